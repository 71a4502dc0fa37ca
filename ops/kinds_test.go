package ops_test

import (
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestEveryOpHasItsKind: every node of a prepared FP8 GPT training graph
// (forward, backward, casts, fused nodes) declares a kind whose name is
// its Type (a fused GEMM's Type names its GEMM and chain), and every kind
// is a different value.
func TestEveryOpHasItsKind(t *testing.T) {
	g := graph.New()
	b := nn.NewBuilder(g)
	gpt, err := nn.NewGPT(b, "gpt", nn.GPTConfig{Layers: 1, Heads: 2, Embd: 32, Block: 16, Vocab: 32, Dropout: 0.1, Seed: 1})
	require.NoError(t, err)
	ids, pos, labels := g.Input("ids", graph.Int32, 2, 16), g.Input("pos", graph.Int32, 16), g.Input("labels", graph.Int32, 2, 16)
	loss := ops.CrossEntropy(gpt.Forward(ids, pos), labels)
	grads, err := graph.Grad(loss, b.Params()...)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 1))
	_, err = passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: append([]*graph.Node{loss}, grads...),
		Filter: func(*graph.Node, string) bool { return true }})
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, n := range graph.Live(graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...) {
		k := graph.KindOf(n.Op())
		require.False(t, k.IsZero(), "%v has no kind", n)
		require.True(t, n.Is(k))
		if k == ops.KindFusedGEMM {
			require.False(t, ops.GEMMKind(n).IsZero(), "%v", n)
			require.Contains(t, n.Op().Type(), ops.GEMMKind(n).String()+"+")
		} else {
			require.Equal(t, k.String(), n.Op().Type(), "%v", n)
		}
		seen[k.String()] = true
	}
	require.Greater(t, len(seen), 20)
	require.False(t, ops.KindAdd == graph.NewKind("Add"), "a kind is its variable, not its name")
	require.False(t, (&graph.Node{}).Is(graph.Kind{}))
}

// TestSettingsReaders: a rule reads an op's settings, and a node of
// another kind reports false.
func TestSettingsReaders(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3, 4)
	w := g.Param("fc.weight", 5, 4)
	s := ops.Scale(x, 0.5)
	r := ops.Reshape(s, 6, 4)
	l := ops.Linear("fc", r, w, nil)
	p := ops.Permute(x, 2, 0, 1)
	m := ops.MatMul(r, w, false, true)
	sum := ops.SumKeepDims(x, 1)
	sl := ops.Slice(x, 2, 1, 3)
	c, ok := graph.SettingsOf[ops.ScaleConfig](s)
	require.True(t, ok)
	require.Equal(t, float32(0.5), c.Factor)
	_, ok = graph.SettingsOf[ops.ScaleConfig](r)
	require.False(t, ok)
	_, ok = graph.SettingsOf[ops.ScaleConfig](ops.Neg(x))
	require.False(t, ok, "a unary op other than Scale")
	require.True(t, r.Is(ops.KindReshape))
	require.Equal(t, graph.Shape{6, 4}, r.Shape())
	require.True(t, l.Is(ops.KindLinear))
	require.Equal(t, "fc", l.Name())
	pc, ok := graph.SettingsOf[ops.PermuteConfig](p)
	require.True(t, ok)
	require.Equal(t, []int{2, 0, 1}, pc.Axes)
	mc, ok := graph.SettingsOf[ops.MatMulConfig](m)
	require.True(t, ok)
	require.Equal(t, ops.MatMulConfig{TransB: true}, mc)
	_, ok = graph.SettingsOf[ops.MatMulConfig](p)
	require.False(t, ok)
	rc, ok := graph.SettingsOf[ops.ReduceConfig](sum)
	require.True(t, ok)
	require.Equal(t, []int{1}, rc.Axes)
	require.True(t, rc.KeepDims)
	sc, ok := graph.SettingsOf[ops.SliceConfig](sl)
	require.True(t, ok)
	require.Equal(t, ops.SliceConfig{Axis: 2, Start: 1, End: 3}, sc)
	lnq := ops.LayerNormQuantize("ln", ops.Reshape(x, 6, 4), g.Param("ln.g", 4), g.Param("ln.b", 4), ops.LayerNormConfig{Eps: 1e-3},
		ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}})
	lc, ok := graph.SettingsOf[ops.LayerNormConfig](lnq)
	require.True(t, ok)
	require.Equal(t, float32(1e-3), lc.Eps)
	_, ok = graph.SettingsOf[ops.RMSNormConfig](lnq)
	require.False(t, ok, "a LayerNormQuantize has no RMSNorm settings")
	q := ops.Quantize(x, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}})
	qc, ok := graph.SettingsOf[ops.QuantizeConfig](q)
	require.True(t, ok)
	require.Equal(t, fp8.E4M3, qc.Format)
	_, ok = graph.SettingsOf[ops.QuantizeConfig](nil)
	require.False(t, ok)
	require.NoError(t, g.Err())
}

func TestGEMMFlops(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3, 4)
	x2 := g.Input("x2", graph.Float32, 6, 4)
	w := g.Param("fc.weight", 5, 4)
	bt := g.Input("bt", graph.Float32, 7, 3, 4)
	q := ops.Quantize(x2, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}})
	qw := ops.Quantize(w, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}})
	for _, c := range []struct {
		name string
		n    *graph.Node
		want int64
	}{
		{"Linear over leading axes", ops.Linear("fc", x, w, nil), 2 * 6 * 5 * 4},
		{"MatMul transB", ops.MatMul(x2, w, false, true), 2 * 6 * 5 * 4},
		{"MatMul transA (k = rows of A)", ops.MatMul(x2, x2, true, false), 2 * 4 * 4 * 6},
		{"BatchMatMul", ops.BatchMatMul(bt, bt, false, true), 2 * 7 * 3 * 3 * 4},
		{"BatchMatMul transA", ops.BatchMatMul(bt, bt, true, false), 2 * 7 * 4 * 4 * 3},
		{"ScaledMatMul", ops.ScaledMatMul("fc", q, qw, false, true, nil), 2 * 6 * 5 * 4},
		{"ScaledMatMul transA", ops.ScaledMatMul("fc", q, q, true, false, nil), 2 * 4 * 4 * 6},
		{"BF16MatMul", ops.BF16MatMul("fc", x2, w, false, true, nil), 2 * 6 * 5 * 4},
	} {
		require.NoError(t, g.Err(), c.name)
		got, ok := ops.GEMMFlops(c.n)
		require.True(t, ok, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	mm := ops.MatMul(x2, x2, true, false)
	fused, err := ops.Fuse(ops.Chain{Head: mm, Nodes: []*graph.Node{ops.ReLU(mm)}, Value: []int{0}}, true)
	require.NoError(t, err)
	got, ok := ops.GEMMFlops(fused)
	require.True(t, ok)
	require.Equal(t, int64(2*4*4*6), got, "a fused GEMM counts its GEMM (transA)")
	_, ok = ops.GEMMFlops(ops.Scale(x, 2))
	require.False(t, ok)
	_, ok = ops.GEMMFlops(nil)
	require.False(t, ok)
}
