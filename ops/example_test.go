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
