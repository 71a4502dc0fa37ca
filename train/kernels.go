package train

import (
	"fmt"

	"github.com/octetml/octet/internal/kernels"
)

// KernelInfo says which kernels run this process's GEMMs and
// element-wise work, chosen at start-up from the CPU's features (or
// forced with OCTET_GEMM_KERNEL). Every choice gives the same bits;
// they differ in speed.
type KernelInfo struct {
	// Family is the instruction set of the element and row kernels:
	// "AVX-512", "AVX2+FMA", "NEON" (arm64) or "portable Go".
	Family string
	// GEMM and GEMMBF16 name the float32 and bf16 micro-kernels
	// ("avx512 8x48", "avx2 bf16 6x16", …; GEMMBF16 "none" when
	// OCTET_GEMM_KERNEL=fp32 turned the bf16 kernels off).
	GEMM, GEMMBF16 string
	// LowPrecisionFaster reports whether bf16 and FP8 GEMMs run on a
	// bf16 dot-product unit (AVX512_BF16 or AMX) and so outrun float32
	// ones. Without one they take about as long as float32: FP8 then
	// saves memory and bandwidth, not time.
	LowPrecisionFaster bool
	// Available lists the kernel names this CPU accepts in
	// OCTET_GEMM_KERNEL.
	Available []string
}

// Kernels describes the kernels in use.
func Kernels() KernelInfo {
	return KernelInfo{Family: kernels.Family(), GEMM: kernels.Kernel(), GEMMBF16: kernels.KernelBF16(),
		LowPrecisionFaster: kernels.LowPrecisionFaster(), Available: kernels.Available()}
}

// String is one line: "AVX2+FMA kernels (GEMM avx2 6x16, bf16 avx2 bf16
// 6x16)".
func (k KernelInfo) String() string {
	return fmt.Sprintf("%s kernels (GEMM %s, bf16 %s)", k.Family, k.GEMM, k.GEMMBF16)
}

// Note is what a run in precision ("bf16", "fp8", "fp32"/"no") should
// know about this CPU: for bf16 and FP8 without a bf16 dot-product
// unit, that they will not run faster than float32 here; "" otherwise.
func (k KernelInfo) Note(precision string) string {
	if k.LowPrecisionFaster || (precision != "bf16" && precision != "fp8") {
		return ""
	}
	if k.Family == "NEON" {
		return fmt.Sprintf("%s: on arm64 the %s GEMMs are NEON FMLAs that emulate VDPBF16PS's order and denormal flushing (arm64's BFDOT rounds otherwise), so that the results are the same bits as on any other machine; they are not faster than float32 here, and %s saves memory and bandwidth, not time", k, precision, precision)
	}
	return fmt.Sprintf("%s: no bf16 dot-product unit (AVX512_BF16 or AMX) on this CPU, so %s GEMMs take about as long as float32 ones here; %s saves memory and bandwidth, not time (the results are the same bits as on any other machine)", k, precision, precision)
}
