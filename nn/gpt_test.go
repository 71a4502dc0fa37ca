package nn

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// fdCheck compares the gradient of L = Σ out·R with respect to every
// parameter of b against central differences in float64 on a sample of
// entries; it returns the worst relative error ‖g−fd‖/‖fd‖.
func fdCheck(t *testing.T, b *Builder, params []*graph.Node, out *graph.Node, feeds func(p *graph.Program), sample int) float64 {
	t.Helper()
	g := b.Graph()
	rng := rand.New(rand.NewPCG(1, 9))
	r := g.Input("R", graph.Float32, out.Shape()...)
	rv := make([]float32, out.Shape().Numel())
	for i := range rv {
		rv[i] = float32(rng.NormFloat64())
	}
	grads, err := graph.Grad(ops.Sum(ops.Mul(out, r)), params...)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 3))
	for _, p := range b.Params() { // LayerNorm γ/β away from 1/0 so every path matters
		v := store.Float32(p.Name())
		for i := range v {
			v[i] += 0.1 * float32(rng.NormFloat64())
		}
	}
	gp, err := graph.Compile(g, store, graph.Options{Training: true}, grads...)
	require.NoError(t, err)
	require.NoError(t, gp.FeedFloat32(r, rv))
	feeds(gp)
	require.NoError(t, gp.Run())
	fp, err := graph.Compile(g, store, graph.Options{Training: true}, out)
	require.NoError(t, err)
	feeds(fp)
	loss := func() float64 {
		require.NoError(t, fp.Run())
		var s float64
		for i, v := range fp.Float32(out) {
			s += float64(v) * float64(rv[i])
		}
		return s
	}
	worst := 0.0
	for i, p := range params {
		got := gp.Float32(grads[i])
		vals := store.Float32(p.Name())
		var num, den float64
		for _, j := range rng.Perm(len(vals))[:min(sample, len(vals))] {
			v := vals[j]
			h := float32(1e-2) * max(1, float32(math.Abs(float64(v))))
			vals[j] = v + h
			lp := loss()
			vals[j] = v - h
			lm := loss()
			vals[j] = v
			fd := (lp - lm) / float64(2*h)
			d := float64(got[j]) - fd
			num += d * d
			den += fd * fd
		}
		rel := math.Sqrt(num) / max(math.Sqrt(den), 1e-6)
		if rel > 2e-3 {
			t.Errorf("gradient of %s: relative error %.3g", p.Name(), rel)
		}
		worst = max(worst, rel)
	}
	return worst
}

func TestAttentionGradients(t *testing.T) {
	g := graph.New()
	b := NewBuilder(g)
	x := b.Param("x", Normal(1), 2, 5, 8)
	attn, err := NewCausalSelfAttention(b, "attn", 8, 2, Dropout{}, Normal(0.3))
	require.NoError(t, err)
	y := attn.Forward(x)
	require.Equal(t, graph.Shape{2, 5, 8}, y.Shape())
	worst := fdCheck(t, b, b.Params(), y, func(*graph.Program) {}, 40)
	t.Logf("attention: worst relative gradient error %.2g", worst)
}

func TestBlockGradients(t *testing.T) {
	g := graph.New()
	b := NewBuilder(g)
	x := b.Param("x", Normal(1), 2, 4, 8)
	m, err := NewGPT(b, "gpt", GPTConfig{Layers: 1, Heads: 2, Embd: 8, Block: 4, Vocab: 5})
	require.NoError(t, err)
	y := m.Blocks[0].Forward(x)
	var params []*graph.Node
	for _, p := range b.Params() {
		if p == x || strings.HasPrefix(p.Name(), "gpt.h.0.") {
			params = append(params, p)
		}
	}
	require.Len(t, params, 13)
	worst := fdCheck(t, b, params, y, func(*graph.Program) {}, 30)
	t.Logf("transformer block: worst relative gradient error %.2g", worst)
}

func TestGPTForwardShapesAndCausality(t *testing.T) {
	g := graph.New()
	b := NewBuilder(g)
	cfg := GPTConfig{Layers: 2, Heads: 2, Embd: 16, Block: 6, Vocab: 11}
	m, err := NewGPT(b, "gpt", cfg)
	require.NoError(t, err)
	ids := g.Input("ids", graph.Int32, 1, 6)
	pos := g.Input("pos", graph.Int32, 6)
	logits := m.Forward(ids, pos)
	require.Equal(t, graph.Shape{1, 6, 11}, logits.Shape())
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 1))
	p, err := graph.Compile(g, store, graph.Options{}, logits)
	require.NoError(t, err)
	require.NoError(t, p.FeedInt32(pos, []int32{0, 1, 2, 3, 4, 5}))
	run := func(seq []int32) []float32 {
		require.NoError(t, p.FeedInt32(ids, seq))
		require.NoError(t, p.Run())
		return append([]float32(nil), p.Float32(logits)...)
	}
	a := run([]int32{1, 2, 3, 4, 5, 6})
	c := run([]int32{1, 2, 3, 9, 9, 9})
	require.Equal(t, a[:3*11], c[:3*11], "positions 0–2 do not see later tokens")
	require.NotEqual(t, a[3*11:4*11], c[3*11:4*11])
	for _, name := range []string{"gpt.h.1.attn.qkv", "gpt.h.0.mlp.fc", "gpt.lm_head", "gpt.ln_f"} {
		require.NotNil(t, g.Lookup(name), name)
	}
	_, err = NewGPT(b, "bad", GPTConfig{Layers: 1, Heads: 3, Embd: 16, Block: 4, Vocab: 5})
	require.ErrorContains(t, err, "heads")
}
