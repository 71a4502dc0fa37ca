package main

import (
	"fmt"
	"runtime"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
)

// gpt2Config is the GPT-2 124M shape: 12 layers, 12 heads, width 768,
// GPT-2's vocabulary padded to 50,304, at context 64 (gpt2Batch rows of
// random tokens).
var gpt2Config = nn.GPTConfig{Layers: 12, Heads: 12, Embd: 768, Block: 64, Vocab: 50304, Seed: 1}

const gpt2Batch = 4

// runGPT2 adds the GPT-2 124M figures to r: one training iteration
// (feed, forward, backward, AdamW) in each precision, interleaved, the
// median of reps; the iteration's GEMM FLOPs, counted from the compiled
// float32 program, and the fraction of the float32 GEMM rate measured
// above that the iteration reaches; and the activation arena the
// compiler plans for the same model at context 512 in float32 and FP8
// (compiled, not run).
func runGPT2(r *Results, reps int) error { return runGPT2Config(r, reps, gpt2Config, gpt2Batch) }

// runGPT2Config is runGPT2 for another configuration and batch (the
// tests run a small one), the arena planned at context 8× cfg.Block.
func runGPT2Config(r *Results, reps int, cfg nn.GPTConfig, batch int) error {
	var steps []func() error
	var fp32 *graph.Program
	for i, rec := range precisions {
		step, prog, _, err := gptTraining(cfg, batch, rec, false)
		if err != nil {
			return fmt.Errorf("GPT-2 124M: %w", err)
		}
		if i == 0 {
			fp32 = prog
		}
		steps = append(steps, step)
	}
	ts, err := samples(reps, steps...)
	if err != nil {
		return fmt.Errorf("GPT-2 124M: %w", err)
	}
	d := median(ts)
	ms := func(i int) float64 { return float64(d[i].Microseconds()) / 1000 }
	r.GPT2FP32, r.GPT2BF16, r.GPT2FP8 = ms(0), ms(1), ms(2)
	r.GPT2BF16OverFP32, r.GPT2FP8OverFP32 = pairedRatio(ts[1], ts[0]), pairedRatio(ts[2], ts[0])
	r.GPT2GEMMGFLOP = float64(gemmFlops(fp32)) / 1e9
	if r.GemmFP32 > 0 {
		r.GPT2RooflineFP32 = r.GPT2GEMMGFLOP / r.GemmFP32 / d[0].Seconds()
	}
	steps, fp32 = nil, nil
	runtime.GC()

	long := cfg
	long.Block = 8 * cfg.Block
	arenas := []*int64{&r.GPT2T512ArenaFP32, &r.GPT2T512ArenaFP8}
	for i, rec := range [...]int{0, 2} { // float32, FP8
		_, prog, _, err := gptTraining(long, batch, precisions[rec], false)
		if err != nil {
			return fmt.Errorf("GPT-2 124M at context 512: %w", err)
		}
		*arenas[i] = int64(prog.Stats().ArenaBytes)
		runtime.GC()
	}
	r.GPT2T512ArenaRatio = float64(r.GPT2T512ArenaFP8) / float64(r.GPT2T512ArenaFP32)
	return nil
}

// gemmFlops sums the GEMM FLOPs of a program's nodes.
func gemmFlops(p *graph.Program) int64 {
	var total int64
	for _, n := range p.Schedule() {
		if f, ok := ops.GEMMFlops(n); ok {
			total += f
		}
	}
	return total
}
