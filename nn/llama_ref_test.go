package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/llamaref"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
)

// TestLlamaMatchesFloat64Reference: the loss and every parameter's
// gradient of a random 2-layer grouped-query Llama (tied and untied
// embeddings) match the float64 definition — the gradient by central
// differences of the float64 loss — to 1e-4 relative (max |diff| / max
// |ref| per tensor).
func TestLlamaMatchesFloat64Reference(t *testing.T) {
	base := nn.LlamaConfig{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 24, MaxPositionEmbeddings: 8, RopeTheta: 10000, RMSNormEps: 1e-5, InitializerRange: 0.3}
	mixtral := base
	mixtral.NumExperts, mixtral.NumExpertsPerTok, mixtral.NormTopKProb, mixtral.IntermediateSize = 4, 2, true, 8
	mixtral.OutputRouterLogits, mixtral.RouterAuxLossCoef = true, 0.25
	qwen3 := base
	qwen3.QKNorm, qwen3.HeadDimension, qwen3.NumExperts, qwen3.NumExpertsPerTok, qwen3.MoEIntermediateSize = true, 6, 5, 3, 8
	qwen3.MLPOnlyLayers, qwen3.OutputRouterLogits, qwen3.RouterAuxLossCoef = []int{0}, true, 0.5
	qwen2 := base
	qwen2.QKVBias, qwen2.NumExperts, qwen2.NumExpertsPerTok, qwen2.MoEIntermediateSize, qwen2.SharedExpertIntermediateSize = true, 4, 2, 8, 12
	qwen2.TieWordEmbeddings = true
	untied, tied := base, base
	tied.TieWordEmbeddings = true
	for name, cfg := range map[string]nn.LlamaConfig{"untied": untied, "tied": tied, "mixtral": mixtral, "qwen3_moe": qwen3, "qwen2_moe": qwen2} {
		const b, T = 2, 6
		g := graph.New()
		bl := nn.NewBuilder(g)
		m, err := nn.NewLlama(bl, cfg)
		require.NoError(t, err)
		ids, labels := g.Input("ids", graph.Int32, b, T), g.Input("labels", graph.Int32, b, T)
		logits, router := m.ForwardRouter(ids)
		require.Len(t, router, map[string]int{"mixtral": 2, "qwen3_moe": 1, "qwen2_moe": 2}[name], name)
		loss := ops.CrossEntropy(logits, labels)
		if aux := m.AuxLoss(router); aux != nil {
			loss = ops.Add(loss, aux)
		}
		grads, err := graph.Grad(loss, bl.Params()...)
		require.NoError(t, err)
		store := graph.NewStore()
		require.NoError(t, bl.Init(store, 11))
		for _, p := range bl.Params() { // norms away from 1 and biases away from 0 too
			if len(p.Shape()) == 1 {
				v := store.Float32(p.Name())
				for i := range v {
					v[i] = 1 + 0.3*float32(math.Sin(float64(i+len(p.Name()))))
				}
			}
		}
		prog, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
		require.NoError(t, err)
		xs, ys := make([]int32, b*T), make([]int32, b*T)
		for i := range xs {
			xs[i], ys[i] = int32(i*5%24), int32((i*7+3)%24)
		}
		require.NoError(t, prog.FeedInt32(ids, xs))
		require.NoError(t, prog.FeedInt32(labels, ys))
		require.NoError(t, prog.Run())

		ref := llamaref.FromStore(cfg, store, bl.Params())
		want := ref.Loss(xs, ys, b, T)
		got := float64(prog.Float32(loss)[0])
		require.InEpsilon(t, want, got, 1e-5, "%s loss", name)
		for i, p := range bl.Params() {
			e := llamaref.RelErr(prog.Float32(grads[i]), ref.Grad(p.Name(), xs, ys, b, T))
			require.Less(t, e, 1e-4, "%s %s", name, p.Name())
		}
	}
}
