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
	rowBlocks(name+"_r", name+"_b", dst, x, rows, func(d, s Register) {
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
	VZEROUPPER()
	RET()
}

// packKernelsAVX2 emits the AVX2 packing kernels.
func packKernelsAVX2() {
	for _, src := range []packSrc{srcF32, srcFP8Table, srcE4M3, srcE5M2} {
		bf16PairsStridedAVX2(src)
		bf16RowsAVX2(src)
	}
	wordTablesData()
	bf16WidenAVX2()
	for _, e5m2 := range []bool{false, true} {
		bf16RowsWordsAVX2(e5m2)
		bf16PairsStridedWordsAVX2(e5m2)
	}
	transpose16AVX2()
	transpose6AVX2()
	copyRows16AVX2()
	splitPairsAVX2()
}

// The word decodes: FP8 codes at scale 1 turned into their bf16 bits in
// 16-bit lanes, 16 codes a vector, by integer arithmetic alone (half the
// operations of decoding to float32 and rounding, and no multiply). A
// normal code's magnitude bits, shifted into bf16's exponent and
// mantissa, plus the difference of the exponent biases is its bf16 value
// (E4M3: 8 mantissa steps to an exponent, 120 more bias; E5M2: 4 steps,
// 112); the subnormal codes' values (m·2^-9, m·2^-16) come from a byte
// table (VPSHUFB); the sign is bit 7 moved to bit 15; NaN codes give the
// tables' positive quiet NaN and E5M2's infinities the signed infinity.

// wordDec describes one format's word decode.
type wordDec struct {
	shift        int    // magnitude bits to bf16's
	bias         uint32 // added to a normal code's shifted bits (two lanes)
	lastSubnorm  uint32 // the largest subnormal magnitude (two lanes)
	e5m2         bool
	tabLo, tabHi [16]byte // subnormal magnitudes' bf16 bytes
}

var wordDecs = [2]wordDec{
	{shift: 4, bias: 0x3C003C00, lastSubnorm: 0x00070007,
		tabLo: [16]byte{0x00, 0x00, 0x80, 0xC0, 0x00, 0x20, 0x40, 0x60},
		tabHi: [16]byte{0x00, 0x3B, 0x3B, 0x3B, 0x3C, 0x3C, 0x3C, 0x3C}},
	{shift: 5, bias: 0x38003800, lastSubnorm: 0x00030003, e5m2: true,
		tabLo: [16]byte{0x00, 0x80, 0x00, 0x40},
		tabHi: [16]byte{0x00, 0x37, 0x38, 0x38}},
}

var wordTabMem Mem

// wordTablesData emits the subnormal byte tables, each 16 bytes twice
// (VPSHUFB looks up within each 128-bit half): E4M3 low, high, E5M2 low,
// high.
func wordTablesData() {
	wordTabMem = GLOBL("fp8WordTables", RODATA|NOPTR)
	for f, d := range wordDecs {
		for t, tab := range [2][16]byte{d.tabLo, d.tabHi} {
			for half := 0; half < 2; half++ {
				for i, b := range tab {
					DATA(64*f+32*t+16*half+i, U8(b))
				}
			}
		}
	}
}

// loadWordTables loads the format's two subnormal tables into lo and hi.
func loadWordTables(e5m2 bool, lo, hi VecPhysical) {
	f := 0
	if e5m2 {
		f = 1
	}
	VMOVDQU(wordTabMem.Offset(64*f), lo)
	VMOVDQU(wordTabMem.Offset(64*f+32), hi)
}

// decodeWordsAVX2 loads the 16 codes at m and leaves their bf16 bits in
// w's 16-bit lanes; lo and hi hold the subnormal tables, c, t0–t2 are
// scratch.
func decodeWordsAVX2(e5m2 bool, m Mem, lo, hi, w, c, t0, t1, t2 VecPhysical) {
	d := wordDecs[0]
	if e5m2 {
		d = wordDecs[1]
	}
	VPMOVZXBW(m, c)
	VPAND(ac(0x007F007F), c, t0) // magnitude
	VPSLLW(U8(d.shift), t0, w)
	VPADDW(ac(d.bias), w, w) // normal codes
	VPSHUFB(t0, lo, t1)
	VPSHUFB(t0, hi, t2)
	VPSLLW(U8(8), t2, t2)
	VPOR(t2, t1, t1) // subnormal codes (and zero)
	VPCMPGTW(ac(d.lastSubnorm), t0, t2)
	VPBLENDVB(t2, w, t1, w)
	if e5m2 {
		VPCMPEQW(ac(0x007C007C), t0, t2) // infinity
		VPBLENDVB(t2, ac(0x7F807F80), w, w)
		VPCMPGTW(ac(0x007C007C), t0, t0) // NaN
	} else {
		VPCMPEQW(ac(0x007F007F), t0, t0) // NaN
	}
	VPSLLW(U8(8), c, c)
	VPAND(ac(0x80008000), c, c)
	VPOR(c, w, w)
	VPBLENDVB(t0, ac(0x7FC07FC0), w, w)
}

// wordsSuffix names a word decode's format.
func wordsSuffix(e5m2 bool) string {
	if e5m2 {
		return "E5M2"
	}
	return "E4M3"
}

// bf16RowsWordsAVX2 is bf16RowsAVX2 for FP8 codes at scale 1 by the word
// decode: rows rows of 8·blocks pairs (16 codes a block; ld counts codes,
// ldd bytes).
func bf16RowsWordsAVX2(e5m2 bool) {
	name := "bf16Rows" + wordsSuffix(e5m2) + "WordsAVX2"
	TEXT(name, NOSPLIT, "func(dst *uint32, x *uint8, rows, blocks, ld, ldd int)")
	Pragma("noescape")
	Doc(name + " writes rows rows of 8·blocks bf16 pairs of consecutive " + wordsSuffix(e5m2) + " codes at scale 1; its Go twin is the loop in Operand.row16 (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	rows := Load(Param("rows"), GP64())
	loadWordTables(e5m2, Y14, Y15)
	rowBlocks(name+"_r", name+"_b", dst, x, rows, func(d, s Register) {
		// The words of consecutive codes are already their pairs.
		decodeWordsAVX2(e5m2, Mem{Base: s}, Y14, Y15, Y0, Y1, Y2, Y3, Y4)
		VMOVDQU(Y0, Mem{Base: d})
		ADDQ(U32(32), d)
		ADDQ(U32(16), s)
	})
	VZEROUPPER()
	RET()
}

// bf16PairsStridedWordsAVX2 is bf16PairsStridedAVX2 for FP8 codes at
// scale 1 by the word decode: groups runs of 16·blocks lanes (dstride in
// bytes, sstride in codes).
func bf16PairsStridedWordsAVX2(e5m2 bool) {
	name := "bf16PairsStrided" + wordsSuffix(e5m2) + "WordsAVX2"
	TEXT(name, NOSPLIT, "func(dst *uint32, r0, r1 *uint8, groups, blocks, dstride, sstride int)")
	Pragma("noescape")
	Doc(name + " writes groups runs of 16·blocks bf16 pairs of two rows of " + wordsSuffix(e5m2) + " codes at scale 1; its Go twin is the loop in Operand.pairs16Groups (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	groups := Load(Param("groups"), GP64())
	loadWordTables(e5m2, Y14, Y15)
	d, s0, s1, n := GP64(), GP64(), GP64(), GP64()
	loop(name+"_g", groups, func() {
		MOVQ(dst, d)
		MOVQ(r0, s0)
		MOVQ(r1, s1)
		Load(Param("blocks"), n)
		loop(name+"_b", n, func() {
			decodeWordsAVX2(e5m2, Mem{Base: s0}, Y14, Y15, Y0, Y2, Y3, Y4, Y5)
			decodeWordsAVX2(e5m2, Mem{Base: s1}, Y14, Y15, Y1, Y2, Y3, Y4, Y5)
			// Quadwords 0 2 1 3, so that the in-half interleaves give
			// lanes 0–7 and 8–15 in order.
			VPERMQ(U8(0xD8), Y0, Y0)
			VPERMQ(U8(0xD8), Y1, Y1)
			VPUNPCKLWD(Y1, Y0, Y2)
			VPUNPCKHWD(Y1, Y0, Y3)
			VMOVDQU(Y2, Mem{Base: d})
			VMOVDQU(Y3, Mem{Base: d, Disp: 32})
			ADDQ(U32(64), d)
			ADDQ(U32(16), s0)
			ADDQ(U32(16), s1)
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

// bf16WidenAVX2 emits the widening kernels of the split row kernels'
// A (rowGemm16S_*): rows rows of float32 values rounded to bf16 (as
// BF16FromFloat32) and widened back, 8 a block, and of FP8 codes at
// scale 1 by the word decode, 16 a block, their words moved to the
// upper halves of float32 lanes (ld counts source elements' bytes for
// float32 and codes for FP8, ldd bytes).
func bf16WidenAVX2() {
	TEXT("bf16WidenRowsF32AVX2", NOSPLIT, "func(dst, src *float32, rows, blocks, ld, ldd int)")
	Pragma("noescape")
	Doc("bf16WidenRowsF32AVX2 writes rows rows of 8·blocks float32 values rounded to bf16 (as BF16FromFloat32) and widened back; its Go twin is the loop in Operand.widenRows (gemmdirect16.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	rows := Load(Param("rows"), GP64())
	rowBlocks("bf16widen_r", "bf16widen_b", dst, src, rows, func(d, s Register) {
		VMOVUPS(Mem{Base: s}, Y0)
		bf16RoundAVX2(Y0, Y1, Y2, Y3)
		VPSLLD(U8(16), Y0, Y0)
		VMOVUPS(Y0, Mem{Base: d})
		ADDQ(U32(32), s)
		ADDQ(U32(32), d)
	})
	VZEROUPPER()
	RET()
	for _, e5m2 := range []bool{false, true} {
		name := "bf16WidenRows" + wordsSuffix(e5m2) + "WordsAVX2"
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint8, rows, blocks, ld, ldd int)")
		Pragma("noescape")
		Doc(name + " writes rows rows of 16·blocks " + wordsSuffix(e5m2) + " codes at scale 1 as float32 values (their bf16 words widened); its Go twin is the loop in Operand.widenRows (gemmdirect16.go) (AVX2).")
		dst := Load(Param("dst"), GP64())
		src := Load(Param("src"), GP64())
		rows := Load(Param("rows"), GP64())
		loadWordTables(e5m2, Y14, Y15)
		VPXOR(Y13, Y13, Y13)
		rowBlocks(name+"_r", name+"_b", dst, src, rows, func(d, s Register) {
			decodeWordsAVX2(e5m2, Mem{Base: s}, Y14, Y15, Y0, Y1, Y2, Y3, Y4)
			// Quadwords 0 2 1 3, then each word under a zero word:
			// values 0–7 and 8–15 in order.
			VPERMQ(U8(0xD8), Y0, Y0)
			VPUNPCKLWD(Y0, Y13, Y1)
			VPUNPCKHWD(Y0, Y13, Y2)
			VMOVDQU(Y1, Mem{Base: d})
			VMOVDQU(Y2, Mem{Base: d, Disp: 32})
			ADDQ(U32(64), d)
			ADDQ(U32(16), s)
		})
		VZEROUPPER()
		RET()
	}
}

// rowBlocks emits a rows kernel's loops: for each of rows rows, body on
// every block of the parameter blocks (d and s walking the row from dst
// and src; body advances them), then dst and src step by the ldd and ld
// parameters (at offsets 40 and 32: every rows kernel's signature).
func rowBlocks(rowLabel, blockLabel string, dst, src, rows Register, body func(d, s Register)) {
	d, s, n := GP64(), GP64(), GP64()
	loop(rowLabel, rows, func() {
		MOVQ(dst, d)
		MOVQ(src, s)
		Load(Param("blocks"), n)
		loop(blockLabel, n, func() { body(d, s) })
		ADDQ(NewParamAddr("ldd", 40), dst)
		ADDQ(NewParamAddr("ld", 32), src)
	})
}

// transpose8x8Halves transposes the 8×8 lanes of r (row i in r[i]) by
// 128-bit halves, with t as scratch: afterwards r[c] (c < 4) holds
// column c of rows 0–3 in its low half and column c+4 of rows 0–3 in its
// high half, and r[c+4] the same columns of rows 4–7 (unpacks and
// shuffles; a 128-bit permute or extract completes each column).
func transpose8x8Halves(r, t []VecPhysical) {
	for i := 0; i < 8; i += 2 {
		VUNPCKLPS(r[i+1], r[i], t[i])
		VUNPCKHPS(r[i+1], r[i], t[i+1])
	}
	for h := 0; h < 2; h++ {
		b := 4 * h
		VSHUFPS(U8(0x44), t[b+2], t[b], r[b])
		VSHUFPS(U8(0xEE), t[b+2], t[b], r[b+1])
		VSHUFPS(U8(0x44), t[b+3], t[b+1], r[b+2])
		VSHUFPS(U8(0xEE), t[b+3], t[b+1], r[b+3])
	}
}

// transpose6AVX2 packs six rows of 32-bit lanes into the 6-lane slivers
// of the AVX2 micro-kernels (float32 values, or bf16 pairs): for each of
// blocks blocks of 8 columns, src[i][8b+j] (row i at i·srcStride bytes,
// i < 6) is stored to dst[(8b+j)·6+i]. Rows 6 and 7 of the 8×8
// transpose are never loaded (their lanes are not stored).
func transpose6AVX2() {
	TEXT("transpose6AVX2", NOSPLIT, "func(dst, src *uint32, blocks, srcStride int)")
	Pragma("noescape")
	Doc("transpose6AVX2 transposes blocks of 6×8 32-bit lanes into 8 rows of 6; its Go twins are packA's loop over the rows of a sliver (gemm.go) and transposeInto's (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	ss := Load(Param("srcStride"), GP64())
	ss3, p4 := GP64(), GP64()
	LEAQ(Mem{Base: ss, Index: ss, Scale: 2}, ss3)
	r := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
	t := []VecPhysical{Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
	loop("transpose6", n, func() {
		LEAQ(Mem{Base: src, Index: ss, Scale: 4}, p4)
		VMOVUPS(Mem{Base: src}, r[0])
		VMOVUPS(Mem{Base: src, Index: ss, Scale: 1}, r[1])
		VMOVUPS(Mem{Base: src, Index: ss, Scale: 2}, r[2])
		VMOVUPS(Mem{Base: src, Index: ss3, Scale: 1}, r[3])
		VMOVUPS(Mem{Base: p4}, r[4])
		VMOVUPS(Mem{Base: p4, Index: ss, Scale: 1}, r[5])
		transpose8x8Halves(r, t)
		// Column c: rows 0–3 from r[c], rows 4–5 from the low
		// quarter of r[c+4]; column c+4 from their high halves.
		for c := 0; c < 4; c++ {
			VMOVUPS(r[c].AsX(), Mem{Base: dst, Disp: 24 * c})
			VMOVQ(r[c+4].AsX(), Mem{Base: dst, Disp: 24*c + 16})
			VEXTRACTF128(U8(1), r[c], Mem{Base: dst, Disp: 24 * (c + 4)})
			VEXTRACTF128(U8(1), r[c+4], t[c].AsX())
			VMOVQ(t[c].AsX(), Mem{Base: dst, Disp: 24*(c+4) + 16})
		}
		ADDQ(U32(32), src)
		ADDQ(U32(192), dst)
	})
	VZEROUPPER()
	RET()
}

// copyRows16AVX2 packs rows of float32 into the 16-lane slivers of the
// AVX2 float32 micro-kernel, reading each row in order: for p < rows and
// s < slivers, the 16 values src[p][16s…] (row p at p·ld bytes) are
// stored at dst + s·sliverStride + 64·p.
func copyRows16AVX2() {
	TEXT("copyRows16AVX2", NOSPLIT, "func(dst, src *float32, rows, slivers, ld, sliverStride int)")
	Pragma("noescape")
	Doc("copyRows16AVX2 copies rows of 16-value slivers; its Go twin is packB's row loop (gemm.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	rows := Load(Param("rows"), GP64())
	ld := Load(Param("ld"), GP64())
	ss := Load(Param("sliverStride"), GP64())
	q, r, n := GP64(), GP64(), GP64()
	loop("copyrows16", rows, func() {
		MOVQ(dst, q)
		MOVQ(src, r)
		Load(Param("slivers"), n)
		loop("copyrows16_s", n, func() {
			VMOVUPS(Mem{Base: r}, Y0)
			VMOVUPS(Mem{Base: r, Disp: 32}, Y1)
			VMOVUPS(Y0, Mem{Base: q})
			VMOVUPS(Y1, Mem{Base: q, Disp: 32})
			ADDQ(U32(64), r)
			ADDQ(ss, q)
		})
		ADDQ(ld, src)
		ADDQ(U32(64), dst)
	})
	VZEROUPPER()
	RET()
}

// splitPairsAVX2 splits bf16 pairs into float32 halves for the split
// micro-kernel: odd[i] = src[i] with its low (even) half cleared, even[i]
// = src[i] shifted up 16 bits, 8 lanes a block. Each block is loaded
// before it is stored, so odd may be src.
func splitPairsAVX2() {
	TEXT("splitPairsAVX2", NOSPLIT, "func(odd, even, src *uint32, blocks int)")
	Pragma("noescape")
	Doc("splitPairsAVX2 splits 8·blocks bf16 pairs into their odd and even elements as float32; its Go twin is splitPairs's loop (bf16pack.go) (AVX2).")
	odd := Load(Param("odd"), GP64())
	even := Load(Param("even"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	bcastAVX2(0xFFFF0000, Y15)
	loop("splitpairs", n, func() {
		VMOVDQU(Mem{Base: src}, Y0)
		VPAND(Y15, Y0, Y1)
		VPSLLD(U8(16), Y0, Y2)
		VMOVDQU(Y1, Mem{Base: odd})
		VMOVDQU(Y2, Mem{Base: even})
		ADDQ(U32(32), src)
		ADDQ(U32(32), odd)
		ADDQ(U32(32), even)
	})
	VZEROUPPER()
	RET()
}

// transpose16AVX2 emits the 8-lane form of bf16Transpose16 for whole
// blocks of 16 rows: for each of blocks blocks of 16 columns, the 16×16
// lanes src[i][16b+j] (row i at i·srcStride bytes) stored transposed to
// dst row 16b+j (at (16b+j)·dstStride bytes) lane i, as four 8×8
// transposes (unpacks, shuffles and 128-bit permutes: moves only).
func transpose16AVX2() {
	TEXT("transpose16AVX2", NOSPLIT, "func(dst, src *uint32, blocks, srcStride, dstStride int)")
	Pragma("noescape")
	Doc("transpose16AVX2 transposes blocks of 16×16 32-bit lanes; its Go twin is the loop of transposeInto (bf16pack.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	ss := Load(Param("srcStride"), GP64())
	ds := Load(Param("dstStride"), GP64())
	ss3, ds3 := GP64(), GP64()
	LEAQ(Mem{Base: ss, Index: ss, Scale: 2}, ss3)
	LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, ds3)
	p, p4, q, q4 := GP64(), GP64(), GP64(), GP64()
	// row returns the address of row i (0–7) from p (p4 = p + 4·stride).
	row := func(p, p4, s, s3 Register, i, disp int) Mem {
		base := p
		if i >= 4 {
			base, i = p4, i-4
		}
		switch i {
		case 0:
			return Mem{Base: base, Disp: disp}
		case 3:
			return Mem{Base: base, Index: s3, Scale: 1, Disp: disp}
		default:
			return Mem{Base: base, Index: s, Scale: uint8(i), Disp: disp}
		}
	}
	loop("transpose16_2", n, func() {
		for _, rc := range [][2]int{{0, 0}, {0, 8}, {8, 0}, {8, 8}} {
			R, C := rc[0], rc[1]
			// Source rows R… at column C; destination rows C… at lane R.
			MOVQ(src, p)
			if R == 8 {
				LEAQ(Mem{Base: p, Index: ss, Scale: 8}, p)
			}
			LEAQ(Mem{Base: p, Index: ss, Scale: 4}, p4)
			MOVQ(dst, q)
			if C == 8 {
				LEAQ(Mem{Base: q, Index: ds, Scale: 8}, q)
			}
			LEAQ(Mem{Base: q, Index: ds, Scale: 4}, q4)
			r := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
			t := []VecPhysical{Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
			for i := range r {
				VMOVDQU(row(p, p4, ss, ss3, i, 4*C), r[i])
			}
			transpose8x8Halves(r, t)
			for c := 0; c < 4; c++ {
				VPERM2F128(U8(0x20), r[c+4], r[c], t[0])
				VMOVDQU(t[0], row(q, q4, ds, ds3, c, 4*R))
				VPERM2F128(U8(0x31), r[c+4], r[c], t[1])
				VMOVDQU(t[1], row(q, q4, ds, ds3, c+4, 4*R))
			}
		}
		ADDQ(U32(64), src)
		// dst moves down 16 rows.
		LEAQ(Mem{Base: dst, Index: ds, Scale: 8}, dst)
		LEAQ(Mem{Base: dst, Index: ds, Scale: 8}, dst)
	})
	VZEROUPPER()
	RET()
}
