package ops_test

import (
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// TestSumToLeadingAxesExact checks that summing leading axes (a bias
// gradient) adds the rows in order, bit for bit like the plain loop, on
// shapes small and large enough to be split over the workers.
func TestSumToLeadingAxesExact(t *testing.T) {
	for _, c := range []struct{ x, to graph.Shape }{{s(3, 5, 7), s(7)}, {s(3, 5, 7), s(5, 7)}, {s(768, 104), s(104)}, {s(2, 384, 130), s(1, 130)}} {
		g := graph.New()
		x := g.Input("x", graph.Float32, c.x...)
		out := ops.SumTo(x, c.to)
		p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, out)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		v := make([]float32, c.x.Numel())
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * 1e3
		}
		if err := p.FeedFloat32(x, v); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		got := p.Float32(out)
		want := make([]float32, len(got))
		for i, e := range v {
			want[i%len(want)] += e
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v → %v: [%d] = %v, want %v", c.x, c.to, i, got[i], want[i])
			}
		}
	}
}

// Same-shape binary ops split over the workers in runs of 16 values
// compute every element as the loop does, the ragged end included.
func TestBinarySplitsElementwise(t *testing.T) {
	const rows, cols = 301, 117 // 35,217 values: split, not a multiple of 16
	g := graph.New()
	x := g.Input("x", graph.Float32, rows, cols)
	y := g.Input("y", graph.Float32, rows, cols)
	outs := []*graph.Node{ops.Add(x, y), ops.Sub(x, y), ops.Mul(x, y), ops.Div(x, y)}
	p, err := graph.Compile(g, nil, graph.Options{}, outs...)
	require.NoError(t, err)
	xv, yv := make([]float32, rows*cols), make([]float32, rows*cols)
	for i := range xv {
		xv[i], yv[i] = float32(i%97)*1.37-40, float32(i%89)*0.71+0.5
	}
	require.NoError(t, p.FeedFloat32(x, xv))
	require.NoError(t, p.FeedFloat32(y, yv))
	require.NoError(t, p.Run())
	for k, f := range []func(a, b float32) float32{
		func(a, b float32) float32 { return a + b }, func(a, b float32) float32 { return a - b },
		func(a, b float32) float32 { return a * b }, func(a, b float32) float32 { return a / b },
	} {
		got := p.Float32(outs[k])
		for i := range xv {
			require.Equal(t, f(xv[i], yv[i]), got[i], "op %d element %d", k, i)
		}
	}
}

// The embedding's gradient, its table rows split over the workers, adds
// each row's tokens in token order (repeated ids included) as one pass
// does; a bad id fails the step.
func TestEmbeddingGradSplitsInOrder(t *testing.T) {
	const vocab, d, tokens = 600, 70, 900 // 42,000 table values: split
	g := graph.New()
	table := g.Param("table", vocab, d)
	ids := g.Input("ids", graph.Int32, tokens)
	loss := ops.Sum(ops.Mul(ops.Embedding("emb", table, ids), g.Input("w", graph.Float32, tokens, d)))
	grads, err := graph.Grad(loss, table)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, store.Init(g, nil))
	p, err := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0])
	require.NoError(t, err)
	idv, wv := make([]int32, tokens), make([]float32, tokens*d)
	for i := range idv {
		idv[i] = int32((i * 7) % vocab) // every row, 300 of them twice
	}
	for i := range wv {
		wv[i] = float32(i%31)*1e6 - float32(i%17)*0.3 // order matters
	}
	require.NoError(t, p.FeedInt32(ids, idv))
	require.NoError(t, p.FeedFloat32(g.Lookup("w"), wv))
	require.NoError(t, p.Run())
	want := make([]float32, vocab*d)
	for i, id := range idv {
		for j := range d {
			want[int(id)*d+j] += wv[i*d+j]
		}
	}
	got := p.Float32(grads[0])
	for i := range want {
		require.Equal(t, want[i], got[i], "table value %d", i)
	}
	idv[3] = vocab
	require.NoError(t, p.FeedInt32(ids, idv))
	require.ErrorContains(t, p.Run(), "3")
}
