//go:build amd64 && !purego

package kernels

import (
	"golang.org/x/sys/cpu"
)

//go:generate sh -c "cd asmgen && go run . -pkg kernels -out ../asm_amd64.s -stubs ../asm_stubs_amd64.go"

// The assembly kernels read and write through raw pointers; the wrappers
// touch the last element of each slice first (k ≥ 1 always) so that a
// short slice panics in Go instead of corrupting memory.

var avx512Kernel = microKernel{name: "avx512 12x32", mr: 12, nr: 32,
	run: func(k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
		_, _, _ = a[12*k-1], b[32*k-1], c[11*ldc+31]
		sgemmKernelAVX512(k, &a[0], &b[0], &c[0], ldc, alpha, b2i(overwrite))
	}}

var avx512x48Kernel = microKernel{name: "avx512 8x48", mr: 8, nr: 48,
	run: func(k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
		_, _, _ = a[8*k-1], b[48*k-1], c[7*ldc+47]
		sgemmKernelAVX512x48(k, &a[0], &b[0], &c[0], ldc, alpha, b2i(overwrite))
	}}

var avx2Kernel = microKernel{name: "avx2 6x16", mr: 6, nr: 16,
	run: func(k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
		_, _, _ = a[6*k-1], b[16*k-1], c[5*ldc+15]
		sgemmKernelAVX2(k, &a[0], &b[0], &c[0], ldc, alpha, b2i(overwrite))
	}}

// availableKernels lists the micro-kernels this CPU can run, in order of
// preference: on the development machine (2-core AMD EPYC) 8×48 ran at
// 170–174 GFLOP/s, 6×16 at 161–177 and 12×32 at 156–160 for n = 1024.
// The assembly kernels accumulate in the same order with the same fused
// multiply-adds, so the choice does not change results.
func availableKernels() []microKernel {
	var ks []microKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512x48Kernel)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernel)
	}
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512Kernel)
	}
	return append(ks, goKernel)
}

var avx512bf16Kernel = bf16Kernel{name: "avx512bf16 12x32", mr: 12, nr: 32,
	run: func(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
		_, _, _ = a[12*k-1], b[32*k-1], c[11*ldc+31]
		bf16KernelAVX512(k, &a[0], &b[0], &c[0], ldc, alpha, alphaLo, b2i(overwrite))
	}}

// avx2bf16Kernel is VDPBF16PS's arithmetic on AVX2 and FMA (see
// bf16GemmKernelAVX2 in asmgen): the same bits as the AVX512_BF16
// kernels.
var avx2bf16Kernel = bf16Kernel{name: "avx2 bf16 6x16", mr: 6, nr: 16, split: true,
	run: func(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
		_, _, _ = a[12*k-1], b[32*k-1], c[5*ldc+15]
		bf16KernelAVX2(k, &a[0], &b[0], &c[0], ldc, alpha, alphaLo, b2i(overwrite))
	}}

var avx512bf16x48Kernel = bf16Kernel{name: "avx512bf16 8x48", mr: 8, nr: 48,
	run: func(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
		_, _, _ = a[8*k-1], b[48*k-1], c[7*ldc+47]
		bf16KernelAVX512x48(k, &a[0], &b[0], &c[0], ldc, alpha, alphaLo, b2i(overwrite))
	}}

// amxBF16Kernel runs amxBF16Tiles; lda counts lanes (the assembly takes
// bytes).
var amxBF16Kernel = bf16Kernel{name: "amx bf16 32x32", mr: 32, nr: 32,
	tiles: func(kt int, a []uint32, lda int, b []uint32, c []float32, ldc, mt, nt int, alpha, alphaLo float32, mode int, scratch []float32) {
		_, _, _, _ = a[(mt*32-1)*lda+16*kt-1], b[nt*32*16*kt-1], c[(mt*32-1)*ldc+nt*32-1], scratch[1023]
		amxBF16Tiles(kt, &a[0], 4*lda, &b[0], &c[0], ldc, mt, nt, alpha, alphaLo, mode, &amxConfig[0], &scratch[0])
	}}

// amxConfig is the tile configuration amxBF16Tiles loads: palette 1,
// tiles 0–7 of 16 rows × 64 bytes.
var amxConfig = func() (cfg [64]byte) {
	cfg[0] = 1
	for t := 0; t < 8; t++ {
		cfg[16+2*t] = 64
		cfg[48+t] = 16
	}
	return cfg
}()

// hasAMX says whether the AMX kernel can run: the CPU has AMX-BF16 (and
// the AVX512_BF16 packing kernels), and Linux grants the process the
// tile data state, which it asks for once here (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; Linux 5.16 and later).
var hasAMX = hasBF16 && cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && requestAMX()

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// hasBF16 says whether the CPU runs the AVX512_BF16 kernels (the packing
// kernels also need AVX512BW's VPERMW).
var hasBF16 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512BF16

// availableBF16Kernels lists the bf16 micro-kernels this CPU runs, fastest
// first, and the pure-Go twin (which KernelEnv may choose). Without
// AVX512_BF16 the AVX2 kernel, which gives the same bits, is the default.
func availableBF16Kernels() []bf16Kernel {
	if !hasBF16 {
		if hasAVX2 {
			return []bf16Kernel{avx2bf16Kernel, goBF16Kernel, goAMXKernel}
		}
		return []bf16Kernel{goBF16Kernel, goAMXKernel}
	}
	if hasAMX {
		return []bf16Kernel{amxBF16Kernel, avx512bf16Kernel, avx512bf16x48Kernel, goBF16Kernel, goAMXKernel}
	}
	return []bf16Kernel{avx512bf16Kernel, avx512bf16x48Kernel, goBF16Kernel, goAMXKernel}
}

var defaultBF16 = hasBF16 || hasAVX2

// pairsVector does the longest multiple of 16 of Operand.pairs16 with
// the vector kernel and returns how many lanes it wrote.
func pairsVector(x *Operand, dst []uint32, o0, o1, n int) int {
	blocks := n / 16
	if blocks == 0 || !groupsVector(x, dst, o0, o1, 1, 16*blocks, 0) {
		return 0
	}
	return blocks * 16
}

// groupsVector does Operand.pairs16Groups with the vector kernel when it
// can (width a multiple of 16) and reports whether it did.
func groupsVector(x *Operand, dst []uint32, o0, o1, groups, width, stride int) bool {
	if !(hasBF16 || hasAVX2) || groups == 0 || width == 0 || width%16 != 0 || (x.Codes != nil && x.bf16Tab == nil) || x.E2M1 != nil {
		return false
	}
	pairsStrided(x, dst, o0, o1, groups, width, stride, width) // the groups contiguous in x
	return true
}

// pairsStrided runs the strided pairs kernel of a float32 or FP8 operand
// (checked by the caller) over groups runs of width lanes, the run g at
// x[o0+g·sstride:] and x[o1+g·sstride:], written to dst[g·stride:].
func pairsStrided(x *Operand, dst []uint32, o0, o1, groups, width, stride, sstride int) {
	last := (groups-1)*sstride + width - 1
	_ = dst[(groups-1)*stride+width-1]
	if !hasBF16 {
		// AVX2: the 8-lane kernels (width is a multiple of 16).
		if x.Codes == nil {
			_, _ = x.F32[o0+last], x.F32[o1+last]
			bf16PairsStridedF32AVX2(&dst[0], &x.F32[o0], &x.F32[o1], groups, width/8, 4*stride, 4*sstride)
			return
		}
		_, _ = x.Codes[o0+last], x.Codes[o1+last]
		switch f := decodeFormat(x); {
		case f == 0 && x.Scale == 1:
			bf16PairsStridedE4M3WordsAVX2(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/16, 4*stride, sstride)
		case f == 1 && x.Scale == 1:
			bf16PairsStridedE5M2WordsAVX2(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/16, 4*stride, sstride)
		case f == 0:
			bf16PairsStridedE4M3AVX2(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/8, 4*stride, sstride, x.Scale)
		case f == 1:
			bf16PairsStridedE5M2AVX2(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/8, 4*stride, sstride, x.Scale)
		default:
			bf16PairsStridedFP8AVX2(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/8, 4*stride, sstride, x.Table)
		}
		return
	}
	if x.Codes == nil {
		_, _ = x.F32[o0+last], x.F32[o1+last]
		bf16PairsStridedF32(&dst[0], &x.F32[o0], &x.F32[o1], groups, width/16, 4*stride, 4*sstride)
	} else {
		_, _ = x.Codes[o0+last], x.Codes[o1+last]
		bf16PairsStridedFP8(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/16, 4*stride, sstride, x.bf16Tab)
	}
}

// stridedPairsVector writes, for each of groups pair rows g, the width
// lanes (a multiple of 16) pairing x[o0+g·sstride+j] with
// x[o1+g·sstride+j] to dst[g·stride:], in one call of the vector kernel
// (Aᵀ's pairs down its columns, a chunk of rows at a time); false when
// the operand has no vector path (E2M1, exponent shifts, FP8 without a
// bf16 table).
func stridedPairsVector(x *Operand, dst []uint32, o0, o1, groups, width, stride, sstride int) bool {
	if x.E2M1 != nil {
		return hasAVX512 && groups > 0 && width > 0 && x.e2m1Strided(dst, o0, o1, groups, width, stride, sstride)
	}
	if !(hasBF16 || hasAVX2) || groups == 0 || width == 0 || width%16 != 0 || (x.Codes != nil && x.bf16Tab == nil) || x.Exp != nil {
		return false
	}
	pairsStrided(x, dst, o0, o1, groups, width, stride, sstride)
	return true
}

// e2m1Strided is stridedPairsVector for an NVFP4 operand with one
// factor row per code row (not 16×16 tiles): each group's two rows are
// consecutive rows of the codes (o1 = o0 + cols, sstride = 2·cols), its
// lanes whole blocks of 16 that start on a block.
func (x *Operand) e2m1Strided(dst []uint32, o0, o1, groups, width, stride, sstride int) bool {
	cols := x.E2M1Cols
	c0 := o0 % cols
	if x.E2M1Tiles || o1 != o0+cols || sstride != 2*cols || width%16 != 0 || c0%16 != 0 || c0+width > cols {
		return false
	}
	r, half, nb, blocks := o0/cols, (cols+1)/2, (cols+15)/16, width/16
	lastRow := r + 2*(groups-1) + 1
	_, _ = x.E2M1[lastRow*half+c0/2+8*blocks-1], x.E2M1Factors[lastRow*nb+c0/16+blocks-1]
	_ = dst[(groups-1)*stride+width-1]
	e2m1PairsStridedAVX512(&dst[0], &x.E2M1[r*half+c0/2], &x.E2M1[(r+1)*half+c0/2], &x.E2M1Factors[r*nb+c0/16], &x.E2M1Factors[(r+1)*nb+c0/16],
		groups, blocks, 4*stride, 2*half, 4*2*nb)
	return true
}

// stridedPairsExpVector is stridedPairsVector with Float8BlockScaling's
// exponent shifts, the same shifts[:width] for every group (the pair
// rows of one k-block), for FP8 codes with a bf16 table.
func stridedPairsExpVector(x *Operand, dst []uint32, o0, o1, groups, width, stride, sstride int, shifts []uint32) bool {
	if !hasBF16 || groups == 0 || width == 0 || width%16 != 0 || x.Codes == nil || x.bf16Tab == nil {
		return false
	}
	last := (groups-1)*sstride + width - 1
	_, _, _, _ = dst[(groups-1)*stride+width-1], x.Codes[o0+last], x.Codes[o1+last], shifts[width-1]
	bf16PairsStridedFP8Shift(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/16, 4*stride, sstride, x.bf16Tab, &shifts[0])
	return true
}

// e2m1GroupsVector interleaves groups runs of 16·blocks decoded NVFP4
// values of two code rows, run g starting g·cstep codes (and g·cstep/16
// factors) along a and b and written g·stride lanes along dst, with one
// call of the vector kernel, and reports whether it could.
func e2m1GroupsVector(dst []uint32, a, b []uint8, fa, fb []float32, groups, blocks, stride, cstep int) bool {
	if groups <= 0 || blocks <= 0 || !hasAVX512 && !hasAVX2 {
		return false
	}
	last := (groups - 1) * cstep
	_, _, _, _, _ = dst[(groups-1)*stride+16*blocks-1], a[last/2+8*blocks-1], b[last/2+8*blocks-1], fa[last/16+blocks-1], fb[last/16+blocks-1]
	if !hasAVX512 {
		e2m1PairsStridedAVX2(&dst[0], &a[0], &b[0], &fa[0], &fb[0], groups, blocks, 4*stride, cstep/2, 4*(cstep/16))
		return true
	}
	e2m1PairsStridedAVX512(&dst[0], &a[0], &b[0], &fa[0], &fb[0], groups, blocks, 4*stride, cstep/2, 4*(cstep/16))
	return true
}

// transposeVector does the longest multiple of 16 of transposeInto's
// columns with the vector kernel and returns how many it did: dst[q·w+i]
// = src[i·ld+q] for i < rows (at most 16; src must hold 16 rows of ld).
// The AVX2 kernel takes whole bands of 16 rows only.
func transposeVector(dst []uint32, w int, src []uint32, ld, rows, n int) int {
	blocks := n / 16
	if blocks == 0 || rows == 0 {
		return 0
	}
	if !hasAVX512 {
		if !hasAVX2 || rows != 16 {
			return 0
		}
		_, _ = src[15*ld+16*blocks-1], dst[(16*blocks-1)*w+15]
		transpose16AVX2(&dst[0], &src[0], blocks, 4*ld, 4*w)
		return 16 * blocks
	}
	_, _ = src[15*ld+16*blocks-1], dst[(16*blocks-1)*w+rows-1]
	bf16Transpose16(&dst[0], &src[0], 1<<rows-1, blocks, 4*ld, 4*w)
	return 16 * blocks
}

// pack6Vector transposes six rows of 32-bit lanes of src (ld apart)
// into the 6-lane sliver dst (dst[p·6+i] = src[i·ld+p]) for the first
// 8·⌊n/8⌋ columns and returns how many it did (0 without AVX2).
func pack6Vector(dst, src []uint32, ld, n int) int {
	blocks := n / 8
	if !hasAVX2 || blocks == 0 {
		return 0
	}
	_, _ = src[5*ld+8*blocks-1], dst[48*blocks-1]
	transpose6AVX2(&dst[0], &src[0], blocks, 4*ld)
	return 8 * blocks
}

// copyRowsVector copies rows rows of n values (ld apart in src) into
// width-w slivers of kb rows (dst[s·kb + p·w + c] = src[p·ld + s + c])
// and returns how many rows it did: all of them for 16-value slivers
// with AVX2, else none.
func copyRowsVector(dst []float32, w int, src []float32, ld, rows, n int) int {
	if !hasAVX2 || w != 16 || rows == 0 || n == 0 {
		return 0
	}
	kb := rows
	_, _ = src[(rows-1)*ld+n-1], dst[(n/16-1)*kb*16+rows*16-1]
	copyRows16AVX2(&dst[0], &src[0], rows, n/16, 4*ld, 64*kb)
	return rows
}

// splitPairsVector splits the first 8·⌊len(src)/8⌋ pairs of src (see
// splitPairs) and returns how many it did (0 without AVX2).
func splitPairsVector(odd, even, src []uint32) int {
	blocks := len(src) / 8
	if !hasAVX2 || blocks == 0 {
		return 0
	}
	_, _ = odd[8*blocks-1], even[8*blocks-1]
	splitPairsAVX2(&odd[0], &even[0], &src[0], blocks)
	return 8 * blocks
}

// decodeFormat returns the format (0 E4M3, 1 E5M2) whose arithmetic
// decode the AVX2 packs may use for x's codes instead of gathering its
// table — Cast and Scale describe the table (Table[c] = Decode[c]·Scale,
// the decode kernels' product) — or −1. At Scale 1 (the FP8 GEMMs'
// operands) they decode straight to bf16 words (bf16RowsE4M3WordsAVX2);
// otherwise to float32, times the scale, then to bf16.
func decodeFormat(x *Operand) int {
	if x.Cast == nil || x.Cast.Format < 0 || x.Cast.Format > 1 {
		return -1
	}
	return x.Cast.Format
}

// rowsAVX2 is rowsVector on the AVX2 kernels: 16 values (8 pairs) at a
// time, each row's rest by the Go loop.
func rowsAVX2(x *Operand, dst []uint32, o, ld, rows, n, ldd int) bool {
	if !hasAVX2 || rows <= 0 || n <= 0 || x.E2M1 != nil || (x.Codes != nil && x.bf16Tab == nil) {
		return false
	}
	blocks := n / 16
	if blocks > 0 {
		_ = dst[(rows-1)*ldd+8*blocks-1]
		if x.Codes == nil {
			_ = x.F32[o+(rows-1)*ld+16*blocks-1]
			bf16RowsF32AVX2(&dst[0], &x.F32[o], rows, blocks, 4*ld, 4*ldd)
		} else {
			_ = x.Codes[o+(rows-1)*ld+16*blocks-1]
			switch f := decodeFormat(x); {
			case f == 0 && x.Scale == 1:
				bf16RowsE4M3WordsAVX2(&dst[0], &x.Codes[o], rows, blocks, ld, 4*ldd)
			case f == 1 && x.Scale == 1:
				bf16RowsE5M2WordsAVX2(&dst[0], &x.Codes[o], rows, blocks, ld, 4*ldd)
			case f == 0:
				bf16RowsE4M3AVX2(&dst[0], &x.Codes[o], rows, blocks, ld, 4*ldd, x.Scale)
			case f == 1:
				bf16RowsE5M2AVX2(&dst[0], &x.Codes[o], rows, blocks, ld, 4*ldd, x.Scale)
			default:
				bf16RowsFP8AVX2(&dst[0], &x.Codes[o], rows, blocks, ld, 4*ldd, x.Table)
			}
		}
	}
	if n%16 != 0 {
		for r := 0; r < rows; r++ {
			x.row16From(dst[r*ldd:], o+r*ld, n, 8*blocks)
		}
	}
	return true
}

// fp8RowsOK reports whether rows of n FP8 codes of x convert with the
// vector row kernels: a bf16 table, and an odd row's missing last value
// read as code 0 converting to the zero half row16 pads with.
func fp8RowsOK(x *Operand, rows, n int) bool {
	return hasBF16 && hasBMI2 && rows > 0 && n > 0 && x.Codes != nil && x.bf16Tab != nil && x.E2M1 == nil && (n%2 == 0 || x.bf16Tab[0] == 0)
}

// rowsVector does Operand.rows16 for float32 values or FP8 codes with
// the vector kernel (rows rows of n values, ld apart, written ⌈n/2⌉
// pairs each, ldd apart) and reports whether it could.
func rowsVector(x *Operand, dst []uint32, o, ld, rows, n, ldd int) bool {
	if !hasBF16 {
		return rowsAVX2(x, dst, o, ld, rows, n, ldd)
	}
	if x.Codes == nil && x.E2M1 == nil && hasBF16 && hasBMI2 && rows > 0 && n > 0 {
		_, _ = x.F32[o+(rows-1)*ld+n-1], dst[(rows-1)*ldd+(n+1)/2-1]
		bf16RowsF32(&dst[0], &x.F32[o], rows, n/32, n%32, 4*ld, 4*ldd)
		return true
	}
	if !fp8RowsOK(x, rows, n) {
		return false
	}
	_, _ = x.Codes[o+(rows-1)*ld+n-1], dst[(rows-1)*ldd+(n+1)/2-1]
	bf16RowsFP8(&dst[0], &x.Codes[o], rows, n/32, n%32, ld, 4*ldd, x.bf16Tab)
	return true
}

// rowsExpVector does Operand.rows16Exp with the vector kernel (row r's
// k-block shifts at exp[r·es:]) and reports whether it could.
func rowsExpVector(x *Operand, dst []uint32, o, ld, rows, n, ldd int, exp []int8, es int) bool {
	if !fp8RowsOK(x, rows, n) || x.expRun() != ExpBlock {
		return false
	}
	nb := (n + ExpBlock - 1) / ExpBlock
	_, _, _ = x.Codes[o+(rows-1)*ld+n-1], dst[(rows-1)*ldd+(n+1)/2-1], exp[(rows-1)*es+nb-1]
	bf16RowsFP8Shift(&dst[0], &x.Codes[o], rows, n/ExpBlock, n%ExpBlock, ld, 4*ldd, x.bf16Tab, &exp[0], es)
	return true
}

// groupsExpVector does Operand.pairs16GroupsExp with the vector kernel
// when it can (FP8 codes with a bf16 table, width a multiple of 16) and
// reports whether it did.
func groupsExpVector(x *Operand, dst []uint32, o0, o1, groups, width, stride int, shifts []uint32) bool {
	if !hasBF16 || groups == 0 || width == 0 || width%16 != 0 || x.Codes == nil || x.bf16Tab == nil || o1 < 0 {
		return false
	}
	n := groups * width
	_, _, _, _ = dst[(groups-1)*stride+width-1], x.Codes[o0+n-1], x.Codes[o1+n-1], shifts[n-1]
	bf16PairsFP8Shift(&dst[0], &x.Codes[o0], &x.Codes[o1], groups, width/16, 4*stride, x.bf16Tab, &shifts[0])
	return true
}

// scaleRowVector does the longest multiple of 8 of postScale's loop over
// one row with the vector kernel and returns how many it did.
func scaleRowVector(row, col []float32, f float64) int {
	blocks := len(row) / 8
	if !hasAVX2 || blocks == 0 {
		return 0
	}
	if col != nil {
		_ = col[8*blocks-1]
	}
	switch {
	case hasAVX512 && col == nil:
		scaleRowAVX512(&row[0], blocks, f)
	case hasAVX512:
		scaleRowColAVX512(&row[0], &col[0], blocks, f)
	case col == nil:
		scaleRowAVX2(&row[0], blocks, f)
	default:
		scaleRowColAVX2(&row[0], &col[0], blocks, f)
	}
	return 8 * blocks
}

// bf16ShiftVector shifts the longest multiple of 16 lanes of d (see
// bf16ShiftGo; step 0 reuses shifts[0:16], 64 walks them along) and
// returns how many it did.
func bf16ShiftVector(d, shifts []uint32, step int) int {
	if !hasBF16 {
		// The 8-lane kernel: step 0 reuses shifts[0:8], so the second
		// eight must repeat them (shiftRun's do).
		blocks := len(d) / 8
		if !hasAVX2 || blocks == 0 || len(shifts) < 16 || (step != 0 && len(shifts) < len(d)) ||
			(step == 0 && [8]uint32(shifts[:8]) != [8]uint32(shifts[8:16])) {
			return 0
		}
		bf16ShiftAVX2(&d[0], &shifts[0], blocks, step/2)
		return blocks * 8
	}
	blocks := len(d) / 16
	if blocks == 0 || len(shifts) < 16 || (step != 0 && len(shifts) < len(d)) {
		return 0
	}
	bf16ShiftAVX512(&d[0], &shifts[0], blocks, step)
	return blocks * 16
}

// shiftGroupsVector shifts groups runs of width lanes of d, run g at
// d[g·stride:], by shifts[g·width:] (see pairs16GroupsExp) with the
// AVX2 kernel in one call (width a multiple of 8), and reports whether
// it could.
func shiftGroupsVector(d, shifts []uint32, groups, width, stride int) bool {
	if !hasAVX2 || groups <= 0 || width <= 0 || width%8 != 0 {
		return false
	}
	_, _ = d[(groups-1)*stride+width-1], shifts[groups*width-1]
	bf16ShiftGroupsAVX2(&d[0], &shifts[0], groups, width/8, 4*stride)
	return true
}

// shiftPeriodVector does shiftPeriodic with the AVX2 kernel (len(shifts)
// a multiple of 8, len(d) of len(shifts)) and reports whether it could.
func shiftPeriodVector(d, shifts []uint32) bool {
	period := len(shifts) / 8
	if !hasAVX2 || period == 0 || len(shifts)%8 != 0 || len(d)%len(shifts) != 0 || len(d) == 0 {
		return false
	}
	bf16ShiftPeriodAVX2(&d[0], &shifts[0], len(d)/len(shifts), period)
	return true
}

// bf16ShiftRunsVector shifts the whole runs of lanes lanes of d by their
// exp entries (see bf16ShiftRunsGo) and returns how many runs it did.
func bf16ShiftRunsVector(d []uint32, exp []int8, lanes int) int {
	if lanes <= 0 {
		return 0
	}
	runs := min(len(d)/lanes, len(exp))
	switch {
	case runs == 0:
		return 0
	case hasBF16 && lanes == 64:
		bf16ShiftRunsAVX512(&d[0], &exp[0], runs)
	case hasAVX2 && lanes%8 == 0:
		bf16ShiftRunsAVX2(&d[0], &exp[0], runs, lanes/8)
	default:
		return 0
	}
	return runs
}
