//go:build (!amd64 && !arm64) || purego

package kernels

// These element kernels have no vector path on this build.

func geluVector(y, x []float32) int                                     { return 0 }
func expSumVector(y, x []float32, scale, shift float32) (float32, bool) { return 0, false }
func rowMaxVector(x []float32) (float32, bool)                          { return 0, false }
func softmaxGradRowVector(ds, p, dp []float32, d, scale float32) bool   { return false }
func adamVector(w, g, m, v []float32, c *AdamConsts) int                { return 0 }
func geluGradVector(dx, x, dy []float32) int                            { return 0 }
func reluGradVector(dx, x, dy []float32) int                            { return 0 }
func addVector(dst, x, y []float32) bool                                { return false }
