package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 packing kernels of the bf16 GEMM: float32 values rounded to
// bf16 as kernels.BF16FromFloat32 rounds them (VCVTNE2PS2BF16's
// rounding), or FP8 codes looked up in their float32 table (a gather;
// the caller checks that every entry is a bf16 value, so its upper half
// is exact), written as bf16 pairs.

// bf16RoundAVX2 turns the float32 bits in v into their bf16 bits in the
// low half of each lane (upper half zero), as BF16FromFloat32: zero or
// denormal → a zero of the sign, NaN → its upper half with the quiet
// bit, otherwise rounded to nearest even. t0–t2 are scratch.
func bf16RoundAVX2(v, t0, t1, t2 VecPhysical) {
	// t0 = rounded: (v + 0x7FFF + ((v >> 16) & 1)) >> 16
	VPSRLD(U8(16), v, t0)
	VPAND(ac(1), t0, t0)
	VPADDD(ac(0x7FFF), t0, t0)
	VPADDD(v, t0, t0)
	VPSRLD(U8(16), t0, t0)
	// NaN: |v| > 0x7F800000 → (v >> 16) | 0x40
	VPAND(ac(0x7FFFFFFF), v, t1)
	VPCMPGTD(ac(0x7F800000), t1, t1)
	VPSRLD(U8(16), v, t2)
	VPOR(ac(0x40), t2, t2)
	VBLENDVPS(t1, t2, t0, t0)
	// zero or denormal: (v >> 16) & 0x8000
	VPAND(ac(0x7F800000), v, t1)
	VPXOR(t2, t2, t2)
	VPCMPEQD(t2, t1, t1)
	VPSRLD(U8(16), v, t2)
	VPAND(ac(0x8000), t2, t2)
	VBLENDVPS(t1, t2, t0, v)
}

// packSrc is what an AVX2 pack reads: float32 values, FP8 codes
// looked up in their float32 table (a gather), or FP8 codes of one
// format decoded by arithmetic (decodeLanesAVX2) and multiplied by a
// scale — the table's values without its gathers, which are slow on
// every AMD core.
type packSrc int

const (
	srcF32 packSrc = iota
	srcFP8Table
	srcE4M3
	srcE5M2
)

// suffix, elem, ptr and extra name a pack's variant, its element size,
// its source's Go type and its trailing parameters.
func (s packSrc) suffix() string {
	return [...]string{"F32", "FP8", "E4M3", "E5M2"}[s]
}

func (s packSrc) elem() int {
	if s == srcF32 {
		return 4
	}
	return 1
}

func (s packSrc) ptr() string {
	if s == srcF32 {
		return "*float32"
	}
	return "*uint8"
}

func (s packSrc) extra() string {
	switch s {
	case srcFP8Table:
		return ", table *[256]float32"
	case srcE4M3, srcE5M2:
		return ", scale float32"
	}
	return ""
}

// packConsts holds what a pack keeps in registers: the gather table's
// address, or the decode's constants.
type packConsts struct {
	tab   Register
	codes decodeConsts
}

// loadPackConsts loads the table or the decode constants (the scale
// from the parameter named scale).
func loadPackConsts(s packSrc) packConsts {
	var pc packConsts
	switch s {
	case srcFP8Table:
		pc.tab = Load(Param("table"), GP64())
	case srcE4M3, srcE5M2:
		pc.codes = newDecodeConsts(s == srcE5M2, Y15, Y14, Y13)
		VBROADCASTSS(paramAddr("scale"), Y15)
	}
	return pc
}

// loadBF16AVX2 loads 8 values at m (float32, or FP8 codes looked up or
// decoded) into dst as bf16 bits in the low halves; t0–t2 are scratch.
func loadBF16AVX2(s packSrc, m Mem, pc packConsts, dst, t0, t1, t2 VecPhysical) {
	switch s {
	case srcF32:
		VMOVUPS(m, dst)
		bf16RoundAVX2(dst, t0, t1, t2)
		return
	case srcFP8Table:
		VPMOVZXBD(m, t0)
		VPCMPEQD(t1, t1, t1) // gather mask: all lanes
		VPXOR(dst, dst, dst)
		VPGATHERDD(t1, Mem{Base: pc.tab, Index: t0, Scale: 4}, dst)
	default:
		VPMOVZXBD(m, t0)
		decodeLanesAVX2(pc.codes, t0, dst, t1, t2)
	}
	VPSRLD(U8(16), dst, dst)
}

// bf16PairsStridedAVX2 emits dst[g·dstride + j] = pair(r0[g·sstride + j],
// r1[g·sstride + j]) for groups runs of 8·blocks lanes (strides in
// bytes of dst and, for float32, of the source; FP8 strides count
// codes).
func bf16PairsStridedAVX2(src packSrc) {
	name, el := "bf16PairsStrided"+src.suffix()+"AVX2", src.elem()
	sig := "func(dst *uint32, r0, r1 " + src.ptr() + ", groups, blocks, dstride, sstride int" + src.extra() + ")"
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " writes groups runs of 8·blocks bf16 pairs of two source rows; its Go twin is the loop in Operand.pairs16Groups (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	groups := Load(Param("groups"), GP64())
	pc := loadPackConsts(src)
	d, s0, s1, n := GP64(), GP64(), GP64(), GP64()
	loop(name+"_g", groups, func() {
		MOVQ(dst, d)
		MOVQ(r0, s0)
		MOVQ(r1, s1)
		Load(Param("blocks"), n)
		loop(name+"_b", n, func() {
			loadBF16AVX2(src, Mem{Base: s0}, pc, Y0, Y2, Y3, Y4)
			loadBF16AVX2(src, Mem{Base: s1}, pc, Y1, Y2, Y3, Y4)
			VPSLLD(U8(16), Y1, Y1)
			VPOR(Y1, Y0, Y0)
			VMOVDQU(Y0, Mem{Base: d})
			ADDQ(U32(32), d)
			ADDQ(U32(8*el), s0)
			ADDQ(U32(8*el), s1)
		})
		ADDQ(NewParamAddr("dstride", 40), dst)
		ss := GP64()
		Load(Param("sstride"), ss)
		ADDQ(ss, r0)
		ADDQ(ss, r1)
	})
	VZEROUPPER()
	RET()
}

// bf16RowsAVX2 emits rows rows of consecutive pairs: dst[r·ldd + q] =
// pair(x[r·ld + 2q], x[r·ld + 2q+1]) for q < 8·blocks (ld, ldd in
// bytes; FP8's ld counts codes).
func bf16RowsAVX2(src packSrc) {
	name, el := "bf16Rows"+src.suffix()+"AVX2", src.elem()
	sig := "func(dst *uint32, x " + src.ptr() + ", rows, blocks, ld, ldd int" + src.extra() + ")"
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " writes rows rows of 8·blocks bf16 pairs of consecutive values; its Go twin is the loop in Operand.row16 (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	rows := Load(Param("rows"), GP64())
	pc := loadPackConsts(src)
	d, s, n := GP64(), GP64(), GP64()
	loop(name+"_r", rows, func() {
		MOVQ(dst, d)
		MOVQ(x, s)
		Load(Param("blocks"), n)
		loop(name+"_b", n, func() {
			loadBF16AVX2(src, Mem{Base: s}, pc, Y0, Y2, Y3, Y4)
			loadBF16AVX2(src, Mem{Base: s, Disp: 8 * el}, pc, Y1, Y2, Y3, Y4)
			// words (v0 v1)(v2 v3)… per 128-bit half, then the halves'
			// quadwords in order.
			VPACKUSDW(Y1, Y0, Y0)
			VPERMQ(U8(0xD8), Y0, Y0)
			VMOVDQU(Y0, Mem{Base: d})
			ADDQ(U32(32), d)
			ADDQ(U32(16*el), s)
		})
		ADDQ(NewParamAddr("ldd", 40), dst)
		ADDQ(NewParamAddr("ld", 32), x)
	})
	VZEROUPPER()
	RET()
}

// packKernelsAVX2 emits the AVX2 packing kernels.
func packKernelsAVX2() {
	for _, src := range []packSrc{srcF32, srcFP8Table, srcE4M3, srcE5M2} {
		bf16PairsStridedAVX2(src)
		bf16RowsAVX2(src)
	}
}
