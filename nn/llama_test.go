package nn_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// tinyLlama is a 2-layer grouped-query Llama whose widths are multiples
// of 16 (every projection converts to FP8).
func tinyLlama(tied bool) nn.LlamaConfig {
	return nn.LlamaConfig{HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 64, MaxPositionEmbeddings: 16, TieWordEmbeddings: tied, RopeTheta: 10000, RMSNormEps: 1e-5}
}

// TestLlamaParameterNames: the parameters carry Hugging Face's names and
// shapes, lm_head only when untied.
func TestLlamaParameterNames(t *testing.T) {
	for _, tied := range []bool{false, true} {
		g := graph.New()
		b := nn.NewBuilder(g)
		_, err := nn.NewLlama(b, tinyLlama(tied))
		require.NoError(t, err)
		got := map[string]graph.Shape{}
		for _, p := range b.Params() {
			got[p.Name()] = p.Shape()
		}
		want := map[string]graph.Shape{"model.embed_tokens.weight": {64, 32}, "model.norm.weight": {32}}
		for _, l := range []string{"0", "1"} {
			p := "model.layers." + l + "."
			want[p+"input_layernorm.weight"] = graph.Shape{32}
			want[p+"post_attention_layernorm.weight"] = graph.Shape{32}
			want[p+"self_attn.q_proj.weight"] = graph.Shape{32, 32}
			want[p+"self_attn.k_proj.weight"] = graph.Shape{16, 32}
			want[p+"self_attn.v_proj.weight"] = graph.Shape{16, 32}
			want[p+"self_attn.o_proj.weight"] = graph.Shape{32, 32}
			want[p+"mlp.gate_proj.weight"] = graph.Shape{48, 32}
			want[p+"mlp.up_proj.weight"] = graph.Shape{48, 32}
			want[p+"mlp.down_proj.weight"] = graph.Shape{32, 48}
		}
		if !tied {
			want["lm_head.weight"] = graph.Shape{64, 32}
		}
		require.Equal(t, want, got, "tied=%v", tied)
	}
}

// TestLlamaConfigRefusals: each bad configuration is refused naming its
// key, matching ErrLlamaConfig.
func TestLlamaConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		edit func(*nn.LlamaConfig)
		key  string
	}{
		{func(c *nn.LlamaConfig) { c.HiddenSize = 0 }, "hidden_size"},
		{func(c *nn.LlamaConfig) { c.IntermediateSize = -3 }, "intermediate_size"},
		{func(c *nn.LlamaConfig) { c.NumHiddenLayers = 0 }, "num_hidden_layers"},
		{func(c *nn.LlamaConfig) { c.VocabSize = 0 }, "vocab_size"},
		{func(c *nn.LlamaConfig) { c.MaxPositionEmbeddings = 0 }, "max_position_embeddings"},
		{func(c *nn.LlamaConfig) { c.NumAttentionHeads = 5 }, "num_attention_heads"},
		{func(c *nn.LlamaConfig) { c.NumKeyValueHeads = 3 }, "num_key_value_heads"},
		{func(c *nn.LlamaConfig) { c.NumKeyValueHeads = -1 }, "num_key_value_heads"},
		{func(c *nn.LlamaConfig) { c.NumAttentionHeads = 32 }, "num_attention_heads"}, // head width 1: odd
		{func(c *nn.LlamaConfig) { c.RMSNormEps = math.NaN() }, "rms_norm_eps"},
		{func(c *nn.LlamaConfig) { c.RopeTheta = -1 }, "rope_theta"},
	} {
		cfg := tinyLlama(false)
		c.edit(&cfg)
		_, err := nn.NewLlama(nn.NewBuilder(graph.New()), cfg)
		require.Error(t, err, c.key)
		require.True(t, errors.Is(err, nn.ErrLlamaConfig), "%v", err)
		require.Contains(t, err.Error(), c.key)
	}
}

// TestLlamaFP8Graph: with the TE recipe every projection is an FP8
// linear layer (the report names qkv_proj, o_proj, gate_up_proj and
// down_proj of each layer), every pre-attention and pre-MLP RMSNorm
// writes FP8 into its GEMM, and a training step runs to a finite loss.
func TestLlamaFP8Graph(t *testing.T) {
	g := graph.New()
	b := nn.NewBuilder(g)
	m, err := nn.NewLlama(b, tinyLlama(false))
	require.NoError(t, err)
	ids := g.Input("ids", graph.Int32, 2, 16)
	labels := g.Input("labels", graph.Int32, 2, 16)
	loss := ops.CrossEntropy(m.Forward(ids), labels)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 1))
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{}, Loss: loss, Params: b.Params()})
	require.NoError(t, err)
	converted := prep.Report.Converted()
	require.Len(t, converted, 9, "four projections per layer and the head: %+v", prep.Report.Layers)
	for _, want := range []string{"model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj", "model.layers.1.mlp.gate_up_proj", "model.layers.1.mlp.down_proj", "lm_head"} {
		require.True(t, slices.Contains(converted, want), "%s not converted: %+v", want, prep.Report.Layers)
	}
	var dump strings.Builder
	require.NoError(t, g.WriteText(&dump, prep.Loss))
	text := dump.String()
	for _, norm := range []string{"model.layers.0.input_layernorm/fp8", "model.layers.0.post_attention_layernorm/fp8", "model.layers.1.input_layernorm/fp8", "model.layers.1.post_attention_layernorm/fp8"} {
		require.Contains(t, text, norm, "RMSNorm not fused into its FP8 cast")
	}
	feed := make([]int32, 32)
	for i := range feed {
		feed[i] = int32(i * 7 % 64)
	}
	require.NoError(t, prep.Train.FeedInt32(ids, feed))
	require.NoError(t, prep.Train.FeedInt32(labels, feed))
	require.NoError(t, prep.Train.Run())
	l := prep.Train.Float32(prep.Loss)[0]
	require.False(t, math.IsNaN(float64(l)) || math.IsInf(float64(l), 0), "loss %v", l)
	require.InDelta(t, math.Log(64), l, 0.5, "an untrained model's loss is near log(vocab)")
}

// TestLlamaDefaults: a zero rms_norm_eps, rope_theta or
// num_key_value_heads takes Llama's default (1e-6, 10000, the attention
// heads), a set one is used as given; HeadDim of no heads is 0.
func TestLlamaDefaults(t *testing.T) {
	require.Equal(t, 0, nn.LlamaConfig{}.HeadDim())
	for _, c := range []struct {
		eps, theta float64
		kv         int
		wantEps    float32
		wantTheta  float64
		wantKV     int
	}{{0, 0, 0, 1e-6, 10000, 4}, {0.25, 500000, 2, 0.25, 500000, 2}} {
		cfg := tinyLlama(false)
		cfg.RMSNormEps, cfg.RopeTheta, cfg.NumKeyValueHeads = c.eps, c.theta, c.kv
		g := graph.New()
		m, err := nn.NewLlama(nn.NewBuilder(g), cfg)
		require.NoError(t, err)
		logits := m.Forward(g.Input("ids", graph.Int32, 1, 8))
		require.NoError(t, g.Err())
		var norms, atts int
		for _, n := range graph.Live(graph.Options{Training: true}, logits) {
			if rc, ok := graph.SettingsOf[ops.RMSNormConfig](n); ok {
				require.Equal(t, c.wantEps, rc.Eps, n.Name())
				norms++
			}
			if ac, ok := graph.SettingsOf[ops.AttentionConfig](n); ok {
				require.Equal(t, c.wantTheta, ac.RoPETheta)
				require.Equal(t, c.wantKV, ac.KVHeads)
				atts++
			}
		}
		require.Equal(t, 5, norms, "two per layer and the final norm")
		require.Equal(t, 2, atts)
	}
}

// TestLlamaContextTooLong: ids longer than max_position_embeddings give
// one error naming the limit, and the loss built on the result adds none.
func TestLlamaContextTooLong(t *testing.T) {
	g := graph.New()
	m, err := nn.NewLlama(nn.NewBuilder(g), tinyLlama(false))
	require.NoError(t, err)
	ids := g.Input("ids", graph.Int32, 1, 17)
	loss := ops.CrossEntropy(ops.Reshape(m.Forward(ids), 17, 64), g.Input("labels", graph.Int32, 17))
	require.NotNil(t, loss)
	err = g.Err()
	require.ErrorContains(t, err, "max_position_embeddings 16")
	require.Equal(t, 1, strings.Count(err.Error(), "\n")+1, "one error: %v", err)
}
