package graph

import (
	"fmt"
	"strconv"

	"github.com/octetml/octet/internal/parallel"
)

// inputOp is a value fed at run time.
type inputOp struct {
	dt    DType
	shape Shape
}

func (inputOp) Type() string { return KindInput.String() }
func (inputOp) Kind() Kind   { return KindInput }
func (o inputOp) Infer([]*Node) (Shape, DType, error) {
	if !o.dt.Valid() {
		return nil, Invalid, fmt.Errorf("unknown dtype %v", o.dt)
	}
	return o.shape, o.dt, nil
}
func (inputOp) Bind(*Binding) (Kernel, error) { return nil, nil }

// paramOp is a float32 parameter held in a Store.
type paramOp struct{ shape Shape }

func (paramOp) Type() string                          { return KindParam.String() }
func (paramOp) Kind() Kind                            { return KindParam }
func (o paramOp) Infer([]*Node) (Shape, DType, error) { return o.shape, Float32, nil }
func (paramOp) Bind(*Binding) (Kernel, error)         { return nil, nil }

// fillOp is a constant.
type fillOp struct {
	v     float32
	shape Shape
}

func (fillOp) Type() string                          { return KindFill.String() }
func (fillOp) Kind() Kind                            { return KindFill }
func (o fillOp) Attrs() string                       { return "value=" + strconv.FormatFloat(float64(o.v), 'g', -1, 32) }
func (o fillOp) Infer([]*Node) (Shape, DType, error) { return o.shape, Float32, nil }
func (o fillOp) Bind(b *Binding) (Kernel, error) {
	out := b.Out.F32
	v := o.v
	return func() error {
		for i := range out {
			out[i] = v
		}
		return nil
	}, nil
}

// addNOp sums inputs of one shape; Grad uses it to accumulate the
// gradients of a node used several times.
type addNOp struct{}

func (addNOp) Type() string { return KindAddN.String() }
func (addNOp) Kind() Kind   { return KindAddN }
func (addNOp) Infer(in []*Node) (Shape, DType, error) {
	if len(in) == 0 {
		return nil, Invalid, fmt.Errorf("no inputs")
	}
	for _, x := range in[1:] {
		if !x.shape.Equal(in[0].shape) || x.dtype != Float32 {
			return nil, Invalid, fmt.Errorf("input %q %v %v differs from %q %v %v",
				x.name, x.shape, x.dtype, in[0].name, in[0].shape, in[0].dtype)
		}
	}
	return in[0].shape, Float32, nil
}
func (addNOp) Bind(b *Binding) (Kernel, error) {
	out := b.Out.F32
	ins := make([][]float32, len(b.In))
	for i, v := range b.In {
		ins[i] = v.F32[:len(out)]
	}
	// ((in0 + in1) + in2) + … element by element, with Options.Sums
	// (the vector kernels under passes.Prepare) or in plain Go, split
	// over the workers in runs of 16 values.
	var sums Sums = goSums{}
	if b.Options.Sums != nil {
		sums = b.Options.Sums
	}
	units, parts := (len(out)+15)/16, 1
	if len(out) >= addNParallelMin {
		parts = parallel.Workers()
	}
	var group parallel.Group
	run := func(p int) {
		lo, hi := parallel.Share(units, p, parts)
		lo, hi = 16*lo, min(len(out), 16*hi)
		o := out[lo:hi]
		if len(ins) == 1 {
			copy(o, ins[0][lo:hi])
			return
		}
		sums.Add(o, ins[0][lo:hi], ins[1][lo:hi])
		for _, x := range ins[2:] {
			sums.AddTo(o, x[lo:hi])
		}
	}
	return func() error { group.For(parts, run); return nil }, nil
}

// addNParallelMin is the element count from which AddN splits its sum
// over the workers.
const addNParallelMin = 1 << 15

func (addNOp) Grad(n, dy *Node, need []bool) []*Node {
	gs := make([]*Node, len(n.inputs))
	for i := range gs {
		gs[i] = dy
	}
	return gs
}

// AddN returns the elementwise sum of nodes of one shape.
func AddN(name string, xs ...*Node) *Node {
	if len(xs) == 0 || xs[0] == nil {
		return nil
	}
	if len(xs) == 1 {
		return xs[0]
	}
	return xs[0].g.Apply(addNOp{}, name, xs...)
}
