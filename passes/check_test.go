package passes

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestStageChecksCatchIllegalGraphs prepares a LayerNorm → Linear →
// Linear model, then breaks what each stage guarantees, one at a time,
// and checks that that stage's check refuses the graph.
func TestStageChecksCatchIllegalGraphs(t *testing.T) {
	build := func() (*graph.Graph, *registry, *graph.Node) {
		g := graph.New()
		x := g.Input("x", graph.Float32, 16, 32)
		y := g.Input("labels", graph.Int32, 16)
		gm, bt := g.Param("ln.weight", 32), g.Param("ln.bias", 32)
		w1, w2 := g.Param("fc1.weight", 32, 32), g.Param("fc2.weight", 16, 32)
		h := ops.Linear("fc1", ops.LayerNorm("ln", x, gm, bt, ops.LayerNormConfig{}), w1, nil)
		loss := ops.CrossEntropy(ops.Linear("fc2", ops.ReLU(h), w2, nil), y)
		grads, err := graph.Grad(loss, gm, bt, w1, w2)
		require.NoError(t, err)
		store := graph.NewStore()
		require.NoError(t, store.Init(g, func(_ *graph.Node, v []float32) {
			for i := range v {
				v[i] = 0.01 * float32(i%7)
			}
		}))
		_, err = Prepare(g, store, Config{Recipe: recipe.TE{}, TrainOutputs: append([]*graph.Node{loss}, grads...)})
		require.NoError(t, err)
		return g, registryOf(g), loss
	}
	g, reg, _ := build()
	require.NoError(t, checkWrapped(g))
	l := reg.layers["fc1"]
	require.NotNil(t, l.autocast)

	// A node reading a converted layer's original dgrad.
	g, reg, _ = build()
	l = reg.layers["fc2"]
	bad := ops.Scale(l.hpDgrad, 2)
	require.NoError(t, g.Err())
	require.ErrorContains(t, checkConverted(g), "still reads")
	_ = bad

	// A node reading the cast a LayerNorm was fused into.
	g, reg, _ = build()
	require.NotEmpty(t, reg.ln)
	f := reg.ln[0]
	ops.ScaledMatMul("stray", f.quantize, f.quantize, false, true, nil)
	require.NoError(t, g.Err())
	require.NoError(t, checkConverted(g))
	require.ErrorContains(t, checkFused(g), "fused into")

	// A node reading a wrapped layer's FP8 output around its Switch.
	g, reg, _ = build()
	ops.Scale(reg.layers["fc1"].fpFprop, 2)
	require.NoError(t, g.Err())
	require.NoError(t, checkFused(g))
	require.ErrorContains(t, checkWrapped(g), "around its autocast Switch")
}

// TestRewriteCountsAndCaptures checks the rule engine itself: patterns
// with inputs (nil a wildcard), Where and Bind, the counts Rewrite
// returns, and Keep, which rewires without forwarding handles.
func TestRewriteCountsAndCaptures(t *testing.T) {
	g := graph.New()
	a, b := g.Input("a", graph.Float32, 4), g.Input("b", graph.Float32, 4)
	s1 := ops.Add(ops.Neg(a), b)
	s2 := ops.Add(b, ops.Neg(a))
	s3 := ops.Add(a, b)
	out := ops.Add(ops.Add(s1, s2), s3)
	require.NoError(t, g.Err())
	var bound []*graph.Node
	counts, err := Rewrite(g, g.Nodes(), Rule{
		Name:    "neg-first",
		Pattern: &Pattern{Kind: ops.KindAdd, Inputs: []*Pattern{{Kind: ops.KindNeg, Inputs: []*Pattern{{Bind: "x"}}}, nil}},
		Apply: func(n *graph.Node, m Match) (*graph.Node, error) {
			bound = append(bound, m["x"])
			return ops.Sub(n.Input(1), m["x"]), nil
		},
	}, Rule{
		Name:    "never",
		Pattern: &Pattern{Kind: ops.KindAdd, Where: func(*graph.Node) bool { return false }},
		Apply:   func(*graph.Node, Match) (*graph.Node, error) { t.Fatal("Where was ignored"); return nil, nil },
	})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"neg-first": 1}, counts, "only s1 has a Neg first")
	require.Equal(t, []*graph.Node{a}, bound)
	require.Equal(t, "Sub", g.Resolve(s1).Op().Type(), "the handle of s1 follows its replacement")

	// Keep: s3's readers other than out's inner Add read a copy; s3 itself
	// stays s3 for the kept reader, and its handle is not forwarded.
	cp := ops.Scale(s3, 1)
	other := ops.Neg(s3)
	_, err = Rewrite(g, []*graph.Node{s3}, Rule{
		Name:    "rewire",
		Pattern: &Pattern{Kind: ops.KindAdd},
		Apply:   func(*graph.Node, Match) (*graph.Node, error) { return cp, nil },
		Keep:    func(c *graph.Node) bool { return c == out },
	})
	require.NoError(t, err)
	require.Equal(t, s3, g.Resolve(s3))
	require.Equal(t, s3, out.Input(1), "the kept consumer still reads s3")
	require.Equal(t, cp, other.Input(0), "another consumer reads the replacement")
	require.Equal(t, s3, cp.Input(0), "the replacement itself still reads s3")
}
