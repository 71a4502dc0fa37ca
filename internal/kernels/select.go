package kernels

import (
	"fmt"
	"os"
	"strings"
)

// KernelEnv names the environment variable that chooses micro-kernels:
// a comma-separated list of kernel names (spaces may be written as
// underscores), each naming a float32 kernel ("avx512 8x48", "avx512
// 12x32", "avx2 6x16", "neon 8x12", "go 4x4") or a bf16 kernel
// ("avx512bf16 12x32", "avx512bf16 8x48", "avx2 bf16 6x16", "neon bf16
// 8x8", "go bf16 4x16"), or "fp32",
// which turns the bf16 kernels off (FP8 GEMMs then decode to float32 and
// sum in float32 order, which gives other bits than the bf16 kernels).
// Only kernels this CPU can run are accepted; CheckEnv reports anything
// else.
const KernelEnv = "OCTET_GEMM_KERNEL"

// Available lists the kernels this CPU can run, by the names KernelEnv
// takes: the float32 kernels, then the bf16 ones, then "fp32" (no bf16
// kernel).
func Available() []string {
	var names []string
	for _, k := range availableKernels() {
		names = append(names, k.name)
	}
	for _, k := range availableBF16Kernels() {
		names = append(names, k.name)
	}
	return append(names, "fp32")
}

// CheckEnv reports an invalid KernelEnv value, listing the values this
// CPU accepts. The kernels stay at their defaults when it is invalid, so
// callers (graph.Compile) refuse to run instead.
func CheckEnv() error { return envErr }

// chooseKernels picks the micro-kernels: those KernelEnv names, or else
// the first candidate of each kind (the lists are ordered by measured
// speed, fastest first), the bf16 one only if useBF16 (otherwise there
// is no bf16 kernel unless KernelEnv names one).
func chooseKernels(f32 []microKernel, b16 []bf16Kernel, useBF16 bool) (microKernel, *bf16Kernel, error) {
	k := f32[0]
	var k16 *bf16Kernel
	if len(b16) > 0 && useBF16 {
		k16 = &b16[0]
	}
	def := k16
	env := os.Getenv(KernelEnv)
	if env == "" {
		return k, k16, nil
	}
	valid := []string{"fp32"}
	for _, c := range f32 {
		valid = append(valid, c.name)
	}
	for _, c := range b16 {
		valid = append(valid, c.name)
	}
	for _, item := range strings.Split(env, ",") {
		want := strings.TrimSpace(strings.ReplaceAll(item, "_", " "))
		found := false
		if want == "fp32" {
			k16, found = nil, true
		}
		for _, c := range f32 {
			if c.name == want {
				k, found = c, true
			}
		}
		for i, c := range b16 {
			if c.name == want {
				k16, found = &b16[i], true
			}
		}
		if !found {
			return f32[0], def, fmt.Errorf("kernels: %s=%q: unknown or unsupported kernel %q; this CPU accepts a comma-separated list of: %s",
				KernelEnv, env, strings.TrimSpace(item), strings.Join(valid, ", "))
		}
	}
	return k, k16, nil
}

var kern, kern16, envErr = chooseKernels(availableKernels(), availableBF16Kernels(), defaultBF16)

// Family names the instruction set the element and row kernels use on
// this CPU: "AVX-512", "AVX2+FMA", "NEON" or "portable Go".
func Family() string {
	switch {
	case hasAVX512:
		return "AVX-512"
	case hasAVX2:
		return "AVX2+FMA"
	case hasNEON:
		return "NEON"
	}
	return "portable Go"
}

// LowPrecisionFaster reports whether the bf16 kernel in use multiplies
// bf16 pairs on a dot-product unit (AVX512_BF16's VDPBF16PS or AMX), the
// only case where bf16 and FP8 GEMMs outrun float32 ones; elsewhere they
// run at about float32's speed and save memory, not time.
func LowPrecisionFaster() bool {
	return kern16 != nil && (kern16.tiles != nil && kern16.name != goAMXKernel.name || strings.HasPrefix(kern16.name, "avx512bf16"))
}
