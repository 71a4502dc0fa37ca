package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// quantizeAVX2 emits the 8-lane form of quantize (the scaled,
// saturating, round-to-nearest-even FP8 cast with its running amax):
// the same integer and float operations as quantizeFP8Go, so the codes
// and the amax bits are the twin's. The lane maxima of |x| (as bits)
// are stored to amax.
func quantizeAVX2(name string, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32) {
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, blocks int, scale float32, amax *[8]uint32)")
	Pragma("noescape")
	Doc(name + " casts 8·blocks values to FP8 with a scale and records their amax; its Go twin is quantizeFP8Go (fp8cast.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	scale, magic, half, maxR, norm, nan, amax := Y8, Y9, Y10, Y11, Y12, Y13, Y14
	VBROADCASTSS(paramAddr("scale"), scale)
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
	loop(name, n, func() {
		x, ya, y, sub, t, c := Y0, Y1, Y2, Y3, Y4, Y5
		VMOVUPS(Mem{Base: src}, x)
		VPAND(ac(0x7FFFFFFF), x, t)
		VPMAXUD(t, amax, amax)
		VMULPS(scale, x, y)
		VPAND(ac(0x7FFFFFFF), y, ya)
		// Normal targets: rebias and round half to even at bit shift.
		VPSRLD(U8(shift), ya, t)
		VPAND(ac(1), t, t)
		VPADDD(half, t, t)
		VPADDD(ya, t, t)
		VPSRLD(U8(shift), t, c)
		// Subnormal targets (ya < the smallest normal): the FPU rounds
		// ya + magic.
		VADDPS(magic, ya, sub)
		VPSUBD(magic, sub, sub)
		VPCMPGTD(ya, norm, t) // norm > ya
		VBLENDVPS(t, sub, c, c)
		VPMINUD(maxR, c, c)
		// NaN: ya above +inf's bits.
		VPCMPGTD(ac(0x7F800000), ya, t)
		VBLENDVPS(t, nan, c, c)
		// The sign from bit 31.
		VPSRLD(U8(24), y, t)
		VPAND(ac(0x80), t, t)
		VPOR(t, c, c)
		// 8 dwords (each < 256) to 8 bytes.
		VEXTRACTI128(U8(1), c, t.AsX())
		VPACKUSDW(t.AsX(), c.AsX(), c.AsX())
		VPACKUSWB(c.AsX(), c.AsX(), c.AsX())
		MOVQ(c.AsX(), Mem{Base: dst})
		ADDQ(U32(32), src)
		ADDQ(U32(8), dst)
	})
	out := Load(Param("amax"), GP64())
	VMOVDQU(amax, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// quantizeKernelsAVX2 emits both formats' casts.
func quantizeKernelsAVX2() {
	quantizeAVX2("quantizeE4M3AVX2", 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
	quantizeAVX2("quantizeE5M2AVX2", 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
}
