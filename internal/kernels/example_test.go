package kernels_test

import (
	"fmt"

	"github.com/octetml/octet/internal/kernels"
)

// A bf16 GEMM reads its float32 operands rounded to bfloat16 (8
// significant bits): 1 + 2^-9 is read as 1, while 1.5 is exact; the
// products are exact and accumulate in float32.
func ExampleGemm_RunBF16() {
	a := []float32{1 + 1.0/512, 1.5} // 1×2
	b := []float32{3, 2}             // 2×1
	c := make([]float32, 1)
	g := kernels.NewGemm()
	g.RunBF16(false, false, 1, 1, 2, &kernels.Operand{F32: a}, 2, &kernels.Operand{F32: b}, 1, c, 1, kernels.Epilogue{Alpha: 1})
	fmt.Println(c[0], kernels.BF16ToFloat32(kernels.BF16FromFloat32(a[0])))
	// Output: 6 1
}
