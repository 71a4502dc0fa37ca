package main

import (
	"slices"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/passes/passestest"
)

// TestSiLURewrite: the rewrite leaves one SiLU where Tanh, Mul and Add
// were (its gradient fused into fc2's dgrad), and gives the written-out
// model's loss and gradients to 1e-5 on three seeds, and gradients a
// central difference agrees with.
func TestSiLURewrite(t *testing.T) {
	rewrite := passestest.RulePass("SiLU", siluRule)
	p := passestest.Equivalent(t, model, 1e-5, []uint64{1, 2, 3}, rewrite)
	ran := p.Ops()
	for _, gone := range []string{"Tanh", "TanhGrad", "Mul", "Add"} {
		if slices.Contains(ran, gone) {
			t.Errorf("%s still runs: %v", gone, ran)
		}
	}
	if !slices.Contains(ran, "SiLU") || !slices.Contains(ran, "MatMul+SiLUGrad") {
		t.Errorf("want SiLU, and its gradient in a GEMM epilogue: %v", ran)
	}
	if len(p.Warnings) > 0 {
		t.Errorf("warnings: %v", p.Warnings)
	}
	passestest.FiniteDifferences(t, p, 1e-2, 2e-2, 8)
	// Not SiLU: with a factor other than 1/2 nothing is rewritten.
	q, err := passestest.Build(modelWith(0.25), 1, rewrite)
	if err != nil {
		t.Fatal(err)
	}
	if q.Count(KindSiLU) != 0 || q.Count(ops.KindTanh) != 1 {
		t.Errorf("c = 1/4 rewritten: %v", q.Ops())
	}
}

// TestSiLUInAnEpilogue: in an evaluation program SiLU runs in fc1's
// epilogue, to the bit what SiLU's own kernel computes.
func TestSiLUInAnEpilogue(t *testing.T) {
	var outs [2][]float32
	for i, noFusion := range []bool{false, true} {
		g := graph.New()
		x, w := g.Input("x", graph.Float32, 4, 16), g.Param("fc1.weight", 32, 16)
		y := g.Apply(siluOp{}, "silu", ops.Linear("fc1", x, w, nil))
		store := graph.NewStore()
		if err := store.Init(g, func(_ *graph.Node, v []float32) {
			for i := range v {
				v[i] = float32(i%7)/4 - 0.7
			}
		}); err != nil {
			t.Fatal(err)
		}
		prep, err := passes.Prepare(g, store, passes.Config{EvalOutputs: []*graph.Node{y}, NoFusion: noFusion})
		if err != nil {
			t.Fatal(err)
		}
		in := make([]float32, 64)
		for i := range in {
			in[i] = float32(i%5) - 2
		}
		if err := prep.Eval.FeedFloat32(x, in); err != nil || prep.Eval.Run() != nil {
			t.Fatal(err)
		}
		sched := prep.Eval.Schedule()
		if last := sched[len(sched)-1].Op().Type(); (last == "Linear+SiLU") == noFusion {
			t.Errorf("fusion %v: the last op is %s", !noFusion, last)
		}
		outs[i] = prep.Eval.Float32(g.Resolve(y))
	}
	if !slices.Equal(outs[0], outs[1]) {
		t.Error("SiLU in the epilogue and SiLU's kernel differ")
	}
}

// TestProgramRuns runs the command as a user would.
func TestProgramRuns(t *testing.T) { main() }
