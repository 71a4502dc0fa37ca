//go:build amd64 && !purego

package kernels

import (
	"math/bits"
	"unsafe"

	"golang.org/x/sys/cpu"
)

var hasAVX512 = cpu.X86.HasAVX512F

// hasAVX2 reports AVX2 with FMA, the ISA of the 8-lane kernels that run
// where AVX-512 is missing (their results equal the AVX-512 kernels' and
// the Go twins' bit for bit).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// hasF16C reports F16C (VCVTPS2PH on 8 lanes), which golang.org/x/sys/cpu
// does not: CPUID leaf 1, ECX bit 29.
var hasF16C = cpu.X86.HasAVX && cpuidECX()&(1<<29) != 0

// hasE2M1Rows: the NVFP4 row decode looks codes up with word permutes
// (AVX-512BW).
var hasE2M1Rows = hasAVX512 && cpu.X86.HasAVX512BW

// hasBMI2: the grouped block casts build their masks with BZHI.
var hasBMI2 = cpu.X86.HasBMI2

// quantizeFP8Vector casts the longest prefix of src that it can vectorise
// (a multiple of 16 values) to FP8 format (0: E4M3, 1: E5M2) with scale,
// writing codes to dst, and returns how many values it did and the
// float32 bits of their amax (a NaN pattern if any was NaN);
// quantizeFP8Go does the rest with the same bits.
func quantizeFP8Vector(format int, dst []uint8, src []float32, scale float32) (done int, amaxBits uint32) {
	if !hasAVX512 {
		blocks := len(src) / 8
		if !hasAVX2 || blocks == 0 || len(dst) < len(src) {
			return 0, 0
		}
		var lanes [8]uint32
		if format == 0 {
			quantizeE4M3AVX2(&dst[0], &src[0], blocks, scale, &lanes)
		} else {
			quantizeE5M2AVX2(&dst[0], &src[0], blocks, scale, &lanes)
		}
		for _, l := range lanes {
			amaxBits = max(amaxBits, l)
		}
		return blocks * 8, amaxBits
	}
	blocks := len(src) / 16
	if blocks == 0 || len(dst) < len(src) {
		return 0, 0
	}
	var lanes [16]uint32
	if format == 0 {
		quantizeE4M3AVX512(&dst[0], &src[0], blocks, scale, &lanes)
	} else {
		quantizeE5M2AVX512(&dst[0], &src[0], blocks, scale, &lanes)
	}
	for _, l := range lanes {
		amaxBits = max(amaxBits, l)
	}
	return blocks * 16, amaxBits
}

// adamVector runs the AVX-512 Adam kernel over the longest multiple of
// 16 and returns how many values it updated.
func adamVector(w, g, m, v []float32, c *AdamConsts) int {
	if !hasAVX512 {
		blocks := len(w) / 8
		if !hasAVX2 || blocks == 0 {
			return 0
		}
		_, _, _ = g[blocks*8-1], m[blocks*8-1], v[blocks*8-1]
		adamAVX2(&w[0], &g[0], &m[0], &v[0], blocks, (*[9]float32)(c))
		return blocks * 8
	}
	blocks := len(w) / 16
	if blocks == 0 {
		return 0
	}
	_, _, _ = g[blocks*16-1], m[blocks*16-1], v[blocks*16-1]
	adamAVX512(&w[0], &g[0], &m[0], &v[0], blocks, (*[9]float32)(c))
	return blocks * 16
}

// decodeFP8Vector decodes the longest prefix of src it can vectorise (a
// multiple of 16) from format (0: E4M3, 1: E5M2) to float32 times scale,
// exactly as decodeFP8Go does, and returns how many it did.
func decodeFP8Vector(format int, dst []float32, src []uint8, scale float32) int {
	blocks := len(src) / 16
	if !hasAVX512 {
		if blocks = len(src) / 8; !hasAVX2 || blocks == 0 || len(dst) < len(src) {
			return 0
		}
		if format == 0 {
			decodeE4M3AVX2(&dst[0], &src[0], blocks, scale)
		} else {
			decodeE5M2AVX2(&dst[0], &src[0], blocks, scale)
		}
		return blocks * 8
	}
	if blocks == 0 || len(dst) < len(src) {
		return 0
	}
	if format == 0 {
		decodeE4M3AVX512(&dst[0], &src[0], blocks, scale)
	} else {
		decodeE5M2AVX512(&dst[0], &src[0], blocks, scale)
	}
	return blocks * 16
}

// decodeFP8Blocks32Vector decodes the whole blocks of 32 of src, each
// times its scale (see DecodeFP8Blocks32), and returns how many values
// it did.
func decodeFP8Blocks32Vector(format int, dst []float32, src []uint8, scales []float32) int {
	blocks := len(src) / 32
	if blocks == 0 || len(dst) < 32*blocks || len(scales) < blocks {
		return 0
	}
	switch {
	case hasAVX512 && format == 0:
		decodeBlocks32E4M3AVX512(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX512:
		decodeBlocks32E5M2AVX512(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX2 && format == 0:
		decodeBlocks32E4M3AVX2(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX2:
		decodeBlocks32E5M2AVX2(&dst[0], &src[0], &scales[0], blocks)
	default:
		return 0
	}
	return 32 * blocks
}

// bf16BitsVector does BF16Bits for the whole blocks of 16 (AVX2; the
// AVX-512 transform kernels store bf16 bits themselves) and returns how
// many values it did.
func bf16BitsVector(dst []uint16, src []float32) int {
	blocks := len(src) / 16
	if !hasAVX2 || blocks == 0 || len(dst) < 16*blocks {
		return 0
	}
	bf16BitsAVX2(&dst[0], &src[0], blocks)
	return 16 * blocks
}

// geluVector runs the vector GELU over the longest multiple of 16 of x
// into y and returns how many values it did (GELU's loop does the rest).
func geluVector(y, x []float32) int {
	if !hasAVX512 {
		blocks := len(x) / 8
		if !hasAVX2 || blocks == 0 || len(y) < len(x) {
			return 0
		}
		geluAVX2(&y[0], &x[0], blocks)
		return blocks * 8
	}
	blocks := len(x) / 16
	if blocks == 0 || len(y) < len(x) {
		return 0
	}
	geluAVX512(&y[0], &x[0], blocks)
	return blocks * 16
}

// geluGradVector is geluVector for the backward, dx = dy·GELU'(x).
func geluGradVector(dx, x, dy []float32) int {
	if !hasAVX512 {
		blocks := len(x) / 8
		if !hasAVX2 || blocks == 0 || len(dx) < len(x) || len(dy) < len(x) {
			return 0
		}
		geluGradAVX2(&dx[0], &x[0], &dy[0], blocks)
		return blocks * 8
	}
	blocks := len(x) / 16
	if blocks == 0 || len(dx) < len(x) || len(dy) < len(x) {
		return 0
	}
	geluGradAVX512(&dx[0], &x[0], &dy[0], blocks)
	return blocks * 16
}

// reluGradVector sets dx = dy where x > 0 and +0 elsewhere (NaN x
// included) over the longest multiple of 16 it can vectorise and returns
// how many it did; ReLUGrad's loop does the rest.
func reluGradVector(dx, x, dy []float32) int {
	if !hasAVX512 {
		blocks := len(x) / 8
		if !hasAVX2 || blocks == 0 || len(dx) < len(x) || len(dy) < len(x) {
			return 0
		}
		reluGradAVX2(&dx[0], &x[0], &dy[0], blocks)
		return blocks * 8
	}
	blocks := len(x) / 16
	if blocks == 0 || len(dx) < len(x) || len(dy) < len(x) {
		return 0
	}
	reluGradAVX512(&dx[0], &x[0], &dy[0], blocks)
	return blocks * 16
}

// amaxBitsVector reads the longest prefix of src it can vectorise (a
// multiple of 64 values) and returns how many it read and the float32
// bits of their max |x|: a pattern above +inf (0x7f800000) if any was
// NaN. amaxBitsGo reads the rest.
func amaxBitsVector(src []float32) (done int, bits uint32) {
	blocks := len(src) / 64
	if !hasAVX512 {
		if blocks = len(src) / 32; !hasAVX2 || blocks == 0 {
			return 0, 0
		}
		var lanes [8]uint32
		amaxAVX2(&src[0], blocks, &lanes)
		for _, l := range lanes {
			bits = max(bits, l)
		}
		return blocks * 32, bits
	}
	if blocks == 0 {
		return 0, 0
	}
	var lanes [16]uint32
	amaxAVX512(&src[0], blocks, &lanes)
	for _, l := range lanes {
		bits = max(bits, l)
	}
	return blocks * 64, bits
}

// encodeFP16Vector stores the longest prefix of src·scale it can
// vectorise (a multiple of 16) as FP16 bits in dst, rounding to nearest
// even, and returns how many it did. For every non-NaN input the bits
// equal ToFP16's.
func encodeFP16Vector(dst []uint16, src []float32, scale float32) int {
	blocks := len(src) / 16
	if !hasAVX512 {
		if blocks = len(src) / 8; !hasAVX2 || !hasF16C || blocks == 0 || len(dst) < len(src) {
			return 0
		}
		fp16EncodeAVX2(&dst[0], &src[0], blocks, scale)
		return blocks * 8
	}
	if blocks == 0 || len(dst) < len(src) {
		return 0
	}
	fp16EncodeAVX512(&dst[0], &src[0], blocks, scale)
	return blocks * 16
}

// The binary kernels by operation (OpSub … OpDiv; Add has its own) and
// the scalar ones (OpAdd … OpDiv), AVX2 then AVX-512.
var (
	binaryKernelsAVX2   = [4]func(dst, x, y *float32, blocks int){nil, binarySubAVX2, binaryMulAVX2, binaryDivAVX2}
	binaryKernelsAVX512 = [4]func(dst, x, y *float32, blocks int){nil, binarySubAVX512, binaryMulAVX512, binaryDivAVX512}
	scalarKernelsAVX2   = [4]func(dst, x *float32, blocks int, c float32){binaryAddScalarAVX2, binarySubScalarAVX2, binaryMulScalarAVX2, binaryDivScalarAVX2}
	scalarKernelsAVX512 = [4]func(dst, x *float32, blocks int, c float32){binaryAddScalarAVX512, binarySubScalarAVX512, binaryMulScalarAVX512, binaryDivScalarAVX512}
)

// binaryVector does the whole vectors of Binary (op OpSub … OpDiv,
// len(x) = len(y) = len(dst)) and returns how many values it did.
func binaryVector(op int, dst, x, y []float32) int {
	if op <= OpAdd || op > OpDiv {
		return 0
	}
	switch {
	case hasAVX512 && len(dst) >= 16:
		binaryKernelsAVX512[op](&dst[0], &x[0], &y[0], len(dst)/16)
		return len(dst) / 16 * 16
	case hasAVX2 && len(dst) >= 8:
		binaryKernelsAVX2[op](&dst[0], &x[0], &y[0], len(dst)/8)
		return len(dst) / 8 * 8
	}
	return 0
}

// binaryScalarVector does the whole vectors of BinaryScalar and returns
// how many values it did.
func binaryScalarVector(op int, dst, x []float32, c float32) int {
	if op < OpAdd || op > OpDiv {
		return 0
	}
	switch {
	case hasAVX512 && len(dst) >= 16:
		scalarKernelsAVX512[op](&dst[0], &x[0], len(dst)/16, c)
		return len(dst) / 16 * 16
	case hasAVX2 && len(dst) >= 8:
		scalarKernelsAVX2[op](&dst[0], &x[0], len(dst)/8, c)
		return len(dst) / 8 * 8
	}
	return 0
}

// unaryVector does the whole vectors of Sqrt or Neg and returns how
// many values it did.
func unaryVector(kind int, y, x []float32) int {
	switch {
	case hasAVX512 && len(y) >= 16:
		[2]func(y, x *float32, blocks int){sqrtAVX512, negAVX512}[kind](&y[0], &x[0], len(y)/16)
		return len(y) / 16 * 16
	case hasAVX2 && len(y) >= 8:
		[2]func(y, x *float32, blocks int){sqrtAVX2, negAVX2}[kind](&y[0], &x[0], len(y)/8)
		return len(y) / 8 * 8
	}
	return 0
}

// decodeFP16Vector does the whole vectors of DecodeFP16 (len(dst) =
// len(src)) and returns how many values it did.
func decodeFP16Vector(dst []float32, src []uint16, scale float32) int {
	switch {
	case hasAVX512 && len(src) >= 16:
		fp16DecodeAVX512(&dst[0], &src[0], len(src)/16, scale)
		return len(src) / 16 * 16
	case hasAVX2 && hasF16C && len(src) >= 8:
		fp16DecodeAVX2(&dst[0], &src[0], len(src)/8, scale)
		return len(src) / 8 * 8
	}
	return 0
}

// rowKernel is the signature of the row-GEMM kernels.
type rowKernel func(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, mask uint16, add *float32, ldadd int, alpha float32)

// rowKernels holds, per vectors per row (1–4), the row-GEMM kernels of
// 1 to rowGemmRows(nv) rows.
var rowKernels = [4][]rowKernel{
	{rowGemm1x1AVX512, rowGemm2x1AVX512, rowGemm3x1AVX512, rowGemm4x1AVX512, rowGemm5x1AVX512, rowGemm6x1AVX512, rowGemm7x1AVX512, rowGemm8x1AVX512},
	{rowGemm1x2AVX512, rowGemm2x2AVX512, rowGemm3x2AVX512, rowGemm4x2AVX512, rowGemm5x2AVX512, rowGemm6x2AVX512, rowGemm7x2AVX512, rowGemm8x2AVX512},
	{rowGemm1x3AVX512, rowGemm2x3AVX512, rowGemm3x3AVX512, rowGemm4x3AVX512, rowGemm5x3AVX512, rowGemm6x3AVX512, rowGemm7x3AVX512, rowGemm8x3AVX512},
	{rowGemm1x4AVX512, rowGemm2x4AVX512, rowGemm3x4AVX512, rowGemm4x4AVX512, rowGemm5x4AVX512, rowGemm6x4AVX512},
}

// rowGemmRows is the row count of the nv-vector row-GEMM kernel (as in
// asmgen).
func rowGemmRows(nv int) int { return min(8, 24/nv) }

// rowGemmVector runs rowGemm on the vector kernels (operands already
// bounds-checked) and reports whether it could.
func rowGemmVector(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, add []float32, ldadd int, alpha float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		rowGemmAVX2(m, n, k, a, rsA, csA, b, ldb, c, ldc, add, ldadd, alpha)
		return true
	}
	// at returns the address of S's element (i, j), or nil for none.
	at := func(i, j int) *float32 {
		if add == nil {
			return nil
		}
		return &add[i*ldadd+j]
	}
	// Row groups outer, column blocks inner: the group's rows of A are
	// read from memory once and reused from L1 for every block of 64
	// columns, while B stays in L2 (in bands of columns where it would
	// not, see rowGemmBand); then the last, narrower block. The rows
	// left over take the kernel of their count.
	nfull := n / 64 * 64
	ks := rowKernels[3]
	band := rowGemmBand(nfull, k, 64)
	for j0 := 0; j0 < nfull; j0 += band {
		j1 := min(nfull, j0+band)
		for i := 0; i < m; {
			rows := min(len(ks), m-i)
			kern := ks[rows-1]
			for j := j0; j < j1; j += 64 {
				kern(k, &a[i*rsA], rsA, csA, &b[j], ldb, &c[i*ldc+j], ldc, 0xFFFF, at(i, j), ldadd, alpha)
			}
			i += rows
		}
	}
	if cols := n - nfull; cols > 0 {
		nv := (cols + 15) / 16
		mask := uint16(1<<(cols-16*(nv-1)) - 1)
		ks = rowKernels[nv-1]
		for i := 0; i < m; {
			rows := min(len(ks), m-i)
			ks[rows-1](k, &a[i*rsA], rsA, csA, &b[nfull], ldb, &c[i*ldc+nfull], ldc, mask, at(i, nfull), ldadd, alpha)
			i += rows
		}
	}
	return true
}

// rowKernelAVX2 is the signature of the AVX2 row-GEMM kernels (mask
// points at the lane masks of the last vector of a row, see
// laneMasksAVX2).
type rowKernelAVX2 func(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, mask *int32, add *float32, ldadd int, alpha float32)

// The AVX2 row-GEMM kernels: unmasked, 16 columns, 1–6 rows; masked
// (the last vector of 8 lanes), 8 or 16 columns, 1–8 or 1–6 rows.
var (
	rowKernelsAVX2  = []rowKernelAVX2{rowGemm1x2AVX2, rowGemm2x2AVX2, rowGemm3x2AVX2, rowGemm4x2AVX2, rowGemm5x2AVX2, rowGemm6x2AVX2}
	rowKernelsAVX2m = [2][]rowKernelAVX2{
		{rowGemm1x1mAVX2, rowGemm2x1mAVX2, rowGemm3x1mAVX2, rowGemm4x1mAVX2, rowGemm5x1mAVX2, rowGemm6x1mAVX2, rowGemm7x1mAVX2, rowGemm8x1mAVX2},
		{rowGemm1x2mAVX2, rowGemm2x2mAVX2, rowGemm3x2mAVX2, rowGemm4x2mAVX2, rowGemm5x2mAVX2, rowGemm6x2mAVX2},
	}
)

// laneMasksAVX2 holds eight all-ones lanes and eight zero lanes: the
// eight from index 8−v on select the first v lanes of a vector.
var laneMasksAVX2 = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

// rowGemmAVX2 is rowGemmVector on the AVX2 kernels: row groups of six
// outer and blocks of 16 columns inner (as the AVX-512 path does with
// 64), then the columns left over with the masked kernels.
func rowGemmAVX2(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, add []float32, ldadd int, alpha float32) {
	at := func(i, j int) *float32 {
		if add == nil {
			return nil
		}
		return &add[i*ldadd+j]
	}
	nfull := n / 16 * 16
	// Row groups outer, blocks of 16 columns inner (the group's rows of
	// A stay in L1, B is read from L2), in bands of columns where op(B)
	// would not fit in L2 (rowGemmBand).
	band := rowGemmBand(nfull, k, 16)
	ks := rowKernelsAVX2
	for j0 := 0; j0 < nfull; j0 += band {
		j1 := min(nfull, j0+band)
		for i := 0; i < m; {
			rows := min(len(ks), m-i)
			kern := ks[rows-1]
			for j := j0; j < j1; j += 16 {
				kern(k, &a[i*rsA], rsA, csA, &b[j], ldb, &c[i*ldc+j], ldc, nil, at(i, j), ldadd, alpha)
			}
			i += rows
		}
	}
	if cols := n - nfull; cols > 0 {
		nv := (cols + 7) / 8
		mask := &laneMasksAVX2[8-(cols-8*(nv-1))]
		ks := rowKernelsAVX2m[nv-1]
		for i := 0; i < m; {
			rows := min(len(ks), m-i)
			ks[rows-1](k, &a[i*rsA], rsA, csA, &b[nfull], ldb, &c[i*ldc+nfull], ldc, mask, at(i, nfull), ldadd, alpha)
			i += rows
		}
	}
}

// rowGemmBandB bounds the elements of op(B) the row GEMMs read for each
// row group: half of a 1 MB L2 (larger bands measured up to 30% slower
// at the GPT's MLP wgrad, op(B) 768×512; smaller ones no faster).
const rowGemmBandB = 1 << 17

// rowGemmBand returns the width of the bands of columns the row GEMMs
// sweep with every row group: all n (a multiple of step) while k·n
// elements of op(B) fit in rowGemmBandB, else as many whole steps as
// fit (at least one).
func rowGemmBand(n, k, step int) int {
	if k*n <= rowGemmBandB {
		return n
	}
	return max(step, rowGemmBandB/k/step*step)
}

// rowKernel16AVX2 is the signature of the AVX2 bf16 row kernels.
type rowKernel16AVX2 func(kp int, a *uint32, rsA, csA int, b *uint32, ldb int, c *float32, ldc int, mask *int32, alpha, alphaLo float32)

// The AVX2 bf16 row kernels: unmasked, 16 columns, 1–6 rows; masked, 8
// or 16 columns, 1–8 or 1–6 rows.
var (
	rowKernels16AVX2  = []rowKernel16AVX2{rowGemm16_1x2AVX2, rowGemm16_2x2AVX2, rowGemm16_3x2AVX2, rowGemm16_4x2AVX2, rowGemm16_5x2AVX2, rowGemm16_6x2AVX2}
	rowKernels16AVX2m = [2][]rowKernel16AVX2{
		{rowGemm16_1x1mAVX2, rowGemm16_2x1mAVX2, rowGemm16_3x1mAVX2, rowGemm16_4x1mAVX2, rowGemm16_5x1mAVX2, rowGemm16_6x1mAVX2, rowGemm16_7x1mAVX2, rowGemm16_8x1mAVX2},
		{rowGemm16_1x2mAVX2, rowGemm16_2x2mAVX2, rowGemm16_3x2mAVX2, rowGemm16_4x2mAVX2, rowGemm16_5x2mAVX2, rowGemm16_6x2mAVX2},
	}
)

// rowKernel16SAVX2 is the signature of the AVX2 bf16 row kernels that
// read A as float32 values (the split form, see rowGemm16Split).
type rowKernel16SAVX2 func(kp int, a *float32, rsA, csA, oddA int, b *uint32, ldb int, c *float32, ldc int, mask *int32, alpha, alphaLo float32)

// The split row kernels, in the same shapes as the pair ones.
var (
	rowKernels16SAVX2  = []rowKernel16SAVX2{rowGemm16S_1x2AVX2, rowGemm16S_2x2AVX2, rowGemm16S_3x2AVX2, rowGemm16S_4x2AVX2, rowGemm16S_5x2AVX2, rowGemm16S_6x2AVX2}
	rowKernels16SAVX2m = [2][]rowKernel16SAVX2{
		{rowGemm16S_1x1mAVX2, rowGemm16S_2x1mAVX2, rowGemm16S_3x1mAVX2, rowGemm16S_4x1mAVX2, rowGemm16S_5x1mAVX2, rowGemm16S_6x1mAVX2, rowGemm16S_7x1mAVX2, rowGemm16S_8x1mAVX2},
		{rowGemm16S_1x2mAVX2, rowGemm16S_2x2mAVX2, rowGemm16S_3x2mAVX2, rowGemm16S_4x2mAVX2, rowGemm16S_5x2mAVX2, rowGemm16S_6x2mAVX2},
	}
)

// rowGemm16AVX2 is rowGemm16Vector on the AVX2 kernels.
func rowGemm16AVX2(m, n, kp int, a []uint32, rsA, csA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) {
	rowGemm16AVX2Tiles(m, n, rowKernels16AVX2, &rowKernels16AVX2m, func(kern rowKernel16AVX2, i, j int, mask *int32) {
		kern(kp, &a[i*rsA], rsA, csA, &b[j/64*64*kp+j%64], 64, &c[i*ldc+j], ldc, mask, alpha, alphaLo)
	})
}

// rowGemm16SplitVector is rowGemm16Split on the AVX2 kernels (only
// there: elsewhere the split form is not used) and reports whether it
// ran.
func rowGemm16SplitVector(m, n, kp int, a []float32, rsA, csA, oddA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) bool {
	if !hasAVX2 || hasBF16 {
		return false
	}
	rowGemm16AVX2Tiles(m, n, rowKernels16SAVX2, &rowKernels16SAVX2m, func(kern rowKernel16SAVX2, i, j int, mask *int32) {
		kern(kp, &a[i*rsA], rsA, csA, oddA, &b[j/64*64*kp+j%64], 64, &c[i*ldc+j], ldc, mask, alpha, alphaLo)
	})
	return true
}

// useSplitA16 reports whether the direct bf16 path converts op(A) to
// float32 values for the split row kernels: on AVX2 without
// AVX512_BF16 (whose kernels read pairs natively), for operands whose
// values widen exactly (float32 rounded to bf16; FP8 codes with a bf16
// table at scale 1, which the word decode widens; not exponent shifts,
// scaled tables or NVFP4).
func useSplitA16(x *Operand) bool {
	return hasAVX2 && !hasBF16 && useRow16Vector &&
		(x.Exp == nil && (x.E2M1 != nil || x.Codes == nil) || x.Codes != nil && x.bf16Tab != nil && x.Scale == 1 && decodeFormat(x) >= 0)
}

// widenRowsVector does the vector part of Operand.widenRows (rows rows
// of n values, x[o+r·ld:] into dst[r·ldd:]) and returns how many values
// of each row it did.
func widenRowsVector(x *Operand, dst []float32, o, ld, rows, n, ldd int) int {
	if !hasAVX2 || rows <= 0 {
		return 0
	}
	if x.E2M1 != nil {
		return e2m1WidenRows(x, dst, o, ld, rows, n, ldd)
	}
	if x.Codes == nil {
		blocks := n / 8
		if blocks == 0 {
			return 0
		}
		_, _ = dst[(rows-1)*ldd+n-1], x.F32[o+(rows-1)*ld+n-1]
		bf16WidenRowsF32AVX2(&dst[0], &x.F32[o], rows, blocks, 4*ld, 4*ldd)
		if n%8 != 0 {
			// The last 8 values of each row again: the overlap gets the
			// same values.
			bf16WidenRowsF32AVX2(&dst[n-8], &x.F32[o+n-8], rows, 1, 4*ld, 4*ldd)
		}
		return n
	}
	blocks := n / 16
	if blocks == 0 || x.Scale != 1 {
		return 0
	}
	_, _ = dst[(rows-1)*ldd+n-1], x.Codes[o+(rows-1)*ld+n-1]
	var widen func(dst *float32, src *uint8, rows, blocks, ld, ldd int)
	switch decodeFormat(x) {
	case 0:
		widen = bf16WidenRowsE4M3WordsAVX2
	case 1:
		widen = bf16WidenRowsE5M2WordsAVX2
	default:
		return 0
	}
	widen(&dst[0], &x.Codes[o], rows, blocks, ld, 4*ldd)
	if n%16 != 0 {
		// The last 16 values of each row again (see above).
		widen(&dst[n-16], &x.Codes[o+n-16], rows, 1, ld, 4*ldd)
	}
	return n
}

// e2m1WidenRows is widenRowsVector for NVFP4 codes: the whole blocks of
// 16 of each row, when every row's run starts on a block of its stored
// row and stays within it (otherwise none).
func e2m1WidenRows(x *Operand, dst []float32, o, ld, rows, n, ldd int) int {
	cols, blocks := x.E2M1Cols, n/16
	if blocks == 0 {
		return 0
	}
	for r := 0; r < rows; r++ {
		if c := (o + r*ld) % cols; c%16 != 0 || c+16*blocks > cols {
			return 0
		}
	}
	_ = dst[(rows-1)*ldd+16*blocks-1]
	for r := 0; r < rows; r++ {
		codes, f := x.e2m1Run(o + r*ld)
		_, _ = codes[8*blocks-1], f[blocks-1]
		e2m1WidenF32AVX2(&dst[r*ldd], &codes[0], &f[0], blocks)
	}
	return 16 * blocks
}

// rowGemm16AVX2Tiles walks C in the tiles of the AVX2 bf16 row kernels:
// B's panels of 64 columns, each in blocks of 16 columns (full holds the
// kernels of 1… rows), the last block of a panel masked when narrower
// (masked[nv−1] the kernels of nv vectors), calling run for each tile
// (its first row and column, and the lane mask or nil).
func rowGemm16AVX2Tiles[K any](m, n int, full []K, masked *[2][]K, run func(kern K, i, j int, mask *int32)) {
	for p0 := 0; p0 < n; p0 += 64 {
		w := min(64, n-p0)
		nf := w / 16 * 16
		if nf > 0 {
			for i := 0; i < m; {
				rows := min(len(full), m-i)
				for j := 0; j < nf; j += 16 {
					run(full[rows-1], i, p0+j, nil)
				}
				i += rows
			}
		}
		if cols := w - nf; cols > 0 {
			nv := (cols + 7) / 8
			mask := &laneMasksAVX2[8-(cols-8*(nv-1))]
			ks := masked[nv-1]
			for i := 0; i < m; {
				rows := min(len(ks), m-i)
				run(ks[rows-1], i, p0+nf, mask)
				i += rows
			}
		}
	}
}

// expSumVector runs ExpSum's vector kernel over all of x and reports
// whether it could.
func expSumVector(y, x []float32, scale, shift float32) (float32, bool) {
	if !hasAVX512 {
		if !hasAVX2 {
			return 0, false
		}
		// 16 values at a time into 16 lane sums, the last block's
		// through lane masks: the AVX-512 kernel's sums.
		if len(x) == 0 {
			return 0, true
		}
		var lanes [16]float32
		blocks, tail := len(x)/16, len(x)%16
		var mask *[16]int32
		if tail > 0 {
			mask = (*[16]int32)(laneMasks[16-tail:])
		}
		_ = y[len(x)-1]
		expSumAVX2(&y[0], &x[0], blocks, scale, shift, &lanes, mask)
		return sumLanes(&lanes), true
	}
	blocks, mask := tailMask(len(x))
	return expSumAVX512(&y[0], &x[0], blocks, mask, scale, shift), true
}

// laneMasks[16−t:] is the lane mask of t values (t ≤ 16) of a 16-lane
// block, for the AVX2 kernels' masked loads and stores.
var laneMasks = [32]int32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// rowMaxVector runs RowMax's vector kernel and reports whether it could.
func rowMaxVector(x []float32) (float32, bool) {
	if !hasAVX512 {
		if !hasAVX2 || len(x) == 0 {
			return 0, false
		}
		blocks, tail := len(x)/16, len(x)%16
		var mask *[16]int32
		if tail > 0 {
			mask = (*[16]int32)(laneMasks[16-tail:])
		}
		var lanes [16]float32
		rowMaxAVX2(&x[0], blocks, &lanes, mask)
		m := lanes[0]
		for _, v := range lanes[1:] {
			m = max(m, v)
		}
		return m, true
	}
	blocks, mask := tailMask(len(x))
	return rowMaxAVX512(&x[0], blocks, mask), true
}

// softmaxGradRowVector runs SoftmaxGradRow's vector kernel and reports
// whether it could.
func softmaxGradRowVector(ds, p, dp []float32, d, scale float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		blocks := len(p) / 8
		if blocks > 0 {
			softmaxGradRowAVX2(&ds[0], &p[0], &dp[0], blocks, d, scale)
		}
		softmaxGradRowGo(ds[8*blocks:], p[8*blocks:], dp[8*blocks:], d, scale)
		return true
	}
	blocks, mask := tailMask(len(p))
	softmaxGradRowAVX512(&ds[0], &p[0], &dp[0], blocks, mask, d, scale)
	return true
}

func lnSumVector(x []float32, blocks int, mask uint16, lanes *[16]float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		if blocks > 0 {
			lnSumAVX2(&x[0], blocks, lanes)
		}
		lnSumGo(x[16*blocks:16*blocks+bits.OnesCount16(mask)], lanes)
		return true
	}
	lnSumAVX512(&x[0], blocks, mask, lanes)
	return true
}

func lnSqDevVector(x []float32, blocks int, mask uint16, mu float32, lanes *[16]float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		if blocks > 0 {
			lnSqDevAVX2(&x[0], blocks, mu, lanes)
		}
		lnSqDevGo(x[16*blocks:16*blocks+bits.OnesCount16(mask)], mu, lanes)
		return true
	}
	lnSqDevAVX512(&x[0], blocks, mask, mu, lanes)
	return true
}

func lnApplyVector(y, x, gamma, beta []float32, blocks int, mask uint16, mu, r, g0 float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := 16*blocks + bits.OnesCount16(mask)
		b8 := n / 8
		if b8 > 0 {
			_, _, _, _ = y[8*b8-1], x[8*b8-1], gamma[8*b8-1], beta[8*b8-1]
			lnApplyAVX2(&y[0], &x[0], &gamma[0], &beta[0], b8, mu, r, g0)
		}
		o := 8 * b8
		lnApplyGo(y[o:n], x[o:n], gamma[o:n], beta[o:n], mu, r, g0)
		return true
	}
	lnApplyAVX512(&y[0], &x[0], &gamma[0], &beta[0], blocks, mask, mu, r, g0)
	return true
}

func lnGradAccumVector(x, dy, gamma, dgamma, dbeta []float32, blocks int, mask uint16, mu, rs, g0 float32, lanes *[32]float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := 16*blocks + bits.OnesCount16(mask)
		if blocks > 0 {
			o := 16*blocks - 1
			_, _, _, _, _ = x[o], dy[o], gamma[o], dgamma[o], dbeta[o]
			lnGradAccumAVX2(&x[0], &dy[0], &gamma[0], &dgamma[0], &dbeta[0], blocks, mu, rs, g0, lanes)
		}
		o := 16 * blocks
		lnGradAccumGo(x[o:n], dy[o:n], gamma[o:n], dgamma[o:n], dbeta[o:n], mu, rs, g0, lanes)
		return true
	}
	lnGradAccumAVX512(&x[0], &dy[0], &gamma[0], &dgamma[0], &dbeta[0], blocks, mask, mu, rs, g0, lanes)
	return true
}

func lnGradDxVector(dx, x, dy, gamma []float32, blocks int, mask uint16, mu, rs, g0, fm, fmx float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := 16*blocks + bits.OnesCount16(mask)
		b8 := n / 8
		if b8 > 0 {
			_, _, _, _ = dx[8*b8-1], x[8*b8-1], dy[8*b8-1], gamma[8*b8-1]
			lnGradDxAVX2(&dx[0], &x[0], &dy[0], &gamma[0], b8, mu, rs, g0, fm, fmx)
		}
		o := 8 * b8
		lnGradDxGo(dx[o:n], x[o:n], dy[o:n], gamma[o:n], mu, rs, g0, fm, fmx)
		return true
	}
	lnGradDxAVX512(&dx[0], &x[0], &dy[0], &gamma[0], blocks, mask, mu, rs, g0, fm, fmx)
	return true
}

// rowKernel16 is the signature of the bf16 row-GEMM kernels.
type rowKernel16 func(kp int, a *uint32, rsA, csA int, b *uint32, ldb int, c *float32, ldc int, mask uint16, alpha, alphaLo float32)

// rowKernels16 holds, per vectors per row (1–4), the bf16 row-GEMM
// kernels of 1 to rowGemmRows(nv) rows.
var rowKernels16 = [4][]rowKernel16{
	{rowGemm16_1x1AVX512, rowGemm16_2x1AVX512, rowGemm16_3x1AVX512, rowGemm16_4x1AVX512, rowGemm16_5x1AVX512, rowGemm16_6x1AVX512, rowGemm16_7x1AVX512, rowGemm16_8x1AVX512},
	{rowGemm16_1x2AVX512, rowGemm16_2x2AVX512, rowGemm16_3x2AVX512, rowGemm16_4x2AVX512, rowGemm16_5x2AVX512, rowGemm16_6x2AVX512, rowGemm16_7x2AVX512, rowGemm16_8x2AVX512},
	{rowGemm16_1x3AVX512, rowGemm16_2x3AVX512, rowGemm16_3x3AVX512, rowGemm16_4x3AVX512, rowGemm16_5x3AVX512, rowGemm16_6x3AVX512, rowGemm16_7x3AVX512, rowGemm16_8x3AVX512},
	{rowGemm16_1x4AVX512, rowGemm16_2x4AVX512, rowGemm16_3x4AVX512, rowGemm16_4x4AVX512, rowGemm16_5x4AVX512, rowGemm16_6x4AVX512},
}

// rowGemm16Vector runs rowGemm16 on the AVX512_BF16 row kernels
// (operands already bounds-checked) and reports whether it could: row
// groups outer (the group's pairs of A stay in L1), the panels of B
// inner, streamed from L2.
func rowGemm16Vector(m, n, kp int, a []uint32, rsA, csA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) bool {
	if !hasBF16 {
		if !hasAVX2 {
			return false
		}
		rowGemm16AVX2(m, n, kp, a, rsA, csA, b, c, ldc, alpha, alphaLo)
		return true
	}
	nfull := n / 64 * 64
	ks := rowKernels16[3]
	if nfull > 0 {
		for i := 0; i < m; {
			rows := min(len(ks), m-i)
			kern := ks[rows-1]
			for j := 0; j < nfull; j += 64 {
				kern(kp, &a[i*rsA], rsA, csA, &b[j*kp], 64, &c[i*ldc+j], ldc, 0xFFFF, alpha, alphaLo)
			}
			i += rows
		}
	}
	if cols := n - nfull; cols > 0 {
		nv := (cols + 15) / 16
		mask := uint16(1<<(cols-16*(nv-1)) - 1)
		ks = rowKernels16[nv-1]
		for i := 0; i < m; {
			rows := min(len(ks), m-i)
			ks[rows-1](kp, &a[i*rsA], rsA, csA, &b[nfull*kp], 64, &c[i*ldc+nfull], ldc, mask, alpha, alphaLo)
			i += rows
		}
	}
	return true
}

// addVector writes x + y to dst with the vector kernel and reports
// whether it could.
func addVector(dst, x, y []float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := len(dst)
		_, _ = x[n-1], y[n-1]
		if b := n / 8; b > 0 {
			addAVX2(&dst[0], &x[0], &y[0], b)
		}
		addGo(dst[n/8*8:], x[n/8*8:], y[n/8*8:])
		return true
	}
	_, _ = x[len(dst)-1], y[len(dst)-1]
	blocks, mask := tailMask(len(dst))
	addAVX512(&dst[0], &x[0], &y[0], blocks, mask)
	return true
}

// widenBF16Vector does the whole vectors of WidenBF16 (len(v) = len(h))
// and returns how many values it did.
func widenBF16Vector(v []float32, h []uint16) int {
	switch {
	case hasAVX512 && len(h) >= 16:
		widenBF16AVX512(&v[0], &h[0], len(h)/16)
		return len(h) / 16 * 16
	case hasAVX2 && len(h) >= 8:
		widenBF16AVX2(&v[0], &h[0], len(h)/8)
		return len(h) / 8 * 8
	}
	return 0
}

// reluVector writes max(x, 0) to y with the vector kernel and reports
// whether it could.
func reluVector(y, x []float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := len(y)
		_ = x[n-1]
		if b := n / 8; b > 0 {
			reluAVX2(&y[0], &x[0], b)
		}
		reluGo(y[n/8*8:], x[n/8*8:])
		return true
	}
	blocks, mask := tailMask(len(y))
	reluAVX512(&y[0], &x[0], blocks, mask)
	return true
}

// addRowVector adds src to dst (same length) with the vector kernel and
// reports whether it could.
func addRowVector(dst, src []float32) bool {
	if len(dst) == 0 {
		return false
	}
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		return addVector(dst, dst, src) // dst + src, dst first as in dst += src
	}
	_ = src[len(dst)-1]
	blocks, mask := tailMask(len(dst))
	addAVX512(&dst[0], &dst[0], &src[0], blocks, mask) // dst + src, dst first as in dst += src
	return true
}

func rmsApplyVector(y, x, gamma []float32, blocks int, mask uint16, r, g0 float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := 16*blocks + bits.OnesCount16(mask)
		b8 := n / 8
		if b8 > 0 {
			_, _, _ = y[8*b8-1], x[8*b8-1], gamma[8*b8-1]
			rmsApplyAVX2(&y[0], &x[0], &gamma[0], b8, r, g0)
		}
		o := 8 * b8
		rmsApplyGo(y[o:n], x[o:n], gamma[o:n], r, g0)
		return true
	}
	rmsApplyAVX512(&y[0], &x[0], &gamma[0], blocks, mask, r, g0)
	return true
}

func rmsGradAccumVector(x, dy, gamma, dgamma []float32, blocks int, mask uint16, rs, g0 float32, lanes *[16]float32) bool {
	if !hasAVX512 {
		if !hasAVX2 {
			return false
		}
		n := 16*blocks + bits.OnesCount16(mask)
		if blocks > 0 {
			o := 16*blocks - 1
			_, _, _, _ = x[o], dy[o], gamma[o], dgamma[o]
			rmsGradAccumAVX2(&x[0], &dy[0], &gamma[0], &dgamma[0], blocks, rs, g0, lanes)
		}
		o := 16 * blocks
		rmsGradAccumGo(x[o:n], dy[o:n], gamma[o:n], dgamma[o:n], rs, g0, lanes)
		return true
	}
	rmsGradAccumAVX512(&x[0], &dy[0], &gamma[0], &dgamma[0], blocks, mask, rs, g0, lanes)
	return true
}

// sigmoidVector runs kernel kind of the sigmoid family over the longest
// multiple of 16 of x and returns how many values it did: out = f(x) or
// f(x, y) (Sigmoid, SiLU: out, x; SigmoidGrad, SiLUGrad: out, x, dy as
// y; SwiGLU: out, a, b; SwiGLUGrad: da, a, b, dy, db).
func sigmoidVector(kind int, out, x, y, z, w []float32) int {
	blocks := len(x) / 16
	if !hasAVX512 {
		return sigmoidAVX2Vector(kind, out, x, y, z, w)
	}
	if blocks == 0 {
		return 0
	}
	n := blocks*16 - 1
	_, _ = out[n], x[n]
	switch kind {
	case sigSigmoid:
		sigmoidAVX512(&out[0], &x[0], blocks)
	case sigSiLU:
		siluAVX512(&out[0], &x[0], blocks)
	case sigSigmoidGrad:
		_ = y[n]
		sigmoidGradAVX512(&out[0], &x[0], &y[0], blocks)
	case sigSiLUGrad:
		_ = y[n]
		siluGradAVX512(&out[0], &x[0], &y[0], blocks)
	case sigSwiGLU:
		_ = y[n]
		swigluAVX512(&out[0], &x[0], &y[0], blocks)
	case sigSwiGLUGrad:
		_, _, _ = y[n], z[n], w[n]
		swigluGradAVX512(&out[0], &w[0], &x[0], &y[0], &z[0], blocks)
	}
	return blocks * 16
}

// sigmoidAVX2Vector is sigmoidVector on the AVX2 kernels, over the
// longest multiple of 8.
func sigmoidAVX2Vector(kind int, out, x, y, z, w []float32) int {
	blocks := len(x) / 8
	if !hasAVX2 || blocks == 0 {
		return 0
	}
	n := blocks*8 - 1
	_, _ = out[n], x[n]
	switch kind {
	case sigSigmoid:
		sigmoidAVX2(&out[0], &x[0], blocks)
	case sigSiLU:
		siluAVX2(&out[0], &x[0], blocks)
	case sigSigmoidGrad:
		_ = y[n]
		sigmoidGradAVX2(&out[0], &x[0], &y[0], blocks)
	case sigSiLUGrad:
		_ = y[n]
		siluGradAVX2(&out[0], &x[0], &y[0], blocks)
	case sigSwiGLU:
		_ = y[n]
		swigluAVX2(&out[0], &x[0], &y[0], blocks)
	case sigSwiGLUGrad:
		_, _, _ = y[n], z[n], w[n]
		swigluGradAVX2(&out[0], &w[0], &x[0], &y[0], &z[0], blocks)
	}
	return blocks * 8
}

// quantizeFP8LanesVector is quantizeFP8Vector with one scale per value.
func quantizeFP8LanesVector(format int, dst []uint8, src, scales []float32) (done int, amaxBits uint32) {
	if !hasAVX512 {
		blocks := len(src) / 8
		if !hasAVX2 || blocks == 0 || len(dst) < len(src) || len(scales) < len(src) {
			return 0, 0
		}
		var lanes [8]uint32
		if format == 0 {
			quantizeLanesE4M3AVX2(&dst[0], &src[0], &scales[0], blocks, &lanes)
		} else {
			quantizeLanesE5M2AVX2(&dst[0], &src[0], &scales[0], blocks, &lanes)
		}
		for _, l := range lanes {
			amaxBits = max(amaxBits, l)
		}
		return blocks * 8, amaxBits
	}
	blocks := len(src) / 16
	if blocks == 0 || len(dst) < len(src) || len(scales) < len(src) {
		return 0, 0
	}
	var lanes [16]uint32
	if format == 0 {
		quantizeLanesE4M3AVX512(&dst[0], &src[0], &scales[0], blocks, &lanes)
	} else {
		quantizeLanesE5M2AVX512(&dst[0], &src[0], &scales[0], blocks, &lanes)
	}
	for _, l := range lanes {
		amaxBits = max(amaxBits, l)
	}
	return blocks * 16, amaxBits
}

// quantizeFP8BlocksVector casts the whole blocks of size (128 or 32)
// of src (see QuantizeFP8Blocks) and returns how many values it did.
// AVX2 has the kernel of 32 only (QuantizeFP8Blocks' fallback, a block
// at a time, is vectorised there too).
func quantizeFP8BlocksVector(format, size int, dst []uint8, src, scales []float32) int {
	blocks := len(src) / size
	if blocks == 0 || len(dst) < size*blocks || len(scales) < blocks {
		return 0
	}
	switch {
	case hasAVX512 && size == 128 && format == 0:
		quantizeBlocksE4M3AVX512(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX512 && size == 128:
		quantizeBlocksE5M2AVX512(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX512 && size == 32 && format == 0:
		quantizeBlocks32E4M3AVX512(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX512 && size == 32:
		quantizeBlocks32E5M2AVX512(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX2 && size == 32 && format == 0:
		quantizeBlocks32E4M3AVX2(&dst[0], &src[0], &scales[0], blocks)
	case hasAVX2 && size == 32:
		quantizeBlocks32E5M2AVX2(&dst[0], &src[0], &scales[0], blocks)
	default:
		return 0
	}
	return size * blocks
}

// quantizeFP8ColsVector casts the whole strips of 16 columns of a band
// (8 on AVX2; see QuantizeFP8Cols) and returns how many columns it did.
func quantizeFP8ColsVector(format int, dst []uint8, ldd int, src []float32, ld int, scales []float32, rows, n int) int {
	if !hasAVX512 {
		strips := n / 8
		if !hasAVX2 || strips == 0 || rows == 0 {
			return 0
		}
		_, _, _ = dst[(rows-1)*ldd+8*strips-1], src[(rows-1)*ld+8*strips-1], scales[8*strips-1]
		if format == 0 {
			quantizeColsE4M3AVX2(&dst[0], &src[0], &scales[0], strips, rows, 4*ld, ldd)
		} else {
			quantizeColsE5M2AVX2(&dst[0], &src[0], &scales[0], strips, rows, 4*ld, ldd)
		}
		return 8 * strips
	}
	strips := n / 16
	if strips == 0 || rows == 0 {
		return 0
	}
	_, _, _ = dst[(rows-1)*ldd+16*strips-1], src[(rows-1)*ld+16*strips-1], scales[16*strips-1]
	if format == 0 {
		quantizeColsE4M3AVX512(&dst[0], &src[0], &scales[0], strips, rows, 4*ld, ldd)
	} else {
		quantizeColsE5M2AVX512(&dst[0], &src[0], &scales[0], strips, rows, 4*ld, ldd)
	}
	return 16 * strips
}

// amaxColsBandVector does AmaxColsBand for the whole strips of 16
// columns (8 on AVX2) and returns how many columns it did and the
// largest |x| bits seen.
func amaxColsBandVector(acc []uint32, src []float32, ld, rows, n int) (done int, seen uint32) {
	if !hasAVX512 {
		strips := n / 8
		if !hasAVX2 || strips == 0 || rows == 0 {
			return 0, 0
		}
		_, _ = acc[8*strips-1], src[(rows-1)*ld+8*strips-1]
		var lanes [8]uint32
		amaxColsBandAVX2(&acc[0], &src[0], strips, rows, 4*ld, &lanes)
		for _, l := range lanes {
			seen = max(seen, l)
		}
		return 8 * strips, seen
	}
	strips := n / 16
	if strips == 0 || rows == 0 {
		return 0, 0
	}
	_, _ = acc[16*strips-1], src[(rows-1)*ld+16*strips-1]
	var lanes [16]uint32
	amaxColsBandAVX512(&acc[0], &src[0], strips, rows, 4*ld, &lanes)
	for _, l := range lanes {
		seen = max(seen, l)
	}
	return 16 * strips, seen
}

// amaxColsVector folds the longest multiple of 16 of src into acc (see
// AmaxCols) and returns how many it did and the largest |x| bits seen.
func amaxColsVector(acc []uint32, src []float32) (done int, seen uint32) {
	if !hasAVX512 {
		blocks := len(src) / 8
		if !hasAVX2 || blocks == 0 || len(acc) < len(src) {
			return 0, 0
		}
		var lanes [8]uint32
		amaxColsAVX2(&acc[0], &src[0], blocks, &lanes)
		for _, l := range lanes {
			seen = max(seen, l)
		}
		return blocks * 8, seen
	}
	blocks := len(src) / 16
	if blocks == 0 || len(acc) < len(src) {
		return 0, 0
	}
	var lanes [16]uint32
	amaxColsAVX512(&acc[0], &src[0], blocks, &lanes)
	for _, l := range lanes {
		seen = max(seen, l)
	}
	return blocks * 16, seen
}

// rht16Vector transforms every group of 16 of x (a multiple of 16 long)
// and returns how many values it did.
func rht16Vector(x []float32) int {
	groups := len(x) / 16
	if groups == 0 || !hasAVX512 && !hasAVX2 {
		return 0
	}
	if !hasAVX512 {
		rht16AVX2(&x[0], groups)
		return groups * 16
	}
	rht16AVX512(&x[0], groups)
	return groups * 16
}

// nvfp4ColsStrips runs the strip kernels on source rows [r0, r1) (whole
// groups of 16) of the strips of 16 columns (8 on AVX2, the transform
// only) from c0 up to c1 and returns
// how many columns they did: the plain pass into dst32, or with dst16
// the transform, its bf16 bits into dst16.
func nvfp4ColsStrips(dst32 []float32, dst16 []uint16, bam []uint32, src []float32, rows, cols, r0, r1, c0, c1 int) int {
	if rows%16 != 0 || r0%16 != 0 || r1%16 != 0 || r0 >= r1 {
		return 0
	}
	if !hasAVX512 {
		// AVX2: the transform's strips of 8 columns.
		if !hasAVX2 || dst16 == nil {
			return 0
		}
		nb, strips := rows/16, (c1-c0)/8
		for s := 0; s < strips; s++ {
			c := c0 + 8*s
			nvfp4ColsRHTAVX2(&dst16[c*rows+r0], &src[r0*cols+c], &bam[c*nb+r0/16], (r1-r0)/16, 4*cols, 2*rows, int32(nb))
		}
		return 8 * strips
	}
	nb, strips := rows/16, (c1-c0)/16
	for s := 0; s < strips; s++ {
		c := c0 + 16*s
		switch {
		case dst16 != nil && nvfp4ColsBF16:
			nvfp4ColsRHTBF16AVX512(&dst16[c*rows+r0], &src[r0*cols+c], &bam[c*nb+r0/16], (r1-r0)/16, 4*cols, 2*rows, int32(nb))
		case dst16 != nil:
			nvfp4ColsRHTAVX512(&dst16[c*rows+r0], &src[r0*cols+c], &bam[c*nb+r0/16], (r1-r0)/16, 4*cols, 2*rows, int32(nb))
		default:
			nvfp4ColsAVX512(&dst32[c*rows+r0], &src[r0*cols+c], &bam[c*nb+r0/16], (r1-r0)/16, 4*cols, 4*rows, int32(nb))
		}
	}
	return 16 * strips
}

// nvfp4ColsBF16 selects the transposing pass's AVX512_BF16 kernel
// (its outputs rounded by VCVTNE2PS2BF16, its transpose of 16-bit
// values) where the CPU has one; tests turn it off to run the other.
var nvfp4ColsBF16 = hasBF16

// nvfp4ColsBands: the strip kernels take any run of whole row groups.
func nvfp4ColsBands(rows, cols int) bool { return hasAVX512 && rows%16 == 0 && cols%16 == 0 }

// amax16Vector does Amax16 for the whole blocks of src with the vector
// kernel and returns how many blocks it did.
func amax16Vector(out []uint32, src []float32) int {
	blocks := len(src) / 16
	if blocks == 0 || len(out) < blocks || !hasAVX512 && !hasAVX2 {
		return 0
	}
	if !hasAVX512 {
		amax16AVX2(&src[0], blocks, &out[0])
		return blocks
	}
	amax16AVX512(&src[0], blocks, &out[0])
	return blocks
}

// mxScalesVector does MXScales for the longest multiple of 8 blocks and
// returns how many it did and their largest amax bits.
func mxScalesVector(sc []uint8, inv []float32, amax []uint32, emax, ceilThr uint32) (int, uint32) {
	groups := len(amax) / 8
	if !hasAVX2 || groups == 0 || emax < 2 || len(sc) < 8*groups || len(inv) < 8*groups {
		return 0, 0
	}
	return 8 * groups, mxScalesAVX2(&amax[0], &sc[0], &inv[0], groups, emax, ceilThr)
}

// e8m0RangeVector does e8m0RangeGo for the longest multiple of 32 codes
// and returns how many it did and their range (255, 0 for none).
func e8m0RangeVector(sc []uint8) (done int, lo, hi1 uint8) {
	groups := len(sc) / 32
	if !hasAVX2 || groups == 0 {
		return 0, 255, 0
	}
	lo, hi1 = e8m0RangeAVX2(&sc[0], groups)
	return 32 * groups, lo, hi1
}

// e8m0FactorsVector does E8M0Factors for the longest multiple of 8
// codes and returns how many it did.
func e8m0FactorsVector(f []float32, sc []uint8, shift int) int {
	groups := len(sc) / 8
	if !hasAVX2 || groups == 0 || len(f) < 8*groups {
		return 0
	}
	e8m0FactorsAVX2(&f[0], &sc[0], groups, int32(shift))
	return 8 * groups
}

// nvfp4ScalesVector does NVFP4BlockScales for the longest multiple of
// 16 blocks and returns how many it did.
func nvfp4ScalesVector(sf []uint8, es []float32, amax []uint32, m, sdec float32) int {
	lanes := 16
	if !hasAVX512 {
		lanes = 8
	}
	groups := len(amax) / lanes
	if !hasAVX2 || groups == 0 || len(sf) < lanes*groups || len(es) < lanes*groups {
		return 0
	}
	if hasAVX512 {
		nvfp4ScalesAVX512(&amax[0], &sf[0], &es[0], groups, m, sdec)
	} else {
		nvfp4ScalesAVX2(&amax[0], &sf[0], &es[0], groups, m, sdec)
	}
	return lanes * groups
}

// e2m1BlocksVector casts the whole blocks of 16 of src (see
// QuantizeE2M1Blocks) and returns how many values it did.
func e2m1BlocksVector(dst []uint8, src, es []float32) int {
	blocks := len(src) / 16
	if blocks == 0 || len(dst) < 8*blocks || len(es) < blocks || !hasAVX512 && !hasAVX2 {
		return 0
	}
	if !hasAVX512 {
		e2m1BlocksAVX2(&dst[0], &src[0], &es[0], blocks)
		return 16 * blocks
	}
	e2m1BlocksAVX512(&dst[0], &src[0], &es[0], blocks)
	return 16 * blocks
}

// e2m1BlocksBF16Vector is e2m1BlocksVector for bf16 values.
func e2m1BlocksBF16Vector(dst []uint8, src []uint16, es []float32) int {
	blocks := len(src) / 16
	if !hasAVX512 || blocks == 0 || len(dst) < 8*blocks || len(es) < blocks {
		return 0
	}
	e2m1BlocksBF16AVX512(&dst[0], &src[0], &es[0], blocks)
	return 16 * blocks
}

// e2m1StochasticBF16Vector is e2m1StochasticVector for bf16 values.
func e2m1StochasticBF16Vector(dst []uint8, src []uint16, es []float32, key, base uint32) int {
	blocks := len(src) / 16
	if !hasAVX512 || blocks == 0 || len(dst) < 8*blocks || len(es) < blocks {
		return 0
	}
	e2m1StochasticBF16AVX512(&dst[0], &src[0], &es[0], blocks, key, base)
	return 16 * blocks
}

// e2m1StochasticVector rounds the whole blocks of 16 of src (see
// E2M1StochasticBlocks) and returns how many values it did.
func e2m1StochasticVector(dst []uint8, src, es []float32, key, base uint32) int {
	blocks := len(src) / 16
	if blocks == 0 || len(dst) < 8*blocks || len(es) < blocks || !hasAVX512 && !hasAVX2 {
		return 0
	}
	if !hasAVX512 {
		e2m1StochasticAVX2(&dst[0], &src[0], &es[0], blocks, key, base)
		return 16 * blocks
	}
	e2m1StochasticAVX512(&dst[0], &src[0], &es[0], blocks, key, base)
	return 16 * blocks
}

// decodeE2M1BF16Vector decodes the whole blocks of 16 of dst (see
// DecodeE2M1BF16) and returns how many values it did.
func decodeE2M1BF16Vector(dst []uint16, src []uint8, factors []float32) int {
	blocks := len(dst) / 16
	if blocks == 0 || len(src) < 8*blocks || len(factors) < blocks || !hasAVX512 && !hasAVX2 {
		return 0
	}
	if !hasAVX512 {
		e2m1DecodeBF16AVX2(&dst[0], &src[0], &factors[0], blocks)
		return blocks * 16
	}
	e2m1DecodeBF16AVX512(&dst[0], &src[0], &factors[0], blocks)
	return blocks * 16
}

// amaxBlocksVector does Amax128 or Amax32 (size) for every block with
// the vector kernel and returns how many blocks it did (AVX2: blocks of
// 32 only).
func amaxBlocksVector(out []uint32, src []float32, size int) int {
	blocks := len(src) / size
	if blocks == 0 || len(out) < blocks {
		return 0
	}
	switch {
	case hasAVX512 && size == 128:
		amax128AVX512(&src[0], blocks, &out[0])
	case hasAVX512 && size == 32:
		amax32AVX512(&src[0], blocks, &out[0])
	case hasAVX2 && size == 32:
		amax32AVX2(&src[0], blocks, &out[0])
	default:
		return 0
	}
	return blocks
}

// blockTilesVector runs BlockTiles' vector kernel when width is a
// multiple of 16 (bounds checked by the caller), reporting whether it
// ran.
func blockTilesVector(format int, dst []uint8, ldd int, src []float32, ld int, inv []float32, tiles, rows, width, ts, tds int, eps float32, mask uint32) (done int, amax uint32, ok bool) {
	if !hasAVX512 || !hasBMI2 || width%16 != 0 {
		return 0, 0, false
	}
	var res [2]uint32
	switch group := blockGroup(rows, width); {
	case group == 1 && format == 0:
		blockTilesSeqE4M3AVX512(&dst[0], &src[0], &inv[0], tiles, rows, width/16, 4*ld, ldd, 4*ts, tds, eps, mask, &res)
	case group == 1:
		blockTilesSeqE5M2AVX512(&dst[0], &src[0], &inv[0], tiles, rows, width/16, 4*ld, ldd, 4*ts, tds, eps, mask, &res)
	case format == 0:
		blockTilesE4M3AVX512(&dst[0], &src[0], &inv[0], tiles, rows, width/16, 4*ld, ldd, 4*ts, tds, group, eps, mask, &res)
	default:
		blockTilesE5M2AVX512(&dst[0], &src[0], &inv[0], tiles, rows, width/16, 4*ld, ldd, 4*ts, tds, group, eps, mask, &res)
	}
	return int(res[0]), res[1], true
}

// blockColsVector casts the whole strips of 16 columns of BlockCols'
// band (bounds checked by the caller), stopping before a strip that
// holds a NaN, and returns how many columns it did, their largest amax
// bits, and how many it tried.
func blockColsVector(format int, dst []uint8, ldd int, src []float32, ld int, inv []float32, rows, n int, eps float32, mask uint32) (done int, amax uint32, tried int) {
	strips := n / 16
	if !hasAVX512 || strips == 0 {
		return 0, 0, 0
	}
	var res [2]uint32
	if format == 0 {
		blockColsE4M3AVX512(&dst[0], &src[0], &inv[0], strips, rows, 4*ld, ldd, eps, mask, &res)
	} else {
		blockColsE5M2AVX512(&dst[0], &src[0], &inv[0], strips, rows, 4*ld, ldd, eps, mask, &res)
	}
	return 16 * int(res[0]), res[1], 16 * strips
}

// e2m1RowsVector decodes rows rows of 16·blocks NVFP4 codes (ld bytes of
// codes apart, their factors fs apart) to bf16 pairs, ldd lanes apart,
// with the vector kernel (hasE2M1Rows checked by the caller).
func e2m1RowsVector(dst []uint32, codes []uint8, factors []float32, rows, blocks, ld, ldd, fs int) {
	_, _, _ = dst[(rows-1)*ldd+8*blocks-1], codes[(rows-1)*ld+8*blocks-1], factors[(rows-1)*fs+blocks-1]
	e2m1RowsBF16AVX512((*uint16)(unsafe.Pointer(&dst[0])), &codes[0], &factors[0], rows, blocks, ld, 4*ldd, 4*fs)
}
