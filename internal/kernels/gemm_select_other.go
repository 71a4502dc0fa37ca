//go:build !amd64 || purego

package kernels

// defaultBF16: the twin is used by default here.
const defaultBF16 = true

// pairsVector has no vector path on this build.
func pairsVector(x *Operand, dst []uint32, o0, o1, n int) int { return 0 }
func groupsVector(x *Operand, dst []uint32, o0, o1, groups, width, stride int) bool {
	return false
}
func stridedPairsVector(x *Operand, dst []uint32, o0, o1, groups, width, stride, sstride int) bool {
	return false
}
func stridedPairsExpVector(x *Operand, dst []uint32, o0, o1, groups, width, stride, sstride int, shifts []uint32) bool {
	return false
}

// splitPairsVector has no vector path on this build.
func splitPairsVector(odd, even, src []uint32) int { return 0 }

// copyRowsVector has no vector path on this build.
func copyRowsVector(dst []float32, w int, src []float32, ld, rows, n int) int { return 0 }

// pack6Vector has no vector path on this build.
func pack6Vector(dst, src []uint32, ld, n int) int { return 0 }

// transposeVector has no vector path on this build.
func transposeVector(dst []uint32, w int, src []uint32, ld, rows, n int) int { return 0 }

// scaleRowVector has no vector path on this build.
func scaleRowVector(row, col []float32, f float64) int { return 0 }

// hasBF16: this build has no AVX512_BF16 kernels.
const hasBF16 = false

// bf16ShiftVector has no vector path on this build.
func bf16ShiftVector(d, shifts []uint32, step int) int                     { return 0 }
func bf16ShiftRunsVector(d []uint32, exp []int8, lanes int) int            { return 0 }
func shiftPeriodVector(d, shifts []uint32) bool                            { return false }
func shiftGroupsVector(d, shifts []uint32, groups, width, stride int) bool { return false }

func e2m1GroupsVector(dst []uint32, a, b []uint8, fa, fb []float32, groups, blocks, stride, cstep int) bool {
	return false
}

// rowsVector and rowsExpVector have no vector path on this build.
func rowsVector(x *Operand, dst []uint32, o, ld, rows, n, ldd int) bool { return false }
func rowsExpVector(x *Operand, dst []uint32, o, ld, rows, n, ldd int, exp []int8, es int) bool {
	return false
}

func groupsExpVector(x *Operand, dst []uint32, o0, o1, groups, width, stride int, shifts []uint32) bool {
	return false
}
