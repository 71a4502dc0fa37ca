package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// reduceOp sums (or averages) x over axes. SumTo gives the target shape
// instead: x is summed down to "to", undoing a broadcast.
type reduceOp struct {
	name     string // "Sum", "Mean" or "SumTo" (its kind's name)
	axes     []int  // all axes when empty (Sum, Mean)
	keepDims bool
	mean     bool
	to       graph.Shape // SumTo's target
}

func (o reduceOp) Type() string { return o.name }
func (o reduceOp) Kind() graph.Kind {
	switch o.name {
	case "Sum":
		return KindSum
	case "Mean":
		return KindMean
	}
	return KindSumTo
}
func (o reduceOp) Attrs() string {
	switch {
	case o.name == "SumTo":
		return "to=" + o.to.String()
	case len(o.axes) == 0:
		return "axes=all"
	}
	return fmt.Sprintf("axes=%v", o.axes)
}

// shapes returns the shape of the result with reduced axes kept (keep)
// and the output shape.
func (o reduceOp) shapes(xs graph.Shape) (keep, out graph.Shape, err error) {
	if o.name == "SumTo" {
		off := len(xs) - len(o.to)
		if off < 0 {
			return nil, nil, fmt.Errorf("cannot sum %v down to %v", xs, o.to)
		}
		keep = make(graph.Shape, len(xs))
		for i := range keep {
			keep[i] = 1
			if j := i - off; j >= 0 {
				keep[i] = o.to[j]
				if keep[i] != 1 && keep[i] != xs[i] {
					return nil, nil, fmt.Errorf("cannot sum %v down to %v", xs, o.to)
				}
			}
		}
		return keep, o.to.Clone(), nil
	}
	reduced := make([]bool, len(xs))
	for _, a := range o.axes {
		ax, err := normAxis(a, len(xs))
		if err != nil {
			return nil, nil, err
		}
		if reduced[ax] {
			return nil, nil, fmt.Errorf("axis %d is listed twice in %v", a, o.axes)
		}
		reduced[ax] = true
	}
	keep = xs.Clone()
	out = graph.Shape{}
	for i := range xs {
		if len(o.axes) == 0 || reduced[i] {
			keep[i] = 1
			if !o.keepDims {
				continue
			}
		}
		out = append(out, keep[i])
	}
	return keep, out, nil
}

func (o reduceOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	_, out, err := o.shapes(in[0].Shape())
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("input %q: %w", in[0].Name(), err)
	}
	return out, graph.Float32, nil
}

func (o reduceOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	xs := b.In[0].Shape
	x, out := b.In[0].F32, b.Out.F32
	keep, _, err := o.shapes(xs)
	if err != nil {
		return nil, err
	}
	if rows, cols, ok := leadingSum(xs, keep); ok && !o.mean {
		return columnSums(x, out, rows, cols), nil
	}
	p := newStridedPlan(xs, xs.Strides(), broadcastStrides(keep, xs))
	n, so := p.n, p.inner[1]
	row := func(ox, oo, _ int) {
		r := x[ox : ox+n]
		if so == 0 {
			var s float64
			for _, v := range r {
				s += float64(v)
			}
			out[oo] += float32(s)
			return
		}
		d := out[oo : oo+n]
		for i, v := range r {
			d[i] += v
		}
	}
	scale := float32(1)
	if o.mean {
		scale = float32(len(out)) / float32(len(x))
	}
	return func() error {
		clear(out)
		p.each(row)
		if scale != 1 {
			kernels.Scale(out, scale)
		}
		return nil
	}, nil
}

// leadingSum reports whether reducing xs to keep sums whole leading axes
// only — x viewed as a [rows, cols] matrix summed down its columns, as a
// bias gradient is — and returns rows and cols.
func leadingSum(xs, keep graph.Shape) (rows, cols int, ok bool) {
	lead := 0
	for lead < len(xs) && keep[lead] == 1 {
		lead++
	}
	if lead == 0 || lead == len(xs) {
		return 0, 0, false
	}
	for i := lead; i < len(xs); i++ {
		if keep[i] != xs[i] {
			return 0, 0, false
		}
	}
	cols = xs[lead:].Numel()
	return xs.Numel() / max(cols, 1), cols, cols > 0
}

// columnSums returns the kernel that writes out[j] = Σ_r x[r·cols + j]:
// the rows added in order (the vector kernels' fused 1·x + s is exactly
// x + s), the columns spread over the workers.
func columnSums(x, out []float32, rows, cols int) graph.Kernel {
	one := []float32{1}
	return newChunkerCost(cols, rows*cols, func(lo, hi int) {
		kernels.RowGemm(1, hi-lo, rows, one, 0, 0, x[lo:], cols, out[lo:hi], cols, false)
	}).kernel()
}

func (o reduceOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	x := n.Input(0)
	keep, _, _ := o.shapes(x.Shape())
	g := Reshape(dy, keep...)
	if o.mean {
		g = Scale(g, float32(keep.Numel())/float32(x.Shape().Numel()))
	}
	return []*graph.Node{BroadcastTo(g, x.Shape())}
}

// broadcastToOp stretches x to a shape it broadcasts to.
type broadcastToOp struct{ shape graph.Shape }

func (o broadcastToOp) Type() string     { return KindBroadcastTo.String() }
func (o broadcastToOp) Kind() graph.Kind { return KindBroadcastTo }
func (o broadcastToOp) Attrs() string    { return "to=" + o.shape.String() }

func (o broadcastToOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	s, err := graph.Broadcast(in[0].Shape(), o.shape)
	if err != nil || !s.Equal(o.shape) {
		return nil, graph.Invalid, fmt.Errorf("cannot broadcast %q %v to %v", in[0].Name(), in[0].Shape(), o.shape)
	}
	return o.shape.Clone(), graph.Float32, nil
}

func (o broadcastToOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, out := b.In[0].F32, b.Out.F32
	p := newStridedPlan(o.shape, o.shape.Strides(), broadcastStrides(b.In[0].Shape, o.shape))
	n, sx := p.n, p.inner[1]
	row := func(oo, ox, _ int) {
		d := out[oo : oo+n]
		if sx == 0 {
			v := x[ox]
			for i := range d {
				d[i] = v
			}
			return
		}
		copy(d, x[ox:ox+n])
	}
	return func() error { p.each(row); return nil }, nil
}

func (o broadcastToOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{SumTo(dy, n.Input(0).Shape())}
}

// BroadcastTo stretches x to shape (numpy broadcasting rules).
func BroadcastTo(x *graph.Node, shape graph.Shape) *graph.Node {
	if x != nil && x.Shape().Equal(shape) {
		return x
	}
	return apply(broadcastToOp{shape.Clone()}, "", x)
}

// SumTo sums x down to shape, the inverse of broadcasting x from shape:
// leading axes x has and shape lacks are summed away, and so are axes
// where shape has extent 1. It returns x itself when the shapes match.
func SumTo(x *graph.Node, shape graph.Shape) *graph.Node {
	if x != nil && x.Shape().Equal(shape) {
		return x
	}
	return apply(reduceOp{name: "SumTo", to: shape.Clone()}, "", x)
}

// Sum returns the sum of x over axes (all axes if none are given),
// dropping the reduced axes. Negative axes count from the end.
func Sum(x *graph.Node, axes ...int) *graph.Node {
	return apply(reduceOp{name: "Sum", axes: axes}, "", x)
}

// SumKeepDims is Sum keeping the reduced axes with extent 1.
func SumKeepDims(x *graph.Node, axes ...int) *graph.Node {
	return apply(reduceOp{name: "Sum", axes: axes, keepDims: true}, "", x)
}

// Mean returns the mean of x over axes (all axes if none are given),
// dropping the reduced axes.
func Mean(x *graph.Node, axes ...int) *graph.Node {
	return apply(reduceOp{name: "Mean", axes: axes, mean: true}, "", x)
}

// MeanKeepDims is Mean keeping the reduced axes with extent 1.
func MeanKeepDims(x *graph.Node, axes ...int) *graph.Node {
	return apply(reduceOp{name: "Mean", axes: axes, mean: true, keepDims: true}, "", x)
}
