package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
)

// moeConfig is a Mixtral-style Mixture of Experts: width 256, 4 layers,
// 8 heads / 2 key/value heads, 8 experts top-2 of SwiGLU width 512, a
// vocabulary of 8192, context 128; moeBatch its batch.
var moeConfig = nn.LlamaConfig{ModelType: "mixtral", HiddenSize: 256, IntermediateSize: 512, NumHiddenLayers: 4, NumAttentionHeads: 8, NumKeyValueHeads: 2,
	VocabSize: 8192, MaxPositionEmbeddings: 128, RopeTheta: 10000, NumExperts: 8, NumExpertsPerTok: 2, NormTopKProb: true}

const moeBatch = 8

// runMoE measures one training iteration (forward, backward, AdamW) of
// the MoE in the three precisions, interleaved, and the float32 grouped
// GEMM of its first expert layer (the batch's 2048 routed rows, 256 per
// expert, times the experts' [1024 256] gate_up weights) beside the
// dense GEMM of the same rows and one weight, interleaved; medians of
// reps.
func runMoE(r *Results, reps int) error {
	var steps []func() error
	for _, rec := range precisions {
		step, _, err := llamaTraining(moeConfig, moeBatch, rec)
		if err != nil {
			return fmt.Errorf("MoE: %w", err)
		}
		steps = append(steps, step)
	}
	ts, err := samples(reps, steps...)
	if err != nil {
		return fmt.Errorf("MoE: %w", err)
	}
	d := median(ts)
	ms := func(i int) float64 { return float64(d[i].Microseconds()) / 1000 }
	r.MoEFP32, r.MoEBF16, r.MoEFP8 = ms(0), ms(1), ms(2)
	r.MoEBF16OverFP32, r.MoEFP8OverFP32 = pairedRatio(ts[1], ts[0]), pairedRatio(ts[2], ts[0])

	e, k := moeConfig.NumExperts, moeConfig.NumExpertsPerTok
	rows, in, out := moeBatch*moeConfig.MaxPositionEmbeddings*k, moeConfig.HiddenSize, 2*moeConfig.IntermediateSize
	rng := rand.New(rand.NewPCG(8, 8))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	xv, wv := rnd(rows*in), rnd(e*out*in)
	counts := make([]int32, e)
	for i := range counts {
		counts[i] = int32(rows / e)
	}
	gemm := func(grouped bool) (func() error, error) {
		g := graph.New()
		x := g.Input("x", graph.Float32, rows, in)
		var y *graph.Node
		var cn *graph.Node
		store := graph.NewStore()
		if grouped {
			w := g.Param("w", e, out, in)
			cn = g.Input("counts", graph.Int32, e)
			y = ops.GroupedLinear("experts", x, cn, w)
			if err := store.SetFloat32("w", wv, e, out, in); err != nil {
				return nil, err
			}
		} else {
			w := g.Param("w", out, in)
			y = ops.MatMul(x, w, false, true)
			if err := store.SetFloat32("w", wv[:out*in], out, in); err != nil {
				return nil, err
			}
		}
		p, err := graph.Compile(g, store, graph.Options{}, y)
		if err != nil {
			return nil, err
		}
		if err := p.FeedFloat32(x, xv); err != nil {
			return nil, err
		}
		if grouped {
			if err := p.FeedInt32(cn, counts); err != nil {
				return nil, err
			}
		}
		return p.Run, nil
	}
	gr, err := gemm(true)
	if err != nil {
		return fmt.Errorf("MoE grouped GEMM: %w", err)
	}
	dn, err := gemm(false)
	if err != nil {
		return fmt.Errorf("MoE dense GEMM: %w", err)
	}
	ts, err = samples(reps*5, gr, dn)
	if err != nil {
		return fmt.Errorf("MoE GEMMs: %w", err)
	}
	d = median(ts)
	flop := 2 * float64(rows) * float64(in) * float64(out)
	r.MoEGroupedGFLOPS, r.MoEDenseGFLOPS = flop/d[0].Seconds()/1e9, flop/d[1].Seconds()/1e9
	r.MoEGroupedOverDense = 1 / pairedRatio(ts[0], ts[1])
	return nil
}
