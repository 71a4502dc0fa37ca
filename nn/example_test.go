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

// A Llama-style decoder in Hugging Face's terms: its parameters carry
// transformers' names and shapes (package hf reads and writes them).
func ExampleNewLlama() {
	cfg := nn.LlamaConfig{HiddenSize: 64, IntermediateSize: 128, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 1000, MaxPositionEmbeddings: 128, TieWordEmbeddings: true}
	b := nn.NewBuilder(graph.New())
	m, err := nn.NewLlama(b, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	logits := m.Forward(b.Graph().Input("ids", graph.Int32, 2, 16))
	fmt.Println(logits.Shape(), b.NumParams(), cfg.HeadDim())
	fmt.Println(b.Params()[1].Name(), b.Params()[1].Shape())
	// Output:
	// [2 16 1000] 138048 16
	// model.layers.0.input_layernorm.weight [64]
}

// A Mixtral-style Mixture-of-Experts block: 8 experts, each token to
// its top 2, with transformers' load-balancing loss over the router's
// logits.
func ExampleNewMoE() {
	b := nn.NewBuilder(graph.New())
	x := b.Graph().Input("x", graph.Float32, 4, 16, 64)
	moe, err := nn.NewMoE(b, "model.layers.0.block_sparse_moe", nn.MoEConfig{Experts: 8, TopK: 2, Hidden: 64, Intermediate: 128, NormTopKProb: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	y, logits := moe.Forward(x)
	aux := nn.LoadBalancingLoss([]*graph.Node{logits}, 8, 2)
	fmt.Println(y.Shape(), logits.Shape(), aux.Shape(), b.NumParams())
	for _, p := range b.Params() {
		fmt.Println(p.Name(), p.Shape())
	}
	// Output:
	// [4 16 64] [64 8] [] 197120
	// model.layers.0.block_sparse_moe.gate.weight [8 64]
	// model.layers.0.block_sparse_moe.experts.gate_up_proj [8 256 64]
	// model.layers.0.block_sparse_moe.experts.down_proj [8 64 128]
}
