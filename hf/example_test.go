package hf_test

import (
	"fmt"
	"math"
	"os"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/nn"
)

// A Llama written in the transformers layout and its configuration
// read back: the directory from_pretrained reads.
func ExampleSaveLlama() {
	cfg := nn.LlamaConfig{HiddenSize: 64, IntermediateSize: 128, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 1000, MaxPositionEmbeddings: 128, TieWordEmbeddings: true}
	b := nn.NewBuilder(graph.New())
	m, err := nn.NewLlama(b, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := b.Graph().Input("ids", graph.Int32, 2, 16)
	logits := m.Forward(ids)
	store := graph.NewStore()
	_ = b.Init(store, 1)
	dir, _ := os.MkdirTemp("", "llama")
	defer os.RemoveAll(dir)
	if err := hf.SaveLlama(dir, m, store); err != nil {
		fmt.Println(err)
		return
	}
	back, _ := hf.ReadLlamaConfig(dir)
	fmt.Println(logits.Shape(), b.NumParams(), back.NumKeyValueHeads, back.HeadDim())
	fmt.Println(b.Params()[1].Name(), b.Params()[1].Shape())
	// Output:
	// [2 16 1000] 138048 2 16
	// model.layers.0.input_layernorm.weight [64]
}

// A trained Llama written as a Hugging Face FP8 checkpoint (the
// fine-grained FP8 layout DeepSeek-V3 and Qwen3-FP8 use), then read
// back: each linear weight is dequantized exactly from its E4M3 codes
// and 128×128 tile scales.
func ExampleExportLlama() {
	cfg := nn.LlamaConfig{HiddenSize: 128, IntermediateSize: 256, NumHiddenLayers: 1, NumAttentionHeads: 4,
		VocabSize: 256, MaxPositionEmbeddings: 64}
	b := nn.NewBuilder(graph.New())
	m, _ := nn.NewLlama(b, cfg)
	store := graph.NewStore()
	_ = b.Init(store, 1)
	dir, _ := os.MkdirTemp("", "llama-fp8")
	defer os.RemoveAll(dir)
	if err := hf.ExportLlama(dir, m, store, hf.Export{Format: hf.FP8Block}); err != nil {
		fmt.Println(err)
		return
	}
	back := graph.NewStore()
	if err := hf.LoadLlama(dir, m, back); err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"model.layers.0.self_attn.q_proj.weight", "lm_head.weight"} {
		w, q := store.Float32(name), back.Float32(name)
		var maxErr, maxW float64
		for i := range w {
			maxErr = max(maxErr, math.Abs(float64(q[i]-w[i])))
			maxW = max(maxW, math.Abs(float64(w[i])))
		}
		fmt.Printf("%s: max |error| / max |w| = %.4f\n", name, maxErr/maxW)
	}
	// Output:
	// model.layers.0.self_attn.q_proj.weight: max |error| / max |w| = 0.0435
	// lm_head.weight: max |error| / max |w| = 0.0000
}
