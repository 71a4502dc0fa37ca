package ops

import "github.com/octetml/octet/internal/kernels"

// FastTanhForTest exposes the kernels' tanh to the external tests.
var FastTanhForTest = kernels.FastTanh

// GELUForTest runs the GELU kernel over x (vector head, Go tail).
func GELUForTest(x []float32) []float32 {
	y := make([]float32, len(x))
	op := unaryOp{kind: kindGELU}
	k, _ := op.bindSlices(x, y)
	k()
	return y
}

// GELUGradForTest runs the GELU gradient kernel.
func GELUGradForTest(x, dy []float32) []float32 { return unaryGradForTest(kindGELU, x, dy) }

// ReLUGradForTest runs the ReLU gradient kernel.
func ReLUGradForTest(x, dy []float32) []float32 { return unaryGradForTest(kindReLU, x, dy) }

func unaryGradForTest(kind unaryKind, x, dy []float32) []float32 {
	dx := make([]float32, len(x))
	k, _ := unaryGradOp{kind: kind}.bindSlices(x, dy, dx)
	k()
	return dx
}
