package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// NVFP4's kernels on 8 lanes (AVX2): the random Hadamard transform, the
// element cast to E2M1 codes, and the decode of E2M1 codes times their
// block factors to bf16 (alone, and as the pairs of two rows a bf16
// GEMM packs). Each does the operations of its Go twin, so the bits are
// the twin's.

var e2m1ValsMem Mem

// e2m1ValsData defines the eight E2M1 magnitudes as float32, the table
// VPERMD looks a code's low three bits up in.
func e2m1ValsData() {
	e2m1ValsMem = GLOBL("e2m1ValsAVX2", RODATA|NOPTR)
	for i, v := range []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6} {
		DATA(4*i, U32(math.Float32bits(v)))
	}
}

// e2m1ProductsAVX2 emits the float32 products value(code)·factor of the
// 16 codes in the 8 bytes at src (the even element in the low nibble):
// elements 0–7 to lo, 8–15 to hi; vals holds the magnitudes, fct the
// factor in every lane, t scratch. A byte's high nibble, shifted down,
// keeps the low byte's bits above it, but only a code's four low bits
// are read (three by VPERMD, the sign from bit 3).
func e2m1ProductsAVX2(src Register, lo, hi, t, vals, fct VecPhysical) {
	MOVQ(Mem{Base: src}, lo.AsX())
	VPSRLW(U8(4), lo.AsX(), hi.AsX())
	VPUNPCKLBW(hi.AsX(), lo.AsX(), lo.AsX()) // element j in byte j
	VPSRLDQ(U8(8), lo.AsX(), hi.AsX())
	VPMOVZXBD(hi.AsX(), hi)
	VPMOVZXBD(lo.AsX(), lo)
	for _, v := range []VecPhysical{lo, hi} {
		VPSLLD(U8(28), v, t)
		VPAND(ac(0x80000000), t, t) // the sign
		VPERMD(vals, v, v)
		VPOR(t, v, v)
		VMULPS(fct, v, v)
	}
}

// e2m1DecodeAVX2 emits the decode of 16·blocks packed E2M1 codes times a
// factor per 16 to bf16 (the top halves of the float32 products).
func e2m1DecodeAVX2() {
	TEXT("e2m1DecodeBF16AVX2", NOSPLIT, "func(dst *uint16, src *uint8, factors *float32, blocks int)")
	Pragma("noescape")
	Doc("e2m1DecodeBF16AVX2 decodes 16·blocks packed E2M1 codes times a factor per 16 to bf16; its Go twin is decodeE2M1BF16Go (fp8cast.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	fac := Load(Param("factors"), GP64())
	n := Load(Param("blocks"), GP64())
	vals, fct := Y15, Y14
	VMOVUPS(e2m1ValsMem, vals)
	loop("e2m1dec2", n, func() {
		lo, hi, t := Y0, Y1, Y2
		VBROADCASTSS(Mem{Base: fac}, fct)
		e2m1ProductsAVX2(src, lo, hi, t, vals, fct)
		VPSRLD(U8(16), lo, lo)
		VPSRLD(U8(16), hi, hi)
		VPACKUSDW(hi, lo, lo) // 128-bit lanes: lo 0–3, hi 0–3 | lo 4–7, hi 4–7
		VPERMQ(U8(0xD8), lo, lo)
		VMOVDQU(lo, Mem{Base: dst})
		ADDQ(U32(8), src)
		ADDQ(U32(4), fac)
		ADDQ(U32(32), dst)
	})
	VZEROUPPER()
	RET()
}

// e2m1WidenAVX2 emits the decode of 16·blocks packed E2M1 codes times a
// factor per 16 to float32 values of bf16 precision (the products' top
// halves, widened back): the split bf16 GEMM kernels' form of A.
func e2m1WidenAVX2() {
	TEXT("e2m1WidenF32AVX2", NOSPLIT, "func(dst *float32, src *uint8, factors *float32, blocks int)")
	Pragma("noescape")
	Doc("e2m1WidenF32AVX2 decodes 16·blocks packed E2M1 codes times a factor per 16 to float32 values of bf16 precision; its Go twin is e2m1At widened back, value by value (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	fac := Load(Param("factors"), GP64())
	n := Load(Param("blocks"), GP64())
	vals, fct, yHi := Y15, Y14, Y13
	VMOVUPS(e2m1ValsMem, vals)
	VMOVDQU(ac(0xFFFF0000), yHi)
	loop("e2m1widen2", n, func() {
		lo, hi, t := Y0, Y1, Y2
		VBROADCASTSS(Mem{Base: fac}, fct)
		e2m1ProductsAVX2(src, lo, hi, t, vals, fct)
		VPAND(yHi, lo, lo)
		VPAND(yHi, hi, hi)
		VMOVDQU(lo, Mem{Base: dst})
		VMOVDQU(hi, Mem{Base: dst, Disp: 32})
		ADDQ(U32(8), src)
		ADDQ(U32(4), fac)
		ADDQ(U32(64), dst)
	})
	VZEROUPPER()
	RET()
}

// e2m1PairsStridedAVX2 is e2m1PairsStrided on 8 lanes: for each of
// groups pairs of rows, 16·blocks codes of each row times their factors
// per 16, interleaved as bf16 pairs (row r0's value low).
func e2m1PairsStridedAVX2() {
	TEXT("e2m1PairsStridedAVX2", NOSPLIT, "func(dst *uint32, r0, r1 *uint8, f0, f1 *float32, groups, blocks, stride, cstride, fstride int)")
	Pragma("noescape")
	Doc("e2m1PairsStridedAVX2 decodes, for each of groups pairs of rows, 16·blocks E2M1 codes of the two rows times their factors per 16 and interleaves them as bf16 pairs, each group stride bytes of dst, cstride bytes of codes and fstride bytes of factors after the last; its Go twin is e2m1At, pair by pair (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	f0 := Load(Param("f0"), GP64())
	f1 := Load(Param("f1"), GP64())
	ng := Load(Param("groups"), GP64())
	vals, fct, yHi := Y15, Y14, Y13
	VMOVUPS(e2m1ValsMem, vals)
	VMOVDQU(ac(0xFFFF0000), yHi)
	loop("e2m1pairs2_g", ng, func() {
		n := Load(Param("blocks"), GP64())
		d, p0, p1, q0, q1 := GP64(), GP64(), GP64(), GP64(), GP64()
		MOVQ(dst, d)
		MOVQ(r0, p0)
		MOVQ(r1, p1)
		MOVQ(f0, q0)
		MOVQ(f1, q1)
		loop("e2m1pairs2", n, func() {
			a0, a1, b0, b1, t := Y0, Y1, Y2, Y3, Y4
			VBROADCASTSS(Mem{Base: q0}, fct)
			e2m1ProductsAVX2(p0, a0, a1, t, vals, fct)
			VBROADCASTSS(Mem{Base: q1}, fct)
			e2m1ProductsAVX2(p1, b0, b1, t, vals, fct)
			for i, ab := range [][2]VecPhysical{{a0, b0}, {a1, b1}} {
				VPSRLD(U8(16), ab[0], ab[0])
				VPAND(yHi, ab[1], ab[1])
				VPOR(ab[1], ab[0], ab[0])
				VMOVDQU(ab[0], Mem{Base: d, Disp: 32 * i})
			}
			ADDQ(U32(8), p0)
			ADDQ(U32(8), p1)
			ADDQ(U32(4), q0)
			ADDQ(U32(4), q1)
			ADDQ(U32(64), d)
		})
		ADDQ(NewParamAddr("stride", 56), dst)
		ADDQ(NewParamAddr("cstride", 64), r0)
		ADDQ(NewParamAddr("cstride", 64), r1)
		ADDQ(NewParamAddr("fstride", 72), f0)
		ADDQ(NewParamAddr("fstride", 72), f1)
	})
	VZEROUPPER()
	RET()
}

// e2m1BlocksAVX2 emits NVFP4's nearest element cast on 8 lanes: each
// block of 16 values times its block's scale to E2M1 codes, two per
// byte, with e2m1BlocksGo's arithmetic (quantizeFP8Go's rounding with
// E2M1's constants, saturating at ±6, a NaN giving +6, the sign in bit
// 3).
func e2m1BlocksAVX2() {
	TEXT("e2m1BlocksAVX2", NOSPLIT, "func(dst *uint8, src *float32, es *float32, blocks int)")
	Pragma("noescape")
	Doc("e2m1BlocksAVX2 casts 16·blocks values times their block's scale to E2M1 codes, two per byte; its Go twin is e2m1BlocksGo (fp8cast.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	es := Load(Param("es"), GP64())
	n := Load(Param("blocks"), GP64())
	shift := 22
	scale, magic, half, seven, norm := Y8, Y9, Y10, Y11, Y12
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	bcastY(uint32(127+22)<<23, magic)
	off := uint32(126 << 1)
	bcastY(uint32(1)<<(shift-1)-1-off<<uint(shift), half)
	bcastY(7, seven)
	bcastY(0x3F800000, norm)
	loop("e2m1blk2", n, func() {
		VBROADCASTSS(Mem{Base: es}, scale)
		codes := []VecPhysical{Y6, Y7}
		for i, c := range codes {
			y, ya, t, sub := Y0, Y1, Y2, Y3
			VMULPS(Mem{Base: src, Disp: 32 * i}, scale, y)
			VPAND(ac(0x7FFFFFFF), y, ya)
			roundAVX2(shift, ya, c, t, sub, half, magic, norm)
			VPMINUD(seven, c, c)
			// The sign to bit 3.
			VPSRLD(U8(28), y, t)
			VPAND(ac(8), t, t)
			VPOR(t, c, c)
			// A NaN gives +6.
			VPCMPGTD(ac(0x7F800000), ya, t)
			VBLENDVPS(t, seven, c, c)
		}
		packNibblesAVX2(codes[0], codes[1], Y2, dst)
		ADDQ(U32(64), src)
		ADDQ(U32(4), es)
		ADDQ(U32(8), dst)
	})
	VZEROUPPER()
	RET()
}

// packNibblesAVX2 stores the 16 codes (below 16) of lo (elements 0–7)
// and hi (8–15) as 8 bytes at dst, two a byte, the even element in the
// low nibble; lo, hi and t are overwritten.
func packNibblesAVX2(lo, hi, t VecPhysical, dst Register) {
	// Codes as dwords j | j+1 << 16 (pairs), then a byte each: the odd
	// code into the high nibble.
	VPACKUSDW(hi, lo, lo)
	VPERMQ(U8(0xD8), lo, lo)
	VPSRLD(U8(12), lo, t)
	VPOR(t, lo, lo)
	VPAND(ac(0xFF), lo, lo)
	VEXTRACTI128(U8(1), lo, t.AsX())
	VPACKUSDW(t.AsX(), lo.AsX(), lo.AsX())
	VPACKUSWB(lo.AsX(), lo.AsX(), lo.AsX())
	MOVQ(lo.AsX(), Mem{Base: dst})
}

// e2m1StochasticAVX2 emits NVFP4's stochastic element cast on 8 lanes,
// e2m1Blocks' stochastic arithmetic: one draw (murmur3's finaliser of
// key ^ n·0x9E3779B1) per stored byte n = base + its position, its low
// 16 bits u rounding the even element, its high 16 bits the odd one;
// with t the magnitude's bits less 0x3F000000 from 1.0 up and
// ceil(|v|·2^23) below 1, (t + 2^22 − 1 − u·2^6) >> 22 is the code at
// or below |v|, plus one exactly when the fraction of the gap above it
// exceeds u·2^−16; saturating at 7, a NaN +6, the sign in bit 3.
func e2m1StochasticAVX2() {
	TEXT("e2m1StochasticAVX2", NOSPLIT, "func(dst *uint8, src *float32, es *float32, blocks int, key uint32, base uint32)")
	Pragma("noescape")
	Doc("e2m1StochasticAVX2 casts 16·blocks values times their block's scale to E2M1 codes, two per byte, rounding stochastically; its Go twin is e2m1StochasticGo (fp8cast.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	es := Load(Param("es"), GP64())
	n := Load(Param("blocks"), GP64())
	yKey, yCtr, yStep, yM1, yM2, yLow22, yScale := Y9, Y10, Y11, Y12, Y13, Y14, Y15
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	bcastY(0x85EBCA6B, yM1)
	bcastY(0xC2B2AE35, yM2)
	bcastY(0x3FFFFF, yLow22)
	// yCtr holds n·0x9E3779B1 of each lane's byte counter n (lane l of
	// block b: base + 8·b + l); it steps by 8·0x9E3779B1 a block.
	bcastY(uint32(8*0x9E3779B1&0xFFFFFFFF), yStep)
	kr, br := Load(Param("key"), GP32()), Load(Param("base"), GP32())
	MOVD(kr, yKey.AsX())
	VPBROADCASTD(yKey.AsX(), yKey)
	MOVD(br, yCtr.AsX())
	VPBROADCASTD(yCtr.AsX(), yCtr)
	VPADDD(e2m1Mem, yCtr, yCtr) // lanes 0–7 of the table: 0, 1, …, 7
	bcastY(0x9E3779B1, Y0)
	VPMULLD(Y0, yCtr, yCtr)
	loop("e2m1sr2", n, func() {
		h, t := Y0, Y1
		VPXOR(yKey, yCtr, h)
		VPSRLD(U8(16), h, t)
		VPXOR(t, h, h)
		VPMULLD(yM1, h, h)
		VPSRLD(U8(13), h, t)
		VPXOR(t, h, h)
		VPMULLD(yM2, h, h)
		VPSRLD(U8(16), h, t)
		VPXOR(t, h, h)
		VPADDD(yStep, yCtr, yCtr)
		VBROADCASTSS(Mem{Base: es}, yScale)
		codes := []VecPhysical{Y7, Y8}
		for i, c := range codes {
			// u: the draws' words of elements 8i … 8i+7.
			u, v, a, m, r := Y2, Y3, Y4, Y5, Y6
			if i == 0 {
				VPMOVZXWD(h.AsX(), u)
			} else {
				VEXTRACTI128(U8(1), h, u.AsX())
				VPMOVZXWD(u.AsX(), u)
			}
			VMULPS(Mem{Base: src, Disp: 32 * i}, yScale, v)
			VPAND(ac(0x7FFFFFFF), v, a)
			VPSUBD(ac(0x3F000000), a, c)
			VMOVDQU(ac(0x3F800000), m)
			VPCMPGTD(a, m, m)            // |v| < 1
			VMULPS(ac(0x4B000000), a, r) // |v|·2^23
			VROUNDPS(U8(0x0A), r, r)     // up, no inexact exception
			VCVTTPS2DQ(r, r)
			VBLENDVPS(m, r, c, c)
			VPSLLD(U8(6), u, u)
			VPADDD(yLow22, c, c)
			VPSUBD(u, c, c)
			VPSRLD(U8(22), c, c)
			VPMINUD(ac(7), c, c)
			// The sign to bit 3 where v is not a NaN.
			VPCMPGTD(ac(0x7F800000), a, m)
			VPSRLD(U8(28), v, r)
			VPAND(ac(8), r, r)
			VPANDN(r, m, r)
			VPOR(r, c, c)
		}
		packNibblesAVX2(codes[0], codes[1], Y2, dst)
		ADDQ(U32(64), src)
		ADDQ(U32(4), es)
		ADDQ(U32(8), dst)
	})
	VZEROUPPER()
	RET()
}

// roundAVX2 emits the code of the magnitudes ya (float32 bits, no NaN
// considered) into c, quantizeFP8Go's arithmetic: at or above the
// smallest normal (norm), the bits rebiased and rounded half to even at
// bit shift (half holding 2^(shift−1) − 1 minus the rebias); below it,
// the FPU's rounding of ya + magic. t and sub are scratch. The caller
// saturates, signs and handles NaN.
func roundAVX2(shift int, ya, c, t, sub, half, magic, norm VecPhysical) {
	VPSRLD(U8(shift), ya, t)
	VPAND(ac(1), t, t)
	VPADDD(half, t, t)
	VPADDD(ya, t, t)
	VPSRLD(U8(shift), t, c)
	VADDPS(magic, ya, sub)
	VPSUBD(magic, sub, sub)
	VPCMPGTD(ya, norm, t) // norm > ya
	VBLENDVPS(t, sub, c, c)
}

// toBF16AVX2 rounds v to bf16 in place (nearest even, as bf16RoundF32),
// NaN lanes kept; t and u scratch.
func toBF16AVX2(v, t, u VecPhysical) {
	VPSRLD(U8(16), v, t)
	VPAND(ac(1), t, t)
	VPADDD(ac(0x7FFF), t, t)
	VPADDD(v, t, t)
	VPAND(ac(0xFFFF0000), t, t)
	VPAND(ac(0x7FFFFFFF), v, u)
	VPCMPGTD(ac(0x7F800000), u, u) // a NaN
	VBLENDVPS(u, v, t, v)
}

// rhtGroupsAVX2 is how many groups of 16 the AVX2 transform interleaves
// (two accumulators a group, of 16 registers).
const rhtGroupsAVX2 = 4

// rht16AVX2 emits the 16-point random Hadamard transform on 8 lanes, as
// rht16 does on 16: each group rounded to bf16 (NaN kept), signed by s,
// y_j = Σ_k H[j][k]·v_k by FMAs with ±1 in k order, times 0.25, rounded
// to bf16. Four groups side by side, then the rest one at a time.
func rht16AVX2() {
	TEXT("rht16AVX2", NOSPLIT, "func(x *float32, groups int)")
	Pragma("noescape")
	Doc("rht16AVX2 applies the 16-point random Hadamard transform to 16·groups values in place; its Go twin is rht16Go (fp8cast.go) (AVX2).")
	x := Load(Param("x"), GP64())
	n := Load(Param("groups"), GP64())
	tab := GP64()
	LEAQ(rhtMem, tab)
	local := AllocLocal(64 * rhtGroupsAVX2)
	toBF16 := toBF16AVX2
	acc := func(i, h int) VecPhysical { return ymm(2*i + h) }
	body := func(g int) {
		t, u := Y14, Y15
		for i := 0; i < g; i++ {
			for h := 0; h < 2; h++ {
				v := acc(i, h)
				VMOVUPS(Mem{Base: x, Disp: 64*i + 32*h}, v)
				toBF16(v, t, u)
				VPXOR(Mem{Base: tab, Disp: 64*16 + 32*h}, v, v)
				VMOVUPS(v, local.Offset(64*i+32*h))
				VPXOR(v, v, v)
			}
		}
		hLo, hHi := Y8, Y9
		bc := []VecPhysical{Y10, Y11, Y12, Y13}
		for k := 0; k < 16; k++ {
			VMOVUPS(Mem{Base: tab, Disp: 64 * k}, hLo)
			VMOVUPS(Mem{Base: tab, Disp: 64*k + 32}, hHi)
			for i := 0; i < g; i++ {
				VBROADCASTSS(local.Offset(64*i+4*k), bc[i])
				VFMADD231PS(bc[i], hLo, acc(i, 0))
				VFMADD231PS(bc[i], hHi, acc(i, 1))
			}
		}
		for i := 0; i < g; i++ {
			for h := 0; h < 2; h++ {
				v := acc(i, h)
				VMULPS(ac(math.Float32bits(0.25)), v, v)
				toBF16(v, t, u)
				VMOVUPS(v, Mem{Base: x, Disp: 64*i + 32*h})
			}
		}
		ADDQ(U32(64*g), x)
	}
	wide := GP64()
	MOVQ(n, wide)
	SHRQ(U8(2), wide)
	ANDQ(U32(rhtGroupsAVX2-1), n)
	loop("rht16x4_2", wide, func() { body(rhtGroupsAVX2) })
	loop("rht16_2", n, func() { body(1) })
	VZEROUPPER()
	RET()
}

// amax16AVX2 emits NVFP4's block amaxes on 8 lanes: for each block of
// 16 values, the largest |x| bits with NaN lanes left out (fmaxf's
// rule), reduced across the lanes and stored to out[b].
func amax16AVX2() {
	TEXT("amax16AVX2", NOSPLIT, "func(src *float32, blocks int, out *uint32)")
	Pragma("noescape")
	Doc("amax16AVX2 stores the max |x| bits of each block of 16 values, NaN left out; its Go twin is amax16Go (fp8cast.go) (AVX2).")
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("out"), GP64())
	yAbs, yInf := Y14, Y15
	VMOVDQU(ac(0x7FFFFFFF), yAbs)
	VMOVDQU(ac(0x7F800000), yInf)
	loop("amax16_2", n, func() {
		a, b, t := Y0, Y1, Y2
		for i, v := range []VecPhysical{a, b} {
			VPAND(Mem{Base: src, Disp: 32 * i}, yAbs, v)
			clearNaNLanes(v, t, yInf)
		}
		VPMAXUD(b, a, a)
		VEXTRACTI128(U8(1), a, t.AsX())
		VPMAXUD(t.AsX(), a.AsX(), a.AsX())
		VPSHUFD(U8(0x4E), a.AsX(), t.AsX())
		VPMAXUD(t.AsX(), a.AsX(), a.AsX())
		VPSHUFD(U8(0xB1), a.AsX(), t.AsX())
		VPMAXUD(t.AsX(), a.AsX(), a.AsX())
		VMOVD(a.AsX(), Mem{Base: out})
		ADDQ(U32(64), src)
		ADDQ(U32(4), out)
	})
	VZEROUPPER()
	RET()
}

// bf16BitsAVX2 emits the bf16 bits of float32 values that are bf16
// values already (the transform's outputs): each value's high half, a
// NaN made quiet first (bit 22 set) so that its half stays a NaN; 16
// values a block.
func bf16BitsAVX2() {
	TEXT("bf16BitsAVX2", NOSPLIT, "func(dst *uint16, src *float32, blocks int)")
	Pragma("noescape")
	Doc("bf16BitsAVX2 stores the high halves of 16·blocks float32 values, NaNs made quiet; its Go twin is bf16Bits, value by value (fp8cast.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	loop("bf16bits2", n, func() {
		for i, v := range []VecPhysical{Y0, Y1} {
			a, t := Y2, Y3
			VMOVDQU(Mem{Base: src, Disp: 32 * i}, v)
			VPAND(ac(0x7FFFFFFF), v, a)
			VPCMPGTD(ac(0x7F800000), a, t) // a NaN
			VPAND(ac(0x00400000), t, t)
			VPOR(t, v, v)
			VPSRLD(U8(16), v, v)
		}
		VPACKUSDW(Y1, Y0, Y0)
		VPERMQ(U8(0xD8), Y0, Y0)
		VMOVDQU(Y0, Mem{Base: dst})
		ADDQ(U32(64), src)
		ADDQ(U32(32), dst)
	})
	VZEROUPPER()
	RET()
}

// nvfp4ScalesAVX2 is nvfp4Scales on 8 blocks a vector: each block's
// E4M3 scale code from its amax times m (saturating, nearest even, as
// e4m3RoundAbs), and its elements' scale min(1/(decode(code)·sdec),
// FLT_MAX).
func nvfp4ScalesAVX2() {
	TEXT("nvfp4ScalesAVX2", NOSPLIT, "func(amax *uint32, sf *uint8, es *float32, groups int, m float32, sdec float32)")
	Pragma("noescape")
	Doc("nvfp4ScalesAVX2 computes the E4M3 block scales and element scales of 8·groups NVFP4 blocks from their amaxes; its Go twin is nvfp4ScalesGo (fp8cast.go) (AVX2).")
	am := Load(Param("amax"), GP64())
	sf := Load(Param("sf"), GP64())
	es := Load(Param("es"), GP64())
	n := Load(Param("groups"), GP64())
	yM, ySdec, yFltMax, magic, half, maxR, norm, rebias := Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	VBROADCASTSS(NewParamAddr("m", 32), yM)
	VBROADCASTSS(NewParamAddr("sdec", 36), ySdec)
	bcastY(math.Float32bits(math.MaxFloat32), yFltMax)
	// E4M3's rounding constants (quantizeAVX2's).
	const shift = 20
	bcastY(uint32(127+14)<<23, magic)
	off := uint32(120 << 3) // wraps, as quantizeAVX2's does
	bcastY(uint32(1)<<(shift-1)-1-off<<uint(shift), half)
	bcastY(0x7E, maxR)
	bcastY(0x3C800000, norm)
	bcastY(120<<23, rebias)
	loop("nvfp4sc2", n, func() {
		t, c, u, sub, d, q := Y0, Y1, Y2, Y3, Y4, Y5
		VMULPS(Mem{Base: am}, yM, t)
		VMINPS(yFltMax, t, t)
		roundAVX2(shift, t, c, u, sub, half, magic, norm)
		VPMINUD(maxR, c, c)
		// The 8 codes (dwords below 256) to 8 bytes.
		VEXTRACTI128(U8(1), c, d.AsX())
		VPACKUSDW(d.AsX(), c.AsX(), d.AsX())
		VPACKUSWB(d.AsX(), d.AsX(), d.AsX())
		MOVQ(d.AsX(), Mem{Base: sf})
		// decode(sf): (c<<20) + (120<<23) from code 8 up, c·2^−9 below.
		VPSLLD(U8(20), c, d)
		VPADDD(rebias, d, d)
		VCVTDQ2PS(c, sub)
		VMULPS(acf(0x1p-9), sub, sub)
		VPCMPGTD(ac(7), c, u) // c > 7: a normal code
		VBLENDVPS(u, d, sub, d)
		VMULPS(ySdec, d, d)
		VMOVUPS(acf(1), q)
		VDIVPS(d, q, q)
		VMINPS(yFltMax, q, q)
		VMOVUPS(q, Mem{Base: es})
		ADDQ(U32(32), am)
		ADDQ(U32(8), sf)
		ADDQ(U32(32), es)
	})
	VZEROUPPER()
	RET()
}

// nvfp4KernelsAVX2 emits the AVX2 NVFP4 kernels and their table.
func nvfp4KernelsAVX2() {
	nvfp4ScalesAVX2()
	mxScalesAVX2()
	e8m0RangeAVX2()
	e8m0FactorsAVX2()
	e2m1ValsData()
	e2m1DecodeAVX2()
	e2m1WidenAVX2()
	e2m1PairsStridedAVX2()
	e2m1BlocksAVX2()
	e2m1StochasticAVX2()
	rht16AVX2()
	amax16AVX2()
	bf16BitsAVX2()
	nvfp4ColsRHTAVX2()
}

// mxScalesAVX2 is mxScalesGo on 8 blocks a vector: from each block's
// amax bits b, its E8M0 scale code s = clamp(b>>23 − emax (+1 when the
// mantissa bits exceed ceilThr), 0, 254), 255 for an infinite or NaN
// amax, and the factor 2^(127−s) its values are cast with (bits
// (254−s)<<23; NaN for 255), and the largest b.
func mxScalesAVX2() {
	TEXT("mxScalesAVX2", NOSPLIT, "func(amax *uint32, sc *uint8, inv *float32, groups int, emax uint32, ceilThr uint32) uint32")
	Pragma("noescape")
	Doc("mxScalesAVX2 computes the E8M0 scales and cast factors of 8·groups MXFP8 blocks from their amax bits and returns the largest amax bits; its Go twin is mxScalesGo (fp8cast.go) (AVX2).")
	am := Load(Param("amax"), GP64())
	sc := Load(Param("sc"), GP64())
	inv := Load(Param("inv"), GP64())
	n := Load(Param("groups"), GP64())
	yEmax, yThr, yMant, yInfM, y254, yNaN, yMax, yFF := Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	VBROADCASTSS(NewParamAddr("emax", 32), yEmax)
	VBROADCASTSS(NewParamAddr("ceilThr", 36), yThr)
	bcastY(1<<23-1, yMant)
	bcastY(0x7F7FFFFF, yInfM)
	bcastY(254, y254)
	bcastY(0x7FC00000, yNaN)
	bcastY(255, yFF)
	VPXOR(yMax, yMax, yMax)
	loop("mxsc2", n, func() {
		b, s, t, sp := Y0, Y1, Y2, Y3
		VMOVDQU(Mem{Base: am}, b)
		VPMAXUD(b, yMax, yMax)
		VPSRLD(U8(23), b, s)
		VPAND(yMant, b, t)
		VPCMPGTD(yThr, t, t) // mantissa above the threshold: −1
		VPSUBD(t, s, s)
		VPSUBD(yEmax, s, s)
		VPXOR(t, t, t)
		VPMAXSD(t, s, s)
		VPMINSD(y254, s, s)
		VPCMPGTD(yInfM, b, sp) // infinite or NaN amax
		VPAND(yFF, sp, t)
		VPOR(t, s, s)
		// The factor 2^(127−s): bits (254−s)<<23, NaN for s = 255.
		VPSUBD(s, y254, t)
		VPSLLD(U8(23), t, t)
		VBLENDVPS(sp, yNaN, t, t)
		VMOVUPS(t, Mem{Base: inv})
		// The 8 codes (dwords below 256) to 8 bytes.
		VEXTRACTI128(U8(1), s, t.AsX())
		VPACKUSDW(t.AsX(), s.AsX(), t.AsX())
		VPACKUSWB(t.AsX(), t.AsX(), t.AsX())
		MOVQ(t.AsX(), Mem{Base: sc})
		ADDQ(U32(32), am)
		ADDQ(U32(8), sc)
		ADDQ(U32(32), inv)
	})
	// The largest of the 8 lanes.
	t := Y0
	VEXTRACTI128(U8(1), yMax, t.AsX())
	VPMAXUD(t.AsX(), yMax.AsX(), t.AsX())
	VPSHUFD(U8(0x4E), t.AsX(), Y1.AsX())
	VPMAXUD(Y1.AsX(), t.AsX(), t.AsX())
	VPSHUFD(U8(0xB1), t.AsX(), Y1.AsX())
	VPMAXUD(Y1.AsX(), t.AsX(), t.AsX())
	r := GP32()
	MOVD(t.AsX(), r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// e8m0RangeAVX2 is e8m0RangeGo on 32 codes a vector: the smallest code
// (VPMINUB; 255, NaN, is the largest byte) and the largest code other
// than 255 plus one (codes plus one wrap 255 to 0, VPMAXUB), 0 when
// every code is 255.
func e8m0RangeAVX2() {
	TEXT("e8m0RangeAVX2", NOSPLIT, "func(sc *uint8, groups int) (lo uint8, hi1 uint8)")
	Pragma("noescape")
	Doc("e8m0RangeAVX2 returns the smallest of 32·groups E8M0 codes and the largest code other than 255 plus one (0 if none); its Go twin is e8m0RangeGo (fp8cast.go) (AVX2).")
	sc := Load(Param("sc"), GP64())
	n := Load(Param("groups"), GP64())
	lo, hi, ones := Y0, Y1, Y2
	VPCMPEQB(ones, ones, ones) // −1 in every byte
	VMOVDQA(ones, lo)
	VPXOR(hi, hi, hi)
	loop("e8r2", n, func() {
		v := Y3
		VMOVDQU(Mem{Base: sc}, v)
		VPMINUB(v, lo, lo)
		VPSUBB(ones, v, v) // plus one
		VPMAXUB(v, hi, hi)
		ADDQ(U32(32), sc)
	})
	reduce := func(y VecPhysical, op func(a, b, c Op)) {
		t := Y3
		VEXTRACTI128(U8(1), y, t.AsX())
		op(t.AsX(), y.AsX(), y.AsX())
		VPSHUFD(U8(0x4E), y.AsX(), t.AsX())
		op(t.AsX(), y.AsX(), y.AsX())
		VPSHUFD(U8(0xB1), y.AsX(), t.AsX())
		op(t.AsX(), y.AsX(), y.AsX())
		VPSRLD(U8(16), y.AsX(), t.AsX())
		op(t.AsX(), y.AsX(), y.AsX())
		VPSRLD(U8(8), y.AsX(), t.AsX())
		op(t.AsX(), y.AsX(), y.AsX())
	}
	reduce(lo, func(a, b, c Op) { VPMINUB(a, b, c) })
	reduce(hi, func(a, b, c Op) { VPMAXUB(a, b, c) })
	r := GP32()
	MOVD(lo.AsX(), r)
	Store(r.As8(), ReturnIndex(0))
	r2 := GP32()
	MOVD(hi.AsX(), r2)
	Store(r2.As8(), ReturnIndex(1))
	VZEROUPPER()
	RET()
}

// e8m0FactorsAVX2 is e8m0FactorsGo on 8 codes a vector: f = 2^(s −
// 127 − shift) from d = s − shift: bits d<<23 for d in [1, 254],
// 1<<(d+22) below (subnormal; VPSLLVD gives 0 for a negative count),
// +inf above, NaN for s = 255.
func e8m0FactorsAVX2() {
	TEXT("e8m0FactorsAVX2", NOSPLIT, "func(f *float32, sc *uint8, groups int, shift int32)")
	Pragma("noescape")
	Doc("e8m0FactorsAVX2 writes 2^(s−127−shift) for 8·groups E8M0 codes s (NaN for 255); its Go twin is e8m0FactorsGo (fp8cast.go) (AVX2).")
	f := Load(Param("f"), GP64())
	sc := Load(Param("sc"), GP64())
	n := Load(Param("groups"), GP64())
	yShift, y22, y0, y255, yInf, yNaN, yOne, y254 := Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	VBROADCASTSS(NewParamAddr("shift", 24), yShift)
	bcastY(22, y22)
	VPXOR(y0, y0, y0)
	bcastY(255, y255)
	bcastY(0x7F800000, yInf)
	bcastY(0x7FC00000, yNaN)
	bcastY(1, yOne)
	bcastY(254, y254)
	loop("e8f2", n, func() {
		s, d, t, u := Y0, Y1, Y2, Y3
		VPMOVZXBD(Mem{Base: sc}, s)
		VPSUBD(yShift, s, d)
		// Normal: d<<23; subnormal or zero below.
		VPSLLD(U8(23), d, t)
		VPADDD(y22, d, u)
		VPSLLVD(u, yOne, u)
		VPCMPGTD(y0, d, Y4) // d > 0
		VBLENDVPS(Y4, t, u, t)
		VPCMPGTD(y254, d, Y4) // d > 254
		VBLENDVPS(Y4, yInf, t, t)
		VPCMPEQD(y255, s, Y4)
		VBLENDVPS(Y4, yNaN, t, t)
		VMOVUPS(t, Mem{Base: f})
		ADDQ(U32(8), sc)
		ADDQ(U32(32), f)
	})
	VZEROUPPER()
	RET()
}

// nvfp4ColsRHTAVX2 is nvfp4Cols(rht) on 8 source columns (AVX2): for
// each group of 16 source rows, the 16×8 values (lanes the columns)
// rounded to bf16 (NaN kept) and signed by s_k, kept in the frame; the
// sums y_j = Σ_k ±v_k in k order from +0 with the AVX-512 kernel's
// shared prefixes (171 additions, the 16 partial sums in the 16
// registers, the terms from the frame); then each output times 0.25,
// rounded to bf16, its |y| folded into the lanes' amax (NaN left out), a
// NaN made quiet; the outputs' high halves paired into dwords (outputs
// 2i and 2i+1) and the 8×8 dwords transposed, so that stored row c (=
// source column c) takes its 16 bf16 values in one store; the 8 block
// amaxes stored nb blocks apart.
func nvfp4ColsRHTAVX2() {
	name := "nvfp4ColsRHTAVX2"
	// Not NOSPLIT: the frame (1,056 bytes) is over the limit.
	TEXT(name, 0, "func(dst *uint16, src *float32, bam *uint32, groups int, srcStride int, dstStride int, nb int32)")
	Pragma("noescape")
	Doc(name + " writes 8 source columns of 16·groups rows transposed, randomly Hadamard-transformed along the rows (as bf16 bits, a NaN quiet), with the amax of each block of 16; its Go twin is nvfp4ColsRHTGo (fp8cast.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	bam := Load(Param("bam"), GP64())
	n := Load(Param("groups"), GP64())
	ss := Load(Param("srcStride"), GP64())
	ds := Load(Param("dstStride"), GP64())
	nbr := Load(Param("nb"), GP32())
	bs := GP64() // the block amaxes' stride in bytes
	MOVLQSX(nbr, bs)
	SHLQ(U8(2), bs)
	ds3 := GP64()
	LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, ds3)
	// frame: the 16 signed terms, the 16 sums, the amaxes.
	local := AllocLocal(32*32 + 32)
	terms := func(k int) Mem { return local.Offset(32 * k) }
	sums := func(j int) Mem { return local.Offset(32 * (16 + j)) }
	amaxSlot := local.Offset(32 * 32)
	toBF16 := toBF16AVX2
	loop(name, n, func() {
		p := GP64()
		MOVQ(src, p)
		for k := 0; k < 16; k++ {
			VMOVUPS(Mem{Base: p}, Y0)
			toBF16(Y0, Y1, Y2)
			if 0xD7E8>>k&1 != 0 {
				VPXOR(ac(0x80000000), Y0, Y0)
			}
			VMOVUPS(Y0, terms(k))
			if k < 15 {
				ADDQ(ss, p)
			}
		}
		// The shared-prefix sums (see nvfp4Cols): pattern p in Y(p).
		acc := ymm
		VXORPS(Y0, Y0, Y0)
		VADDPS(terms(0), Y0, Y0) // +0 + v_0
		rhtPrefixSums(acc, func(k int) Op { return terms(k) })
		for j := 0; j < 16; j++ {
			VMOVUPS(acc(j), sums(j))
		}
		// The outputs two at a time, paired into dwords in Y8…Y15.
		m := Y3
		VPXOR(m, m, m)
		output := func(j int, y, t, u VecPhysical) {
			VMOVUPS(sums(j), y)
			VMULPS(acf(0.25), y, y)
			toBF16(y, t, u)
			VPAND(ac(0x7FFFFFFF), y, t)
			VPCMPGTD(ac(0x7F800000), t, u) // a NaN
			VPANDN(t, u, t)                // |y|, 0 for a NaN
			VPMAXUD(t, m, m)
			VPAND(ac(0x00400000), u, u)
			VPOR(u, y, y) // a NaN quiet
		}
		for i := 0; i < 8; i++ {
			output(2*i, Y0, Y1, Y2)
			output(2*i+1, Y4, Y5, Y6)
			r := ymm(8 + i)
			VPSRLD(U8(16), Y0, Y0)
			VPAND(ac(0xFFFF0000), Y4, Y4)
			VPOR(Y4, Y0, r)
		}
		VMOVDQU(m, amaxSlot)
		r := []VecPhysical{Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
		t := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
		transpose8x8Halves(r, t)
		q, q4 := GP64(), GP64()
		MOVQ(dst, q)
		LEAQ(Mem{Base: q, Index: ds, Scale: 4}, q4)
		row := func(c int) Mem {
			base := q
			if c >= 4 {
				base, c = q4, c-4
			}
			switch c {
			case 0:
				return Mem{Base: base}
			case 3:
				return Mem{Base: base, Index: ds3, Scale: 1}
			default:
				return Mem{Base: base, Index: ds, Scale: uint8(c)}
			}
		}
		for c := 0; c < 4; c++ {
			VPERM2F128(U8(0x20), r[c+4], r[c], t[0])
			VMOVDQU(t[0], row(c))
			VPERM2F128(U8(0x31), r[c+4], r[c], t[1])
			VMOVDQU(t[1], row(c+4))
		}
		// The 8 block amaxes, nb blocks apart.
		b, v := GP64(), GP32()
		MOVQ(bam, b)
		for c := 0; c < 8; c++ {
			MOVL(amaxSlot.Offset(4*c), v)
			MOVL(v, Mem{Base: b})
			if c < 7 {
				ADDQ(bs, b)
			}
		}
		// Next group: 16 source rows down, 16 stored values along.
		MOVQ(ss, p)
		SHLQ(U8(4), p)
		ADDQ(p, src)
		ADDQ(U32(32), dst)
		ADDQ(U32(4), bam)
	})
	VZEROUPPER()
	RET()
}
