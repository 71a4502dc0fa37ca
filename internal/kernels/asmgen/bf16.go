package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Neither Go's assembler nor avo knows the AVX512_BF16 instructions, so
// the generator encodes them itself and emits the bytes. Only the
// register-to-register, 512-bit, unmasked forms are used:
//
//	VDPBF16PS      zmm1, zmm2, zmm3   EVEX.512.F3.0F38.W0 52 /r
//	VCVTNE2PS2BF16 zmm1, zmm2, zmm3   EVEX.512.F2.0F38.W0 72 /r
//
// (Intel operand order: zmm1 is ModRM.reg, zmm2 EVEX.vvvv, zmm3
// ModRM.rm.) TestEVEXEncoding checks the bytes against GNU as.

// EVEX pp field values (the implied legacy prefix).
const (
	ppF3 = 0b10
	ppF2 = 0b11
)

// evex512 encodes a register-only EVEX.512.pp.0F38.W0 instruction with
// the given opcode: dst in ModRM.reg, src1 in vvvv, src2 in ModRM.rm
// (register numbers 0–31).
func evex512(opcode byte, pp byte, dst, src1, src2 int) []byte {
	inv := func(v, bit int) byte { return byte(^(v >> bit) & 1) }
	// P0: R̄ X̄ B̄ R̄' 0 0 m m, with mm = 10 selecting the 0F38 map. For a
	// register rm, X̄ carries bit 4 of its number and B̄ bit 3.
	p0 := inv(dst, 3)<<7 | inv(src2, 4)<<6 | inv(src2, 3)<<5 | inv(dst, 4)<<4 | 0b10
	// P1: W v̄v̄v̄v̄ 1 p p, W = 0.
	p1 := byte(^src1&0xF)<<3 | 1<<2 | pp
	// P2: z L'L b V̄' a a a: no zeroing, 512-bit, no broadcast, no mask.
	p2 := byte(0b10)<<5 | inv(src1, 4)<<3
	modrm := byte(0xC0) | byte(dst&7)<<3 | byte(src2&7)
	return []byte{0x62, p0, p1, p2, opcode, modrm}
}

// rawInstruction emits encoded bytes, preceded by a comment giving the
// instruction in Intel syntax.
func rawInstruction(text string, code []byte) {
	Comment(text)
	for _, b := range code {
		Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(b)}})
	}
}

func zname(r VecPhysical) string { return strings.ToLower(r.Asm()) }

// vdpbf16ps emits acc += src1.bf16[2i+1]·src2.bf16[2i+1] then
// += src1.bf16[2i]·src2.bf16[2i] for each of the 16 float32 lanes.
func vdpbf16ps(acc, src1, src2 VecPhysical) {
	rawInstruction(fmt.Sprintf("VDPBF16PS %s, %s, %s", zname(acc), zname(src1), zname(src2)),
		evex512(0x52, ppF3, int(acc.PhysicalIndex()), int(src1.PhysicalIndex()), int(src2.PhysicalIndex())))
}

// vcvtne2ps2bf16 emits dst.word[0:16] = bf16(src2), dst.word[16:32] =
// bf16(src1), rounding to nearest even (denormal inputs become zero).
func vcvtne2ps2bf16(dst, src1, src2 VecPhysical) {
	rawInstruction(fmt.Sprintf("VCVTNE2PS2BF16 %s, %s, %s", zname(dst), zname(src1), zname(src2)),
		evex512(0x72, ppF2, int(dst.PhysicalIndex()), int(src1.PhysicalIndex()), int(src2.PhysicalIndex())))
}

// bf16GemmKernel emits an mr × (16·nv) register-tile kernel on
// VDPBF16PS: A and B are packed in bf16 pairs (two consecutive k values
// per 32-bit lane), k counts pairs; mr·nv accumulators, nv registers for
// the B sliver, and nb rotating registers for broadcast A pairs. The
// store adds acc·alphaLo (unless alphaLo is 0) and then acc·alpha to C,
// each a fused multiply-add, so a two-part alpha (the product of two
// float32 scales, split hi + lo) costs one rounding; with overwrite set
// it writes C = acc·alpha without reading C. The twin is
// kernels.bf16KernelRef.
func bf16GemmKernel(name string, mr, nv, nb int) {
	nr := nv * 16
	TEXT(name, NOSPLIT, "func(k int, a, b *uint32, c *float32, ldc int, alpha, alphaLo float32, overwrite int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes C[%d×%d] += alpha·A·B from bf16-pair slivers (AVX512_BF16).", name, mr, nr))
	k := Load(Param("k"), GP64())
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	acc := func(r, j int) VecPhysical { return zmm(r*nv + j) }
	breg := func(j int) VecPhysical { return zmm(mr*nv + j) }
	areg := func(r int) VecPhysical { return zmm(mr*nv + nv + r%nb) }
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VPXORD(acc(r, j), acc(r, j), acc(r, j))
		}
	}
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	for j := 0; j < nv; j++ {
		VMOVDQU32(Mem{Base: b, Disp: 64 * j}, breg(j))
	}
	for r := 0; r < mr; r++ {
		VPBROADCASTD(Mem{Base: a, Disp: 4 * r}, areg(r))
		for j := 0; j < nv; j++ {
			vdpbf16ps(acc(r, j), breg(j), areg(r))
		}
	}
	ADDQ(U32(4*mr), a)
	ADDQ(U32(4*nr), b)
	DECQ(k)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	// Four stores: C += acc·alpha or C = acc·alpha (overwrite, the first
	// block of k: C is neither cleared nor read, so its NaNs do not
	// propagate), each with a two-part alpha or, when alphaLo = 0, a
	// one-part one (adding acc·0 would turn an infinite accumulator into
	// NaN).
	alpha, alphaLo := areg(0), areg(1)
	VBROADCASTSS(NewParamAddr("alpha", 40), alpha)
	VBROADCASTSS(NewParamAddr("alphaLo", 44), alphaLo)
	bf16Stores(name, mr, nv, 64, c, ldc, acc, breg, alpha, alphaLo)
}

// bf16Stores emits a bf16 micro-kernel's four stores of C[mr × nv
// vectors of width bytes] from the accumulators, chosen by the overwrite
// and alphaLo parameters: C += acc·alpha or C = acc·alpha (overwrite,
// the first block of k: C is neither cleared nor read, so its NaNs do
// not propagate), each with a two-part alpha or, when alphaLo = 0, a
// one-part one (adding acc·0 would turn an infinite accumulator into
// NaN). tmp(j) is scratch.
func bf16Stores(name string, mr, nv, width int, c, ldc Register, acc func(r, j int) VecPhysical, tmp func(int) VecPhysical, alpha, alphaLo VecPhysical) {
	lo, ow := GP32(), GP64()
	MOVL(NewParamAddr("alphaLo", 44), lo)
	MOVQ(NewParamAddr("overwrite", 48), ow)
	store := func(two, overwrite bool) {
		for r := 0; r < mr; r++ {
			for j := 0; j < nv; j++ {
				t, m := tmp(j), Mem{Base: c, Disp: width * j}
				switch {
				case overwrite && two:
					VMULPS(alphaLo, acc(r, j), t)
					VFMADD231PS(acc(r, j), alpha, t)
				case overwrite:
					VMULPS(alpha, acc(r, j), t)
				case two:
					VMOVUPS(m, t)
					VFMADD231PS(acc(r, j), alphaLo, t)
					VFMADD231PS(acc(r, j), alpha, t)
				default:
					VMOVUPS(m, t)
					VFMADD231PS(acc(r, j), alpha, t)
				}
				VMOVUPS(t, m)
			}
			if r+1 < mr {
				ADDQ(ldc, c)
			}
		}
		VZEROUPPER()
		RET()
	}
	TESTQ(ow, ow)
	JNZ(LabelRef(name + "_overwrite"))
	TESTL(lo, lo)
	JZ(LabelRef(name + "_add1"))
	store(true, false)
	Label(name + "_add1")
	store(false, false)
	Label(name + "_overwrite")
	TESTL(lo, lo)
	JZ(LabelRef(name + "_set1"))
	store(true, true)
	Label(name + "_set1")
	store(false, true)
}

// pairIndexData defines the VPERMW index that interleaves the low and
// high halves of a register: word 2j ← word j, word 2j+1 ← word 16+j.
func pairIndexData() {
	pairIndexMem = GLOBL("bf16PairIndex", RODATA|NOPTR)
	for j := 0; j < 16; j++ {
		DATA(4*j, U32(uint32(j)|uint32(16+j)<<16))
	}
}

// pairIndex loads the index defined by pairIndexData into dst.
func pairIndex(dst VecPhysical) {
	VMOVDQU32(pairIndexMem, dst)
}

var pairIndexMem Mem

// bf16Pack emits the bf16 pairs kernel for one source type: dst[j] =
// bf16(r0[j]) | bf16(r1[j])<<16 for 16·blocks j — two rows of op(X)
// along k interleaved, as the kernel reads them, written in groups (one
// per sliver of the packed panel) that lie stride bytes apart. (Rows
// whose k runs along them are already pairs: bf16Rows converts those.)
//
// float32 values round to nearest even (VCVTNE2PS2BF16). FP8 codes
// (kind "FP8", any format) are looked up in a 128-entry table of the
// bf16 bits of each magnitude (VPERMI2W on two pairs of registers, bit
// 6 choosing the pair) and take their sign from bit 7.
func bf16Pack(kind string) {
	fp8 := kind == "FP8"
	elem, width := "float32", 64
	tabSig, tabDoc := "", ""
	if fp8 {
		elem, width = "uint8", 16
		tabSig, tabDoc = ", table *[128]uint16", " (FP8 codes through a bf16 table)"
	}
	// pairs: groups of pair rows, each its own two source rows
	name := "bf16PairsStrided" + kind
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst *uint32, r0, r1 *%s, groups, group, stride, sstride int%s)", elem, tabSig))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s interleaves, for each of groups pairs of rows, 16·group values of the two rows%s as bf16 pairs: group g reads r0 and r1 advanced by g·sstride bytes and writes dst advanced by g·stride bytes (AVX512_BF16).", name, tabDoc))
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	ng := Load(Param("groups"), GP64())
	stride := Load(Param("stride"), GP64())
	ss := Load(Param("sstride"), GP64())
	if fp8 {
		loadTable(56)
	}
	pairIndex(Z31)
	loop(name+"_g", ng, func() {
		n := Load(Param("group"), GP64())
		d, p0, p1 := GP64(), GP64(), GP64()
		MOVQ(dst, d)
		MOVQ(r0, p0)
		MOVQ(r1, p1)
		loop(name, n, func() {
			if fp8 {
				fp8PairWords(p0, p1)
			} else {
				VMOVUPS(Mem{Base: p0}, Z0)
				VMOVUPS(Mem{Base: p1}, Z1)
				vcvtne2ps2bf16(Z4, Z1, Z0)
			}
			VPERMW(Z4, Z31, Z4)
			VMOVDQU32(Z4, Mem{Base: d})
			ADDQ(U32(width), p0)
			ADDQ(U32(width), p1)
			ADDQ(U32(64), d)
		})
		ADDQ(stride, dst)
		ADDQ(ss, r0)
		ADDQ(ss, r1)
	})
	VZEROUPPER()
	RET()
}

// The sources of bf16Rows: FP8 codes, FP8 codes with exponent shifts,
// float32 values.
const (
	rowsFP8 = iota
	rowsFP8Shift
	rowsF32
)

// bf16Rows emits the conversion of rows to bf16 pairs (k along the
// row: consecutive values are already pairs): float32 values rounded to
// nearest even (VCVTNE2PS2BF16), or FP8 codes through the 128-entry bf16
// table (bf16Pack's lookup): rows rows, each runs·L + tail values (L =
// 32, or 128 with shift), row r read at src + r·ld bytes and written at
// dst + r·ldd bytes, ⌈(runs·L + tail)/2⌉ pairs. The tail goes through
// masked loads and stores: values past it read as zero (code 0: the zero
// half an odd row's last pair needs, when the table's entry 0 is zero)
// and lanes past it are left alone, so a row of any length is one pass
// and the caller needs no padded copy.
//
// With shift (Float8BlockScaling's power-of-two scales), run r of a row
// (128 codes, a k-block; the tail its own) has its finite non-zero bf16
// values moved by exp[r] (bf16ShiftRuns' arithmetic), the row's shifts
// es bytes after the last row's: the shift is added to the table's
// finite non-zero entries (K4–K7, the entries whose exponent is neither
// 0 nor all ones) once per run, and the codes are looked up in the
// shifted table. The sign, ORed in after the lookup, is then outside the
// addition, which is the same as adding to the signed value as long as
// no exponent leaves 1…254 (the caller's range check).
func bf16Rows(kind int) {
	shift, f32 := kind == rowsFP8Shift, kind == rowsF32
	name, run, elem := "bf16RowsFP8", 32, 1
	sig := "func(dst *uint32, src *uint8, rows, runs, tail, ld, ldd int, table *[128]uint16)"
	twin := "bf16At pair by pair (row16's loop)"
	switch kind {
	case rowsFP8Shift:
		name, run = "bf16RowsFP8Shift", ExpBlockAsm
		sig = "func(dst *uint32, src *uint8, rows, runs, tail, ld, ldd int, table *[128]uint16, exp *int8, es int)"
		twin = "that loop then bf16ShiftRunsGo, equal whenever no shifted exponent leaves 1…254"
	case rowsF32:
		name, elem = "bf16RowsF32", 4
		sig = "func(dst *uint32, src *float32, rows, runs, tail, ld, ldd int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	what := "FP8 codes through a bf16 table"
	if f32 {
		what = "float32 values (nearest even)"
	}
	Doc(fmt.Sprintf("%s converts rows of %d·runs + tail %s to bf16 pairs%s, the tail through masked loads and stores; its Go twin is %s (AVX512_BF16, BMI2).",
		name, run, what, map[bool]string{true: ", each run's exponents shifted by its exp entry", false: ""}[shift], twin))
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	nr := Load(Param("rows"), GP64())
	tab := []VecPhysical{Z20, Z21, Z22, Z23}
	if !f32 {
		loadTable(56)
	}
	var ex Register
	zShift := Z28
	if shift {
		ex = Load(Param("exp"), GP64())
		zExp := Z27
		r := GP32()
		MOVL(U32(0x7F807F80), r)
		VPBROADCASTD(r, zExp)
		shifted := []VecPhysical{Z8, Z9, Z10, Z11}
		masks := []Op{K4, K5, K6, K7}
		for i, t := range tab {
			VPANDD(zExp, t, Z5)
			VPTESTMW(Z5, Z5, masks[i])     // exponent ≠ 0
			VPCMPEQW(zExp, Z5, K2)         // exponent all ones
			KANDNQ(masks[i], K2, masks[i]) // ¬K2 ∧ mask
		}
		tab = shifted
	}
	// shiftTable moves the table's finite non-zero entries by the run's
	// exponent shift at e.
	shiftTable := func(e Register) {
		v := GP32()
		MOVBLSX(Mem{Base: e}, v)
		SHLL(U8(7), v)
		VPBROADCASTW(v, zShift)
		for i, t := range []VecPhysical{Z20, Z21, Z22, Z23} {
			VMOVDQA64(t, tab[i])
			VPADDW(zShift, tab[i], []Op{K4, K5, K6, K7}[i], tab[i])
		}
	}
	end := name + "_rowend"
	loop(name+"_row", nr, func() {
		p, d := GP64(), GP64()
		MOVQ(src, p)
		MOVQ(dst, d)
		var e Register
		if shift {
			e = GP64()
			MOVQ(ex, e)
		}
		n := Load(Param("runs"), GP64())
		loop(name+"_run", n, func() {
			if shift {
				shiftTable(e)
				INCQ(e)
			}
			for i := 0; i < run/32; i++ {
				if f32 {
					VMOVUPS(Mem{Base: p, Disp: 128 * i}, Z0)
					VMOVUPS(Mem{Base: p, Disp: 128*i + 64}, Z1)
					vcvtne2ps2bf16(Z4, Z1, Z0)
				} else {
					VPMOVZXBW(Mem{Base: p, Disp: 32 * i}, Z0)
					lookupIn(Z0, Z4, tab)
				}
				VMOVDQU32(Z4, Mem{Base: d, Disp: 64 * i})
			}
			ADDQ(U32(run*elem), p)
			ADDQ(U32(2*run), d)
		})
		t := Load(Param("tail"), GP64()).(GPVirtual)
		TESTQ(t, t)
		JZ(LabelRef(end))
		if shift {
			shiftTable(e)
		}
		ones, m := GP32(), GP32()
		MOVL(U32(0xFFFFFFFF), ones)
		for i := 0; i < run/32; i++ {
			// t > 0 codes left: this block's first min(t, 32) (BZHI
			// keeps all 32 bits for an index of 32 or more).
			BZHIL(t.As32(), ones, m)
			if f32 {
				KMOVW(m, K2)
				SHRL(U8(16), m)
				KMOVW(m, K4)
				VMOVUPS_Z(Mem{Base: p, Disp: 128 * i}, K2, Z0)
				VMOVUPS_Z(Mem{Base: p, Disp: 128*i + 64}, K4, Z1)
				vcvtne2ps2bf16(Z4, Z1, Z0)
			} else {
				KMOVD(m, K2)
				VPMOVZXBW_Z(Mem{Base: p, Disp: 32 * i}, K2, Z0)
				lookupIn(Z0, Z4, tab)
			}
			LEAL(Mem{Base: t, Disp: 1}, m)
			SHRL(U8(1), m) // ⌈t/2⌉ pairs
			BZHIL(m, ones, m)
			KMOVW(m, K3)
			VMOVDQU32(Z4, K3, Mem{Base: d, Disp: 64 * i})
			if i < run/32-1 {
				SUBQ(U8(32), t)
				JLE(LabelRef(end))
			}
		}
		Label(end)
		ADDQ(NewParamAddr("ld", 40), src)
		ADDQ(NewParamAddr("ldd", 48), dst)
		if shift {
			ADDQ(NewParamAddr("es", 72), ex)
		}
	})
	VZEROUPPER()
	RET()
}

// bf16PairsFP8Shift emits bf16PairsStridedFP8 (groups contiguous in the
// source) with Float8BlockScaling's exponent shifts applied as the codes
// convert: lane j (of the groups taken end to end) adds shifts[j] to its
// finite non-zero bf16 halves (bf16Shift's arithmetic), so that the
// pairs are written once.
func bf16PairsFP8Shift() {
	name := "bf16PairsFP8Shift"
	TEXT(name, NOSPLIT, "func(dst *uint32, r0, r1 *uint8, groups, group, stride int, table *[128]uint16, shifts *uint32)")
	Pragma("noescape")
	Doc(name + " interleaves two rows of 16·group·groups FP8 codes through a bf16 table as bf16 pairs, each group of 16·group lanes stride bytes after the last, lane j's exponents shifted by shifts[j]; its Go twin is pairs16 then bf16ShiftGo (AVX512_BF16).")
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	ng := Load(Param("groups"), GP64())
	stride := Load(Param("stride"), GP64())
	loadTable(48)
	sh := Load(Param("shifts"), GP64())
	pairIndex(Z31)
	sc := newShiftRegs(Z27, Z28, Z29)
	loop(name+"_g", ng, func() {
		n := Load(Param("group"), GP64())
		d := GP64()
		MOVQ(dst, d)
		loop(name, n, func() {
			fp8PairWords(r0, r1)
			VPERMW(Z4, Z31, Z4)
			shiftBF16Exp(Z4, Z5, sc, Mem{Base: sh}, K2)
			VMOVDQU32(Z4, Mem{Base: d})
			ADDQ(U32(16), r0)
			ADDQ(U32(16), r1)
			ADDQ(U32(64), sh)
			ADDQ(U32(64), d)
		})
		ADDQ(stride, dst)
	})
	VZEROUPPER()
	RET()
}

// bf16PairsStridedFP8Shift emits bf16PairsStridedFP8 with the exponent
// shifts of bf16PairsFP8Shift: every group (a pair of rows of Aᵀ within
// one k-block) shifts lane j by shifts[j].
func bf16PairsStridedFP8Shift() {
	name := "bf16PairsStridedFP8Shift"
	TEXT(name, NOSPLIT, "func(dst *uint32, r0, r1 *uint8, groups, group, stride, sstride int, table *[128]uint16, shifts *uint32)")
	Pragma("noescape")
	Doc(name + " is bf16PairsStridedFP8 with every group's lane j's exponents shifted by shifts[j]; its Go twin is pairs16 then shiftLanes per group (AVX512_BF16).")
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	ng := Load(Param("groups"), GP64())
	stride := Load(Param("stride"), GP64())
	ss := Load(Param("sstride"), GP64())
	loadTable(56)
	pairIndex(Z31)
	sc := newShiftRegs(Z27, Z28, Z29)
	loop(name+"_g", ng, func() {
		n := Load(Param("group"), GP64())
		sh := Load(Param("shifts"), GP64())
		d, p0, p1 := GP64(), GP64(), GP64()
		MOVQ(dst, d)
		MOVQ(r0, p0)
		MOVQ(r1, p1)
		loop(name, n, func() {
			fp8PairWords(p0, p1)
			VPERMW(Z4, Z31, Z4)
			shiftBF16Exp(Z4, Z5, sc, Mem{Base: sh}, K2)
			VMOVDQU32(Z4, Mem{Base: d})
			ADDQ(U32(16), p0)
			ADDQ(U32(16), p1)
			ADDQ(U32(64), sh)
			ADDQ(U32(64), d)
		})
		ADDQ(stride, dst)
		ADDQ(ss, r0)
		ADDQ(ss, r1)
	})
	VZEROUPPER()
	RET()
}

// fp8PairWords loads 16 FP8 codes from each of r0 and r1 and leaves
// their bf16 bits in Z4, the 16 of r0 in words 0–15 and those of r1 in
// words 16–31 (Z0–Z3 and K1 are scratch).
func fp8PairWords(r0, r1 Register) {
	VPMOVZXBW(Mem{Base: r0}, Y0)
	VPMOVZXBW(Mem{Base: r1}, Y1)
	VINSERTI64X4(U8(1), Y1, Z0, Z0)
	lookup(Z0, Z4)
}

// loadTable loads the 128-word bf16 table whose pointer is the
// parameter at off into Z20–Z23 and the word masks 0x7F, 0x80 and 0x40
// into Z24–Z26.
func loadTable(off int) {
	t := GP64()
	MOVQ(NewParamAddr("table", off), t)
	for i, z := range []VecPhysical{Z20, Z21, Z22, Z23} {
		VMOVDQU32(Mem{Base: t, Disp: 64 * i}, z)
	}
	for i, v := range []uint32{0x007F007F, 0x00800080, 0x00400040} {
		r := GP32()
		MOVL(U32(v), r)
		VPBROADCASTD(r, []VecPhysical{Z24, Z25, Z26}[i])
	}
}

// lookup turns 32 word-wide FP8 codes in c into their bf16 bits in out
// (c, Z1–Z3 and K1 are scratch).
func lookup(c, out VecPhysical) { lookupIn(c, out, []VecPhysical{Z20, Z21, Z22, Z23}) }

// lookupIn is lookup with the table in the four registers tab.
func lookupIn(c, out VecPhysical, tab []VecPhysical) {
	VPANDD(Z24, c, Z1)            // magnitude
	VPANDD(Z25, c, Z2)            // sign, at bit 7
	VPSLLW(U8(8), Z2, Z2)         // … to bit 15
	VMOVDQA64(Z1, out)            // VPERMI2W overwrites its index
	VPERMI2W(tab[1], tab[0], out) // magnitudes 0–63 (index bits 0–5)
	VPERMI2W(tab[3], tab[2], Z1)  // magnitudes 64–127
	VPTESTMW(Z26, c, K1)          // bit 6: the upper half of the table
	VPBLENDMW(Z1, out, K1, out)
	VPORD(Z2, out, out)
}

// transpose16 emits bf16Transpose16: for each of blocks blocks of 16
// columns, the 16×16 lanes src[i][16b+j] (row i at i·srcStride bytes)
// are stored transposed, to dst row 16b+j (at (16b+j)·dstStride bytes)
// lane i, only the lanes set in mask (rows beyond it are loaded but not
// stored). It is the packing transpose for operands whose k runs along
// their rows; the twin is the scalar loop in packA16 and packB16.
func transpose16() {
	TEXT("bf16Transpose16", NOSPLIT, "func(dst, src *uint32, mask, blocks, srcStride, dstStride int)")
	Pragma("noescape")
	Doc("bf16Transpose16 transposes blocks of 16×16 32-bit lanes, storing the masked lanes of each row (AVX-512F).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	mask := Load(Param("mask"), GP64())
	n := Load(Param("blocks"), GP64())
	ss := Load(Param("srcStride"), GP64())
	ds := Load(Param("dstStride"), GP64())
	KMOVQ(mask, K1)
	loop("transpose16", n, func() {
		p := GP64()
		MOVQ(src, p)
		r := make([]VecPhysical, 16)
		for i := range r {
			r[i] = zmm(i)
			VMOVDQU32(Mem{Base: p}, r[i])
			if i < 15 {
				ADDQ(ss, p)
			}
		}
		out := transpose16Regs()
		d := GP64()
		MOVQ(dst, d)
		for j := 0; j < 16; j++ {
			VMOVDQU32(out[j], K1, Mem{Base: d})
			ADDQ(ds, d)
		}
		MOVQ(d, dst)
		ADDQ(U32(64), src)
	})
	VZEROUPPER()
	RET()
}

// rowGemm16Kernel emits the direct bf16 GEMM's row kernel: C[mr × n] =
// alpha·A·B for n ≤ 16·nv, A and B in bf16 pairs (two consecutive k
// values per 32-bit lane), kp counting pairs. Lane (r, q) of A is read by
// a 32-bit broadcast at a + r·rsA + q·csA (lanes), so A may be stored
// with its pairs along rows or down columns; row q of B is ldb lanes
// after row q−1 and contiguous. The last vector of every row of B and C
// is masked by mask (masked-off lanes are neither read nor written). The
// store is C = acc·alpha, or with a two-part alpha (alphaLo ≠ 0) C =
// fma(acc, alpha, acc·alphaLo): the blocked kernels' overwrite store. C is
// never read. The twin is kernels.rowGemm16Go.
func rowGemm16Kernel(name string, mr, nv int) {
	TEXT(name, NOSPLIT, "func(kp int, a *uint32, rsA, csA int, b *uint32, ldb int, c *float32, ldc int, mask uint16, alpha, alphaLo float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes C[%d×n] = alpha·A·B for n ≤ %d from bf16 pairs, A read by broadcasts at any strides; its Go twin is rowGemm16Go (gemmdirect16.go) (AVX512_BF16).", name, mr, 16*nv))
	k, cs, b, ldb, rs := rowKernelArgs("kp")
	maskK1()
	rows := rowPointers(mr, rs)
	acc := func(r, j int) VecPhysical { return zmm(r*nv + j) }
	breg := func(j int) VecPhysical { return zmm(mr*nv + j) }
	areg := func(r int) VecPhysical { return zmm(mr*nv + nv + r%2) }
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VPXORD(acc(r, j), acc(r, j), acc(r, j))
		}
	}
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	for j := 0; j < nv-1; j++ {
		VMOVDQU32(Mem{Base: b, Disp: 64 * j}, breg(j))
	}
	VMOVDQU32_Z(Mem{Base: b, Disp: 64 * (nv - 1)}, K1, breg(nv-1))
	for r := 0; r < mr; r++ {
		VPBROADCASTD(Mem{Base: rows[r]}, areg(r))
		for j := 0; j < nv; j++ {
			vdpbf16ps(acc(r, j), breg(j), areg(r))
		}
		ADDQ(cs, rows[r])
	}
	ADDQ(ldb, b)
	DECQ(k)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	alpha, alphaLo := areg(0), areg(1)
	VBROADCASTSS(paramAddr("alpha"), alpha)
	VBROADCASTSS(paramAddr("alphaLo"), alphaLo)
	lo := GP32()
	MOVL(paramAddr("alphaLo"), lo)
	TESTL(lo, lo)
	JZ(LabelRef(name + "_one"))
	// Two-part alpha: acc·alphaLo, then fma(acc, alpha, ·), rounded once.
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			t := breg(j)
			VMULPS(alphaLo, acc(r, j), t)
			VFMADD231PS(acc(r, j), alpha, t)
			VMOVAPS(t, acc(r, j))
		}
	}
	JMP(LabelRef(name + "_write"))
	Label(name + "_one")
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VMULPS(alpha, acc(r, j), acc(r, j))
		}
	}
	Label(name + "_write")
	for r := 0; r < mr; r++ {
		for j := 0; j < nv-1; j++ {
			VMOVUPS(acc(r, j), Mem{Base: c, Disp: 64 * j})
		}
		VMOVUPS(acc(r, nv-1), K1, Mem{Base: c, Disp: 64 * (nv - 1)})
		if r+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// add3 emits dst[j] = x[j] + y[j] (x the first operand, as Go's x + y)
// for 16·blocks values and then the lanes of mask.
func add3() {
	TEXT("addAVX512", NOSPLIT, "func(dst, x, y *float32, blocks int, mask uint16)")
	Pragma("noescape")
	Doc("addAVX512 writes x + y to dst over 16·blocks values and the lanes of mask in one more vector; its Go twin is addGo (element.go) (AVX-512F).")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	y := Load(Param("y"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	loop("addAVX512", n, func() {
		VMOVUPS(Mem{Base: x}, Z0)
		VADDPS(Mem{Base: y}, Z0, Z0)
		VMOVUPS(Z0, Mem{Base: dst})
		ADDQ(U8(64), x)
		ADDQ(U8(64), y)
		ADDQ(U8(64), dst)
	})
	VMOVUPS_Z(Mem{Base: x}, K1, Z0)
	VMOVUPS_Z(Mem{Base: y}, K1, Z1)
	VADDPS(Z1, Z0, Z0)
	VMOVUPS(Z0, K1, Mem{Base: dst})
	VZEROUPPER()
	RET()
}

// relu emits dst[j] = max(src[j], 0) with Go's max: +0 for every value
// at most zero (−0 included), the value itself above zero, a NaN with
// its sign bit cleared (Go computes max as −min(−x, −0)), for 16·blocks
// values and then the lanes of mask.
func relu() {
	TEXT("reluAVX512", NOSPLIT, "func(dst, src *float32, blocks int, mask uint16)")
	Pragma("noescape")
	Doc("reluAVX512 writes max(x, 0) (Go's max: −0 gives +0, a NaN its bits with the sign cleared) over 16·blocks values and the lanes of mask in one more vector; its Go twin is reluGo (add.go) (AVX-512F).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	VPXORD(Z2, Z2, Z2)
	bcast(0x7FFFFFFF, Z3)
	// K2: not (x ≤ 0), true for x > 0 and NaN; the other lanes become
	// +0, and the sign bit is cleared (which changes only NaNs).
	loop("reluAVX512", n, func() {
		VMOVUPS(Mem{Base: src}, Z0)
		VCMPPS(U8(6), Z2, Z0, K2)
		VPANDD_Z(Z3, Z0, K2, Z1)
		VMOVUPS(Z1, Mem{Base: dst})
		ADDQ(U8(64), src)
		ADDQ(U8(64), dst)
	})
	VMOVUPS_Z(Mem{Base: src}, K1, Z0)
	VCMPPS(U8(6), Z2, Z0, K2)
	VPANDD_Z(Z3, Z0, K2, Z1)
	VMOVUPS(Z1, K1, Mem{Base: dst})
	VZEROUPPER()
	RET()
}

// transpose16Regs transposes the 16×16 lanes of Z0–Z15 (row i in Zi)
// with Z16–Z31 as scratch and returns the registers holding the
// transposed rows: column j of the input in the j-th.
func transpose16Regs() []VecPhysical {
	r := make([]VecPhysical, 16)
	for i := range r {
		r[i] = zmm(i)
	}
	// 32-bit interleave of row pairs, within 128-bit lanes.
	a := make([]VecPhysical, 16)
	for k := 0; k < 8; k++ {
		a[2*k], a[2*k+1] = zmm(16+2*k), zmm(17+2*k)
		VPUNPCKLDQ(r[2*k+1], r[2*k], a[2*k])
		VPUNPCKHDQ(r[2*k+1], r[2*k], a[2*k+1])
	}
	// 64-bit interleave: b[4k+m] lane L holds rows 4k…4k+3 of
	// column 4L+m.
	b := make([]VecPhysical, 16)
	for k := 0; k < 4; k++ {
		for m := 0; m < 4; m++ {
			b[4*k+m] = zmm(4*k + m)
		}
		VPUNPCKLQDQ(a[4*k+2], a[4*k], b[4*k+0])
		VPUNPCKHQDQ(a[4*k+2], a[4*k], b[4*k+1])
		VPUNPCKLQDQ(a[4*k+3], a[4*k+1], b[4*k+2])
		VPUNPCKHQDQ(a[4*k+3], a[4*k+1], b[4*k+3])
	}
	// 128-bit lane shuffles: column 4L+m gathers lane L of
	// b[m], b[4+m], b[8+m], b[12+m].
	out := make([]VecPhysical, 16)
	for m := 0; m < 4; m++ {
		p0, q0, p1, q1 := zmm(16+4*m), zmm(17+4*m), zmm(18+4*m), zmm(19+4*m)
		VSHUFI32X4(U8(0x88), b[4+m], b[m], p0)
		VSHUFI32X4(U8(0xDD), b[4+m], b[m], q0)
		VSHUFI32X4(U8(0x88), b[12+m], b[8+m], p1)
		VSHUFI32X4(U8(0xDD), b[12+m], b[8+m], q1)
	}
	// b is consumed: the outputs go back into Z0–Z15.
	for m := 0; m < 4; m++ {
		p0, q0, p1, q1 := zmm(16+4*m), zmm(17+4*m), zmm(18+4*m), zmm(19+4*m)
		o0, o1, o2, o3 := zmm(4*m), zmm(4*m+1), zmm(4*m+2), zmm(4*m+3)
		VSHUFI32X4(U8(0x88), p1, p0, o0) // L = 0
		VSHUFI32X4(U8(0x88), q1, q0, o1) // L = 1
		VSHUFI32X4(U8(0xDD), p1, p0, o2) // L = 2
		VSHUFI32X4(U8(0xDD), q1, q0, o3) // L = 3
		out[0+m], out[4+m], out[8+m], out[12+m] = o0, o1, o2, o3
	}
	return out
}
