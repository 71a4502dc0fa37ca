//go:build (!amd64 && !arm64) || purego

package kernels

func availableKernels() []microKernel { return []microKernel{goKernel} }

// availableBF16Kernels is the pure-Go twin of the AVX512_BF16 kernel:
// slow, but it gives the portable build the same bf16 and FP8 numerics.
func availableBF16Kernels() []bf16Kernel { return []bf16Kernel{goBF16Kernel, goAMXKernel} }
