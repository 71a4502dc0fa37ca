package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
	"github.com/octetml/octet/train"
)

// llamaConfig is examples/llama's default model: llama2.c's smallest
// story model's shape (width 288, 6 layers, 6 heads, 2 key/value heads,
// SwiGLU 768) over GPT-2's BPE vocabulary padded to 50,304, context 256;
// llamaBatch its default batch.
var llamaConfig = nn.LlamaConfig{HiddenSize: 288, IntermediateSize: 768, NumHiddenLayers: 6, NumAttentionHeads: 6, NumKeyValueHeads: 2,
	VocabSize: 50304, MaxPositionEmbeddings: 256, RopeTheta: 10000}

const llamaBatch = 4

// llamaTraining returns one training iteration (forward, backward,
// AdamW) of a Llama of cfg on random tokens, through the library, with
// its compiled program.
func llamaTraining(cfg nn.LlamaConfig, batch int, rec recipe.Recipe) (func() error, *graph.Program, error) {
	t := cfg.MaxPositionEmbeddings
	model := func(rows int, _ bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		m, err := nn.NewLlama(b, cfg)
		if err != nil {
			return nil, err
		}
		ids, labels := g.Input("ids", graph.Int32, rows, t), g.Input("labels", graph.Int32, rows, t)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": ids, "y": labels}, Loss: ops.CrossEntropy(m.Forward(ids), labels)}, g.Err()
	}
	rng := rand.New(rand.NewPCG(6, 6))
	xs, ys := make([]int32, batch*t), make([]int32, batch*t)
	for i := range xs {
		xs[i], ys[i] = rng.Int32N(int32(cfg.VocabSize)), rng.Int32N(int32(cfg.VocabSize))
	}
	ds, err := data.NewTensors(data.Int32Column("x", xs, t), data.Column{Field: data.Field{Name: "y", DType: graph.Int32, Shape: []int{t}, Label: true}, I32: ys})
	if err != nil {
		return nil, nil, err
	}
	step, _, s, err := stepper(model, ds, batch, rec, nil, "", false, 0.1, 3e-4)
	if err != nil {
		return nil, nil, err
	}
	return step, s.Program(), nil
}

// runLlama measures one iteration of examples/llama's default model in
// the three precisions, interleaved, the median of reps.
func runLlama(r *Results, reps int, cfg nn.LlamaConfig, batch int) error {
	var steps []func() error
	for _, rec := range precisions {
		step, _, err := llamaTraining(cfg, batch, rec)
		if err != nil {
			return fmt.Errorf("Llama: %w", err)
		}
		steps = append(steps, step)
	}
	ts, err := samples(reps, steps...)
	if err != nil {
		return fmt.Errorf("Llama: %w", err)
	}
	d := median(ts)
	ms := func(i int) float64 { return float64(d[i].Microseconds()) / 1000 }
	r.LlamaFP32, r.LlamaBF16, r.LlamaFP8 = ms(0), ms(1), ms(2)
	r.LlamaBF16OverFP32, r.LlamaFP8OverFP32 = pairedRatio(ts[1], ts[0]), pairedRatio(ts[2], ts[0])
	return nil
}
