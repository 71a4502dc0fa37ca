package ops_test

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// Linear builds a layer's forward GEMM (role Fprop); graph.Grad appends
// its Dgrad and Wgrad GEMMs, which the FP8 passes find through the roles.
func ExampleLinear() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	w := g.Param("fc.weight", 1, 3)
	y := ops.Linear("fc", x, w, nil)
	loss := ops.Sum(y)
	grads, _ := graph.Grad(loss, w)

	store := graph.NewStore()
	_ = store.SetFloat32("fc.weight", []float32{1, 2, 3}, 1, 3)
	p, _ := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0])
	_ = p.FeedFloat32(x, []float32{1, 1, 1, 0, 1, 0})
	_ = p.Run()
	l, _ := p.Scalar(loss)
	fmt.Println(y.Role(), l, p.Float32(grads[0]))
	// Output: fprop 8 [1 2 1]
}

// CausalAttention reads q, k and v side by side from a fused QKV
// projection's output and returns the heads concatenated: here one head
// of width 2 over three tokens whose keys are all equal, so each token's
// output is the mean of the values it may see (itself and earlier ones).
func ExampleCausalAttention() {
	g := graph.New()
	qkv := g.Input("qkv", graph.Float32, 1, 3, 6) // [B T 3C], C = 2
	y := ops.CausalAttention(qkv, 1)
	p, _ := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	_ = p.FeedFloat32(qkv, []float32{
		1, 0, 1, 1, 3, 0, // token 0: q, k, v
		1, 0, 1, 1, 0, 3, // token 1
		1, 0, 1, 1, 3, 3, // token 2
	})
	_ = p.Run()
	fmt.Println(y.Shape(), p.Float32(y))
	// Output: [1 3 2] [3 0 1.5 1.5 2 2]
}
