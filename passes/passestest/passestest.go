// Package passestest is a small kit for testing graph rewrites: build a
// model twice, rewrite one copy, and check what users check — the ops
// that remain, in order, and that the rewritten program computes the
// same loss and gradients as the original, and the gradients a central
// finite difference of its own loss gives.
//
// A test states the model once as a Model function (a new graph each
// call) and the rewrite as passes (passes.Pass, or rules through
// RulePass); the kit runs the passes through passes.Prepare's checked
// pipeline as ForwardPasses, so that the backward is built from the
// rewritten forward graph and every stage's legality check runs.
package passestest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/passes"
)

// Model builds a fresh forward graph: its scalar loss and the parameters
// to differentiate it by. Its inputs and parameters are filled with
// seeded random values (float32 N(0, 1); int32 inputs need Feed).
type Model func() (loss *graph.Node, params []*graph.Node, err error)

// Program is a prepared training program of a Model with the values it
// was fed.
type Program struct {
	Prog   *graph.Program
	Loss   *graph.Node
	Params []*graph.Node
	Grads  []*graph.Node
	Store  *graph.Store
	// Warnings are Prepare's (see passes.Prepared).
	Warnings []string
}

// Build prepares model rewritten by ps (none: as it is), with values from
// seed, and runs it once.
func Build(model Model, seed uint64, ps ...passes.Pass) (*Program, error) {
	loss, params, err := model()
	if err != nil {
		return nil, err
	}
	g := loss.Graph()
	rng := rand.New(rand.NewPCG(seed, 11))
	store := graph.NewStore()
	for _, p := range params {
		v := make([]float32, p.Shape().Numel())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		if err := store.SetFloat32(p.Name(), v, p.Shape()...); err != nil {
			return nil, err
		}
	}
	prep, err := passes.Prepare(g, store, passes.Config{Loss: loss, Params: params, ForwardPasses: ps})
	if err != nil {
		return nil, err
	}
	for _, n := range g.Nodes() {
		if !n.Is(graph.KindInput) || n.DType() != graph.Float32 {
			continue
		}
		v := make([]float32, n.Shape().Numel())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		if err := prep.Train.FeedFloat32(n, v); err != nil {
			return nil, err
		}
	}
	if err := prep.Train.Run(); err != nil {
		return nil, err
	}
	return &Program{Prog: prep.Train, Loss: prep.Loss, Params: params, Grads: prep.Grads, Store: store, Warnings: prep.Warnings}, nil
}

// Ops lists the kinds of the ops the program runs, in order (Params and
// Inputs left out): what a test of a rewrite asserts remains.
func (p *Program) Ops() []string {
	var out []string
	for _, n := range p.Prog.Schedule() {
		if n.Is(graph.KindParam) || n.Is(graph.KindInput) {
			continue
		}
		out = append(out, n.Op().Type())
	}
	return out
}

// Count returns how many nodes of kind k the program runs.
func (p *Program) Count(k graph.Kind) int {
	c := 0
	for _, n := range p.Prog.Schedule() {
		if n.Is(k) {
			c++
		}
	}
	return c
}

// Equivalent checks, for each of seeds, that model rewritten by ps gives
// the loss and gradients of the model as it is, within a relative (or,
// near zero, absolute) tolerance tol, and returns the rewritten program
// of the first seed.
func Equivalent(t testing.TB, model Model, tol float64, seeds []uint64, ps ...passes.Pass) *Program {
	t.Helper()
	var first *Program
	for _, seed := range seeds {
		ref, err := Build(model, seed)
		if err != nil {
			t.Fatalf("the model as it is: %v", err)
		}
		got, err := Build(model, seed, ps...)
		if err != nil {
			t.Fatalf("the rewritten model: %v", err)
		}
		if first == nil {
			first = got
		}
		compare(t, fmt.Sprintf("seed %d: loss", seed), []float32{scalar(t, ref)}, []float32{scalar(t, got)}, tol)
		for i := range ref.Grads {
			compare(t, fmt.Sprintf("seed %d: gradient of %s", seed, ref.Params[i].Name()), ref.Prog.Float32(ref.Grads[i]), got.Prog.Float32(got.Grads[i]), tol)
		}
	}
	return first
}

// FiniteDifferences checks p's gradients against central differences of
// its own loss (step eps, in float64 around float32 values) at up to
// samples elements of each parameter, within tol relative to the larger
// of the two and 1.
func FiniteDifferences(t testing.TB, p *Program, eps, tol float64, samples int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 5))
	for i, param := range p.Params {
		grad := append([]float32(nil), p.Prog.Float32(p.Grads[i])...)
		w := p.Store.Float32(param.Name())
		for s := 0; s < min(samples, len(w)); s++ {
			j := rng.IntN(len(w))
			orig := w[j]
			w[j] = orig + float32(eps)
			up := run(t, p)
			w[j] = orig - float32(eps)
			down := run(t, p)
			w[j] = orig
			fd := (up - down) / (2 * eps)
			if d := math.Abs(fd - float64(grad[j])); d > tol*math.Max(1, math.Max(math.Abs(fd), math.Abs(float64(grad[j])))) {
				t.Errorf("gradient of %s[%d]: %v, central difference %v", param.Name(), j, grad[j], fd)
			}
		}
	}
	run(t, p)
}

// RulePass is a pass that applies rules to every node of the graph
// (passes.Rewrite).
func RulePass(name string, rules ...passes.Rule) passes.Pass {
	return passes.Pass{Name: name, Run: func(g *graph.Graph) (string, error) {
		counts, err := passes.Rewrite(g, g.Nodes(), rules...)
		return fmt.Sprint(counts), err
	}}
}

func run(t testing.TB, p *Program) float64 {
	t.Helper()
	if err := p.Prog.Run(); err != nil {
		t.Fatal(err)
	}
	return float64(scalar(t, p))
}

func scalar(t testing.TB, p *Program) float32 {
	t.Helper()
	l, err := p.Prog.Scalar(p.Loss)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func compare(t testing.TB, what string, want, got []float32, tol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if d := math.Abs(w - g); d > tol*math.Max(1, math.Abs(w)) || math.IsNaN(g) != math.IsNaN(w) {
			t.Errorf("%s[%d]: %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}
