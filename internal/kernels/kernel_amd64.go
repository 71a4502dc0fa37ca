//go:build amd64 && !purego

package kernels

import (
	"golang.org/x/sys/cpu"
)

//go:generate sh -c "cd asmgen && go run . -pkg kernels -out ../gemm_amd64.s -stubs ../gemm_stubs_amd64.go"

// The assembly kernels read and write through raw pointers; the wrappers
// touch the last element of each slice first (k ≥ 1 always) so that a
// short slice panics in Go instead of corrupting memory.

var avx512Kernel = microKernel{name: "avx512 12x32", mr: 12, nr: 32,
	run: func(k int, a, b, c []float32, ldc int, alpha float32) {
		_, _, _ = a[12*k-1], b[32*k-1], c[11*ldc+31]
		sgemmKernelAVX512(k, &a[0], &b[0], &c[0], ldc, alpha)
	}}

var avx512x48Kernel = microKernel{name: "avx512 8x48", mr: 8, nr: 48,
	run: func(k int, a, b, c []float32, ldc int, alpha float32) {
		_, _, _ = a[8*k-1], b[48*k-1], c[7*ldc+47]
		sgemmKernelAVX512x48(k, &a[0], &b[0], &c[0], ldc, alpha)
	}}

var avx2Kernel = microKernel{name: "avx2 6x16", mr: 6, nr: 16,
	run: func(k int, a, b, c []float32, ldc int, alpha float32) {
		_, _, _ = a[6*k-1], b[16*k-1], c[5*ldc+15]
		sgemmKernelAVX2(k, &a[0], &b[0], &c[0], ldc, alpha)
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

var kern = chooseKernel(availableKernels())
