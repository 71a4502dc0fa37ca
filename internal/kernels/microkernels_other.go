//go:build (!amd64 && !arm64) || purego

package kernels

func availableKernels() []microKernel { return []microKernel{goKernel} }
