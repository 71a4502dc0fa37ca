package passes_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/passes/passestest"
	"github.com/stretchr/testify/require"
)

// rebuild rewrites s + s·tanh(s) as the same expression made of new
// nodes (a user's SiLU rule would build one node instead): one rule
// matches either operand order of the Add and the Mul.
var rebuild = passes.Pass{Name: "Rebuild", Run: func(g *graph.Graph) (string, error) {
	tanh := &passes.Pattern{Kind: ops.KindTanh, Bind: "t"}
	rule := passes.Rule{Name: "rebuild",
		Pattern: &passes.Pattern{Kind: ops.KindAdd, Commutative: true, Inputs: []*passes.Pattern{
			{Bind: "s"}, {Kind: ops.KindMul, Commutative: true, Inputs: []*passes.Pattern{{Bind: "s2"}, tanh}}}},
		Apply: func(_ *graph.Node, m passes.Match) (*graph.Node, error) {
			s := m["s"]
			if m["s2"] != s || m["t"].Input(0) != s {
				return nil, nil
			}
			return ops.Add(ops.Mul(ops.Tanh(s), s), s), nil
		}}
	counts, err := passes.Rewrite(g, g.Nodes(), rule)
	return fmt.Sprintf("%d rebuilt", counts["rebuild"]), err
}}

func tanhModel(t *testing.T) (*graph.Graph, *graph.Store, *graph.Node, *graph.Node) {
	g := graph.New()
	p := g.Param("p", 8)
	s := ops.Scale(p, 0.5)
	loss := ops.Sum(ops.Add(s, ops.Mul(s, ops.Tanh(s))))
	store := graph.NewStore()
	v := []float32{-2, -1, -0.5, 0, 0.25, 0.5, 1, 3}
	require.NoError(t, store.SetFloat32("p", v, 8))
	return g, store, p, loss
}

// wantGrad is d/dp of s + s·tanh(s), s = p/2, in float64.
func wantGrad(p float32) float64 {
	s := float64(p) / 2
	th := math.Tanh(s)
	return 0.5 * (1 + th + s*(1-th*th))
}

// TestForwardPassesBeforeAutodiff: a forward rewrite in ForwardPasses is
// differentiated as it is (the old tanh is gone from the program, the
// gradient is right); the same rewrite on the joint graph leaves the
// backward reading the old tanh, and says so.
func TestForwardPassesBeforeAutodiff(t *testing.T) {
	g, store, p, loss := tanhModel(t)
	var flog bytes.Buffer
	prep, err := passes.Prepare(g, store, passes.Config{Loss: loss, Params: []*graph.Node{p}, ForwardPasses: []passes.Pass{rebuild}, Log: &flog})
	require.NoError(t, err)
	require.Contains(t, flog.String(), "Rebuild: 1 rebuilt", "the forward pass ran")
	require.Empty(t, prep.Warnings)
	require.Len(t, prep.Grads, 1)
	kinds := map[string]int{}
	for _, n := range prep.Train.Schedule() {
		kinds[n.Op().Type()]++
	}
	require.Equal(t, 1, kinds["Tanh"], "only the rewritten tanh runs: %v", kinds)
	require.NoError(t, prep.Train.Run())
	grad := prep.Train.Float32(prep.Grads[0])
	var want float64
	for i, x := range store.Float32("p") {
		require.InDelta(t, wantGrad(x), float64(grad[i]), 1e-6, "d/dp[%d]", i)
		s := float64(x) / 2
		want += s + s*math.Tanh(s)
	}
	l, err := prep.Train.Scalar(prep.Loss)
	require.NoError(t, err)
	require.InDelta(t, want, float64(l), 1e-5)

	// The joint-graph way: the backward still reads the old tanh.
	g, store, p, loss = tanhModel(t)
	grads, err := graph.Grad(loss, p)
	require.NoError(t, err)
	var log bytes.Buffer
	prep, err = passes.Prepare(g, store, passes.Config{TrainOutputs: append([]*graph.Node{loss}, grads...), Passes: []passes.Pass{rebuild}, Log: &log})
	require.NoError(t, err)
	require.Len(t, prep.Warnings, 1)
	require.Contains(t, prep.Warnings[0], "pass Rebuild rewrote forward values that the backward still reads")
	require.Contains(t, prep.Warnings[0], "tanh")
	require.Contains(t, log.String(), "warning: pass Rebuild")
	kinds = map[string]int{}
	for _, n := range prep.Train.Schedule() {
		kinds[n.Op().Type()]++
	}
	require.Equal(t, 2, kinds["Tanh"], "the old and the new tanh both run: %v", kinds)

	// A joint-graph pass that leaves nothing stale gets no warning.
	g, store, p, loss = tanhModel(t)
	grads, err = graph.Grad(loss, p)
	require.NoError(t, err)
	noop := passes.Pass{Name: "Nothing", Run: func(*graph.Graph) (string, error) { return "", nil }}
	prep, err = passes.Prepare(g, store, passes.Config{TrainOutputs: append([]*graph.Node{loss}, grads...), Passes: []passes.Pass{noop}})
	require.NoError(t, err)
	require.Empty(t, prep.Warnings)

	_, err = passes.Prepare(g, store, passes.Config{ForwardPasses: []passes.Pass{rebuild}, EvalOutputs: []*graph.Node{loss}})
	require.ErrorContains(t, err, "ForwardPasses need the forward graph's Loss")
	_, err = passes.Prepare(g, store, passes.Config{Loss: loss})
	require.ErrorContains(t, err, "without Params")
}

// TestWarningNamesTheStaleNodes prints what a user sees.
func TestWarningNamesTheStaleNodes(t *testing.T) {
	g, store, p, loss := tanhModel(t)
	grads, err := graph.Grad(loss, p)
	require.NoError(t, err)
	prep, err := passes.Prepare(g, store, passes.Config{TrainOutputs: append([]*graph.Node{loss}, grads...), Passes: []passes.Pass{rebuild}})
	require.NoError(t, err)
	t.Log(prep.Warnings[0])
	require.Regexp(t, `"[^"]*tanh[^"]*" \(read by "[^"]*"`, prep.Warnings[0])
}

// TestRebuildWithTheKit is the forward rewrite's test with passestest:
// one tanh runs, the loss and gradients are the model's as written, and
// finite differences agree.
func TestRebuildWithTheKit(t *testing.T) {
	model := func() (*graph.Node, []*graph.Node, error) {
		g, _, p, loss := tanhModel(t)
		return loss, []*graph.Node{p}, g.Err()
	}
	p := passestest.Equivalent(t, model, 1e-6, []uint64{1, 2}, rebuild)
	require.Equal(t, 1, p.Count(ops.KindTanh), "%v", p.Ops())
	passestest.FiniteDifferences(t, p, 1e-2, 1e-3, 8)
}
