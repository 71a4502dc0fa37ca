package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// softmaxOp is softmax (or log-softmax) over the last axis.
type softmaxOp struct{ log bool }

func (o softmaxOp) Type() string { return o.Kind().String() }
func (o softmaxOp) Kind() graph.Kind {
	if o.log {
		return KindLogSoftmax
	}
	return KindSoftmax
}

func (o softmaxOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if len(in[0].Shape()) == 0 {
		return nil, graph.Invalid, fmt.Errorf("input %q is a scalar; softmax runs over the last axis", in[0].Name())
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o softmaxOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, y := b.In[0].F32, b.Out.F32
	s := b.Out.Shape
	d := 1
	if len(s) > 0 {
		d = s[len(s)-1]
	}
	log := o.log
	rows := len(y) / max(d, 1)
	return newChunkerCost(rows, rows*d, func(lo, hi int) {
		for r := lo * d; r < hi*d; r += d {
			softmaxRow(y[r:r+d], x[r:r+d], log)
		}
	}).kernel(), nil
}

// softmaxRow writes softmax(x) (or log-softmax) into y: the row's max,
// then exp(x − max) and its sum in one pass of the vector kernels.
func softmaxRow(y, x []float32, log bool) {
	if len(x) == 0 {
		return
	}
	if !log {
		softmaxSum(y, x)
		return
	}
	m := kernels.RowMax(x)
	sum := kernels.ExpSum(y, x, 1, m)
	lse := m + kernels.Log32(sum)
	for i, v := range x {
		y[i] = v - lse
	}
}

// softmaxSum writes softmax(x) into y (which may be x) and returns the
// row's max m and the sum of exp(x − m), whose log plus m is the row's
// log-sum-exp (CrossEntropy's term is that less the label's logit).
func softmaxSum(y, x []float32) (m, sum float32) {
	m = kernels.RowMax(x)
	sum = kernels.ExpSum(y, x, 1, m)
	kernels.Scale(y, 1/sum)
	return m, sum
}

func (o softmaxOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(softmaxGradOp(o), "", n, dy)}
}

// softmaxGradOp computes dx from (y, dy): y·(dy − Σdy·y) for softmax,
// dy − exp(y)·Σdy for log-softmax.
type softmaxGradOp struct{ log bool }

func (o softmaxGradOp) Type() string { return o.Kind().String() }
func (o softmaxGradOp) Kind() graph.Kind {
	if o.log {
		return KindLogSoftmaxGrad
	}
	return KindSoftmaxGrad
}

func (o softmaxGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if !in[0].Shape().Equal(in[1].Shape()) {
		return nil, graph.Invalid, shapeMismatch(in[0], in[1])
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o softmaxGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	y, dy, dx := b.In[0].F32, b.In[1].F32, b.Out.F32
	s := b.Out.Shape
	d := s[len(s)-1]
	log := o.log
	return func() error {
		for r := 0; r+d <= len(dx); r += d {
			yr, gr, xr := y[r:r+d], dy[r:r+d], dx[r:r+d]
			if log {
				var sum float32
				for _, g := range gr {
					sum += g
				}
				for i, v := range yr {
					xr[i] = gr[i] - float32(kernels.Exp32(v)*sum)
				}
				continue
			}
			var dot float32
			for i, v := range yr {
				dot += float32(v * gr[i])
			}
			for i, v := range yr {
				xr[i] = v * (gr[i] - dot)
			}
		}
		return nil
	}, nil
}

// Softmax returns softmax over the last axis of x.
func Softmax(x *graph.Node) *graph.Node { return apply(softmaxOp{}, "", x) }

// LogSoftmax returns log-softmax over the last axis of x.
func LogSoftmax(x *graph.Node) *graph.Node { return apply(softmaxOp{log: true}, "", x) }
