package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
)

// reshapeOp gives x a new shape with the same number of elements; one
// axis may be -1 and is inferred.
type reshapeOp struct{ shape []int }

func (o reshapeOp) Type() string     { return KindReshape.String() }
func (o reshapeOp) Kind() graph.Kind { return KindReshape }
func (o reshapeOp) Attrs() string    { return fmt.Sprintf("to=%v", o.shape) }

func (o reshapeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	s, err := resolveShape(o.shape, in[0].Shape().Numel())
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("input %q %v: %w", in[0].Name(), in[0].Shape(), err)
	}
	return s, in[0].DType(), nil
}

func resolveShape(shape []int, numel int) (graph.Shape, error) {
	s := graph.Shape(shape).Clone()
	infer, known := -1, 1
	for i, d := range s {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d <= 0:
			return nil, fmt.Errorf("bad target shape %v", shape)
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || numel%known != 0 {
			return nil, fmt.Errorf("cannot reshape %d elements to %v", numel, shape)
		}
		s[infer] = numel / known
	}
	if s.Numel() != numel {
		return nil, fmt.Errorf("cannot reshape %d elements to %v", numel, shape)
	}
	return s, nil
}

// AliasOf makes a reshape a view of its input: no copy, no buffer.
func (o reshapeOp) AliasOf(graph.Options) int { return 0 }

// Bind is never called: a reshape is always a view of its input (see
// AliasOf), so it has no kernel of its own.
func (o reshapeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	return nil, fmt.Errorf("a reshape is a view of its input and has no kernel")
}

func (o reshapeOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{Reshape(dy, n.Input(0).Shape()...)}
}

// Reshape returns x with a new shape holding the same elements in the
// same order. One axis may be -1 and is inferred. It returns x itself when
// the shape is unchanged.
func Reshape(x *graph.Node, shape ...int) *graph.Node {
	if x != nil && x.Shape().Equal(shape) {
		return x
	}
	return apply(reshapeOp{append([]int(nil), shape...)}, "", x)
}

// permuteOp reorders axes: output axis i is input axis perm[i].
type permuteOp struct {
	perm []int
	// transpose marks a Transpose of fewer than two axes, refused in
	// Infer with a message that says so.
	transpose bool
}

func (o permuteOp) Type() string     { return KindPermute.String() }
func (o permuteOp) Kind() graph.Kind { return KindPermute }
func (o permuteOp) Attrs() string    { return fmt.Sprintf("perm=%v", o.perm) }

func (o permuteOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	xs := in[0].Shape()
	if o.transpose {
		return nil, graph.Invalid, fmt.Errorf("Transpose swaps the last two axes; %q %v has fewer than two", in[0].Name(), xs)
	}
	if len(o.perm) != len(xs) {
		return nil, graph.Invalid, fmt.Errorf("permutation %v does not fit %q %v", o.perm, in[0].Name(), xs)
	}
	seen := make([]bool, len(xs))
	out := make(graph.Shape, len(xs))
	for i, p := range o.perm {
		if p < 0 || p >= len(xs) || seen[p] {
			return nil, graph.Invalid, fmt.Errorf("%v is not a permutation of %d axes (input %q %v)", o.perm, len(xs), in[0].Name(), xs)
		}
		seen[p] = true
		out[i] = xs[p]
	}
	return out, graph.Float32, nil
}

func (o permuteOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, out := b.In[0].F32, b.Out.F32
	xst := b.In[0].Shape.Strides()
	st := make([]int, len(o.perm))
	for i, p := range o.perm {
		st[i] = xst[p]
	}
	p := newStridedPlan(b.Out.Shape, b.Out.Shape.Strides(), st)
	n, sx := p.n, p.inner[1]
	row := func(oo, ox, _ int) {
		d := out[oo : oo+n]
		if sx == 1 { // the innermost axis stays innermost: rows copy whole
			copy(d, x[ox:ox+n])
			return
		}
		for i := range d {
			d[i] = x[ox+i*sx]
		}
	}
	return func() error { p.each(row); return nil }, nil
}

func (o permuteOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	inv := make([]int, len(o.perm))
	for i, p := range o.perm {
		inv[p] = i
	}
	return []*graph.Node{Permute(dy, inv...)}
}

// Permute reorders the axes of x: output axis i is input axis perm[i].
func Permute(x *graph.Node, perm ...int) *graph.Node {
	return apply(permuteOp{perm: append([]int(nil), perm...)}, "", x)
}

// Transpose swaps the last two axes of x, which must have at least two.
func Transpose(x *graph.Node) *graph.Node {
	if x == nil {
		return nil
	}
	r := x.Shape().Rank()
	if r < 2 {
		return apply(permuteOp{transpose: true}, "", x)
	}
	perm := make([]int, r)
	for i := range perm {
		perm[i] = i
	}
	perm[r-1], perm[r-2] = r-2, r-1
	return Permute(x, perm...)
}
