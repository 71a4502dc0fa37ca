package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// AMX (Advanced Matrix Extensions, Intel Sapphire Rapids and later) is
// unknown to Go's assembler and to avo: the generator encodes the six
// instructions it uses (all VEX.128.0F38.W0) and emits the bytes.
//
//	LDTILECFG   m512                  VEX.128.NP.0F38.W0 49 /0
//	TILERELEASE                       VEX.128.NP.0F38.W0 49 C0
//	TILEZERO    tmm                   VEX.128.F2.0F38.W0 49 11:rrr:000
//	TILELOADD   tmm, [base+index+d]   VEX.128.F2.0F38.W0 4B /r (SIB)
//	TILESTORED  [base+index+d], tmm   VEX.128.F3.0F38.W0 4B /r (SIB)
//	TDPBF16PS   tmm1, tmm2, tmm3      VEX.128.F3.0F38.W0 5C 11:rrr:bbb, vvvv = tmm3
//
// Memory operands always take a 32-bit displacement (ModRM.mod = 10), so
// every base register encodes the same way. TestAMXEncoding checks the
// bytes against GNU as.

// VEX pp values (the implied legacy prefix).
const (
	vexNP = 0b00
	vex66 = 0b01
	vexF3 = 0b10
	vexF2 = 0b11
)

// vex3 returns the three-byte VEX prefix for map 0F38, W0, L0: x and b
// are bit 3 of the SIB index and base register numbers, vvvv the extra
// register operand (0 when unused, encoded inverted as 1111).
func vex3(pp byte, x, b int, vvvv int) []byte {
	inv := func(v int) byte { return byte(^v & 1) }
	p1 := 1<<7 | inv(x)<<6 | inv(b)<<5 | 0b00010
	p2 := byte(^vvvv&0xF)<<3 | pp
	return []byte{0xC4, p1, p2}
}

// amxMem encodes a [base + index·1 + disp32] operand with reg in
// ModRM.reg, after the opcode.
func amxMem(pp, opcode byte, reg, base, index int, disp int32) []byte {
	if index == 4 {
		panic("asmgen: RSP cannot be a SIB index")
	}
	code := vex3(pp, index>>3, base>>3, 0)
	modrm := byte(0b10)<<6 | byte(reg&7)<<3 | 0b100
	sib := byte(index&7)<<3 | byte(base&7)
	code = append(code, opcode, modrm, sib)
	return append(code, byte(disp), byte(disp>>8), byte(disp>>16), byte(disp>>24))
}

func ldtilecfg(base int, disp int32) []byte {
	// [base + disp32] without an index: ModRM.rm is the base, except
	// that rm = 100 (RSP, R12) announces a SIB byte (index 100: none).
	code := vex3(vexNP, 0, base>>3, 0)
	code = append(code, 0x49, byte(0b10_000_000|base&7))
	if base&7 == 4 {
		code = append(code, 0b00_100_100)
	}
	return append(code, byte(disp), byte(disp>>8), byte(disp>>16), byte(disp>>24))
}

func tilerelease() []byte { return append(vex3(vexNP, 0, 0, 0), 0x49, 0xC0) }

func tilezero(t int) []byte { return append(vex3(vexF2, 0, 0, 0), 0x49, byte(0xC0|t<<3)) }

func tileloadd(t, base, index int, disp int32) []byte {
	return amxMem(vexF2, 0x4B, t, base, index, disp)
}

func tilestored(t, base, index int, disp int32) []byte {
	return amxMem(vexF3, 0x4B, t, base, index, disp)
}

func tdpbf16ps(dst, a, b int) []byte {
	return append(vex3(vexF3, 0, 0, b), 0x5C, byte(0xC0|dst<<3|a))
}

func gpName(r GPPhysical) string { return r.Asm() }

// amxLoad, amxStore and amxDot emit the tile operations above with a
// comment in Intel syntax.
func amxLoad(t int, base, index GPPhysical, disp int32) {
	rawInstruction(fmt.Sprintf("TILELOADD tmm%d, [%s + %s + %d]", t, gpName(base), gpName(index), disp),
		tileloadd(t, int(base.PhysicalIndex()), int(index.PhysicalIndex()), disp))
}

func amxStore(t int, base, index GPPhysical, disp int32) {
	rawInstruction(fmt.Sprintf("TILESTORED [%s + %s + %d], tmm%d", gpName(base), gpName(index), disp, t),
		tilestored(t, int(base.PhysicalIndex()), int(index.PhysicalIndex()), disp))
}

func amxDot(dst, a, b int) {
	rawInstruction(fmt.Sprintf("TDPBF16PS tmm%d, tmm%d, tmm%d", dst, a, b), tdpbf16ps(dst, a, b))
}

// amxBF16Kernel emits amxBF16Tiles, which computes a grid of 32×32
// blocks of C from AMX-packed bf16 pairs:
//
//   - a: mt groups of 32 rows, each row kt·16 pairs (lda bytes apart;
//     group i starts 32·lda bytes after group i−1);
//   - b: nt slivers of 32 columns, each kt·16 pair-rows of 32 lanes
//     (128 bytes a pair-row, 2048 bytes per 16 pairs);
//   - c: the grid's top-left element, rows ldc elements apart; block
//     (i, j) at row 32·i, column 32·j.
//
// Each block accumulates in four tiles (tmm0–3, 16×16 float32: rows
// 0–15 / 16–31 × columns 0–15 / 16–31) from two A tiles (tmm4, tmm5) and
// two B tiles (tmm6, tmm7) per 16 pairs, is stored into scratch (32×32
// float32) and from there into C as the bf16 micro-kernels store theirs
// (see bf16GemmKernel), mode selecting the store: bit 0 overwrite (C =
// acc·alpha, C not read), bit 1 the two-part alpha (acc·alphaLo first).
// cfg is the 64-byte tile configuration (palette 1, eight 16×64-byte
// tiles), loaded on entry; the tiles are released on return.
func amxBF16Kernel() {
	const name = "amxBF16Tiles"
	TEXT(name, NOSPLIT, "func(kt int, a *uint32, lda int, b *uint32, c *float32, ldc int, mt, nt int, alpha, alphaLo float32, mode int, cfg *byte, scratch *float32)")
	Pragma("noescape")
	Doc(name + " computes mt×nt blocks of 32×32 of C from AMX-packed bf16 pairs on TDPBF16PS (AMX-BF16); see amxBF16Kernel in asmgen.")
	lda, stride, colC, grpA, slvB, tileC, ldc := R8, R9, R10, R11, R12, R13, R14
	pa, pa16, pb, cnt, ci, cj := RSI, RDI, RDX, RCX, RAX, RBX
	alpha, alphaLo := Z0, Z1
	Load(Param("cfg"), pa)
	rawInstruction("LDTILECFG [SI]", ldtilecfg(int(pa.PhysicalIndex()), 0))
	Load(Param("lda"), lda)
	MOVQ(U32(128), stride)
	Load(Param("c"), colC)
	Load(Param("b"), slvB)
	Load(Param("ldc"), ldc)
	SHLQ(U8(2), ldc)
	VBROADCASTSS(NewParamAddr("alpha", 64), alpha)
	VBROADCASTSS(NewParamAddr("alphaLo", 68), alphaLo)
	Load(Param("nt"), cj)
	Label(name + "_j")
	Load(Param("a"), grpA)
	MOVQ(colC, tileC)
	Load(Param("mt"), ci)
	Label(name + "_i")
	for t := 0; t < 4; t++ {
		rawInstruction(fmt.Sprintf("TILEZERO tmm%d", t), tilezero(t))
	}
	MOVQ(grpA, pa)
	MOVQ(lda, pa16)
	SHLQ(U8(4), pa16)
	ADDQ(grpA, pa16)
	MOVQ(slvB, pb)
	Load(Param("kt"), cnt)
	Label(name + "_k")
	amxLoad(4, pa, lda, 0)
	amxLoad(5, pa16, lda, 0)
	amxLoad(6, pb, stride, 0)
	amxLoad(7, pb, stride, 64)
	amxDot(0, 4, 6)
	amxDot(1, 4, 7)
	amxDot(2, 5, 6)
	amxDot(3, 5, 7)
	ADDQ(U32(64), pa)
	ADDQ(U32(64), pa16)
	ADDQ(U32(2048), pb)
	DECQ(cnt)
	JNZ(LabelRef(name + "_k"))
	Load(Param("scratch"), pa)
	amxStore(0, pa, stride, 0)
	amxStore(1, pa, stride, 64)
	amxStore(2, pa, stride, 2048)
	amxStore(3, pa, stride, 2048+64)
	// The store, one row of 32 at a time: pa walks scratch, pb walks C.
	MOVQ(tileC, pb)
	Load(Param("mode"), cnt)
	for mode := 0; mode < 4; mode++ {
		CMPQ(cnt, U8(mode))
		JE(LabelRef(fmt.Sprintf("%s_store%d", name, mode)))
	}
	for mode := 0; mode < 4; mode++ {
		overwrite, two := mode&1 != 0, mode&2 != 0
		Label(fmt.Sprintf("%s_store%d", name, mode))
		MOVQ(U32(32), pa16)
		Label(fmt.Sprintf("%s_row%d", name, mode))
		for j := 0; j < 2; j++ {
			acc, t := Z2, Z3
			m := Mem{Base: pb, Disp: 64 * j}
			VMOVUPS(Mem{Base: pa, Disp: 64 * j}, acc)
			switch {
			case overwrite && two:
				VMULPS(alphaLo, acc, t)
				VFMADD231PS(acc, alpha, t)
			case overwrite:
				VMULPS(alpha, acc, t)
			case two:
				VMOVUPS(m, t)
				VFMADD231PS(acc, alphaLo, t)
				VFMADD231PS(acc, alpha, t)
			default:
				VMOVUPS(m, t)
				VFMADD231PS(acc, alpha, t)
			}
			VMOVUPS(t, m)
		}
		ADDQ(U32(128), pa)
		ADDQ(ldc, pb)
		DECQ(pa16)
		JNZ(LabelRef(fmt.Sprintf("%s_row%d", name, mode)))
		JMP(LabelRef(name + "_next"))
	}
	Label(name + "_next")
	// The next row group: pb is already 32 rows of C further.
	MOVQ(pb, tileC)
	MOVQ(lda, cnt)
	SHLQ(U8(5), cnt)
	ADDQ(cnt, grpA)
	DECQ(ci)
	JNZ(LabelRef(name + "_i"))
	// The next sliver of B (kt·2048 bytes on) and of C (32 columns on).
	Load(Param("kt"), cnt)
	SHLQ(U8(11), cnt)
	ADDQ(cnt, slvB)
	ADDQ(U32(128), colC)
	DECQ(cj)
	JNZ(LabelRef(name + "_j"))
	rawInstruction("TILERELEASE", tilerelease())
	VZEROUPPER()
	RET()
}
