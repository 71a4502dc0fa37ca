package nn_test

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
)

// A Builder gives layers fully qualified names and initialises their
// parameters from a seed, independently of creation order.
func ExampleNewMLP() {
	g := graph.New()
	b := nn.NewBuilder(g)
	mlp, _ := nn.NewMLP(b, "mlp", []int{784, 512, 10}, nn.ReLU, nn.Dropout{})
	logits := mlp.Forward(g.Input("x", graph.Float32, 32, 784))
	store := graph.NewStore()
	_ = b.Init(store, 1)
	for _, p := range b.Params() {
		fmt.Println(p.Name(), p.Shape())
	}
	fmt.Println(logits.Shape(), b.NumParams())
	// Output:
	// mlp.fc1.weight [512 784]
	// mlp.fc1.bias [512]
	// mlp.fc2.weight [10 512]
	// mlp.fc2.bias [10]
	// [32 10] 407050
}
