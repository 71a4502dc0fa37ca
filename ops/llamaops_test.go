package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// TestGradLlamaOps checks RMSNorm, SwiGLU (two inputs and halves) and
// Concat against central finite differences, at sizes that run the
// vector kernels and their tails.
func TestGradLlamaOps(t *testing.T) {
	for _, zc := range []bool{false, true} {
		checkGrad(t, gradCase{name: fmt.Sprintf("RMSNorm zc=%v", zc), params: []graph.Shape{s(3, 37), s(37)},
			build: func(ps, _ []*graph.Node) *graph.Node {
				return ops.RMSNorm("norm", ps[0], ps[1], ops.RMSNormConfig{ZeroCenteredGamma: zc})
			}, tol: 2e-3})
	}
	for _, c := range []gradCase{
		{name: "SwiGLU", params: []graph.Shape{s(3, 21), s(3, 21)},
			build: func(ps, _ []*graph.Node) *graph.Node { return ops.SwiGLU(ps[0], ps[1]) }},
		{name: "SwiGLUHalves", params: []graph.Shape{s(2, 3, 38)},
			build: func(ps, _ []*graph.Node) *graph.Node { return ops.SwiGLUHalves(ps[0]) }},
		{name: "Concat axis -1", params: []graph.Shape{s(2, 3, 4), s(2, 3, 1), s(2, 3, 5)},
			build: func(ps, _ []*graph.Node) *graph.Node { return ops.Concat(-1, ps...) }},
		{name: "Concat axis 0", params: []graph.Shape{s(2, 5), s(3, 5)},
			build: func(ps, _ []*graph.Node) *graph.Node { return ops.Concat(0, ps...) }},
		{name: "Concat axis 1", params: []graph.Shape{s(2, 2, 3), s(2, 4, 3)},
			build: func(ps, _ []*graph.Node) *graph.Node { return ops.Concat(1, ps...) }},
	} {
		checkGrad(t, c)
	}
}

// TestLlamaOpsMatchCompositions compares each fused op with the same
// function composed of existing ops, values and gradients: RMSNorm with
// x·γ/√(mean(x²)+eps), SiLU with x·Sigmoid(x), SwiGLU with
// SiLU(a)·b, SwiGLUHalves with SwiGLU of two Slices, Concat of the
// halves with the input.
func TestLlamaOpsMatchCompositions(t *testing.T) {
	const eps = 1e-5
	rmsComposed := func(g *graph.Graph, x, gamma *graph.Node) *graph.Node {
		ms := ops.MeanKeepDims(ops.Mul(x, x), -1)
		return ops.Mul(ops.Div(x, ops.Sqrt(ops.Add(ms, g.Const("eps", eps)))), gamma)
	}
	cases := []struct {
		name            string
		shapes          []graph.Shape
		fused, composed func(g *graph.Graph, ps []*graph.Node) *graph.Node
	}{
		{"RMSNorm", []graph.Shape{s(5, 70), s(70)},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node {
				return ops.RMSNorm("n", ps[0], ps[1], ops.RMSNormConfig{Eps: eps})
			},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return rmsComposed(g, ps[0], ps[1]) }},
		{"SiLU", []graph.Shape{s(5, 70)},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return ops.SiLU(ps[0]) },
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return ops.Mul(ps[0], ops.Sigmoid(ps[0])) }},
		{"SwiGLU", []graph.Shape{s(5, 70), s(5, 70)},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return ops.SwiGLU(ps[0], ps[1]) },
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return ops.Mul(ops.SiLU(ps[0]), ps[1]) }},
		{"SwiGLUHalves", []graph.Shape{s(5, 2*35)},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return ops.SwiGLUHalves(ps[0]) },
			func(g *graph.Graph, ps []*graph.Node) *graph.Node {
				return ops.SwiGLU(ops.Slice(ps[0], -1, 0, 35), ops.Slice(ps[0], -1, 35, 70))
			}},
		{"Concat", []graph.Shape{s(5, 70)},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node {
				return ops.Concat(-1, ops.Slice(ps[0], -1, 0, 30), ops.Slice(ps[0], -1, 30, 70))
			},
			func(g *graph.Graph, ps []*graph.Node) *graph.Node { return ops.Scale(ps[0], 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(c.name))))
			g := graph.New()
			store := graph.NewStore()
			var ps []*graph.Node
			for i, sh := range c.shapes {
				name := fmt.Sprintf("p%d", i)
				ps = append(ps, g.Param(name, sh...))
				v := make([]float32, sh.Numel())
				for j := range v {
					v[j] = float32(3 * rng.NormFloat64())
				}
				if err := store.SetFloat32(name, v, sh...); err != nil {
					t.Fatal(err)
				}
			}
			f, k := c.fused(g, ps), c.composed(g, ps)
			r := g.Input("R", graph.Float32, f.Shape()...)
			gf, err := graph.Grad(ops.Sum(ops.Mul(f, r)), ps...)
			if err != nil {
				t.Fatal(err)
			}
			gk, err := graph.Grad(ops.Sum(ops.Mul(k, r)), ps...)
			if err != nil {
				t.Fatal(err)
			}
			outs := append(append([]*graph.Node{f, k}, gf...), gk...)
			p, err := graph.Compile(g, store, graph.Options{Training: true}, outs...)
			if err != nil {
				t.Fatal(err)
			}
			rv := make([]float32, f.Shape().Numel())
			for i := range rv {
				rv[i] = float32(rng.NormFloat64())
			}
			if err := p.FeedFloat32(r, rv); err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			pairs := [][2]*graph.Node{{f, k}}
			for i := range gf {
				pairs = append(pairs, [2]*graph.Node{gf[i], gk[i]})
			}
			for i, pr := range pairs {
				a, b := p.Float32(pr[0]), p.Float32(pr[1])
				var num, den float64
				for j := range a {
					d := float64(a[j]) - float64(b[j])
					num += d * d
					den += float64(b[j]) * float64(b[j])
				}
				if rel := math.Sqrt(num / max(den, 1e-30)); rel > 2e-6 || math.IsNaN(rel) {
					t.Errorf("output %d (0: value, then gradients): relative difference %.3g", i, rel)
				}
			}
		})
	}
}
