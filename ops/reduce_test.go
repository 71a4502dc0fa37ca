package ops_test

import (
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
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
