package ops_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// moeRef is a routed expert layer in float64 from its definition:
// y[t] = Σ_k w[t,k] · (x[t] · W_{idx[t,k]}ᵀ).
func moeRef(x []float32, idx []int32, w []float32, wts []float32, t, k, in, out int) []float64 {
	y := make([]float64, t*out)
	for tok := 0; tok < t; tok++ {
		for c := 0; c < k; c++ {
			e := int(idx[tok*k+c])
			for o := 0; o < out; o++ {
				var s float64
				for i := 0; i < in; i++ {
					s += float64(x[tok*in+i]) * float64(wts[(e*out+o)*in+i])
				}
				y[tok*out+o] += float64(w[tok*k+c]) * s
			}
		}
	}
	return y
}

// moeGraph routes x [T in] through experts w [E out in] with the given
// choices and weights.
func moeGraph(g *graph.Graph, x, idx, wt, w *graph.Node, experts int) *graph.Node {
	xs := ops.Dispatch(x, idx, experts)
	ys := ops.GroupedLinear("experts", xs, ops.ExpertCounts(idx, experts), w)
	return ops.Combine(ys, idx, wt, experts)
}

// TestRoutedExpertsAgainstDefinition: Dispatch, GroupedLinear and
// Combine give the float64 definition's outputs (to float32 rounding),
// with an expert that receives no token.
func TestRoutedExpertsAgainstDefinition(t *testing.T) {
	const tokens, k, experts, in, out = 9, 2, 4, 8, 5
	rng := rand.New(rand.NewPCG(5, 6))
	xv, wv, wtv := make([]float32, tokens*in), make([]float32, experts*out*in), make([]float32, tokens*k)
	for _, v := range [][]float32{xv, wv, wtv} {
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
	}
	idx := make([]int32, tokens*k)
	for i := range idx { // experts 0, 1, 3 only; each token two distinct
		idx[i] = []int32{0, 1, 3}[(i/k+i%k)%3]
	}
	g := graph.New()
	x, ix, wt := g.Input("x", graph.Float32, tokens, in), g.Input("idx", graph.Int32, tokens, k), g.Input("w", graph.Float32, tokens, k)
	w := g.Param("experts.weight", experts, out, in)
	y := moeGraph(g, x, ix, wt, w, experts)
	counts := ops.ExpertCounts(ix, experts)
	require.NoError(t, g.Err())
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("experts.weight", wv, experts, out, in))
	p, err := graph.Compile(g, store, graph.Options{}, y, counts)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, xv))
	require.NoError(t, p.FeedInt32(ix, idx))
	require.NoError(t, p.FeedFloat32(wt, wtv))
	require.NoError(t, p.Run())
	c, _ := p.Value(counts)
	require.Equal(t, []int32{6, 6, 0, 6}, c.I32)
	want := moeRef(xv, idx, wtv, wv, tokens, k, in, out)
	for i, v := range p.Float32(y) {
		require.InDelta(t, want[i], float64(v), 1e-5*(1+math.Abs(want[i])), "y[%d]", i)
	}
}

// TestRoutedExpertsGradients: gradients to x, the expert weights and
// the routing weights against central differences, with an expert that
// receives no token (its weight gradient is zero).
func TestRoutedExpertsGradients(t *testing.T) {
	const tokens, k, experts, in, out = 5, 2, 3, 4, 3
	// Choices among experts 0 and 1 only: expert 2 idle.
	checkGrad(t, gradCase{name: "routed experts", params: []graph.Shape{s(tokens, in), s(experts, out, in), s(tokens, k)},
		ints: []intInput{{s(tokens, k), 2}},
		build: func(ps, ints []*graph.Node) *graph.Node {
			return moeGraph(ps[0].Graph(), ps[0], ints[0], ps[2], ps[1], experts)
		}})
}

// TestGroupedLinearIsTheDenseGEMMOfEachGroup: each expert's rows of the
// output and of the input gradient, and its weight gradient, equal bit
// for bit what MatMul gives on that expert's rows alone; an idle expert's
// weight gradient is zero. Sizes cross the GEMM's blocked path.
func TestGroupedLinearIsTheDenseGEMMOfEachGroup(t *testing.T) {
	const in, out = 400, 48
	counts := []int32{37, 0, 130, 1}
	n := 0
	for _, c := range counts {
		n += int(c)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	rnd := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	xv, wv, dyv := rnd(n*in), rnd(len(counts)*out*in), rnd(n*out)
	// run builds y = f(x, w) and the gradients of Σ y·dy; feed feeds the
	// other inputs.
	run := func(rows, experts int, xd, wd, dyd []float32, f func(g *graph.Graph, x, w *graph.Node) *graph.Node, feed func(*graph.Program)) (y, dx, dw []float32) {
		g := graph.New()
		x, dy := g.Param("x", rows, in), g.Input("dy", graph.Float32, rows, out)
		w := g.Param("w", experts, out, in)
		yn := f(g, x, w)
		grads, err := graph.Grad(ops.Sum(ops.Mul(yn, dy)), x, w)
		require.NoError(t, err)
		store := graph.NewStore()
		require.NoError(t, store.SetFloat32("x", xd, rows, in))
		require.NoError(t, store.SetFloat32("w", wd, experts, out, in))
		p, err := graph.Compile(g, store, graph.Options{Training: true}, append(grads, yn)...)
		require.NoError(t, err)
		require.NoError(t, p.FeedFloat32(dy, dyd))
		if feed != nil {
			feed(p)
		}
		require.NoError(t, p.Run())
		return p.Float32(yn), p.Float32(grads[0]), p.Float32(grads[1])
	}
	var cn *graph.Node
	y, dx, dw := run(n, len(counts), xv, wv, dyv, func(g *graph.Graph, x, w *graph.Node) *graph.Node {
		cn = g.Input("counts", graph.Int32, len(counts))
		return ops.GroupedLinear("experts", x, cn, w)
	}, func(p *graph.Program) { require.NoError(t, p.FeedInt32(cn, counts)) })
	r0 := 0
	for e, c := range counts {
		ew := dw[e*out*in : (e+1)*out*in]
		if c == 0 {
			require.Equal(t, make([]float32, out*in), ew, "idle expert %d's weight gradient", e)
			continue
		}
		r1 := r0 + int(c)
		ey, edx, edw := run(int(c), 1, xv[r0*in:r1*in], wv[e*out*in:(e+1)*out*in], dyv[r0*out:r1*out], func(g *graph.Graph, x, w *graph.Node) *graph.Node {
			return ops.MatMul(x, ops.Reshape(w, out, in), false, true)
		}, nil)
		require.Equal(t, bitsOf(ey), bitsOf(y[r0*out:r1*out]), "expert %d output", e)
		require.Equal(t, bitsOf(edx), bitsOf(dx[r0*in:r1*in]), "expert %d input gradient", e)
		require.Equal(t, bitsOf(edw), bitsOf(ew), "expert %d weight gradient", e)
		r0 = r1
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestGroupedLinearRefusesBadCounts: group sizes that do not add up to
// the rows, or are negative, fail the run naming them.
func TestGroupedLinearRefusesBadCounts(t *testing.T) {
	for _, c := range []struct {
		counts []int32
		says   string
	}{{[]int32{2, 2}, "add up to 4 rows, the operand has 3"}, {[]int32{4, -1}, "expert 1 has -1 rows"}} {
		g := graph.New()
		x, cn, w := g.Input("x", graph.Float32, 3, 2), g.Input("counts", graph.Int32, 2), g.Param("w", 2, 2, 2)
		y := ops.GroupedLinear("experts", x, cn, w)
		store := graph.NewStore()
		require.NoError(t, store.SetFloat32("w", make([]float32, 8), 2, 2, 2))
		p, err := graph.Compile(g, store, graph.Options{}, y)
		require.NoError(t, err)
		require.NoError(t, p.FeedFloat32(x, make([]float32, 6)))
		require.NoError(t, p.FeedInt32(cn, c.counts))
		require.ErrorContains(t, p.Run(), c.says)
	}
}

// TestLogSumExp: against float64 with values that overflow exp in
// float32, and its gradient against central differences.
func TestLogSumExp(t *testing.T) {
	xv := []float32{100, 101, 99, -3, 0, 2.5}
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	y := ops.LogSumExp(x)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, xv))
	require.NoError(t, p.Run())
	for r := 0; r < 2; r++ {
		m := math.Inf(-1)
		for _, v := range xv[r*3 : r*3+3] {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range xv[r*3 : r*3+3] {
			s += math.Exp(float64(v) - m)
		}
		require.InDelta(t, m+math.Log(s), float64(p.Float32(y)[r]), 1e-5*math.Abs(m+math.Log(s))+1e-6)
	}
	checkGrad(t, gradCase{name: "LogSumExp", params: []graph.Shape{s(4, 6)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.LogSumExp(ps[0]) }})
}

// TestExpertShare: each expert's choices over the tokens.
func TestExpertShare(t *testing.T) {
	g := graph.New()
	idx := g.Input("idx", graph.Int32, 4, 2)
	f := ops.ExpertShare(idx, 3)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, f)
	require.NoError(t, err)
	require.NoError(t, p.FeedInt32(idx, []int32{0, 1, 1, 0, 0, 2, 0, 1}))
	require.NoError(t, p.Run())
	require.Equal(t, []float32{1, 0.75, 0.25}, p.Float32(f))
}

// TestRoutedExpertsAllocateNothing: a training step of routed experts
// allocates nothing after the first, whatever the routing.
func TestRoutedExpertsAllocateNothing(t *testing.T) {
	const tokens, k, experts, in, out = 256, 2, 4, 400, 48
	g := graph.New()
	x, ix, wt := g.Input("x", graph.Float32, tokens, in), g.Input("idx", graph.Int32, tokens, k), g.Input("w", graph.Float32, tokens, k)
	w := g.Param("experts.weight", experts, out, in)
	y := moeGraph(g, x, ix, wt, w, experts)
	grads, err := graph.Grad(ops.Sum(ops.Mul(y, y)), w)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("experts.weight", make([]float32, experts*out*in), experts, out, in))
	p, err := graph.Compile(g, store, graph.Options{Training: true}, grads...)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, make([]float32, tokens*in)))
	require.NoError(t, p.FeedFloat32(wt, make([]float32, tokens*k)))
	idx := make([]int32, tokens*k)
	step := 0
	run := func() {
		for i := range idx { // a different routing every step
			idx[i] = int32((i + step*(i%3+1)) % experts)
		}
		step++
		if err := p.FeedInt32(ix, idx); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if a := testing.AllocsPerRun(10, run); a != 0 {
		t.Errorf("%v allocations per step", a)
	}
}
