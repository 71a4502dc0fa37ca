package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// logSumExpOp is log Σ exp over the last axis: [..., E] → [...].
type logSumExpOp struct{}

func (logSumExpOp) Type() string     { return KindLogSumExp.String() }
func (logSumExpOp) Kind() graph.Kind { return KindLogSumExp }

func (logSumExpOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	s := in[0].Shape()
	if s.Rank() == 0 {
		return nil, graph.Invalid, fmt.Errorf("input %q is a scalar", in[0].Name())
	}
	return s[:len(s)-1].Clone(), graph.Float32, nil
}

func (logSumExpOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, out := b.In[0].F32, b.Out.F32
	s := b.In[0].Shape
	d := s[len(s)-1]
	work := make([]float32, d)
	return func() error {
		for r := range out {
			row := x[r*d : r*d+d]
			m := kernels.RowMax(row)
			out[r] = m + kernels.Log32(kernels.ExpSum(work, row, 1, m))
		}
		return nil
	}, nil
}

func (logSumExpOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(logSumExpGradOp{}, n.Name()+".dx", n.Input(0), dy)}
}

// logSumExpGradOp is softmax(x)·dy per row.
type logSumExpGradOp struct{}

func (logSumExpGradOp) Type() string     { return KindLogSumExpGrad.String() }
func (logSumExpGradOp) Kind() graph.Kind { return KindLogSumExpGrad }

func (logSumExpGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	xs, ds := in[0].Shape(), in[1].Shape()
	if xs.Rank() == 0 || !xs[:len(xs)-1].Equal(ds) {
		return nil, graph.Invalid, fmt.Errorf("gradient %q %v does not match %q %v less its last axis", in[1].Name(), ds, in[0].Name(), xs)
	}
	return xs.Clone(), graph.Float32, nil
}

func (logSumExpGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, dy, out := b.In[0].F32, b.In[1].F32, b.Out.F32
	s := b.In[0].Shape
	d := s[len(s)-1]
	return func() error {
		for r, g := range dy {
			row := out[r*d : r*d+d]
			softmaxSum(row, x[r*d:r*d+d])
			kernels.Scale(row, g)
		}
		return nil
	}, nil
}

// LogSumExp returns log Σ exp(x) over the last axis of x (computed from
// the row's max, so that large values do not overflow): the router
// z-loss's term. Its gradient is softmax(x)·dy.
func LogSumExp(x *graph.Node) *graph.Node { return apply(logSumExpOp{}, "", x) }

// expertShareOp is the share of the tokens' choices each expert got.
type expertShareOp struct{ experts int }

func (expertShareOp) Type() string     { return KindExpertShare.String() }
func (expertShareOp) Kind() graph.Kind { return KindExpertShare }
func (o expertShareOp) Attrs() string  { return fmt.Sprintf("experts=%d", o.experts) }

func (o expertShareOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if _, _, err := (expertCountsOp{o.experts}).Infer(in); err != nil {
		return nil, graph.Invalid, err
	}
	return graph.Shape{o.experts}, graph.Float32, nil
}

func (o expertShareOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 0, o.experts)
	idx, out := b.In[0].I32, b.Out.F32
	tokens := float32(b.In[0].Shape[0])
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for e, c := range r.counts {
			out[e] = float32(c) / tokens
		}
		return nil
	}, nil
}

// ExpertShare returns, for choices idx [T, K] among experts experts,
// each expert's count of choices divided by the T tokens (float32
// [experts], summing to K): Switch Transformer's f, summed over the K
// choices as transformers' load_balancing_loss_func sums them. No
// gradient flows through it.
func ExpertShare(idx *graph.Node, experts int) *graph.Node {
	return apply(expertShareOp{experts}, scopedName(idx, "share"), idx)
}
