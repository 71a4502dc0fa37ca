// Command silu is a rewrite of one's own, written against the public API
// only: a SiLU op defined here (forward and gradient), and a rule that
// finds s + s·tanh(s) with s = x/2 — SiLU written out, as
// x·σ(x) = x/2·(1 + tanh(x/2)) — and replaces it with one SiLU node,
// before autodiff, so that the backward is SiLU's own.
//
//	go run ./examples/silu
package main

import (
	"fmt"
	"math"
	"os"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
)

// KindSiLU and KindSiLUGrad are the kinds of the two ops defined here.
var (
	KindSiLU     = graph.NewKind("SiLU")
	KindSiLUGrad = graph.NewKind("SiLUGrad")
)

// siluOp is x·σ(x); siluGradOp is dy·σ(x)(1 + x(1 − σ(x))) of inputs x, dy.
type siluOp struct{}
type siluGradOp struct{}

func (siluOp) Type() string                                             { return KindSiLU.String() }
func (siluOp) Kind() graph.Kind                                         { return KindSiLU }
func (siluGradOp) Type() string                                         { return KindSiLUGrad.String() }
func (siluGradOp) Kind() graph.Kind                                     { return KindSiLUGrad }
func sigmoid(x float32) float32                                         { return float32(1 / (1 + math.Exp(-float64(x)))) }
func (siluOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) { return like(in, 1) }
func (siluGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	return like(in, 2)
}

func like(in []*graph.Node, n int) (graph.Shape, graph.DType, error) {
	if len(in) != n || in[0].DType() != graph.Float32 || (n == 2 && !in[1].Shape().Equal(in[0].Shape())) {
		return nil, graph.Invalid, fmt.Errorf("want %d float32 inputs of one shape", n)
	}
	return in[0].Shape(), graph.Float32, nil
}

// silu and siluGrad are the two ops' loops: their kernels run them over
// whole tensors, and a fused chain over blocks (ops.Elementwise below).
func silu(x, y []float32) {
	for i, v := range x {
		y[i] = v * sigmoid(v)
	}
}

func siluGrad(x, dy, dx []float32) {
	for i, v := range x {
		s := sigmoid(v)
		dx[i] = dy[i] * s * (1 + float32(v*(1-s))) // float32(…): no fused multiply-add on any machine
	}
}

func (siluOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, y := b.In[0].F32, b.Out.F32
	return func() error { silu(x, y); return nil }, nil
}

func (siluGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, dy, dx := b.In[0].F32, b.In[1].F32, b.Out.F32
	return func() error { siluGrad(x, dy, dx); return nil }, nil
}

// ChainStep lets passes.Fuse take SiLU into chains and GEMM epilogues
// ("Linear+SiLU"): the same loop, in place on each block.
func (siluOp) ChainStep(n *graph.Node, vi int) (ops.ChainStep, bool) {
	return ops.ChainStep{Name: "SiLU", Operand: -1, Apply: func(v, _ []float32, _ bool) { silu(v, v) }}, true
}

// ChainStep: the running value is the incoming gradient (input 1), the
// forward input (input 0) its operand.
func (siluGradOp) ChainStep(n *graph.Node, vi int) (ops.ChainStep, bool) {
	return ops.ChainStep{Name: "SiLUGrad", Operand: 0, Apply: func(v, x []float32, _ bool) { siluGrad(x, v, v) }}, vi == 1
}

// Grad makes siluOp differentiable.
func (siluOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{n.Graph().Apply(siluGradOp{}, n.Name()+"/grad", n.Input(0), dy)}
}

// siluRule finds s + s·tanh(s) with s = x/2, in any operand order.
var siluRule = passes.Rule{
	Name: "silu",
	Pattern: &passes.Pattern{Kind: ops.KindAdd, Commutative: true, Inputs: []*passes.Pattern{
		{Kind: ops.KindScale, Bind: "s"},
		{Kind: ops.KindMul, Commutative: true, Inputs: []*passes.Pattern{{Bind: "s2"}, {Kind: ops.KindTanh, Bind: "t"}}},
	}},
	Apply: func(root *graph.Node, m passes.Match) (*graph.Node, error) {
		s := m["s"]
		if half, _ := graph.SettingsOf[ops.ScaleConfig](s); half.Factor != 0.5 || m["s2"] != s || m["t"].Input(0) != s {
			return nil, nil // not SiLU
		}
		return root.Graph().Apply(siluOp{}, root.Name()+"/silu", s.Input(0)), nil
	},
}

// modelWith is a small MLP whose activation is s + s·tanh(s), s = c·x:
// SiLU written out when c is 1/2.
func modelWith(c float32) func() (*graph.Node, []*graph.Node, error) {
	return func() (*graph.Node, []*graph.Node, error) {
		g := graph.New()
		x := g.Input("x", graph.Float32, 8, 16)
		w1, w2 := g.Param("fc1.weight", 32, 16), g.Param("fc2.weight", 1, 32)
		s := ops.Scale(ops.Linear("fc1", x, w1, nil), c)
		h := ops.Add(ops.Mul(ops.Tanh(s), s), s)
		loss := ops.Mean(ops.Linear("fc2", h, w2, nil))
		return loss, []*graph.Node{w1, w2}, g.Err()
	}
}

var model = modelWith(0.5)

func main() {
	loss, params, err := model()
	if err == nil {
		var prep *passes.Prepared
		store := graph.NewStore()
		if err = store.Init(loss.Graph(), func(n *graph.Node, v []float32) {}); err == nil {
			prep, err = passes.Prepare(loss.Graph(), store, passes.Config{Loss: loss, Params: params, Log: os.Stdout,
				ForwardPasses: []passes.Pass{{Name: "SiLU", Run: func(g *graph.Graph) (string, error) {
					n, err := passes.Rewrite(g, g.Nodes(), siluRule)
					return fmt.Sprintf("%d SiLU(s)", n["silu"]), err
				}}}})
		}
		if err == nil {
			err = loss.Graph().WriteText(os.Stdout, append([]*graph.Node{prep.Loss}, prep.Grads...)...)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "silu:", err)
		os.Exit(1)
	}
}
