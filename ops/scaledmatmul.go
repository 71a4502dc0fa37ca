package ops

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// scaledMatMulOp multiplies FP8 operands with float32 accumulation:
// op(A)·op(B) (+ bias), float32 out. A may have rank > 2 when not
// transposed (its leading axes are flattened, as in Linear).
type scaledMatMulOp struct {
	transA, transB bool
}

func (o scaledMatMulOp) Type() string     { return KindScaledMatMul.String() }
func (o scaledMatMulOp) Kind() graph.Kind { return KindScaledMatMul }
func (o scaledMatMulOp) Attrs() string {
	return transAttrs(o.transA, o.transB)
}

// dims reads each operand as its 2-D view [numel/last, last]; the
// output keeps A's leading axes when A is not transposed.
func (o scaledMatMulOp) dims(as, bs graph.Shape) (out graph.Shape, m, n, k int, err error) {
	return gemm2D("ScaledMatMul", as, bs, o.transA, o.transB)
}

// gemm2D is the shape rule of the GEMMs the passes emit (ScaledMatMul,
// BF16MatMul): each operand read as its 2-D view [numel/last, last],
// op(A)·op(B), the output keeping A's leading axes when A is not
// transposed.
func gemm2D(op string, as, bs graph.Shape, transA, transB bool) (out graph.Shape, m, n, k int, err error) {
	if len(as) < 2 || len(bs) < 2 {
		return nil, 0, 0, 0, fmt.Errorf("%s wants operands of rank ≥ 2, got %v and %v", op, as, bs)
	}
	ar, ac := view2D(as)
	br, bc := view2D(bs)
	m, k = ar, ac
	if transA {
		m, k = ac, ar
	}
	kb, n := br, bc
	if transB {
		kb, n = bc, br
	}
	if k != kb {
		return nil, 0, 0, 0, fmt.Errorf("inner dimensions differ: %v%s · %v%s (%d vs %d)", as, tmark(transA), bs, tmark(transB), k, kb)
	}
	if !transA && len(as) > 2 {
		return append(as[:len(as)-1].Clone(), n), m, n, k, nil
	}
	return graph.Shape{m, n}, m, n, k, nil
}

func (o scaledMatMulOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 2 && len(in) != 3 {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want A, B and an optional bias", len(in))
	}
	for i := 0; i < 2; i++ {
		if !in[i].DType().IsQuantized() {
			return nil, graph.Invalid, fmt.Errorf("operand %d %q is %v, want an FP8 or NVFP4 dtype", i, in[i].Name(), in[i].DType())
		}
	}
	out, _, n, _, err := o.dims(in[0].Shape(), in[1].Shape())
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("%q and %q: %w", in[0].Name(), in[1].Name(), err)
	}
	if len(in) == 3 {
		if in[2].DType() != graph.Float32 || !in[2].Shape().Equal(graph.Shape{n}) {
			return nil, graph.Invalid, fmt.Errorf("bias %q is %v %v, want float32 [%d]", in[2].Name(), in[2].Shape(), in[2].DType(), n)
		}
	}
	return out, graph.Float32, nil
}

// checkAxis verifies that an axiswise or block-scaled operand was cast
// along the contraction dimension of this GEMM.
func checkAxis(name string, sc *fp8Scales, wantAxis int) error {
	if sc.Config.AlongAxis() && sc.Config.Axis != wantAxis {
		return fmt.Errorf("operand %s was cast with %v scales along axis %d, but this GEMM contracts along axis %d", name, sc.Config.Scaling(), sc.Config.Axis, wantAxis)
	}
	return nil
}

// Bind returns the kernel; the bias is added to each block of C as the
// GEMM finishes it, by the worker that computed it.
func (o scaledMatMulOp) Bind(b *graph.Binding) (graph.Kernel, error) { return o.bind(b, nil) }

// bind is Bind with epi (if not nil) run on each block after the bias.
func (o scaledMatMulOp) bind(b *graph.Binding, epi func(r0, r1, c0, c1 int)) (graph.Kernel, error) {
	_, m, n, k, err := o.dims(b.In[0].Shape, b.In[1].Shape)
	if err != nil {
		return nil, err
	}
	sa, okA := graph.Meta(b.In[0], scalesKey)
	sb, okB := graph.Meta(b.In[1], scalesKey)
	if !okA || !okB {
		return nil, fmt.Errorf("operands must come from Quantize nodes (they carry the scales)")
	}
	axisA, axisB := 1, 0
	if o.transA {
		axisA = 0
	}
	if o.transB {
		axisB = 1
	}
	if err := checkAxis("A", sa, axisA); err != nil {
		return nil, err
	}
	if err := checkAxis("B", sb, axisB); err != nil {
		return nil, err
	}
	for _, k := range []fp8.QuantizerKind{fp8.MXFP8Blocks, fp8.NVFP4Blocks, fp8.Float8Blocks} {
		if (sa.Config.Kind == k) != (sb.Config.Kind == k) {
			return nil, fmt.Errorf("%v needs both operands cast by it (A is %v, B is %v)", k, sa.Config.Scaling(), sb.Config.Scaling())
		}
	}
	if sa.Config.Kind == fp8.Float8Blocks && sa.Config.BlockDim == 2 && sb.Config.BlockDim == 2 {
		return nil, fmt.Errorf("both operands have 128×128 Float8BlockScaling tiles; a 2-D operand multiplies only a 1-D one")
	}
	a, bb, c := b.In[0].U8, b.In[1].U8, b.Out.F32
	var bias []float32
	if len(b.In) == 3 {
		bias = b.In[2].F32
	}
	if err := kernels.CheckEnv(); err != nil {
		return nil, err
	}
	g := fp8.NewScaledGEMM()
	g.Block = blockEpilogue(c, n, bias, epi)
	tA, tB := o.transA, o.transB
	return func() error {
		return g.Run(m, n, k, sa.Operand(a, tA, tA), sb.Operand(bb, tB, !tB), c)
	}, nil
}

// blockEpilogue returns the function a GEMM runs on each finished block
// of c (rows n long): the bias added to its rows, then epi; nil when
// there is neither.
func blockEpilogue(c []float32, n int, bias []float32, epi func(r0, r1, c0, c1 int)) func(r0, r1, c0, c1 int) {
	if bias == nil {
		return epi
	}
	return func(r0, r1, c0, c1 int) {
		kernels.AddBias(c, n, bias, r0, r1, c0, c1)
		if epi != nil {
			epi(r0, r1, c0, c1)
		}
	}
}

// ScaledMatMul multiplies FP8 values (outputs of Quantize or
// LayerNormQuantize) with float32 accumulation and output: op(a)·op(b),
// plus bias if it is not nil. Each operand is read as its 2-D view
// [numel/last, last]; when a is not transposed its leading axes are kept
// in the output. Axiswise and MXFP8 operands must have been cast along
// the contraction dimension.
func ScaledMatMul(name string, a, b *graph.Node, transA, transB bool, bias *graph.Node) *graph.Node {
	if bias == nil {
		return apply(scaledMatMulOp{transA: transA, transB: transB}, name, a, b)
	}
	return apply(scaledMatMulOp{transA: transA, transB: transB}, name, a, b, bias)
}
