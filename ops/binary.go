package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

type binaryKind uint8

const (
	kindAdd binaryKind = iota
	kindSub
	kindMul
	kindDiv
)

// binaryOp is an elementwise function of two float32 inputs, broadcast
// by graph.ImplicitBroadcast's rule.
type binaryOp struct{ kind binaryKind }

func (o binaryOp) Type() string     { return o.Kind().String() }
func (o binaryOp) Kind() graph.Kind { return binaryKinds[o.kind] }

func (o binaryOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	s, err := graph.ImplicitBroadcast(in[0].Shape(), in[1].Shape())
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("%q %v and %q %v: %w", in[0].Name(), in[0].Shape(), in[1].Name(), in[1].Shape(), err)
	}
	return s, graph.Float32, nil
}

func (o binaryOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	out := b.Out.F32
	av, bv := b.In[0], b.In[1]
	x, y := av.F32, bv.F32
	if av.Shape.Equal(b.Out.Shape) && bv.Shape.Equal(b.Out.Shape) {
		// Split over the workers in runs of 16 values.
		x, y = x[:len(out)], y[:len(out)]
		kind := o.kind
		c := newChunkerCost((len(out)+15)/16, len(out), func(lo, hi int) {
			lo, hi = 16*lo, min(len(out), 16*hi)
			binaryRow(kind, out[lo:hi], x[lo:hi], y[lo:hi], 1, 1)
		})
		return c.kernel(), nil
	}
	p := newStridedPlan(b.Out.Shape, b.Out.Shape.Strides(), broadcastStrides(av.Shape, b.Out.Shape), broadcastStrides(bv.Shape, b.Out.Shape))
	n, sa, sb := p.n, p.inner[1], p.inner[2]
	kind := o.kind
	row := func(oo, oa, ob int) {
		binaryRow(kind, out[oo:oo+n], x[oa:], y[ob:], sa, sb)
	}
	return func() error { p.each(row); return nil }, nil
}

// ChainStep makes Add, Sub and Mul steps of fused chains (the running
// value either operand; Div is not fused), with the loops of their own
// kernel.
func (o binaryOp) ChainStep(n *graph.Node, vi int) (ChainStep, bool) {
	kind := o.kind
	switch {
	case kind == kindAdd || kind == kindMul:
		return ChainStep{Name: o.Type(), Operand: 1 - vi, Apply: func(v, a []float32, _ bool) { binaryRow(kind, v, v, a, 1, 1) }}, true
	case kind == kindSub && vi == 0:
		return ChainStep{Name: "Sub", Operand: 1, Apply: func(v, a []float32, _ bool) { binaryRow(kindSub, v, v, a, 1, 1) }}, true
	case kind == kindSub:
		return ChainStep{Name: "RSub", Operand: 0, Apply: func(v, a []float32, _ bool) { binaryRow(kindSub, v, a, v, 1, 1) }}, true
	}
	return ChainStep{}, false
}

// kernelOps maps the binary kinds to the kernels' operations.
var kernelOps = [...]int{kindAdd: kernels.OpAdd, kindSub: kernels.OpSub, kindMul: kernels.OpMul, kindDiv: kernels.OpDiv}

// binaryRow computes out[i] = x[i·sa] ∘ y[i·sb].
func binaryRow(kind binaryKind, out, x, y []float32, sa, sb int) {
	switch {
	case sa == 1 && sb == 1:
		kernels.Binary(kernelOps[kind], out, x, y)
	case sa == 1 && sb == 0:
		kernels.BinaryScalar(kernelOps[kind], out, x, y[0])
	default:
		for i := range out {
			a, b := x[i*sa], y[i*sb]
			switch kind {
			case kindAdd:
				out[i] = a + b
			case kindSub:
				out[i] = a - b
			case kindMul:
				out[i] = a * b
			case kindDiv:
				out[i] = a / b
			}
		}
	}
}

func (o binaryOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	a, b := n.Input(0), n.Input(1)
	gs := make([]*graph.Node, 2)
	switch o.kind {
	case kindAdd:
		gs[0], gs[1] = SumTo(dy, a.Shape()), SumTo(dy, b.Shape())
	case kindSub:
		gs[0] = SumTo(dy, a.Shape())
		if need[1] {
			gs[1] = SumTo(Neg(dy), b.Shape())
		}
	case kindMul:
		if need[0] {
			gs[0] = SumTo(Mul(dy, b), a.Shape())
		}
		if need[1] {
			gs[1] = SumTo(Mul(dy, a), b.Shape())
		}
	case kindDiv:
		if need[0] {
			gs[0] = SumTo(Div(dy, b), a.Shape())
		}
		if need[1] { // d(a/b)/db = -(a/b)/b
			gs[1] = SumTo(Neg(Div(Mul(dy, n), b)), b.Shape())
		}
	}
	if !need[0] {
		gs[0] = nil
	}
	if !need[1] {
		gs[1] = nil
	}
	return gs
}

// Add returns a + b, broadcast by graph.ImplicitBroadcast's rule (an error
// naming both nodes for operands of different ranks that would stretch).
func Add(a, b *graph.Node) *graph.Node { return apply(binaryOp{kindAdd}, "", a, b) }

// Sub returns a - b, broadcast as Add.
func Sub(a, b *graph.Node) *graph.Node { return apply(binaryOp{kindSub}, "", a, b) }

// Mul returns a · b elementwise, broadcast as Add.
func Mul(a, b *graph.Node) *graph.Node { return apply(binaryOp{kindMul}, "", a, b) }

// Div returns a / b elementwise, broadcast as Add.
func Div(a, b *graph.Node) *graph.Node { return apply(binaryOp{kindDiv}, "", a, b) }

func shapeMismatch(a, b *graph.Node) error {
	return fmt.Errorf("shape of %q %v differs from %q %v", a.Name(), a.Shape(), b.Name(), b.Shape())
}
