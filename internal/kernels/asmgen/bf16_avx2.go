package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2+FMA bf16 GEMM kernels: VDPBF16PS's arithmetic on CPUs
// without it. Each 32-bit lane of a packed operand holds a pair of bf16
// values (the even k in the low half, the odd k in the high half); a
// bf16 value is the high half of its float32, so the odd element is the
// lane ANDed with 0xFFFF0000 and the even one the lane shifted left by
// 16. Per pair, every accumulator first adds the odd elements' product
// and then the even ones' — VDPBF16PS's order — with one fused
// multiply-add each (the products of bf16 values are exact in float32).
// VDPBF16PS reads denormal inputs as zero and flushes denormal results
// to zero whatever MXCSR says; these kernels set MXCSR's DAZ and FTZ
// bits for the accumulation, which makes VFMADD231PS do the same, and
// restore MXCSR before the store, which rounds as the AVX512_BF16
// kernels' store does. The results equal theirs and the Go twin's bit
// for bit.

const mxcsrDAZFTZ = 0x8040

// flushDenormals saves MXCSR in the frame and sets DAZ and FTZ; the
// returned function restores it.
func flushDenormals() (restore func()) {
	slot := AllocLocal(8)
	STMXCSR(slot)
	r := GP32()
	MOVL(slot, r)
	ORL(U32(mxcsrDAZFTZ), r)
	MOVL(r, slot.Offset(4))
	LDMXCSR(slot.Offset(4))
	return func() { LDMXCSR(slot) }
}

// pairStepAVX2 emits one pair of k for mr rows × nv vectors: the odd
// elements' products for every accumulator, then the even ones'.
// loadB(j, odd, d) puts the odd or even elements of B's vector j, as
// float32, in d (pairB: from pairs of bf16 values); loadA(r, odd, d)
// puts row r's odd or even element of A, as a float32, in every lane of
// d (pairA: from a pair of bf16 values); breg(j) and areg(r) are
// scratch.
func pairStepAVX2(mr, nv int, acc func(r, j int) VecPhysical, breg func(int) VecPhysical, areg func(int) VecPhysical,
	loadB func(j int, odd bool, d VecPhysical), loadA func(r int, odd bool, d VecPhysical)) {
	for _, odd := range []bool{true, false} {
		for j := 0; j < nv; j++ {
			loadB(j, odd, breg(j))
		}
		for r := 0; r < mr; r++ {
			loadA(r, odd, areg(r))
			for j := 0; j < nv; j++ {
				VFMADD231PS(areg(r), breg(j), acc(r, j))
			}
		}
	}
}

// pairB returns pairStepAVX2's loadB for B stored as bf16 pairs, vector
// j loaded from bAt(j) by load (which may mask): the even elements
// masked out or the odd ones shifted up.
func pairB(bAt func(int) Mem, load func(Mem, VecPhysical)) func(j int, odd bool, d VecPhysical) {
	return func(j int, odd bool, d VecPhysical) {
		load(bAt(j), d)
		if odd {
			VPAND(ac(0xFFFF0000), d, d)
		} else {
			VPSLLD(U8(16), d, d)
		}
	}
}

// pairA returns pairStepAVX2's loadA for A stored as bf16 pairs, row r's
// pair at aAt(r): broadcast, then the odd element masked out or the even
// one shifted up.
func pairA(aAt func(int) Mem) func(r int, odd bool, d VecPhysical) {
	return func(r int, odd bool, d VecPhysical) {
		VPBROADCASTD(aAt(r), d)
		if odd {
			VPAND(ac(0xFFFF0000), d, d)
		} else {
			VPSLLD(U8(16), d, d)
		}
	}
}

// bf16GemmKernelAVX2 emits the blocked bf16 GEMM's micro-kernel on AVX2:
// bf16GemmKernel's contract (C[mr×16·nv/2] += alpha·A·B, the four
// stores) with VDPBF16PS's arithmetic emulated, from slivers whose bf16
// pairs are split into float32 halves (see splitSlivers): k·mr odd
// elements of A, then its k·mr even ones, and B's likewise — the
// products read straight from memory, as the float32 kernel reads them,
// with no integer operations in the loop (splitting pairs in the loop
// cost 5–7% of the float32 kernel's rate; in the packs it is a pass over
// the packed panels).
func bf16GemmKernelAVX2(name string, mr, nv int) {
	nr := nv * 8
	TEXT(name, NOSPLIT, "func(k int, a, b *uint32, c *float32, ldc int, alpha, alphaLo float32, overwrite int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes C[%d×%d] += alpha·A·B from slivers of bf16 pairs split into float32 halves (odd elements, then even ones) in VDPBF16PS's order and rounding; its Go twin is bf16KernelSplitRef (bf16.go) (AVX2, FMA).", name, mr, nr))
	k := Load(Param("k"), GP64())
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	// The even elements follow the odd ones: k·mr values on in A, k·nr
	// in B.
	offA, offB := GP64(), GP64()
	IMUL3Q(U32(4*mr), k, offA)
	IMUL3Q(U32(4*nr), k, offB)
	acc := func(r, j int) VecPhysical { return ymm(r*nv + j) }
	breg := func(j int) VecPhysical { return ymm(mr*nv + j) }
	nb := 16 - mr*nv - nv
	areg := func(r int) VecPhysical { return ymm(mr*nv + nv + r%nb) }
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VXORPS(acc(r, j), acc(r, j), acc(r, j))
		}
	}
	restore := flushDenormals()
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	pairStepAVX2(mr, nv, acc, breg, areg,
		func(j int, odd bool, d VecPhysical) {
			if odd {
				VMOVUPS(Mem{Base: b, Disp: 32 * j}, d)
			} else {
				VMOVUPS(Mem{Base: b, Index: offB, Scale: 1, Disp: 32 * j}, d)
			}
		},
		func(r int, odd bool, d VecPhysical) {
			if odd {
				VBROADCASTSS(Mem{Base: a, Disp: 4 * r}, d)
			} else {
				VBROADCASTSS(Mem{Base: a, Index: offA, Scale: 1, Disp: 4 * r}, d)
			}
		})
	ADDQ(U32(4*mr), a)
	ADDQ(U32(4*nr), b)
	DECQ(k)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	restore()
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	alpha, alphaLo := breg(0), breg(1)
	VBROADCASTSS(paramAddr("alpha"), alpha)
	VBROADCASTSS(paramAddr("alphaLo"), alphaLo)
	bf16Stores(name, mr, nv, 32, c, ldc, acc, func(int) VecPhysical { return areg(0) }, alpha, alphaLo)
}

// rowGemm16AVX2Rows is the row count of the AVX2 bf16 row kernel with nv
// vectors a row: accumulators, nv registers for B, one for A and one
// for the lane mask — six rows of two vectors, as the float32 row
// kernel has (five rows, with a second A register, measured 9% slower
// per product at the GPT's shapes).
func rowGemm16AVX2Rows(nv int) int { return min(8, (16-nv-2)/nv) }

// rowGemm16KernelAVX2 emits rowGemm16Kernel's contract (C[mr × n] =
// alpha·A·B from bf16 pairs, C not read, A by broadcasts at any strides)
// on AVX2 for n ≤ 8·nv, with VDPBF16PS's arithmetic emulated; with
// masked, mask points at eight int32 lane masks for the last vector of
// every row of B and C. With split, A holds float32 values (bf16 values
// widened): a pair's even element at a[i·rsA + q·csA], its odd one oddA
// values further — broadcast straight from memory, with no integer
// operations in the loop.
func rowGemm16KernelAVX2(name string, mr, nv int, masked, split bool) {
	if split {
		TEXT(name, NOSPLIT, "func(kp int, a *float32, rsA, csA, oddA int, b *uint32, ldb int, c *float32, ldc int, mask *int32, alpha, alphaLo float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes C[%d×n] = alpha·A·B for n ≤ %d from A's float32 values (bf16 values widened; a pair's odd element oddA after its even one) and B's bf16 pairs in VDPBF16PS's order and rounding; its Go twin is rowGemm16SplitGo (gemmdirect16.go) (AVX2, FMA).", name, mr, 8*nv))
	} else {
		TEXT(name, NOSPLIT, "func(kp int, a *uint32, rsA, csA int, b *uint32, ldb int, c *float32, ldc int, mask *int32, alpha, alphaLo float32)")
		Pragma("noescape")
		Doc(fmt.Sprintf("%s computes C[%d×n] = alpha·A·B for n ≤ %d from bf16 pairs in VDPBF16PS's order and rounding, A read by broadcasts at any strides; its Go twin is rowGemm16Go (gemmdirect16.go) (AVX2, FMA).", name, mr, 8*nv))
	}
	k, cs, b, ldb, rs := rowKernelArgs("kp")
	rows := rowPointers(mr, rs)
	loadA := pairA(func(r int) Mem { return Mem{Base: rows[r]} })
	if split {
		odd := Load(Param("oddA"), GP64())
		SHLQ(U8(2), odd)
		loadA = func(r int, isOdd bool, d VecPhysical) {
			if isOdd {
				VBROADCASTSS(Mem{Base: rows[r], Index: odd, Scale: 1}, d)
			} else {
				VBROADCASTSS(Mem{Base: rows[r]}, d)
			}
		}
	}
	acc := func(r, j int) VecPhysical { return ymm(r*nv + j) }
	breg := func(j int) VecPhysical { return ymm(mr*nv + j) }
	// A's registers: what the accumulators, B and the mask leave, at
	// most two (the products of a row wait on one broadcast either way).
	free := 15 - mr*nv - nv
	if free < 1 || mr*nv+2 > 14 {
		panic(name + ": too few registers")
	}
	areg := func(r int) VecPhysical { return ymm(mr*nv + nv + r%min(2, free)) }
	mreg := ymm(15)
	if masked {
		m := Load(Param("mask"), GP64())
		VMOVDQU(Mem{Base: m}, mreg)
	}
	loadB := func(m Mem, d VecPhysical) { VMOVDQU(m, d) }
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VXORPS(acc(r, j), acc(r, j), acc(r, j))
		}
	}
	restore := flushDenormals()
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	pairStepAVX2(mr, nv, acc, breg, areg,
		pairB(func(j int) Mem { return Mem{Base: b, Disp: 32 * j} },
			func(m Mem, d VecPhysical) {
				if masked && m.Disp == 32*(nv-1) {
					VMASKMOVPS(m, mreg, d)
					return
				}
				loadB(m, d)
			}),
		loadA)
	for r := 0; r < mr; r++ {
		ADDQ(cs, rows[r])
	}
	ADDQ(ldb, b)
	DECQ(k)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	restore()
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	// alpha and alphaLo in the first two registers after the
	// accumulators (B's, and A's when nv is 1), a product in the next.
	alpha, alphaLo, t := ymm(mr*nv), ymm(mr*nv+1), ymm(mr*nv+2)
	VBROADCASTSS(paramAddr("alpha"), alpha)
	VBROADCASTSS(paramAddr("alphaLo"), alphaLo)
	lo := GP32()
	MOVL(paramAddr("alphaLo"), lo)
	TESTL(lo, lo)
	JZ(LabelRef(name + "_one"))
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
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
	writeRowsAVX2(mr, nv, acc, c, ldc, masked, mreg)
}

// bf16KernelsAVX2 emits the AVX2 bf16 kernels.
func bf16KernelsAVX2() {
	bf16GemmKernelAVX2("bf16KernelAVX2", 6, 2)
	for _, split := range []bool{false, true} {
		s := ""
		if split {
			s = "S"
		}
		for mr := 1; mr <= rowGemm16AVX2Rows(2); mr++ {
			rowGemm16KernelAVX2(fmt.Sprintf("rowGemm16%s_%dx2AVX2", s, mr), mr, 2, false, split)
		}
		for nv := 1; nv <= 2; nv++ {
			for mr := 1; mr <= rowGemm16AVX2Rows(nv); mr++ {
				rowGemm16KernelAVX2(fmt.Sprintf("rowGemm16%s_%dx%dmAVX2", s, mr, nv), mr, nv, true, split)
			}
		}
	}
}
