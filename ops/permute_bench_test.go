package ops_test

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// BenchmarkPermuteAttention is the GPT attention's head split, [B T H D]
// → [B H T D]: the innermost axis stays innermost.
func BenchmarkPermuteAttention(b *testing.B) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 12, 64, 4, 32)
	y := ops.Permute(x, 0, 2, 1, 3)
	p, err := graph.Compile(g, nil, graph.Options{}, y)
	if err != nil {
		b.Fatal(err)
	}
	_ = p.FeedFloat32(x, make([]float32, 12*64*4*32))
	b.SetBytes(4 * 12 * 64 * 4 * 32)
	for i := 0; i < b.N; i++ {
		_ = p.Run()
	}
}
