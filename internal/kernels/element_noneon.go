//go:build (!amd64 && !arm64) || purego

package kernels

// These element kernels have no vector path on this build.

func geluVector(y, x []float32) int                                             { return 0 }
func expSumVector(y, x []float32, scale, shift float32) (float32, bool)         { return 0, false }
func rowMaxVector(x []float32) (float32, bool)                                  { return 0, false }
func softmaxGradRowVector(ds, p, dp []float32, d, scale float32) bool           { return false }
func adamVector(w, g, m, v []float32, c *AdamConsts) int                        { return 0 }
func geluGradVector(dx, x, dy []float32) int                                    { return 0 }
func reluGradVector(dx, x, dy []float32) int                                    { return 0 }
func addVector(dst, x, y []float32) bool                                        { return false }
func widenBF16Vector(v []float32, h []uint16) int                               { return 0 }
func decodeFP16Vector(dst []float32, src []uint16, scale float32) int           { return 0 }
func binaryVector(op int, dst, x, y []float32) int                              { return 0 }
func binaryScalarVector(op int, dst, x []float32, c float32) int                { return 0 }
func unaryVector(kind int, y, x []float32) int                                  { return 0 }
func lnSumVector(x []float32, blocks int, mask uint16, lanes *[16]float32) bool { return false }
func lnSqDevVector(x []float32, blocks int, mask uint16, mu float32, lanes *[16]float32) bool {
	return false
}
func lnApplyVector(y, x, gamma, beta []float32, blocks int, mask uint16, mu, r, g0 float32) bool {
	return false
}
func lnGradAccumVector(x, dy, gamma, dgamma, dbeta []float32, blocks int, mask uint16, mu, rs, g0 float32, lanes *[32]float32) bool {
	return false
}
func lnGradDxVector(dx, x, dy, gamma []float32, blocks int, mask uint16, mu, rs, g0, fm, fmx float32) bool {
	return false
}
func rmsApplyVector(y, x, gamma []float32, blocks int, mask uint16, r, g0 float32) bool { return false }
func rmsGradAccumVector(x, dy, gamma, dgamma []float32, blocks int, mask uint16, rs, g0 float32, lanes *[16]float32) bool {
	return false
}
func quantizeFP8Vector(format int, dst []uint8, src []float32, scale float32) (done int, amaxBits uint32) {
	return 0, 0
}
func amaxBitsVector(src []float32) (done int, bits uint32)                      { return 0, 0 }
func reluVector(y, x []float32) bool                                            { return false }
func sigmoidVector(kind int, out, x, y, z, w []float32) int                     { return 0 }
func decodeFP8Vector(format int, dst []float32, src []uint8, scale float32) int { return 0 }
func quantizeFP8LanesVector(format int, dst []uint8, src, scales []float32) (int, uint32) {
	return 0, 0
}
func quantizeFP8ColsVector(format int, dst []uint8, ldd int, src []float32, ld int, scales []float32, rows, n int) int {
	return 0
}
func amaxColsBandVector(acc []uint32, src []float32, ld, rows, n int) (int, uint32) { return 0, 0 }
