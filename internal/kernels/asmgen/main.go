// Command asmgen generates the amd64 assembly of package
// kernels with avo:
//
//	cd internal/kernels/asmgen && go run . -pkg kernels -out ../asm_amd64.s -stubs ../asm_stubs_amd64.go
//
// Each kernel computes one register tile C[mr×nr] += alpha·A·B from packed
// slivers (A: mr values per step of k, B: nr values per step) and is
// documented by its pure-Go twin, kernels.microKernelRef.
package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	avx2ConstData() // the AVX2 kernels' constants, which some AVX-512 ones broadcast
	gemmKernel("sgemmKernelAVX512", "AVX-512F", 12, 2, 6, zmm, 64)
	gemmKernel("sgemmKernelAVX512x48", "AVX-512F", 8, 3, 5, zmm, 64)
	gemmKernel("sgemmKernelAVX2", "AVX2 and FMA", 6, 2, 1, ymm, 32)
	quantize("quantizeE4M3AVX512", 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
	quantize("quantizeE5M2AVX512", 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
	quantizeLanes("quantizeLanesE4M3AVX512", 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
	quantizeLanes("quantizeLanesE5M2AVX512", 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
	quantizeBlocks("quantizeBlocksE4M3AVX512", 128, 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
	quantizeBlocks("quantizeBlocksE5M2AVX512", 128, 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
	quantizeBlocks("quantizeBlocks32E4M3AVX512", 32, 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
	quantizeBlocks("quantizeBlocks32E5M2AVX512", 32, 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
	quantizeCols("quantizeColsE4M3AVX512", 20, 0x3C800000, 14, 120<<3, 0x7E, 0x7F)
	quantizeCols("quantizeColsE5M2AVX512", 21, 0x38800000, 7, 112<<2, 0x7B, 0x7E)
	amaxColsBand()
	for _, f := range blockFormats {
		blockTiles(f)
		blockTilesSeq(f)
		blockCols(f)
	}
	rht16Data()
	rht16()
	amax16Data()
	amax16()
	nvfp4ColsData()
	nvfp4Cols(false, false)
	nvfp4Cols(true, false)
	nvfp4Cols(true, true)
	nvfp4Scales()
	e2m1Tables()
	e2m1Blocks(false, false)
	e2m1Blocks(true, false)
	e2m1Blocks(false, true)
	e2m1Blocks(true, true)
	e2m1DecodeData()
	e2m1Decode()
	e2m1RowsData()
	e2m1Rows()
	e2m1PairsStrided()
	bf16Shift()
	bf16ShiftRuns()
	amaxBlocks(128)
	amaxBlocks(32)
	amaxCols()
	adam()
	decode("decodeE4M3AVX512", 20, 120, false, false)
	decode("decodeE5M2AVX512", 21, 112, true, false)
	decode("decodeBlocks32E4M3AVX512", 20, 120, false, true)
	decode("decodeBlocks32E5M2AVX512", 21, 112, true, true)
	gelu(false)
	gelu(true)
	amax()
	fp16Encode()
	reluGrad()
	scaleRow(false)
	scaleRow(true)
	pairIndexData()
	bf16GemmKernel("bf16KernelAVX512", 12, 2, 6)
	bf16GemmKernel("bf16KernelAVX512x48", 8, 3, 5)
	amxBF16Kernel()
	bf16Pack("F32")
	bf16Pack("FP8")
	bf16Rows(rowsFP8)
	bf16Rows(rowsFP8Shift)
	bf16Rows(rowsF32)
	bf16PairsFP8Shift()
	bf16PairsStridedFP8Shift()
	transpose16()
	for nv := 1; nv <= 4; nv++ {
		for mr := 1; mr <= rowGemmRows(nv); mr++ {
			rowGemmKernel(fmt.Sprintf("rowGemm%dx%dAVX512", mr, nv), mr, nv)
		}
	}
	rowGemmKernelsAVX2()
	avx2ElementKernels()
	for nv := 1; nv <= 4; nv++ {
		for mr := 1; mr <= rowGemmRows(nv); mr++ {
			rowGemm16Kernel(fmt.Sprintf("rowGemm16_%dx%dAVX512", mr, nv), mr, nv)
		}
	}
	add3()
	relu()
	for kind := range sigmoidKernels {
		sigmoidFamily(sigmoidKind(kind))
	}
	expSum()
	rowMax()
	softmaxGradRow()
	lnSums("lnSumAVX512", false)
	lnSums("lnSqDevAVX512", true)
	lnApply(false)
	lnApply(true)
	rmsGradAccum()
	lnGradAccum()
	lnGradDx()
	Generate()
}

// f32 returns the bits of a float32 constant.
func f32(v float64) uint32 { return math.Float32bits(float32(v)) }

// gelu emits the 16-lane GELU (tanh form) forward, y = 0.5·x·(1+tanh(u)),
// or backward, dx = dy·(0.5·(1+t) + 0.5·x·(1−t²)·du), with tanh and exp
// computed exactly as kernels.FastTanh and kernels.fastExp do (same
// operations, same order, no fused multiply-add), so results match the
// Go loops bit for bit. Three vectors at a time, their instructions
// interleaved (one vector's chain of dependent operations is longer than
// the out-of-order window covers: one at a time ran at a third of the
// rate), then the rest one at a time. Constants are broadcast from
// avx2Consts where an operation takes them as its second source, so that
// three vectors' registers fit.
func gelu(backward bool) {
	name := "geluAVX512"
	sig := "func(y, x *float32, blocks int)"
	if backward {
		name, sig = "geluGradAVX512", "func(dx, x, dy *float32, blocks int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " is the vector form of the Go loop in GELU or GELUGrad (activation.go), bit for bit (AVX-512F).")
	var out, x, dy, n Register
	if backward {
		out, x, dy = Load(Param("dx"), GP64()), Load(Param("x"), GP64()), Load(Param("dy"), GP64())
	} else {
		out, x = Load(Param("y"), GP64()), Load(Param("x"), GP64())
	}
	n = Load(Param("blocks"), GP64())
	// The constants an operation needs as its first source (the clamps
	// keep a NaN only with x second; 1 − t and 2/e).
	c := &constRegs{next: 24}
	lim, negLim, one, two := c.reg(f32(87)), c.reg(f32(-87)), c.reg(f32(1)), c.reg(f32(2))
	type set struct {
		v, u, t, e, r, nn, tmp, tmp2 VecPhysical
		k1, k2                       Op // u > 9, u < −9 (k2 also fastExp's t < −0.5)
		off                          int
	}
	masks := []Op{K1, K2, K3, K4, K5, K6}
	var sets []set
	for i := 0; i < 3; i++ {
		z := func(j int) VecPhysical { return zmm(8*i + j) }
		sets = append(sets, set{z(0), z(1), z(2), z(3), z(4), z(5), z(6), z(7), masks[2*i], masks[2*i+1], 64 * i})
	}
	body := func(sets []set) {
		all := func(f func(s set)) {
			for _, s := range sets {
				f(s)
			}
		}
		// u = geluC·(v + ((0.044715·v)·v)·v)
		all(func(s set) { VMOVUPS(Mem{Base: x, Disp: s.off}, s.v) })
		all(func(s set) { VMULPS_BCST(acf(0.044715), s.v, s.u) })
		all(func(s set) { VMULPS(s.v, s.u, s.u) })
		all(func(s set) { VMULPS(s.v, s.u, s.u) })
		all(func(s set) { VADDPS(s.u, s.v, s.u) })
		all(func(s set) { VMULPS_BCST(acf(0.7978845608028654), s.u, s.u) })
		// e = fastExp(2u), as fastExp
		all(func(s set) { VMULPS(two, s.u, s.e) })
		all(func(s set) { VMINPS(s.e, lim, s.e) })
		all(func(s set) { VMAXPS(s.e, negLim, s.e) })
		all(func(s set) { VMULPS_BCST(acf(1.4426950408889634), s.e, s.t) })
		all(func(s set) { VADDPS_BCST(acf(0.5), s.t, s.tmp); VCVTTPS2DQ(s.tmp, s.tmp) })
		all(func(s set) { VSUBPS_BCST(acf(0.5), s.t, s.tmp2); VCVTTPS2DQ(s.tmp2, s.tmp2) })
		all(func(s set) { VCMPPS_BCST(U8(1), acf(-0.5), s.t, s.k2) }) // t < −0.5
		all(func(s set) { VPBLENDMD(s.tmp2, s.tmp, s.k2, s.tmp); VCVTDQ2PS(s.tmp, s.nn) })
		all(func(s set) { VMULPS_BCST(acf(0.693145751953125), s.nn, s.r); VSUBPS(s.r, s.e, s.r) })
		all(func(s set) { VMULPS_BCST(acf(1.428606765330187e-06), s.nn, s.tmp2); VSUBPS(s.tmp2, s.r, s.r) })
		all(func(s set) { VMULPS_BCST(acf(1.0/5040), s.r, s.e) })
		all(func(s set) { VADDPS_BCST(acf(1.0/720), s.e, s.e) })
		for _, c := range []float64{1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1} {
			all(func(s set) { VMULPS(s.e, s.r, s.e) })
			all(func(s set) { VADDPS_BCST(acf(c), s.e, s.e) })
		}
		all(func(s set) { VMULPS(s.e, s.r, s.e) })
		all(func(s set) { VADDPS(one, s.e, s.e) })
		all(func(s set) { VPADDD_BCST(ac(127), s.tmp, s.tmp); VPSLLD(U8(23), s.tmp, s.tmp) })
		all(func(s set) { VMULPS(s.tmp, s.e, s.e) })
		// t = 1 − 2/(e+1), ±1 beyond |u| > 9
		all(func(s set) { VADDPS(one, s.e, s.e) })
		all(func(s set) { VDIVPS(s.e, two, s.t) })
		all(func(s set) { VSUBPS(s.t, one, s.t) })
		all(func(s set) { VCMPPS_BCST(U8(14), acf(9), s.u, s.k1); VPBLENDMD(one, s.t, s.k1, s.t) }) // u > 9
		all(func(s set) { VCMPPS_BCST(U8(1), acf(-9), s.u, s.k2); VPBLENDMD_BCST(acf(-1), s.t, s.k2, s.t) })
		if !backward {
			// y = (0.5·v)·(1+t)
			all(func(s set) { VMULPS_BCST(acf(0.5), s.v, s.tmp); VADDPS(one, s.t, s.t) })
			all(func(s set) { VMULPS(s.t, s.tmp, s.t); VMOVUPS(s.t, Mem{Base: out, Disp: s.off}) })
		} else {
			// du = geluC·(1 + (0.134145·v)·v)
			all(func(s set) { VMULPS_BCST(acf(3*0.044715), s.v, s.e); VMULPS(s.v, s.e, s.e) })
			all(func(s set) { VADDPS(one, s.e, s.e); VMULPS_BCST(acf(0.7978845608028654), s.e, s.e) })
			// g = 0.5·(1+t) + ((0.5·v)·(1 − t·t))·du
			all(func(s set) { VMULPS(s.t, s.t, s.tmp); VSUBPS(s.tmp, one, s.tmp) })
			all(func(s set) { VMULPS_BCST(acf(0.5), s.v, s.tmp2); VMULPS(s.tmp, s.tmp2, s.tmp2) })
			all(func(s set) { VMULPS(s.e, s.tmp2, s.tmp2) })
			all(func(s set) { VADDPS(one, s.t, s.t); VMULPS_BCST(acf(0.5), s.t, s.t) })
			all(func(s set) { VADDPS(s.tmp2, s.t, s.t) })
			all(func(s set) { VMOVUPS(Mem{Base: dy, Disp: s.off}, s.tmp); VMULPS(s.t, s.tmp, s.t) })
			all(func(s set) { VMOVUPS(s.t, Mem{Base: out, Disp: s.off}) })
			ADDQ(U32(64*len(sets)), dy)
		}
		ADDQ(U32(64*len(sets)), x)
		ADDQ(U32(64*len(sets)), out)
	}
	// blocks = 3·q + r: q triples, then r single vectors.
	q, rest := GP64(), GP64()
	MOVQ(n, RAX)
	XORQ(RDX, RDX)
	MOVQ(U64(3), rest)
	DIVQ(rest)
	MOVQ(RAX, q)
	MOVQ(RDX, rest)
	loop(name+"_triples", q, func() { body(sets) })
	loop(name, rest, func() { body(sets[:1]) })
	VZEROUPPER()
	RET()
}

// decode emits the 16-lane FP8 → float32 decode with a scale: the 7
// magnitude bits shifted into float32 position (exponent field low bits,
// mantissa high bits) read as a float32 that is 2^rebias too small — a
// normal or denormal float32 of exactly the right significand — times
// 2^rebias gives the value exactly; NaN (and, for E5M2, infinity) codes
// are fixed up (infinity signed, NaN the tables' positive quiet NaN
// whatever the code's sign); the result is multiplied by scale. It is
// the twin of the decode tables in package fp8.
// With per32, each block of 32 codes has its own scale (read from
// scales, one a block: MXFP8's block factors).
func decode(name string, shift int, rebias int, e5m2, per32 bool) {
	var scales Register
	if per32 {
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint8, scales *float32, blocks int)")
		Pragma("noescape")
		Doc(name + " decodes 32·blocks FP8 codes to float32, each block of 32 times its own scale; its Go twin is decodeFP8Go block by block (fp8cast.go) (AVX-512F).")
	} else {
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint8, blocks int, scale float32)")
		Pragma("noescape")
		Doc(name + " decodes 16·blocks FP8 codes to float32 times scale; its Go twin is decodeFP8Go (fp8cast.go) (AVX-512F).")
	}
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	if per32 {
		scales = Load(Param("scales"), GP64())
	}
	n := Load(Param("blocks"), GP64())
	zScale, zMagic, z7F, z80, zNaN, zInf, zNaNMag, zInfMag := Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27
	if !per32 {
		VBROADCASTSS(NewParamAddr("scale", 24), zScale)
	}
	bcast(uint32(127+rebias)<<23, zMagic)
	bcast(0x7F, z7F)
	bcast(0x80, z80)
	bcast(0x7FC00000, zNaN)
	bcast(0x7F800000, zInf)
	if e5m2 {
		bcast(0x7C, zInfMag)
	} else {
		bcast(0x7F, zNaNMag)
	}
	// one decodes the 16 codes at src+16·i to dst+64·i.
	one := func(i int) {
		c, mag, f, sign := Z0, Z1, Z2, Z3
		VPMOVZXBD(Mem{Base: src, Disp: 16 * i}, c)
		VPANDD(z7F, c, mag)
		VPSLLD(U8(shift), mag, f)
		VMULPS(zMagic, f, f)
		nan := K1
		if e5m2 {
			VPCMPUD(U8(0), zInfMag, mag, K1) // == 0x7C: infinity
			VPBLENDMD(zInf, f, K1, f)
			VPCMPUD(U8(6), zInfMag, mag, K2) // > 0x7C: NaN
			nan = K2
		} else {
			VPCMPUD(U8(0), zNaNMag, mag, K1) // == 0x7F: NaN
		}
		VPANDD(z80, c, sign)
		VPSLLD(U8(24), sign, sign)
		VPORD(sign, f, f)
		// A NaN code decodes to the tables' positive quiet NaN, whatever
		// its sign bit.
		VPBLENDMD(zNaN, f, nan, f)
		VMULPS(zScale, f, f)
		VMOVUPS(f, Mem{Base: dst, Disp: 64 * i})
	}
	if per32 {
		loop(name, n, func() {
			VBROADCASTSS(Mem{Base: scales}, zScale)
			one(0)
			one(1)
			ADDQ(U32(4), scales)
			ADDQ(U32(32), src)
			ADDQ(U32(128), dst)
		})
	} else {
		loop(name, n, func() {
			one(0)
			ADDQ(U32(16), src)
			ADDQ(U32(64), dst)
		})
	}
	VZEROUPPER()
	RET()
}

// adam emits the 16-lane Adam update, the twin of kernels.adamRef: the
// same multiplies, adds, square root and divides in the same order (no
// fused multiply-add), so results match the Go loop bit for bit.
// c holds l2, df, b1, 1−b1, b2, 1−b2, stepSize, bc2s, eps.
func adam() { adamKernel("adamAVX512", "adam", "AVX-512F", 16, zmm, 20) }

// adamKernel emits the Adam update over lanes·blocks parameters on
// vectors of lanes float32s (zmm or ymm): its nine constants broadcast
// into registers from constBase on, six scratch registers from 0; the
// twin is the loop in Adam (adam.go).
func adamKernel(name, label, isa string, lanes int, vec func(int) VecPhysical, constBase int) {
	TEXT(name, NOSPLIT, "func(w, grad, mom, vel *float32, blocks int, c *[9]float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s applies the Adam update to %d·blocks parameters; its Go twin is the loop in Adam (adam.go) (%s).", name, lanes, isa))
	w := Load(Param("w"), GP64())
	g := Load(Param("grad"), GP64()) // "g" is the assembler's goroutine register
	m := Load(Param("mom"), GP64())
	v := Load(Param("vel"), GP64())
	n := Load(Param("blocks"), GP64())
	c := Load(Param("c"), GP64())
	for i := 0; i < 9; i++ {
		VBROADCASTSS(Mem{Base: c, Disp: 4 * i}, vec(constBase+i))
	}
	l2, df, b1, c1, b2, c2, step, bc2s, eps := vec(constBase), vec(constBase+1), vec(constBase+2), vec(constBase+3), vec(constBase+4), vec(constBase+5), vec(constBase+6), vec(constBase+7), vec(constBase+8)
	size := U32(4 * lanes)
	loop(label, n, func() {
		zw, zg, zm, zv, t, u := vec(0), vec(1), vec(2), vec(3), vec(4), vec(5)
		VMOVUPS(Mem{Base: w}, zw)
		VMOVUPS(Mem{Base: g}, zg)
		VMOVUPS(Mem{Base: m}, zm)
		VMOVUPS(Mem{Base: v}, zv)
		VMULPS(zw, l2, t) // gi = g + l2·w
		VADDPS(t, zg, zg)
		VMULPS(df, zw, zw) // w = w·df
		VMULPS(zm, b1, zm) // m = b1·m + (1−b1)·gi
		VMULPS(zg, c1, t)
		VADDPS(t, zm, zm)
		VMULPS(zv, b2, zv) // v = b2·v + ((1−b2)·gi)·gi
		VMULPS(zg, c2, t)
		VMULPS(zg, t, t)
		VADDPS(t, zv, zv)
		VSQRTPS(zv, t) // den = √v / bc2s + eps
		VDIVPS(bc2s, t, t)
		VADDPS(eps, t, t)
		VMULPS(zm, step, u) // w = w − (step·m)/den
		VDIVPS(t, u, u)
		VSUBPS(u, zw, zw)
		VMOVUPS(zw, Mem{Base: w})
		VMOVUPS(zm, Mem{Base: m})
		VMOVUPS(zv, Mem{Base: v})
		ADDQ(size, w)
		ADDQ(size, g)
		ADDQ(size, m)
		ADDQ(size, v)
	})
	VZEROUPPER()
	RET()
}

// quantize emits a 16-lane version of fp8.Quantize's loop for one format:
// scale, saturating round-to-nearest-even cast and the running amax (as
// float32 bits, so NaN sorts above +inf). shift is 23 − mantissa bits,
// minNorm the float32 bits of the smallest normal, magicExp the exponent
// of the magic constant whose ulp is the subnormal quantum (emin −
// mbits + 23), off the exponent rebias (127 − bias) << mbits. It handles
// n/16 blocks and stores the lane-wise amax bits to amax.
func quantize(name string, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32) {
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, blocks int, scale float32, amax *[16]uint32)")
	Pragma("noescape")
	Doc(name + " casts 16·blocks values to FP8 with a scale and records their amax; its Go twin is quantizeFP8Go (fp8cast.go) (AVX-512F).")
	quantizeBody(name, shift, minNorm, magicExp, off, maxCode, nanCode, castScalar)
}

// quantizeLanes is quantize with one scale per value (read from scales
// beside src) instead of one for all: Transformer Engine's column-wise
// block cast, where each column of a row has its own block's scale.
func quantizeLanes(name string, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32) {
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, scales *float32, blocks int, amax *[16]uint32)")
	Pragma("noescape")
	Doc(name + " casts 16·blocks values to FP8, each with its own scale, and records their amax; its Go twin is quantizeFP8LanesGo (fp8cast.go) (AVX-512F).")
	quantizeBody(name, shift, minNorm, magicExp, off, maxCode, nanCode, castLanes)
}

// quantizeBlocks is quantize with one scale per block of size values
// (read from scales, one a block): Transformer Engine's row-wise
// Float8BlockScaling cast (128) and MXFP8's (32), whose amaxes are known
// before it runs, so it records none.
func quantizeBlocks(name string, size int, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32) {
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, scales *float32, blocks int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s casts %d·blocks values to FP8, each block of %d with its own scale; its Go twin is quantizeFP8BlocksGo (fp8cast.go) (AVX-512F).", name, size, size))
	kind := castBlocks
	if size == 32 {
		kind = castBlocks32
	}
	quantizeBody(name, shift, minNorm, magicExp, off, maxCode, nanCode, kind)
}

// quantizeCols is quantize over a band of rows with one scale per
// column (Transformer Engine's column-wise Float8BlockScaling cast: a
// block is 128 values down a column): strips of 16 columns, each strip's
// scales held in a register while the kernel walks down its rows.
func quantizeCols(name string, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32) {
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, scales *float32, blocks int, rows int, ld int, ldd int)")
	Pragma("noescape")
	Doc(name + " casts rows × 16·blocks values (rows ld bytes apart, codes ldd apart) to FP8 with a scale per column; its Go twin is quantizeFP8ColsGo (fp8cast.go) (AVX-512F).")
	quantizeBody(name, shift, minNorm, magicExp, off, maxCode, nanCode, castCols)
}

// The scales of a quantize kernel: one for all values, one per value,
// one per block of 128 along a row, one per column of a band.
const (
	castScalar = iota
	castLanes
	castBlocks
	castCols
	castBlocks32 // a scale per block of 32 (MXFP8)
)

func quantizeBody(name string, shift int, minNorm uint32, magicExp int, off, maxCode, nanCode uint32, kind int) {
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	var scales, out Register
	if kind != castScalar {
		scales = Load(Param("scales"), GP64())
	}
	n := Load(Param("blocks"), GP64())
	if kind == castScalar || kind == castLanes {
		out = Load(Param("amax"), GP64())
	}
	zScale, zAbs, zNaN, zInf, zSignMask, zAmax := Z20, Z21, Z28, Z30, Z31, Z19
	if kind == castScalar {
		VBROADCASTSS(NewParamAddr("scale", 24), zScale)
	}
	bcast(0x7FFFFFFF, zAbs)
	r := newRoundRegs(shift, minNorm, magicExp, off, maxCode, Z22, Z23, Z24, Z25, Z27, Z29)
	bcast(nanCode, zNaN)
	bcast(0x7F800000, zInf)
	bcast(0x80, zSignMask)
	VPXORD(zAmax, zAmax, zAmax)
	// cast16 casts the 16 values at sp+64·i to the 16 codes at dp+16·i.
	cast16 := func(sp, dp Register, i int) {
		x, ya, y, sub, t, c := Z0, Z1, Z2, Z3, Z4, Z5
		VMOVUPS(Mem{Base: sp, Disp: 64 * i}, x)
		if kind == castScalar || kind == castLanes {
			VPANDD(zAbs, x, t)
			VPMAXUD(t, zAmax, zAmax)
		}
		if kind == castLanes {
			VMULPS(Mem{Base: scales, Disp: 64 * i}, x, y)
		} else {
			VMULPS(zScale, x, y)
		}
		VPANDD(zAbs, y, ya)
		r.round(ya, c, t, sub)
		VPCMPUD(U8(6), zInf, ya, K2) // K2: ya > +inf bits, a NaN
		VPBLENDMD(zNaN, c, K2, c)
		VPSRLD(U8(24), y, t)
		VPTERNLOGD(U8(0xF8), zSignMask, t, c) // c |= t & 0x80 (the sign)
		VPMOVDB(c, Mem{Base: dp, Disp: 16 * i})
	}
	if kind == castCols {
		rows := Load(Param("rows"), GP64())
		ld, ldd := Load(Param("ld"), GP64()), Load(Param("ldd"), GP64())
		loop(name, n, func() {
			VMOVUPS(Mem{Base: scales}, zScale)
			p, q, k := GP64(), GP64(), GP64()
			MOVQ(src, p)
			MOVQ(dst, q)
			MOVQ(rows, k)
			loop(name+"_rows", k, func() {
				cast16(p, q, 0)
				ADDQ(ld, p)
				ADDQ(ldd, q)
			})
			ADDQ(U32(64), scales)
			ADDQ(U32(64), src)
			ADDQ(U32(16), dst)
		})
		VZEROUPPER()
		RET()
		return
	}
	if kind == castBlocks || kind == castBlocks32 {
		vecs := 8 // 16-value vectors a block
		if kind == castBlocks32 {
			vecs = 2
		}
		loop(name, n, func() {
			VBROADCASTSS(Mem{Base: scales}, zScale)
			for i := 0; i < vecs; i++ {
				cast16(src, dst, i)
			}
			ADDQ(U32(4), scales)
			ADDQ(U32(64*vecs), src)
			ADDQ(U32(16*vecs), dst)
		})
		VZEROUPPER()
		RET()
		return
	}
	loop(name, n, func() {
		cast16(src, dst, 0)
		if kind == castLanes {
			ADDQ(U32(64), scales)
		}
		ADDQ(U32(64), src)
		ADDQ(U32(16), dst)
	})
	VMOVDQU32(zAmax, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// roundRegs hold the constants of a rounding to a small float format
// (quantizeFP8Go's arithmetic): the code of a magnitude is found by
// rebiasing its bits and rounding half to even at bit shift, or, below
// the smallest normal, by letting the FPU round it against a magic
// constant whose ulp is the format's smallest subnormal.
type roundRegs struct {
	shift                                  int
	magic, magicBits, half, one, max, norm VecPhysical
}

// newRoundRegs broadcasts a format's rounding constants into six
// registers. The rebias off is folded into the rounding's half:
// (ya + half + lsb) >> shift − off is (ya + half − off<<shift + lsb) >>
// shift for every magnitude at or above the smallest normal (whose bits
// are at least off<<shift), the only ones that take that path.
func newRoundRegs(shift int, minNorm uint32, magicExp int, off, maxCode uint32, magic, magicBits, half, one, maxR, norm VecPhysical) roundRegs {
	m := uint32(127+magicExp) << 23
	bcast(m, magic)
	bcast(m, magicBits)
	bcast(uint32(1)<<(shift-1)-1-off<<shift, half)
	bcast(1, one)
	bcast(maxCode, maxR)
	bcast(minNorm, norm)
	return roundRegs{shift, magic, magicBits, half, one, maxR, norm}
}

// round sets c to the code of the magnitude ya (float32 bits, sign
// clear), rounded to nearest even and saturating at the largest finite
// code (NaN is the caller's), with t and sub scratch and K1 clobbered.
// The subnormal targets' codes overwrite theirs under a mask.
func (r roundRegs) round(ya, c, t, sub VecPhysical) {
	// Normal targets: rebias and round half to even at bit shift.
	VPSRLD(U8(r.shift), ya, t)
	VPANDD(r.one, t, t)
	VPADDD(r.half, t, t)
	VPADDD(ya, t, t)
	VPSRLD(U8(r.shift), t, c)
	// Subnormal targets: let the FPU round ya + magic.
	VPCMPUD(U8(1), r.norm, ya, K1) // K1: ya < smallest normal
	VADDPS(r.magic, ya, sub)
	VPSUBD(r.magicBits, sub, K1, c)
	VPMINUD(r.max, c, c)
}

// e2m1DecodeData defines the values of the 16 E2M1 codes and the
// VPERMI2D index that interleaves two registers' low halves (lane 2k from
// the first, 2k+1 from the second: VPERMI2D, the index overwritten).
func e2m1DecodeData() {
	e2m1DecMem = GLOBL("e2m1Decode", RODATA|NOPTR)
	vals := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	for c := 0; c < 16; c++ {
		v := vals[c&7]
		if c&8 != 0 {
			v = -v
		}
		DATA(4*c, U32(math.Float32bits(v)))
	}
	for k := 0; k < 16; k++ {
		DATA(64+4*k, U32(uint32(k/2+16*(k%2))))
	}
}

var e2m1DecMem Mem

// ExpBlockAsm is kernels.ExpBlock: the k-block of Float8BlockScaling's
// exponent shifts (one shift per run of 128 codes).
const ExpBlockAsm = 128

// e2m1Decode emits the decode of NVFP4's packed E2M1 codes (two per
// byte, the even element low) times one factor per 16 elements, as bf16:
// dst[16b+j] = the top half of the float32 bits of value(code)·
// factors[b], for blocks of 16 (exact when the product is a bf16 value,
// as an E2M1 value times an E4M3 block scale is).
func e2m1Decode() {
	TEXT("e2m1DecodeBF16AVX512", NOSPLIT, "func(dst *uint16, src *uint8, factors *float32, blocks int)")
	Pragma("noescape")
	Doc("e2m1DecodeBF16AVX512 decodes 16·blocks packed E2M1 codes times a factor per 16 to bf16; its Go twin is decodeE2M1BF16Go (fp8cast.go) (AVX-512F).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	fac := Load(Param("factors"), GP64())
	n := Load(Param("blocks"), GP64())
	tab := GP64()
	LEAQ(e2m1DecMem, tab)
	zVals, zIdx, z15 := Z20, Z21, Z22
	VMOVUPS(Mem{Base: tab}, zVals)
	VMOVDQU32(Mem{Base: tab, Disp: 64}, zIdx)
	r := GP32()
	MOVL(U32(15), r)
	VPBROADCASTD(r, z15)
	loop("e2m1dec", n, func() {
		v := Z4
		e2m1Products(src, fac, v, Z0, Z1, Z2, Z3, Z5, zVals, zIdx, z15)
		VPSRLD(U8(16), v, v)
		VPMOVDW(v, Mem{Base: dst})
		ADDQ(U32(8), src)
		ADDQ(U32(4), fac)
		ADDQ(U32(32), dst)
	})
	VZEROUPPER()
	RET()
}

// e2m1RowsData defines e2m1Rows' constants: the VPERMI2W index that
// gathers the high (bf16) halves of two registers of float32 products
// (word i ← word 2i+1 of the pair), the nibble mask of a code pair's
// dword, and the offset that sends the second block's codes to the
// second table.
func e2m1RowsData() {
	e2m1RowsMem = GLOBL("e2m1RowsConsts", RODATA|NOPTR)
	for i := 0; i < 32; i += 2 {
		DATA(2*i, U32(uint32(2*i+1)|uint32(2*i+3)<<16))
	}
	DATA(64, U32(0x000F000F))
	for i := 0; i < 16; i++ {
		v := uint32(0)
		if i >= 8 {
			v = 0x00100010
		}
		DATA(128+4*i, U32(v))
	}
}

var e2m1RowsMem Mem

// e2m1Rows emits the decode of rows of NVFP4 codes to bf16 (k along the
// rows: consecutive values are already pairs): for each of rows rows,
// 16·blocks codes times one factor per 16, as e2m1Decode computes them
// (each product exactly a bf16 value), two blocks at a time through a
// 32-entry word table: the block's 16 products are computed once and
// each code is looked up (VPERMW), not decoded and multiplied one by
// one. Row r reads src + r·ld bytes of codes and factors + r·fs bytes,
// and writes dst + r·ldd bytes.
func e2m1Rows() {
	TEXT("e2m1RowsBF16AVX512", NOSPLIT, "func(dst *uint16, src *uint8, factors *float32, rows, blocks, ld, ldd, fs int)")
	Pragma("noescape")
	Doc("e2m1RowsBF16AVX512 decodes rows of 16·blocks packed E2M1 codes times a factor per 16 to bf16, a table of each block's products looked up by code; its Go twin is decodeE2M1BF16Go row by row (fp8cast.go) (AVX-512BW).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	fac := Load(Param("factors"), GP64())
	nr := Load(Param("rows"), GP64())
	tab := GP64()
	LEAQ(e2m1DecMem, tab)
	zVals, zGather, zNib, zHiBlk := Z20, Z21, Z22, Z23
	VMOVUPS(Mem{Base: tab}, zVals)
	LEAQ(e2m1RowsMem, tab)
	VMOVDQU32(Mem{Base: tab}, zGather)
	VPBROADCASTD(Mem{Base: tab, Disp: 64}, zNib)
	VMOVDQU32(Mem{Base: tab, Disp: 128}, zHiBlk)
	// index turns the code bytes in c (a dword each) into the word
	// indices code_lo | code_hi<<16 (t scratch).
	index := func(c, t VecPhysical) {
		VPSLLD(U8(12), c, t)
		VPORD(t, c, c)
		VPANDD(zNib, c, c)
	}
	loop("e2m1rows", nr, func() {
		p, d, f := GP64(), GP64(), GP64()
		MOVQ(src, p)
		MOVQ(dst, d)
		MOVQ(fac, f)
		n := Load(Param("blocks"), GP64())
		k := GP64()
		MOVQ(n, k)
		SHRQ(U8(1), k)
		loop("e2m1rows_pair", k, func() {
			VBROADCASTSS(Mem{Base: f}, Z1)
			VMULPS(zVals, Z1, Z1)
			VBROADCASTSS(Mem{Base: f, Disp: 4}, Z2)
			VMULPS(zVals, Z2, Z2)
			VMOVDQA64(zGather, Z3)
			VPERMI2W(Z2, Z1, Z3) // the two blocks' 32 products as bf16
			VPMOVZXBD(Mem{Base: p}, Z0)
			index(Z0, Z4)
			VPORD(zHiBlk, Z0, Z0)
			VPERMW(Z3, Z0, Z0)
			VMOVDQU32(Z0, Mem{Base: d})
			ADDQ(U32(16), p)
			ADDQ(U32(64), d)
			ADDQ(U32(8), f)
		})
		TESTQ(U32(1), n)
		JZ(LabelRef("e2m1rows_next"))
		// An odd last block: its table alone, its 8 bytes of codes.
		VBROADCASTSS(Mem{Base: f}, Z1)
		VMULPS(zVals, Z1, Z1)
		VMOVDQA64(zGather, Z3)
		VPERMI2W(Z1, Z1, Z3)
		VPMOVZXBD(Mem{Base: p}, Y0)
		index(Z0, Z4)
		VPERMW(Z3, Z0, Z0)
		VMOVDQU32(Y0, Mem{Base: d})
		Label("e2m1rows_next")
		ADDQ(NewParamAddr("ld", 40), src)
		ADDQ(NewParamAddr("ldd", 48), dst)
		ADDQ(NewParamAddr("fs", 56), fac)
	})
	VZEROUPPER()
	RET()
}

// e2m1Products sets v to the 16 values of the 8 bytes of packed E2M1
// codes at src (the even element in the low nibble) times the factor at
// fac, as float32: zVals holds the 16 codes' values, zIdx the index that
// interleaves the low and high nibbles, z15 the nibble mask; b, lo, hi,
// c and f are scratch.
func e2m1Products(src, fac Register, v, b, lo, hi, c, f, zVals, zIdx, z15 VecPhysical) {
	VPMOVZXBD(Mem{Base: src}, b.AsY()) // 8 bytes → 8 lanes
	VPANDD(z15, b, lo)
	VPSRLD(U8(4), b, hi)
	VMOVDQU32(zIdx, c)
	VPERMI2D(hi, lo, c) // c: lo0 hi0 lo1 hi1 … (index in, values out)
	VPERMPS(zVals, c, v)
	VBROADCASTSS(Mem{Base: fac}, f)
	VMULPS(f, v, v)
}

// e2m1PairsStrided emits the E2M1 pairs kernel: for each of groups
// pairs of rows, 16·blocks codes of each row times their factors per 16,
// interleaved as bf16 pairs; group g reads the codes at r0, r1 advanced by g·cstride bytes and the factors
// at f0, f1 advanced by g·fstride bytes, and writes dst advanced by
// g·stride bytes (Aᵀ's pairs down its columns, a chunk of rows at a
// time).
func e2m1PairsStrided() {
	TEXT("e2m1PairsStridedAVX512", NOSPLIT, "func(dst *uint32, r0, r1 *uint8, f0, f1 *float32, groups, blocks, stride, cstride, fstride int)")
	Pragma("noescape")
	Doc("e2m1PairsStridedAVX512 decodes, for each of groups pairs of rows, 16·blocks E2M1 codes of the two rows times their factors per 16 and interleaves them as bf16 pairs, each group stride bytes of dst, cstride bytes of codes and fstride bytes of factors after the last; its Go twin is e2m1At, pair by pair (bf16pack.go) (AVX-512F).")
	dst := Load(Param("dst"), GP64())
	r0 := Load(Param("r0"), GP64())
	r1 := Load(Param("r1"), GP64())
	f0 := Load(Param("f0"), GP64())
	f1 := Load(Param("f1"), GP64())
	ng := Load(Param("groups"), GP64())
	tab := GP64()
	LEAQ(e2m1DecMem, tab)
	zVals, zIdx, z15, zHi := Z20, Z21, Z22, Z23
	VMOVUPS(Mem{Base: tab}, zVals)
	VMOVDQU32(Mem{Base: tab, Disp: 64}, zIdx)
	r := GP32()
	MOVL(U32(15), r)
	VPBROADCASTD(r, z15)
	MOVL(U32(0xFFFF0000), r)
	VPBROADCASTD(r, zHi)
	loop("e2m1pairss_g", ng, func() {
		n := Load(Param("blocks"), GP64())
		d, p0, p1, q0, q1 := GP64(), GP64(), GP64(), GP64(), GP64()
		MOVQ(dst, d)
		MOVQ(r0, p0)
		MOVQ(r1, p1)
		MOVQ(f0, q0)
		MOVQ(f1, q1)
		loop("e2m1pairss", n, func() {
			e2m1Products(p0, q0, Z4, Z0, Z1, Z2, Z3, Z5, zVals, zIdx, z15)
			e2m1Products(p1, q1, Z10, Z6, Z7, Z8, Z9, Z11, zVals, zIdx, z15)
			VPSRLD(U8(16), Z4, Z4)
			VPANDD(zHi, Z10, Z10)
			VPORD(Z10, Z4, Z4)
			VMOVDQU32(Z4, Mem{Base: d})
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

// shiftRegs hold the constants of shiftBF16Exp: 0x7F80 (the exponent
// field), 0x0080 and 0x7E80 in each 16-bit half.
type shiftRegs struct{ exp, lo, span VecPhysical }

// newShiftRegs broadcasts shiftBF16Exp's constants into three registers.
func newShiftRegs(exp, lo, span VecPhysical) shiftRegs {
	bcast(0x7F807F80, exp)
	bcast(0x00800080, lo)
	bcast(0x7E807E80, span)
	return shiftRegs{exp, lo, span}
}

// shiftBF16Exp adds shift (a word per bf16 half: the exponent moved by
// a power-of-two factor) to the halves of x whose exponent field e is
// neither 0 (zero) nor all ones (inf, NaN): e − 0x80, as an unsigned
// word, is at most 0x7E80 exactly for those (0 wraps to 0xFF80, 0x7F80
// gives 0x7F00), one comparison into a mask; t and k are scratch.
func shiftBF16Exp(x, t VecPhysical, c shiftRegs, shift Op, k Op) {
	VPANDD(c.exp, x, t)
	VPSUBW(c.lo, t, t)
	VPCMPUW(U8(2), c.span, t, k) // k: e − 0x80 ≤ 0x7E80
	VPADDW(shift, x, k, x)
}

// bf16Shift emits the exponent shift of bf16 pairs: each 16-bit half of
// the 16·blocks lanes at d whose exponent field is neither 0 (zero) nor
// all ones (inf, NaN) gets the matching half of its lane of shifts added
// (a power-of-two factor, the exponent field moved by it); shifts
// advances by step bytes per 16 lanes (0: one vector for all).
func bf16Shift() {
	TEXT("bf16ShiftAVX512", NOSPLIT, "func(d *uint32, shifts *uint32, blocks int, step int)")
	Pragma("noescape")
	Doc("bf16ShiftAVX512 adds per-lane exponent shifts to the finite non-zero bf16 halves of 16·blocks lanes; its Go twin is bf16ShiftGo (bf16pack.go) (AVX-512BW).")
	d := Load(Param("d"), GP64())
	sh := Load(Param("shifts"), GP64())
	n := Load(Param("blocks"), GP64())
	step := Load(Param("step"), GP64())
	c := newShiftRegs(Z20, Z21, Z22)
	loop("bf16shift", n, func() {
		x, e := Z0, Z1
		VMOVDQU32(Mem{Base: d}, x)
		shiftBF16Exp(x, e, c, Mem{Base: sh}, K1)
		VMOVDQU32(x, Mem{Base: d})
		ADDQ(U32(64), d)
		ADDQ(step, sh)
	})
	VZEROUPPER()
	RET()
}

// bf16ShiftRuns emits bf16Shift for runs of 64 lanes (a 128-value
// block of k as bf16 pairs) that share one exponent shift: run r's lanes
// move by exp[r] (an int8), broadcast to every 16-bit half in the
// kernel, so that a row of pairs takes one call instead of one per run.
func bf16ShiftRuns() {
	TEXT("bf16ShiftRunsAVX512", NOSPLIT, "func(d *uint32, exp *int8, runs int)")
	Pragma("noescape")
	Doc("bf16ShiftRunsAVX512 adds the exponent shift exp[r] to the finite non-zero bf16 halves of the 64 lanes of each run r; its Go twin is bf16ShiftRunsGo (bf16pack.go) (AVX-512BW).")
	d := Load(Param("d"), GP64())
	ex := Load(Param("exp"), GP64())
	n := Load(Param("runs"), GP64())
	zShift := Z23
	c := newShiftRegs(Z20, Z21, Z22)
	e := GP32()
	loop("bf16shiftruns", n, func() {
		MOVBLSX(Mem{Base: ex}, e)
		SHLL(U8(7), e)
		VPBROADCASTW(e, zShift)
		for i := 0; i < 4; i++ {
			x, t := Z0, Z1
			VMOVDQU32(Mem{Base: d, Disp: 64 * i}, x)
			shiftBF16Exp(x, t, c, zShift, K1)
			VMOVDQU32(x, Mem{Base: d, Disp: 64 * i})
		}
		ADDQ(U32(256), d)
		INCQ(ex)
	})
	VZEROUPPER()
	RET()
}

// amaxBlocks emits the max |x| bits of each run of size (128 or 32)
// values (a NaN pattern above +inf's where the run holds a NaN):
// Float8BlockScaling's row-wise and MXFP8's block amaxes.
func amaxBlocks(size int) {
	name := fmt.Sprintf("amax%dAVX512", size)
	TEXT(name, NOSPLIT, "func(src *float32, blocks int, out *uint32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s stores the max |x| bits of each block of %d values; its Go twin is amaxBlocksGo (fp8cast.go) (AVX-512F).", name, size))
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("out"), GP64())
	zAbs := Z20
	r := GP32()
	MOVL(U32(0x7FFFFFFF), r)
	VPBROADCASTD(r, zAbs)
	vecs := size / 16
	loop(fmt.Sprintf("amax%d", size), n, func() {
		acc := []VecPhysical{Z0, Z1, Z2, Z3}[:min(4, vecs)]
		for i, a := range acc {
			VPANDD(Mem{Base: src, Disp: 64 * i}, zAbs, a)
		}
		for i := len(acc); i < vecs; i++ {
			a, t := acc[i%4], []VecPhysical{Z4, Z5, Z6, Z7}[i%4]
			VPANDD(Mem{Base: src, Disp: 64 * i}, zAbs, t)
			VPMAXUD(t, a, a)
		}
		if len(acc) == 4 {
			VPMAXUD(Z3, Z2, Z2)
		}
		VPMAXUD(Z1, Z0, Z0)
		if len(acc) == 4 {
			VPMAXUD(Z2, Z0, Z0)
		}
		storeMaxUD(Mem{Base: out})
		ADDQ(U32(64*vecs), src)
		ADDQ(U32(4), out)
	})
	VZEROUPPER()
	RET()
}

// storeMaxUD stores the largest of Z0's 16 unsigned 32-bit lanes to m
// (Y1 scratch; Z0 clobbered): the horizontal step of the block amaxes.
func storeMaxUD(m Mem) {
	hmaxUD(Z0, Y0, Y1, X0, X1)
	VMOVD(X0, m)
}

// hmaxUD leaves the largest of z's 16 unsigned 32-bit lanes in lane 0
// of zx (zy and zx are z's lower halves; ty, tx scratch of one register).
func hmaxUD(z, zy, ty, zx, tx VecPhysical) {
	VEXTRACTI64X4(U8(1), z, ty)
	VPMAXUD(ty, zy, zy)
	VEXTRACTI128(U8(1), zy, tx)
	VPMAXUD(tx, zx, zx)
	VPSHUFD(U8(0x4E), zx, tx)
	VPMAXUD(tx, zx, zx)
	VPSHUFD(U8(0xB1), zx, tx)
	VPMAXUD(tx, zx, zx)
}

// amaxCols emits, for 16·blocks values, acc[j] = max(acc[j], |x[j]|)
// as float32 bits with NaN lanes left out (fmaxf's rule), and stores the
// lane-wise maximum of the raw |x| bits to seen (above +inf where a NaN
// was): one row's contribution to the column amaxes of a block cast.
func amaxCols() {
	TEXT("amaxColsAVX512", NOSPLIT, "func(acc *uint32, src *float32, blocks int, seen *[16]uint32)")
	Pragma("noescape")
	Doc("amaxColsAVX512 folds |x| of 16·blocks values into the column amaxes acc, NaN left out, and records the lane-wise max of |x| bits; its Go twin is amaxColsGo (fp8cast.go) (AVX-512F).")
	acc := Load(Param("acc"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("seen"), GP64())
	zAbs, zInf, zSeen, zZero := Z20, Z21, Z22, Z23
	r := GP32()
	MOVL(U32(0x7FFFFFFF), r)
	VPBROADCASTD(r, zAbs)
	MOVL(U32(0x7F800000), r)
	VPBROADCASTD(r, zInf)
	VPXORD(zSeen, zSeen, zSeen)
	VPXORD(zZero, zZero, zZero)
	loop("amaxcols", n, func() {
		VPANDD(Mem{Base: src}, zAbs, Z0)
		VPMAXUD(Z0, zSeen, zSeen)
		VPCMPUD(U8(6), zInf, Z0, K1) // K1: |x| bits above +inf, a NaN
		VPBLENDMD(zZero, Z0, K1, Z0)
		VPMAXUD(Mem{Base: acc}, Z0, Z0)
		VMOVDQU32(Z0, Mem{Base: acc})
		ADDQ(U32(64), src)
		ADDQ(U32(64), acc)
	})
	VMOVDQU32(zSeen, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// amax emits the running max of |x| as float32 bits over 64·blocks
// values, four lanes-wide accumulators at a time (an unsigned max of the
// bits orders non-negative floats and puts NaNs above +inf), storing the
// 16 lane maxima to out.
func amax() {
	TEXT("amaxAVX512", NOSPLIT, "func(src *float32, blocks int, out *[16]uint32)")
	Pragma("noescape")
	Doc("amaxAVX512 records the lane-wise max of |x| bits over 64·blocks values; its Go twin is amaxBitsGo (fp8cast.go) (AVX-512F).")
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("out"), GP64())
	zAbs := Z20
	r := GP32()
	MOVL(U32(0x7FFFFFFF), r)
	VPBROADCASTD(r, zAbs)
	acc := []VecPhysical{Z0, Z1, Z2, Z3}
	for _, a := range acc {
		VPXORD(a, a, a)
	}
	loop("amax", n, func() {
		for i, a := range acc {
			t := []VecPhysical{Z4, Z5, Z6, Z7}[i]
			VPANDD(Mem{Base: src, Disp: 64 * i}, zAbs, t)
			VPMAXUD(t, a, a)
		}
		ADDQ(U32(256), src)
	})
	VPMAXUD(Z1, Z0, Z0)
	VPMAXUD(Z3, Z2, Z2)
	VPMAXUD(Z2, Z0, Z0)
	VMOVDQU32(Z0, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// fp16Encode emits dst = FP16(src·scale) for 16·blocks values with
// VCVTPS2PH, rounding to nearest even (imm8 0).
func fp16Encode() {
	TEXT("fp16EncodeAVX512", NOSPLIT, "func(dst *uint16, src *float32, blocks int, scale float32)")
	Pragma("noescape")
	Doc("fp16EncodeAVX512 stores 16·blocks values times scale as FP16, rounding to nearest even; its Go twin is encodeFP16Go (fp16.go) (AVX-512F).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	zScale := Z20
	VBROADCASTSS(NewParamAddr("scale", 24), zScale)
	loop("fp16enc", n, func() {
		VMULPS(Mem{Base: src}, zScale, Z0)
		VCVTPS2PH(U8(0), Z0, Mem{Base: dst})
		ADDQ(U32(64), src)
		ADDQ(U32(32), dst)
	})
	VZEROUPPER()
	RET()
}

// reluGrad emits dx = dy where x > 0, else +0 (NaN x gives 0), 16 lanes
// at a time: the twin of ReLU's backward loop in package ops.
func reluGrad() {
	TEXT("reluGradAVX512", NOSPLIT, "func(dx, x, dy *float32, blocks int)")
	Pragma("noescape")
	Doc("reluGradAVX512 is the vector form of the Go loop in ReLUGrad (activation.go) (AVX-512F).")
	dx := Load(Param("dx"), GP64())
	x := Load(Param("x"), GP64())
	dy := Load(Param("dy"), GP64())
	n := Load(Param("blocks"), GP64())
	VPXORD(Z20, Z20, Z20)
	loop("relugrad", n, func() {
		VMOVUPS(Mem{Base: x}, Z0)
		VCMPPS(U8(0x1E), Z20, Z0, K1) // x > 0, ordered: false for NaN
		VMOVUPS_Z(Mem{Base: dy}, K1, Z1)
		VMOVUPS(Z1, Mem{Base: dx})
		ADDQ(U32(64), x)
		ADDQ(U32(64), dy)
		ADDQ(U32(64), dx)
	})
	VZEROUPPER()
	RET()
}

// scaleRow emits the bf16 GEMM's epilogue pass over one row of C, 8
// lanes at a time in float64: c[j] = float32(float64(c[j]) · f), or with
// col, float32(float64(c[j]) · (f · float64(col[j]))) — the operations
// of kernels.postScale's loop, in its order, rounded once at the end.
func scaleRow(withCol bool) {
	scaleRowKernel(withCol, false)
	scaleRowKernel(withCol, true)
}

// scaleRowKernel emits scaleRow's kernel for AVX-512 (eight float64
// lanes a vector) or AVX2 (two vectors of four a block of eight).
func scaleRowKernel(withCol, avx2 bool) {
	isa, sfx := "AVX-512F", "AVX512"
	if avx2 {
		isa, sfx = "AVX2", "AVX2"
	}
	name, sig := "scaleRow"+sfx, "func(c *float32, blocks int, f float64)"
	if withCol {
		name, sig = "scaleRowCol"+sfx, "func(c, col *float32, blocks int, f float64)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " multiplies 8·blocks accumulators by the epilogue's factors in float64; its Go twin is the loop in postScale (gemm16.go) (" + isa + ").")
	c := Load(Param("c"), GP64())
	var col Register
	off := 16
	if withCol {
		col, off = Load(Param("col"), GP64()), 24
	}
	n := Load(Param("blocks"), GP64())
	// v: the float64 vector (Z or Y), h: its float32 half (Y or X), a
	// block's vectors of width bytes of float32.
	v0, v1, fv, h0, parts, width := VecPhysical(Z0), VecPhysical(Z1), VecPhysical(Z20), VecPhysical(Y0), 1, 32
	if avx2 {
		v0, v1, fv, h0, parts, width = Y0, Y1, Y15, X0, 2, 16
	}
	VBROADCASTSD(NewParamAddr("f", off), fv)
	loop(name, n, func() {
		for i := 0; i < parts; i++ {
			VCVTPS2PD(Mem{Base: c, Disp: width * i}, v0)
			if withCol {
				VCVTPS2PD(Mem{Base: col, Disp: width * i}, v1)
				VMULPD(v1, fv, v1) // f · col
				VMULPD(v1, v0, v0)
			} else {
				VMULPD(fv, v0, v0)
			}
			if avx2 {
				VCVTPD2PSY(v0, h0)
			} else {
				VCVTPD2PS(v0, h0)
			}
			VMOVUPS(h0, Mem{Base: c, Disp: width * i})
		}
		if withCol {
			ADDQ(U32(32), col)
		}
		ADDQ(U32(32), c)
	})
	VZEROUPPER()
	RET()
}

// amaxColsBand emits the column amaxes of a band of rows: for each
// strip of 16 columns, acc[j] = max over the rows of |x[r][j]| as float32
// bits with NaN lanes left out (fmaxf's rule), the strip's running
// maximum held in a register down the rows; seen gets the lane-wise
// maximum of the raw |x| bits (above +inf where a NaN was).
func amaxColsBand() {
	TEXT("amaxColsBandAVX512", NOSPLIT, "func(acc *uint32, src *float32, strips int, rows int, ld int, seen *[16]uint32)")
	Pragma("noescape")
	Doc("amaxColsBandAVX512 stores the column amaxes of rows × 16·strips values (rows ld bytes apart), NaN left out, and the lane-wise max of |x| bits; its Go twin is amaxColsBandGo (fp8cast.go) (AVX-512F).")
	acc := Load(Param("acc"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("strips"), GP64())
	rows := Load(Param("rows"), GP64())
	ld := Load(Param("ld"), GP64())
	out := Load(Param("seen"), GP64())
	zAbs, zInf, zSeen := Z20, Z21, Z22
	bcast(0x7FFFFFFF, zAbs)
	bcast(0x7F800000, zInf)
	VPXORD(zSeen, zSeen, zSeen)
	loop("amaxcb", n, func() {
		p, k := GP64(), GP64()
		MOVQ(src, p)
		MOVQ(rows, k)
		VPXORD(Z0, Z0, Z0)
		loop("amaxcb_rows", k, func() {
			VPANDD(Mem{Base: p}, zAbs, Z1)
			VPMAXUD(Z1, zSeen, zSeen)
			VPCMPUD(U8(6), zInf, Z1, K1) // K1: NaN
			VPXORD(Z1, Z1, K1, Z1)
			VPMAXUD(Z1, Z0, Z0)
			ADDQ(ld, p)
		})
		VMOVDQU32(Z0, Mem{Base: acc})
		ADDQ(U32(64), acc)
		ADDQ(U32(64), src)
	})
	VMOVDQU32(zSeen, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// loop emits a counted loop: body runs n times (n ≥ 0, counted down),
// with labels prefix_loop and prefix_done.
func loop(prefix string, n Register, body func()) {
	TESTQ(n, n)
	JZ(LabelRef(prefix + "_done"))
	Label(prefix + "_loop")
	body()
	DECQ(n)
	JNZ(LabelRef(prefix + "_loop"))
	Label(prefix + "_done")
}

// zmm returns the physical register Zi.
func zmm(i int) VecPhysical {
	return []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}[i]
}

func ymm(i int) VecPhysical {
	return []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}[i]
}

// gemmKernel emits an mr × (nv·lanes) register-tile kernel: mr·nv
// accumulators (nv vectors per row of C), nv registers for the B sliver,
// and nb rotating registers for broadcast A values (rotating lets the
// loads run ahead of the FMAs). vec maps a register number to a physical
// register of the kernel's width (64 bytes for zmm, 32 for ymm).
func gemmKernel(name, isa string, mr, nv, nb int, vec func(int) VecPhysical, width int) {
	nr := nv * width / 4
	TEXT(name, NOSPLIT, "func(k int, a, b, c *float32, ldc int, alpha float32, overwrite int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes C[%d×%d] += alpha·A·B (C = alpha·A·B, C not read, with overwrite) from packed slivers (%s).", name, mr, nr, isa))
	k := Load(Param("k"), GP64())
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	acc := func(r, j int) VecPhysical { return vec(r*nv + j) }
	breg := func(j int) VecPhysical { return vec(mr*nv + j) }
	areg := func(r int) VecPhysical { return vec(mr*nv + nv + r%nb) }
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			if width == 64 {
				VPXORD(acc(r, j), acc(r, j), acc(r, j)) // AVX-512F (VXORPS on zmm needs DQ)
			} else {
				VXORPS(acc(r, j), acc(r, j), acc(r, j))
			}
		}
	}
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	for j := 0; j < nv; j++ {
		VMOVUPS(Mem{Base: b, Disp: width * j}, breg(j))
	}
	for r := 0; r < mr; r++ {
		VBROADCASTSS(Mem{Base: a, Disp: 4 * r}, areg(r))
		for j := 0; j < nv; j++ {
			VFMADD231PS(areg(r), breg(j), acc(r, j))
		}
	}
	ADDQ(U32(4*mr), a)
	ADDQ(U32(4*nr), b)
	DECQ(k)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	alpha := areg(0)
	VBROADCASTSS(NewParamAddr("alpha", 40), alpha)
	ow := GP64()
	MOVQ(NewParamAddr("overwrite", 48), ow)
	TESTQ(ow, ow)
	JNZ(LabelRef(name + "_overwrite"))
	// C += alpha·acc, or (the first block of k of a GEMM with beta = 0)
	// C = alpha·acc without reading C, so that C is never cleared and its
	// NaNs do not propagate.
	for _, overwrite := range []bool{false, true} {
		if overwrite {
			Label(name + "_overwrite")
		}
		for r := 0; r < mr; r++ {
			for j := 0; j < nv; j++ {
				if overwrite {
					VMULPS(alpha, acc(r, j), breg(j))
				} else {
					VMOVUPS(Mem{Base: c, Disp: width * j}, breg(j))
					VFMADD231PS(acc(r, j), alpha, breg(j))
				}
				VMOVUPS(breg(j), Mem{Base: c, Disp: width * j})
			}
			if r+1 < mr {
				ADDQ(ldc, c)
			}
		}
		VZEROUPPER()
		RET()
	}
}

// bcast broadcasts the 32-bit constant v to every lane of z (the
// broadcast from a general register is AVX-512's: AVX2 kernels use
// bcastAVX2).
func bcast(v uint32, z VecPhysical) {
	r := GP32()
	MOVL(U32(v), r)
	VPBROADCASTD(r, z)
}

// bcastAVX2 broadcasts the 32-bit constant v to every lane of the YMM
// register y with AVX2 instructions only (through y's low XMM half).
func bcastAVX2(v uint32, y VecPhysical) {
	r := GP32()
	MOVL(U32(v), r)
	MOVD(r, y.AsX())
	VPBROADCASTD(y.AsX(), y)
}
