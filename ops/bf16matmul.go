package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// bf16MatMulOp is a GEMM in bf16 mixed precision: float32 operands, read
// rounded to bfloat16 (nearest even), exact products, float32
// accumulation and output: op(A)·op(B) (+ bias). It is what Accelerate's
// mixed_precision="bf16" does to a linear layer's GEMMs; the float32
// values (master weights, activations) are untouched. On CPUs with
// AVX512_BF16 it runs on the bf16 dot-product kernel.
type bf16MatMulOp struct {
	transA, transB bool
}

func (o bf16MatMulOp) Type() string     { return KindBF16MatMul.String() }
func (o bf16MatMulOp) Kind() graph.Kind { return KindBF16MatMul }
func (o bf16MatMulOp) Attrs() string {
	return transAttrs(o.transA, o.transB)
}

func (o bf16MatMulOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 2 && len(in) != 3 {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want A, B and an optional bias", len(in))
	}
	if err := float32In(in, len(in)); err != nil {
		return nil, graph.Invalid, err
	}
	out, _, n, _, err := gemm2D("BF16MatMul", in[0].Shape(), in[1].Shape(), o.transA, o.transB)
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("%q and %q: %w", in[0].Name(), in[1].Name(), err)
	}
	if len(in) == 3 && !in[2].Shape().Equal(graph.Shape{n}) {
		return nil, graph.Invalid, fmt.Errorf("bias %q is %v, want [%d]", in[2].Name(), in[2].Shape(), n)
	}
	return out, graph.Float32, nil
}

// Bind returns the kernel; the bias is added to each block of C as the
// GEMM finishes it, by the worker that computed it.
func (o bf16MatMulOp) Bind(b *graph.Binding) (graph.Kernel, error) { return o.bind(b, nil) }

// bind is Bind with epi (if not nil) run on each block after the bias.
func (o bf16MatMulOp) bind(b *graph.Binding, epi func(r0, r1, c0, c1 int)) (graph.Kernel, error) {
	_, m, n, k, err := gemm2D("BF16MatMul", b.In[0].Shape, b.In[1].Shape, o.transA, o.transB)
	if err != nil {
		return nil, err
	}
	a, bb, c := &kernels.Operand{F32: b.In[0].F32}, &kernels.Operand{F32: b.In[1].F32}, b.Out.F32
	lda, ldb := k, n
	if o.transA {
		lda = m
	}
	if o.transB {
		ldb = k
	}
	var bias []float32
	if len(b.In) == 3 {
		bias = b.In[2].F32
	}
	g, err := newGemm()
	if err != nil {
		return nil, err
	}
	g.Block = blockEpilogue(c, n, bias, epi)
	tA, tB := o.transA, o.transB
	return func() error {
		g.RunBF16(tA, tB, m, n, k, a, lda, bb, ldb, c, n, kernels.Epilogue{Alpha: 1})
		return nil
	}, nil
}

// BF16MatMul multiplies float32 values in bf16 mixed precision: both
// operands rounded to bfloat16 as they are read, float32 accumulation and
// output, op(a)·op(b) plus bias if it is not nil. Each operand is read as
// its 2-D view [numel/last, last]; when a is not transposed its leading
// axes are kept in the output.
func BF16MatMul(name string, a, b *graph.Node, transA, transB bool, bias *graph.Node) *graph.Node {
	if bias == nil {
		return apply(bf16MatMulOp{transA: transA, transB: transB}, name, a, b)
	}
	return apply(bf16MatMulOp{transA: transA, transB: transB}, name, a, b, bias)
}
