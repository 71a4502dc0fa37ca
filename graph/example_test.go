package graph_test

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// Build a linear layer, append its backward graph, compile a training
// program and run one step.
func Example() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	w := g.Param("fc.weight", 1, 3)
	b := g.Param("fc.bias", 1)
	loss := ops.Mean(ops.Linear("fc", x, w, b))
	grads, err := graph.Grad(loss, w, b)
	if err != nil {
		fmt.Println(err)
		return
	}

	store := graph.NewStore()
	_ = store.SetFloat32("fc.weight", []float32{1, 2, 3}, 1, 3)
	_ = store.SetFloat32("fc.bias", []float32{0.5}, 1)
	prog, err := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0], grads[1])
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = prog.FeedFloat32(x, []float32{1, 0, 0, 0, 1, 1})
	if err := prog.Run(); err != nil {
		fmt.Println(err)
		return
	}
	l, _ := prog.Scalar(loss)
	fmt.Println("loss:", l)
	fmt.Println("dW:", prog.Float32(grads[0]))
	fmt.Println("db:", prog.Float32(grads[1]))
	fmt.Println("roles:", g.Lookup("fc").Role(), g.Lookup("fc.wgrad").Role())
	// Output:
	// loss: 3.5
	// dW: [0.5 0.5 0.5]
	// db: [1]
	// roles: fprop wgrad
}

// Graph errors name the node and the shapes involved.
func ExampleGraph_Err() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 8, 16)
	w := g.Param("fc.weight", 32, 15)
	ops.Linear("fc", x, w, nil)
	fmt.Println(g.Err())
	// Output:
	// graph: node "fc" (Linear): input "x" [8 16] does not end in the weight's in-features ("fc.weight" [32 15])
}
