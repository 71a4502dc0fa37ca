package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
)

// sliceOp takes x[…, start:end, …] along one axis.
type sliceOp struct {
	axis, start, end int
}

func (o sliceOp) Type() string     { return KindSlice.String() }
func (o sliceOp) Kind() graph.Kind { return KindSlice }
func (o sliceOp) Attrs() string    { return fmt.Sprintf("axis=%d,%d:%d", o.axis, o.start, o.end) }

func (o sliceOp) check(s graph.Shape) (int, error) {
	ax, err := normAxis(o.axis, len(s))
	if err != nil {
		return 0, err
	}
	if o.start < 0 || o.end > s[ax] || o.start >= o.end {
		return 0, fmt.Errorf("range %d:%d is not within axis %d of extent %d", o.start, o.end, ax, s[ax])
	}
	return ax, nil
}

func (o sliceOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	ax, err := o.check(in[0].Shape())
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("input %q %v: %w", in[0].Name(), in[0].Shape(), err)
	}
	out := in[0].Shape().Clone()
	out[ax] = o.end - o.start
	return out, graph.Float32, nil
}

// sliceGeometry returns, for x's shape and the axis, the number of outer
// runs, the run length of x along (axis and inner), the offset of the
// slice in a run and its length.
func sliceGeometry(s graph.Shape, ax, start, end int) (outer, run, off, n int) {
	inner := 1
	for _, d := range s[ax+1:] {
		inner *= d
	}
	outer = 1
	for _, d := range s[:ax] {
		outer *= d
	}
	return outer, s[ax] * inner, start * inner, (end - start) * inner
}

func (o sliceOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	ax, err := o.check(b.In[0].Shape)
	if err != nil {
		return nil, err
	}
	outer, run, off, n := sliceGeometry(b.In[0].Shape, ax, o.start, o.end)
	x, y := b.In[0].F32, b.Out.F32
	return func() error {
		for r := 0; r < outer; r++ {
			copy(y[r*n:(r+1)*n], x[r*run+off:r*run+off+n])
		}
		return nil
	}, nil
}

func (o sliceOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(sliceGradOp{sliceOp: o, shape: n.Input(0).Shape().Clone()}, "", dy)}
}

// sliceGradOp scatters dy into zeros of the sliced tensor's shape.
type sliceGradOp struct {
	sliceOp
	shape graph.Shape
}

func (o sliceGradOp) Type() string     { return KindSliceGrad.String() }
func (o sliceGradOp) Kind() graph.Kind { return KindSliceGrad }

func (o sliceGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	ax, err := o.check(o.shape)
	if err != nil {
		return nil, graph.Invalid, err
	}
	want := o.shape.Clone()
	want[ax] = o.end - o.start
	if !in[0].Shape().Equal(want) {
		return nil, graph.Invalid, fmt.Errorf("gradient %q is %v, want %v", in[0].Name(), in[0].Shape(), want)
	}
	return o.shape.Clone(), graph.Float32, nil
}

func (o sliceGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	ax, err := o.check(o.shape)
	if err != nil {
		return nil, err
	}
	outer, run, off, n := sliceGeometry(o.shape, ax, o.start, o.end)
	dy, dx := b.In[0].F32, b.Out.F32
	return func() error {
		clear(dx)
		for r := 0; r < outer; r++ {
			copy(dx[r*run+off:r*run+off+n], dy[r*n:(r+1)*n])
		}
		return nil
	}, nil
}

func (o sliceGradOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{Slice(dy, o.axis, o.start, o.end)}
}

// Slice returns x[…, start:end, …] along axis (negative axes count from
// the end).
func Slice(x *graph.Node, axis, start, end int) *graph.Node {
	return apply(sliceOp{axis: axis, start: start, end: end}, "", x)
}
