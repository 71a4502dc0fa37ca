package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// quantizeAVX2 emits the 8-lane form of quantize (the scaled,
// saturating, round-to-nearest-even FP8 cast with its running amax):
// the same integer and float operations as quantizeFP8Go, so the codes
// and the amax bits are the twin's. kind says where the scales come
// from (as quantizeBody's): one for all values (the lane maxima of |x|
// as bits stored to amax), one per value read beside it (amax too), or
// one per column of a band of rows, walked 8 columns at a time down the
// rows (no amax).
func quantizeAVX2(name string, kind int, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32) {
	switch kind {
	case castScalar:
		TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, blocks int, scale float32, amax *[8]uint32)")
		Pragma("noescape")
		Doc(name + " casts 8·blocks values to FP8 with a scale and records their amax; its Go twin is quantizeFP8Go (fp8cast.go) (AVX2).")
	case castLanes:
		TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, scales *float32, blocks int, amax *[8]uint32)")
		Pragma("noescape")
		Doc(name + " casts 8·blocks values to FP8, each with its own scale, and records their amax; its Go twin is quantizeFP8LanesGo (fp8cast.go) (AVX2).")
	case castBlocks32:
		TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, scales *float32, blocks int)")
		Pragma("noescape")
		Doc(name + " casts 32·blocks values to FP8, each block of 32 with its own scale; its Go twin is quantizeFP8BlocksGo (fp8cast.go) (AVX2).")
	case castCols:
		TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, scales *float32, blocks int, rows int, ld int, ldd int)")
		Pragma("noescape")
		Doc(name + " casts rows × 8·blocks values (rows ld bytes apart, codes ldd apart) to FP8 with a scale per column; its Go twin is quantizeFP8ColsGo (fp8cast.go) (AVX2).")
	default:
		panic("asmgen: quantizeAVX2 of an unknown kind")
	}
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	var scales Register
	if kind != castScalar {
		scales = Load(Param("scales"), GP64())
	}
	n := Load(Param("blocks"), GP64())
	scale, magic, half, maxR, norm, nan, amax := Y8, Y9, Y10, Y11, Y12, Y13, Y14
	if kind == castScalar {
		VBROADCASTSS(paramAddr("scale"), scale)
	}
	m := uint32(127+magicExp) << 23
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	bcastY(m, magic)
	bcastY(uint32(1)<<(shift-1)-1-off<<uint(shift), half)
	bcastY(maxCode, maxR)
	bcastY(minNorm, norm)
	bcastY(nanCode, nan)
	VPXOR(amax, amax, amax)
	// codes8 leaves in c the 8 codes (one a dword) of the 8 values at m,
	// each times its lane of sc.
	codes8 := func(m Mem, sc Op, c VecPhysical) {
		x, ya, y, sub, t := Y0, Y1, Y2, Y3, Y4
		VMOVUPS(m, x)
		if kind == castScalar || kind == castLanes {
			VPAND(ac(0x7FFFFFFF), x, t)
			VPMAXUD(t, amax, amax)
		}
		VMULPS(sc, x, y)
		VPAND(ac(0x7FFFFFFF), y, ya)
		roundAVX2(shift, ya, c, t, sub, half, magic, norm)
		VPMINUD(maxR, c, c)
		// NaN: ya above +inf's bits.
		VPCMPGTD(ac(0x7F800000), ya, t)
		VBLENDVPS(t, nan, c, c)
		// The sign from bit 31.
		VPSRLD(U8(24), y, t)
		VPAND(ac(0x80), t, t)
		VPOR(t, c, c)
	}
	// cast8 casts the 8 values at sp to the 8 codes at dp, each times
	// its lane of sc.
	cast8 := func(sp, dp Register, sc Op) {
		c, t := Y5, Y4
		codes8(Mem{Base: sp}, sc, c)
		// 8 dwords (each < 256) to 8 bytes.
		VEXTRACTI128(U8(1), c, t.AsX())
		VPACKUSDW(t.AsX(), c.AsX(), c.AsX())
		VPACKUSWB(c.AsX(), c.AsX(), c.AsX())
		MOVQ(c.AsX(), Mem{Base: dp})
	}
	// cast32 casts the 32 values at sp to the 32 codes at dp, vector i
	// times sc(i), with one store: the dwords of vectors 0 and 1 packed
	// to words (lane-wise: 0-3, 4-7 of each), then 2 and 3, then the
	// words to bytes, whose dword groups VPERMD puts in order.
	idx := Y15
	cast32 := func(sp, dp Register, sc func(i int) Op) {
		c0, c1 := Y5, Y6
		codes8(Mem{Base: sp}, sc(0), c0)
		codes8(Mem{Base: sp, Disp: 32}, sc(1), c1)
		VPACKUSDW(c1, c0, c0)
		codes8(Mem{Base: sp, Disp: 64}, sc(2), c1)
		codes8(Mem{Base: sp, Disp: 96}, sc(3), Y7)
		VPACKUSDW(Y7, c1, c1)
		VPACKUSWB(c1, c0, c0)
		VPERMD(c0, idx, c0)
		VMOVDQU(c0, Mem{Base: dp})
	}
	if kind != castCols {
		VMOVDQU(pack32Mem, idx)
	}
	switch kind {
	case castCols:
		rows := Load(Param("rows"), GP64())
		ld, ldd := Load(Param("ld"), GP64()), Load(Param("ldd"), GP64())
		loop(name, n, func() {
			VMOVUPS(Mem{Base: scales}, scale)
			p, q, k := GP64(), GP64(), GP64()
			MOVQ(src, p)
			MOVQ(dst, q)
			MOVQ(rows, k)
			loop(name+"_rows", k, func() {
				cast8(p, q, scale)
				ADDQ(ld, p)
				ADDQ(ldd, q)
			})
			ADDQ(U32(32), scales)
			ADDQ(U32(32), src)
			ADDQ(U32(8), dst)
		})
		VZEROUPPER()
		RET()
		return
	case castBlocks32:
		loop(name, n, func() {
			VBROADCASTSS(Mem{Base: scales}, scale)
			cast32(src, dst, func(int) Op { return scale })
			ADDQ(U32(4), scales)
			ADDQ(U32(128), src)
			ADDQ(U32(32), dst)
		})
		VZEROUPPER()
		RET()
		return
	}
	// Four vectors a store, then the rest one at a time.
	quads := GP64()
	MOVQ(n, quads)
	SHRQ(U8(2), quads)
	ANDQ(U32(3), n)
	if kind == castLanes {
		loop(name+"_quads", quads, func() {
			cast32(src, dst, func(i int) Op { return Mem{Base: scales, Disp: 32 * i} })
			ADDQ(U32(128), scales)
			ADDQ(U32(128), src)
			ADDQ(U32(32), dst)
		})
		loop(name, n, func() {
			cast8(src, dst, Mem{Base: scales})
			ADDQ(U32(32), scales)
			ADDQ(U32(32), src)
			ADDQ(U32(8), dst)
		})
	} else {
		loop(name+"_quads", quads, func() {
			cast32(src, dst, func(int) Op { return scale })
			ADDQ(U32(128), src)
			ADDQ(U32(32), dst)
		})
		loop(name, n, func() {
			cast8(src, dst, scale)
			ADDQ(U32(32), src)
			ADDQ(U32(8), dst)
		})
	}
	out := Load(Param("amax"), GP64())
	VMOVDQU(amax, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// pack32Mem holds VPERMD's index of cast32: the dword groups of four
// codes, in the order VPACKUSDW and VPACKUSWB leave them (vector 0's
// codes 0–3, vector 1's 0–3, 2's, 3's, then their codes 4–7), put back
// in value order.
var pack32Mem Mem

// quantizeKernelsAVX2 emits both formats' casts.
func quantizeKernelsAVX2() {
	pack32Mem = GLOBL("quantizePack32", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
	for _, kind := range []int{castScalar, castLanes, castCols, castBlocks32} {
		name := map[int]string{castScalar: "quantize", castLanes: "quantizeLanes", castCols: "quantizeCols", castBlocks32: "quantizeBlocks32"}[kind]
		quantizeAVX2(name+"E4M3AVX2", kind, 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
		quantizeAVX2(name+"E5M2AVX2", kind, 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
	}
	amaxColsAVX2()
	amaxColsBandAVX2()
	amax32AVX2()
	bf16ShiftAVX2()
	bf16ShiftRunsAVX2()
	bf16ShiftGroupsAVX2()
}

// amaxColsAVX2 is amaxCols on 8 lanes: acc[j] = max(acc[j], |x[j]|) as
// float32 bits, NaN lanes left out, over 8·blocks values, and the
// lane-wise maximum of the raw |x| bits stored to seen.
func amaxColsAVX2() {
	TEXT("amaxColsAVX2", NOSPLIT, "func(acc *uint32, src *float32, blocks int, seen *[8]uint32)")
	Pragma("noescape")
	Doc("amaxColsAVX2 folds |x| of 8·blocks values into the column amaxes acc, NaN left out, and records the lane-wise max of |x| bits; its Go twin is amaxColsGo (fp8cast.go) (AVX2).")
	acc := Load(Param("acc"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("seen"), GP64())
	ySeen := Y15
	VPXOR(ySeen, ySeen, ySeen)
	loop("amaxcols2", n, func() {
		x, t := Y0, Y1
		VMOVDQU(Mem{Base: src}, x)
		VPAND(ac(0x7FFFFFFF), x, x)
		VPMAXUD(x, ySeen, ySeen)
		clearNaNLanes(x, t, ac(0x7F800000))
		VPMAXUD(Mem{Base: acc}, x, x)
		VMOVDQU(x, Mem{Base: acc})
		ADDQ(U32(32), src)
		ADDQ(U32(32), acc)
	})
	VMOVDQU(ySeen, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// clearNaNLanes zeroes the lanes of x, |x| bits, that hold a NaN: bits
// above +inf's (inf, in memory or a register), found by a signed compare
// (|x| bits are below 2^31); t is scratch. The column and block amaxes
// leave NaNs out this way (fmaxf's rule).
func clearNaNLanes(x, t VecPhysical, inf Op) {
	VPCMPGTD(inf, x, t)
	VPANDN(x, t, x)
}

// amaxColsBandAVX2 is amaxColsBand on strips of 8 columns: acc[j] =
// max over the rows of |x[r][j]| as float32 bits, NaN lanes left out,
// each strip's maximum held in a register down the rows; seen gets the
// lane-wise maximum of the raw |x| bits.
func amaxColsBandAVX2() {
	TEXT("amaxColsBandAVX2", NOSPLIT, "func(acc *uint32, src *float32, strips int, rows int, ld int, seen *[8]uint32)")
	Pragma("noescape")
	Doc("amaxColsBandAVX2 stores the column amaxes of rows × 8·strips values (rows ld bytes apart), NaN left out, and the lane-wise max of |x| bits; its Go twin is amaxColsBandGo (fp8cast.go) (AVX2).")
	acc := Load(Param("acc"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("strips"), GP64())
	rows := Load(Param("rows"), GP64())
	ld := Load(Param("ld"), GP64())
	out := Load(Param("seen"), GP64())
	yAbs, yInf, ySeen := Y13, Y14, Y15
	VMOVDQU(ac(0x7FFFFFFF), yAbs)
	VMOVDQU(ac(0x7F800000), yInf)
	VPXOR(ySeen, ySeen, ySeen)
	loop("amaxcb2", n, func() {
		p, k := GP64(), GP64()
		MOVQ(src, p)
		MOVQ(rows, k)
		VPXOR(Y0, Y0, Y0)
		loop("amaxcb2_rows", k, func() {
			VPAND(Mem{Base: p}, yAbs, Y1)
			VPMAXUD(Y1, ySeen, ySeen)
			clearNaNLanes(Y1, Y2, yInf)
			VPMAXUD(Y1, Y0, Y0)
			ADDQ(ld, p)
		})
		VMOVDQU(Y0, Mem{Base: acc})
		ADDQ(U32(32), acc)
		ADDQ(U32(32), src)
	})
	VMOVDQU(ySeen, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// amax32AVX2 is amaxBlocks(32) on 8 lanes: the max |x| bits of each run
// of 32 values, a NaN pattern above +inf's where the run holds one.
func amax32AVX2() {
	TEXT("amax32AVX2", NOSPLIT, "func(src *float32, blocks int, out *uint32)")
	Pragma("noescape")
	Doc("amax32AVX2 stores the max |x| bits of each block of 32 values; its Go twin is amaxBlocksGo (fp8cast.go) (AVX2).")
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("out"), GP64())
	yAbs := Y15
	VMOVDQU(ac(0x7FFFFFFF), yAbs)
	loop("amax32_2", n, func() {
		acc := []VecPhysical{Y0, Y1, Y2, Y3}
		for i, a := range acc {
			VPAND(Mem{Base: src, Disp: 32 * i}, yAbs, a)
		}
		VPMAXUD(Y1, Y0, Y0)
		VPMAXUD(Y3, Y2, Y2)
		VPMAXUD(Y2, Y0, Y0)
		VEXTRACTI128(U8(1), Y0, X1)
		VPMAXUD(X1, X0, X0)
		VPSHUFD(U8(0x4E), X0, X1)
		VPMAXUD(X1, X0, X0)
		VPSHUFD(U8(0xB1), X0, X1)
		VPMAXUD(X1, X0, X0)
		VMOVD(X0, Mem{Base: out})
		ADDQ(U32(128), src)
		ADDQ(U32(4), out)
	})
	VZEROUPPER()
	RET()
}

// bf16ShiftAVX2 is bf16Shift on 8 lanes: each 16-bit half of the
// 8·blocks lanes at d whose exponent field is neither 0 nor all ones
// gets the matching half of its lane of shifts added; shifts advances
// by step bytes per 8 lanes (0: one vector for all).
func bf16ShiftAVX2() {
	TEXT("bf16ShiftAVX2", NOSPLIT, "func(d *uint32, shifts *uint32, blocks int, step int)")
	Pragma("noescape")
	Doc("bf16ShiftAVX2 adds per-lane exponent shifts to the finite non-zero bf16 halves of 8·blocks lanes; its Go twin is bf16ShiftGo (bf16pack.go) (AVX2).")
	d := Load(Param("d"), GP64())
	sh := Load(Param("shifts"), GP64())
	n := Load(Param("blocks"), GP64())
	step := Load(Param("step"), GP64())
	yExp, yZero := shiftConstsAVX2()
	loop("bf16shift2", n, func() {
		bf16Shift8AVX2(d, Mem{Base: sh}, yExp, yZero)
		ADDQ(U32(32), d)
		ADDQ(step, sh)
	})
	VZEROUPPER()
	RET()
	TEXT("bf16ShiftPeriodAVX2", NOSPLIT, "func(d *uint32, shifts *uint32, reps int, period int)")
	Pragma("noescape")
	Doc("bf16ShiftPeriodAVX2 adds exponent shifts to the finite non-zero bf16 halves of reps·8·period lanes, lane i taking shifts[i mod 8·period]; its Go twin is bf16ShiftGo (bf16pack.go) run by run (AVX2).")
	d = Load(Param("d"), GP64())
	n = Load(Param("reps"), GP64())
	yExp, yZero = shiftConstsAVX2()
	loop("bf16shiftp2", n, func() {
		s, k := GP64(), GP64()
		Load(Param("shifts"), s)
		Load(Param("period"), k)
		loop("bf16shiftp2_run", k, func() {
			bf16Shift8AVX2(d, Mem{Base: s}, yExp, yZero)
			ADDQ(U32(32), d)
			ADDQ(U32(32), s)
		})
	})
	VZEROUPPER()
	RET()
}

// bf16ShiftGroupsAVX2 emits bf16ShiftAVX2 over groups runs of 8·blocks
// lanes, run g at d + g·stride bytes, the shifts walked on from run to
// run (lane i of run g takes shifts[g·8·blocks + i]).
func bf16ShiftGroupsAVX2() {
	TEXT("bf16ShiftGroupsAVX2", NOSPLIT, "func(d *uint32, shifts *uint32, groups int, blocks int, stride int)")
	Pragma("noescape")
	Doc("bf16ShiftGroupsAVX2 adds exponent shifts to the finite non-zero bf16 halves of groups runs of 8·blocks lanes stride bytes apart, the shifts consecutive across the runs; its Go twin is bf16ShiftGo run by run (bf16pack.go) (AVX2).")
	d := Load(Param("d"), GP64())
	sh := Load(Param("shifts"), GP64())
	n := Load(Param("groups"), GP64())
	yExp, yZero := shiftConstsAVX2()
	loop("bf16shiftg2", n, func() {
		p, k := GP64(), GP64()
		MOVQ(d, p)
		Load(Param("blocks"), k)
		loop("bf16shiftg2_run", k, func() {
			bf16Shift8AVX2(p, Mem{Base: sh}, yExp, yZero)
			ADDQ(U32(32), p)
			ADDQ(U32(32), sh)
		})
		ADDQ(NewParamAddr("stride", 32), d)
	})
	VZEROUPPER()
	RET()
}

// bf16ShiftRunsAVX2 emits the shift of runs runs of 8·blocks lanes, run
// r by the exponent shift exp[r] (an int8 made a shiftLane value and
// broadcast).
func bf16ShiftRunsAVX2() {
	TEXT("bf16ShiftRunsAVX2", NOSPLIT, "func(d *uint32, exp *int8, runs int, blocks int)")
	Pragma("noescape")
	Doc("bf16ShiftRunsAVX2 adds the exponent shift exp[r] to the finite non-zero bf16 halves of the 8·blocks lanes of each run r; its Go twin is bf16ShiftRunsGo (gemmdirect16.go) (AVX2).")
	d := Load(Param("d"), GP64())
	ex := Load(Param("exp"), GP64())
	n := Load(Param("runs"), GP64())
	yExp, yZero := shiftConstsAVX2()
	loop("bf16shiftr2", n, func() {
		h, h2, k := GP32(), GP32(), GP64()
		// shiftLane(e): uint16(e<<7) in both halves.
		MOVBLSX(Mem{Base: ex}, h)
		SHLL(U8(7), h)
		ANDL(U32(0xFFFF), h)
		MOVL(h, h2)
		SHLL(U8(16), h2)
		ORL(h2, h)
		MOVD(h, Y3.AsX())
		VPBROADCASTD(Y3.AsX(), Y3)
		Load(Param("blocks"), k)
		loop("bf16shiftr2_run", k, func() {
			bf16Shift8AVX2(d, Y3, yExp, yZero)
			ADDQ(U32(32), d)
		})
		INCQ(ex)
	})
	VZEROUPPER()
	RET()
}

// shiftConstsAVX2 loads the shift kernels' constants: 0x7F80 (the bf16
// exponent field) in every 16-bit half, and zeros.
func shiftConstsAVX2() (yExp, yZero VecPhysical) {
	yExp, yZero = Y15, Y14
	VMOVDQU(ac(0x7F807F80), yExp)
	VPXOR(yZero, yZero, yZero)
	return yExp, yZero
}

// bf16Shift8AVX2 emits bf16ShiftAVX2's step on the 8 lanes at d with the
// shifts sh (in memory or a register); yExp holds 0x7F80 in every half,
// yZero zeros.
func bf16Shift8AVX2(d Register, sh Op, yExp, yZero VecPhysical) {
	x, e, m := Y0, Y1, Y2
	VMOVDQU(Mem{Base: d}, x)
	VPAND(yExp, x, e)
	VPCMPEQW(yZero, e, m) // zero or subnormal
	VPCMPEQW(yExp, e, e)  // inf or NaN
	VPOR(e, m, m)
	VPANDN(sh, m, e) // the shift where neither
	VPADDW(e, x, x)
	VMOVDQU(x, Mem{Base: d})
}
