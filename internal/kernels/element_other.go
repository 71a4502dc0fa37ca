//go:build !amd64 || purego

package kernels

// This build has no vector element kernels: each reports that it did
// nothing, and the Go twin does all of the work.

const hasAVX512 = false

// hasAVX2: no AVX2 kernels in this build.
const hasAVX2 = false

func encodeFP16Vector(dst []uint16, src []float32, scale float32) int { return 0 }
func rowGemm16Vector(m, n, kp int, a []uint32, rsA, csA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) bool {
	return false
}
func rowGemm16SplitVector(m, n, kp int, a []float32, rsA, csA, oddA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) bool {
	return false
}
func useSplitA16(x *Operand) bool                                            { return false }
func widenRowsVector(x *Operand, dst []float32, o, ld, rows, n, ldd int) int { return 0 }
func addRowVector(dst, src []float32) bool                                   { return false }

func quantizeFP8BlocksVector(format, size int, dst []uint8, src, scales []float32) int { return 0 }
func decodeFP8Blocks32Vector(format int, dst []float32, src []uint8, scales []float32) int {
	return 0
}
func amaxColsVector(acc []uint32, src []float32) (int, uint32) { return 0, 0 }

func rht16Vector(x []float32) int { return 0 }

func nvfp4ColsStrips(dst32 []float32, dst16 []uint16, bam []uint32, src []float32, rows, cols, r0, r1, c0, c1 int) int {
	return 0
}

func nvfp4ColsBands(rows, cols int) bool { return false }

func amax16Vector(out []uint32, src []float32) int { return 0 }
func mxScalesVector(sc []uint8, inv []float32, amax []uint32, emax, ceilThr uint32) (int, uint32) {
	return 0, 0
}
func e8m0RangeVector(sc []uint8) (int, uint8, uint8)                                 { return 0, 255, 0 }
func e8m0FactorsVector(f []float32, sc []uint8, shift int) int                       { return 0 }
func nvfp4ScalesVector(sf []uint8, es []float32, amax []uint32, m, sdec float32) int { return 0 }
func e2m1BlocksVector(dst []uint8, src, es []float32) int                            { return 0 }
func e2m1StochasticVector(dst []uint8, src, es []float32, key, base uint32) int      { return 0 }
func e2m1BlocksBF16Vector(dst []uint8, src []uint16, es []float32) int               { return 0 }
func e2m1StochasticBF16Vector(dst []uint8, src []uint16, es []float32, key, base uint32) int {
	return 0
}

func decodeE2M1BF16Vector(dst []uint16, src []uint8, factors []float32) int { return 0 }

func amaxBlocksVector(out []uint32, src []float32, size int) int { return 0 }

func blockTilesVector(format int, dst []uint8, ldd int, src []float32, ld int, inv []float32, tiles, rows, width, ts, tds int, eps float32, mask uint32) (int, uint32, bool) {
	return 0, 0, false
}
func blockColsVector(format int, dst []uint8, ldd int, src []float32, ld int, inv []float32, rows, n int, eps float32, mask uint32) (int, uint32, int) {
	return 0, 0, 0
}

// hasE2M1Rows: no NVFP4 row kernel on this build.
const hasE2M1Rows = false

func e2m1RowsVector(dst []uint32, codes []uint8, factors []float32, rows, blocks, ld, ldd, fs int) {
	panic("kernels: no vector NVFP4 rows on this build")
}

// nvfp4ColsBF16: this build has no AVX512_BF16 transposing pass.
var nvfp4ColsBF16 = false

func bf16BitsVector(dst []uint16, src []float32) int { return 0 }
