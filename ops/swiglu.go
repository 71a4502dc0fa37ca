package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// swigluOp is the gated unit of Llama's MLP, y = silu(gate)·up: on two
// inputs of one shape, or (halves) on the two halves of one input's last
// axis, gate first — the output of one GEMM whose weight stacks the gate
// and up projections.
type swigluOp struct{ halves bool }

func (o swigluOp) Type() string     { return KindSwiGLU.String() }
func (o swigluOp) Kind() graph.Kind { return KindSwiGLU }
func (o swigluOp) Attrs() string {
	if o.halves {
		return "halves"
	}
	return ""
}

func (o swigluOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if o.halves {
		if err := float32In(in, 1); err != nil {
			return nil, graph.Invalid, err
		}
		s := in[0].Shape()
		if len(s) == 0 || s[len(s)-1]%2 != 0 {
			return nil, graph.Invalid, fmt.Errorf("input %q %v: the last axis must have an even extent (gate and up halves)", in[0].Name(), s)
		}
		out := s.Clone()
		out[len(out)-1] /= 2
		return out, graph.Float32, nil
	}
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if !in[0].Shape().Equal(in[1].Shape()) {
		return nil, graph.Invalid, shapeMismatch(in[0], in[1])
	}
	return in[0].Shape(), graph.Float32, nil
}

// halvesRows returns the row count and half width of a halves input.
func halvesRows(s graph.Shape) (rows, f int) {
	f = s[len(s)-1] / 2
	return s.Numel() / max(2*f, 1), f
}

func (o swigluOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	y := b.Out.F32
	if !o.halves {
		a, up := b.In[0].F32, b.In[1].F32
		return newChunker(len(y), func(lo, hi int) { kernels.SwiGLU(y[lo:hi], a[lo:hi], up[lo:hi]) }).kernel(), nil
	}
	x := b.In[0].F32
	rows, f := halvesRows(b.In[0].Shape)
	return newChunkerCost(rows, rows*f, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			kernels.SwiGLU(y[r*f:(r+1)*f], x[2*r*f:(2*r+1)*f], x[(2*r+1)*f:(2*r+2)*f])
		}
	}).kernel(), nil
}

func (o swigluOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	if o.halves {
		return []*graph.Node{apply(swigluGradOp{mode: gradHalves}, n.Name()+".grad", n.Input(0), dy)}
	}
	a, b := n.Input(0), n.Input(1)
	gs := make([]*graph.Node, 2)
	if need[0] {
		gs[0] = apply(swigluGradOp{mode: gradGate}, n.Name()+".dgate", a, b, dy)
	}
	if need[1] {
		// d up = dy·silu(gate): the forward's own kernel with dy as up.
		gs[1] = apply(swigluOp{}, n.Name()+".dup", a, dy)
	}
	return gs
}

// The gradients swigluGradOp computes.
const (
	gradHalves = iota // (x, dy) → [dgate | dup] over x's halves
	gradGate          // (gate, up, dy) → dgate
)

// swigluGradOp is SwiGLU's backward: dgate = (dy·up)·silu'(gate) and
// dup = dy·silu(gate), both in one pass for the halves form.
type swigluGradOp struct{ mode int }

func (o swigluGradOp) Type() string     { return KindSwiGLUGrad.String() }
func (o swigluGradOp) Kind() graph.Kind { return KindSwiGLUGrad }
func (o swigluGradOp) Attrs() string {
	if o.mode == gradHalves {
		return "halves"
	}
	return "gate"
}

func (o swigluGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if o.mode == gradHalves {
		if err := float32In(in, 2); err != nil {
			return nil, graph.Invalid, err
		}
		want, _, err := swigluOp{halves: true}.Infer(in[:1])
		if err != nil {
			return nil, graph.Invalid, err
		}
		if !in[1].Shape().Equal(want) {
			return nil, graph.Invalid, fmt.Errorf("gradient %q is %v, want %v", in[1].Name(), in[1].Shape(), want)
		}
		return in[0].Shape(), graph.Float32, nil
	}
	if err := float32In(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	for _, x := range in[1:] {
		if !x.Shape().Equal(in[0].Shape()) {
			return nil, graph.Invalid, shapeMismatch(x, in[0])
		}
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o swigluGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	dx := b.Out.F32
	if o.mode == gradHalves {
		x, dy := b.In[0].F32, b.In[1].F32
		rows, f := halvesRows(b.In[0].Shape)
		return newChunkerCost(rows, rows*f, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				g, u := 2*r*f, (2*r+1)*f
				kernels.SwiGLUGrad(dx[g:g+f], dx[u:u+f], x[g:g+f], x[u:u+f], dy[r*f:(r+1)*f])
			}
		}).kernel(), nil
	}
	a, up, dy := b.In[0].F32, b.In[1].F32, b.In[2].F32
	// dup is not wanted here: each piece writes it into a scratch block
	// of its own, reused block by block.
	const block = 1024
	scratch := make([][]float32, parallel.Workers())
	for i := range scratch {
		scratch[i] = make([]float32, block)
	}
	c := newPartChunker(len(dx), len(dx), func(part, lo, hi int) {
		for s := lo; s < hi; s += block {
			e := min(hi, s+block)
			kernels.SwiGLUGrad(dx[s:e], scratch[part][:e-s], a[s:e], up[s:e], dy[s:e])
		}
	})
	return c.kernel(), nil
}

// SwiGLU returns silu(gate)·up, elementwise, for two tensors of one shape
// (Llama's MLP: the gate and up projections).
func SwiGLU(gate, up *graph.Node) *graph.Node { return apply(swigluOp{}, "", gate, up) }

// SwiGLUHalves returns silu(gate)·up where gate and up are the first and
// second halves of x's last axis: the output of one GEMM whose weight
// stacks the gate projection over the up projection. The last axis
// halves.
func SwiGLUHalves(x *graph.Node) *graph.Node { return apply(swigluOp{halves: true}, "", x) }
