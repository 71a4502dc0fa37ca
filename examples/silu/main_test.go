package main

import (
	"slices"
	"testing"

	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes/passestest"
)

// TestSiLURewrite: the rewrite leaves one SiLU where Tanh, Mul and Add
// were, and gives the written-out model's loss and gradients to 1e-5 on
// three seeds, and gradients a central difference agrees with.
func TestSiLURewrite(t *testing.T) {
	rewrite := passestest.RulePass("SiLU", siluRule)
	p := passestest.Equivalent(t, model, 1e-5, []uint64{1, 2, 3}, rewrite)
	ran := p.Ops()
	for _, gone := range []string{"Tanh", "TanhGrad", "Mul", "Add"} {
		if slices.Contains(ran, gone) {
			t.Errorf("%s still runs: %v", gone, ran)
		}
	}
	if p.Count(KindSiLU) != 1 || p.Count(KindSiLUGrad) != 1 {
		t.Errorf("want one SiLU and its gradient: %v", ran)
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

// TestProgramRuns runs the command as a user would.
func TestProgramRuns(t *testing.T) { main() }
