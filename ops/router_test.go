package ops_test

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// topKRef is TopK's definition in float64: experts sorted by descending
// score + bias (ties to the lower index); with groups, each group's score
// is the sum of its two highest, the topkGroups best groups are kept
// (ties to the lower group) and the other groups' experts score 0.
func topKRef(scores, bias []float32, cfg ops.RouterConfig) []int32 {
	e := len(scores)
	choice := make([]float64, e)
	for j := range choice {
		choice[j] = float64(scores[j])
		if bias != nil {
			choice[j] = float64(float32(choice[j]) + bias[j]) // the op adds in float32
		}
	}
	if cfg.Groups > 0 {
		size := e / cfg.Groups
		type gs struct {
			g int
			v float64
		}
		var groups []gs
		for g := 0; g < cfg.Groups; g++ {
			vs := append([]float64(nil), choice[g*size:(g+1)*size]...)
			sort.Sort(sort.Reverse(sort.Float64Slice(vs)))
			groups = append(groups, gs{g, float64(float32(vs[0]) + float32(vs[1]))})
		}
		sort.SliceStable(groups, func(a, b int) bool { return groups[a].v > groups[b].v })
		keep := map[int]bool{}
		for _, g := range groups[:cfg.TopKGroups] {
			keep[g.g] = true
		}
		for j := range choice {
			if !keep[j/size] {
				choice[j] = 0
			}
		}
	}
	idx := make([]int, e)
	for j := range idx {
		idx[j] = j
	}
	sort.SliceStable(idx, func(a, b int) bool { return choice[idx[a]] > choice[idx[b]] })
	out := make([]int32, cfg.K)
	for k := range out {
		out[k] = int32(idx[k])
	}
	return out
}

func runTopK(t *testing.T, scores, bias []float32, tokens, experts int, cfg ops.RouterConfig) []int32 {
	t.Helper()
	g := graph.New()
	s := g.Input("scores", graph.Float32, tokens, experts)
	var b *graph.Node
	if bias != nil {
		b = g.Input("bias", graph.Float32, experts)
	}
	idx := ops.TopK(s, b, cfg)
	require.NoError(t, g.Err())
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, idx)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(s, scores))
	if b != nil {
		require.NoError(t, p.FeedFloat32(b, bias))
	}
	require.NoError(t, p.Run())
	v, err := p.Value(idx)
	require.NoError(t, err)
	return append([]int32(nil), v.I32...)
}

// TestTopKAgainstDefinition: random scores with many ties (values on a
// coarse grid), with and without bias and groups, against topKRef; a
// token count large enough for the parallel path.
func TestTopKAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		tokens, experts int
		cfg             ops.RouterConfig
		bias            bool
	}{
		{5, 4, ops.RouterConfig{K: 1}, false},
		{7, 8, ops.RouterConfig{K: 2}, false},
		{9, 8, ops.RouterConfig{K: 8}, true},
		{6, 16, ops.RouterConfig{K: 4, Groups: 4, TopKGroups: 2}, true},
		{6, 16, ops.RouterConfig{K: 3, Groups: 8, TopKGroups: 3}, false},
		{4096, 64, ops.RouterConfig{K: 6, Groups: 8, TopKGroups: 4}, true},
	} {
		scores := make([]float32, c.tokens*c.experts)
		for i := range scores {
			scores[i] = float32(rng.IntN(5)) / 4 // ties everywhere
		}
		var bias []float32
		if c.bias {
			bias = make([]float32, c.experts)
			for i := range bias {
				bias[i] = float32(rng.IntN(3)-1) / 4
			}
		}
		got := runTopK(t, scores, bias, c.tokens, c.experts, c.cfg)
		for r := 0; r < c.tokens; r++ {
			want := topKRef(scores[r*c.experts:(r+1)*c.experts], bias, c.cfg)
			require.Equal(t, want, got[r*c.cfg.K:(r+1)*c.cfg.K], "%+v token %d", c.cfg, r)
		}
	}
}

// TestTopKTies: equal scores go to the lower expert index, in order.
func TestTopKTies(t *testing.T) {
	got := runTopK(t, []float32{0.5, 0.7, 0.5, 0.7, 0.1, 0.5}, nil, 1, 6, ops.RouterConfig{K: 4})
	require.Equal(t, []int32{1, 3, 0, 2}, got)
	// A bias changes the choice only.
	got = runTopK(t, []float32{0.5, 0.7, 0.5, 0.7}, []float32{0, 0, 0.25, 0}, 1, 4, ops.RouterConfig{K: 2})
	require.Equal(t, []int32{2, 1}, got)
}

// TestTopKRefusals: bad configurations at build time, naming the key;
// non-finite scores at run time, naming the token and expert.
func TestTopKRefusals(t *testing.T) {
	for _, c := range []struct {
		cfg  ops.RouterConfig
		says string
	}{
		{ops.RouterConfig{K: 0}, "top-k 0 (num_experts_per_tok)"},
		{ops.RouterConfig{K: 9}, "top-k 9 (num_experts_per_tok), want 1 to the 8 experts"},
		{ops.RouterConfig{K: 2, Groups: 3, TopKGroups: 1}, "3 expert groups (n_group) for 8 experts"},
		{ops.RouterConfig{K: 2, Groups: 8, TopKGroups: 1}, "8 expert groups (n_group) for 8 experts"},
		{ops.RouterConfig{K: 2, Groups: 4, TopKGroups: 5}, "topk_group 5"},
		{ops.RouterConfig{K: 5, Groups: 4, TopKGroups: 2}, "top-k 5 exceeds the 4 experts"},
		{ops.RouterConfig{K: 2, TopKGroups: 2}, "topk_group 2 without expert groups"},
	} {
		g := graph.New()
		ops.TopK(g.Input("scores", graph.Float32, 3, 8), nil, c.cfg)
		require.ErrorContains(t, g.Err(), c.says, "%+v", c.cfg)
	}
	g := graph.New()
	ops.TopK(g.Input("scores", graph.Float32, 3, 8), g.Input("bias", graph.Float32, 7), ops.RouterConfig{K: 2})
	require.ErrorContains(t, g.Err(), "want [8] (one per expert)")

	scores := make([]float32, 12)
	scores[7] = float32(math.NaN())
	g = graph.New()
	s := g.Input("router", graph.Float32, 3, 4)
	idx := ops.TopK(s, nil, ops.RouterConfig{K: 2})
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, idx)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(s, scores))
	require.ErrorContains(t, p.Run(), "NaN at token 1, expert 3")
}

// TestGatherLastGradients: the routing weights of a Mixtral-style router
// (softmax, top-2, renormalised) differentiate as central differences
// say, through the kept weights only.
func TestGatherLastGradients(t *testing.T) {
	checkGrad(t, gradCase{name: "router weights", params: []graph.Shape{s(6, 5)}, values: func(rng *rand.Rand) float32 { return float32(2 * rng.NormFloat64()) },
		build: func(ps, _ []*graph.Node) *graph.Node {
			p := ops.Softmax(ps[0])
			w := ops.GatherLast(p, ops.TopK(p, nil, ops.RouterConfig{K: 2}))
			return ops.Div(w, ops.BroadcastTo(ops.SumKeepDims(w, 1), w.Shape()))
		}})
}

// TestGatherLastRefusesBadIndex: an index outside [0, E) fails the run,
// naming the token.
func TestGatherLastRefusesBadIndex(t *testing.T) {
	g := graph.New()
	x, idx := g.Input("x", graph.Float32, 2, 3), g.Input("idx", graph.Int32, 2, 2)
	y := ops.GatherLast(x, idx)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, make([]float32, 6)))
	require.NoError(t, p.FeedInt32(idx, []int32{0, 2, 1, 3}))
	require.ErrorContains(t, p.Run(), `"idx": index 3 at token 1, choice 1 is outside [0, 3)`)
}

// TestTopKBiasUpdate: with a bias update speed, each training step moves
// the selection bias by γ toward an even load (up for an expert below
// the mean, down above it, unchanged at it), from the step's own
// choices; an evaluation program leaves it alone; and the bias steers
// the next step's choice.
func TestTopKBiasUpdate(t *testing.T) {
	const tokens, experts = 4, 4
	g := graph.New()
	scores := g.Input("scores", graph.Float32, tokens, experts)
	bias := g.Param("bias", experts)
	idx := ops.TopK(scores, bias, ops.RouterConfig{K: 1, BiasUpdateSpeed: 0.25})
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("bias", make([]float32, experts), experts))
	// Tokens 0–2 prefer expert 0, token 3 expert 1: loads 3, 1, 0, 0
	// against a mean of 1.
	sc := []float32{
		0.9, 0.1, 0, 0,
		0.8, 0.2, 0, 0,
		0.7, 0.3, 0, 0,
		0.1, 0.6, 0.3, 0,
	}
	eval, err := graph.Compile(g, store, graph.Options{}, idx)
	require.NoError(t, err)
	require.NoError(t, eval.FeedFloat32(scores, sc))
	require.NoError(t, eval.Run())
	require.Equal(t, []float32{0, 0, 0, 0}, store.Float32("bias"), "evaluation updates nothing")
	train, err := graph.Compile(g, store, graph.Options{Training: true}, idx)
	require.NoError(t, err)
	require.NoError(t, train.FeedFloat32(scores, sc))
	require.NoError(t, train.Run())
	require.Equal(t, []int32{0, 0, 0, 1}, int32Of(t, train, idx))
	require.Equal(t, []float32{-0.25, 0, 0.25, 0.25}, store.Float32("bias"))
	require.NoError(t, train.Run())
	// Token 2 (0.7 − 0.25 = 0.45 vs expert 2's 0 + 0.25, expert 1's 0.3):
	// still expert 0; token 0's 0.9 − 0.25 too. Token 3: expert 1 (0.6)
	// over expert 2 (0.3 + 0.25).
	require.Equal(t, []float32{-0.5, 0, 0.5, 0.5}, store.Float32("bias"))
	for range 2 {
		require.NoError(t, train.Run())
	}
	// Bias 1 for experts 2 and 3 now outbids expert 0 (0.9 − 1): the
	// choice moved.
	require.NotEqual(t, []int32{0, 0, 0, 1}, int32Of(t, train, idx))
}

func int32Of(t *testing.T, p *graph.Program, n *graph.Node) []int32 {
	v, err := p.Value(n)
	require.NoError(t, err)
	return append([]int32(nil), v.I32...)
}
