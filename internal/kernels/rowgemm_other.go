//go:build (!amd64 && !arm64) || purego

package kernels

// rowGemmVector has no vector path on this build.
func rowGemmVector(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, add []float32, ldadd int, alpha float32) bool {
	return false
}
