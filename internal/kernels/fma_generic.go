//go:build !arm64

package kernels

// fma32 is a·b + c rounded once to nearest even (fma32Emulated).
func fma32(a, b, c float32) float32 { return fma32Emulated(a, b, c) }
