package hf_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/nn"
)

// moeConfigs are small models of each sparse and dense model type.
func moeConfigs() map[string]nn.LlamaConfig {
	base := nn.LlamaConfig{HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 64, MaxPositionEmbeddings: 16, RopeTheta: 10000, RMSNormEps: 1e-5, InitializerRange: 0.02}
	mixtral := base
	mixtral.NumExperts, mixtral.NumExpertsPerTok, mixtral.NormTopKProb = 4, 2, true
	mixtral.RouterAuxLossCoef, mixtral.OutputRouterLogits = 0.02, true
	qwen3 := base
	qwen3.QKNorm, qwen3.HeadDimension = true, 16
	qwen3moe := qwen3
	qwen3moe.NumExperts, qwen3moe.NumExpertsPerTok, qwen3moe.MoEIntermediateSize, qwen3moe.MLPOnlyLayers, qwen3moe.NormTopKProb = 8, 2, 16, []int{1}, true
	qwen3moe.RouterAuxLossCoef, qwen3moe.DecoderSparseStep = 0.001, 1
	qwen2 := base
	qwen2.QKVBias = true
	qwen2moe := qwen2
	qwen2moe.NumExperts, qwen2moe.NumExpertsPerTok, qwen2moe.MoEIntermediateSize, qwen2moe.SharedExpertIntermediateSize = 4, 3, 16, 32
	qwen2moe.TieWordEmbeddings, qwen2moe.RouterAuxLossCoef, qwen2moe.DecoderSparseStep = true, 0.001, 1
	return map[string]nn.LlamaConfig{"mixtral": mixtral, "qwen3": qwen3, "qwen3_moe": qwen3moe, "qwen2": qwen2, "qwen2_moe": qwen2moe}
}

// TestDecoderTypesRoundTrip: each model type saves (experts one tensor
// per expert, and stacked), reads back as the same type and config, and
// loads every parameter bit for bit from either layout; the two layouts
// name the tensors as transformers does.
func TestDecoderTypesRoundTrip(t *testing.T) {
	for typ, cfg := range moeConfigs() {
		m, b, store := newLlama(t, cfg, 7)
		got, err := hf.DecoderType(cfg)
		require.NoError(t, err)
		require.Equal(t, typ, got)
		for _, stacked := range []bool{false, true} {
			dir := t.TempDir()
			require.NoError(t, hf.ExportLlama(dir, m, store, hf.Export{StackedExperts: stacked}), typ)
			back, err := hf.ReadLlamaConfig(dir)
			require.NoError(t, err, typ)
			want := cfg.Resolved()
			want.ModelType = typ
			if want.HeadDimension == want.HiddenSize/want.NumAttentionHeads {
				want.HeadDimension = 0
			}
			require.Equal(t, want.Resolved(), back.Resolved(), typ)
			m2, b2, _ := newLlama(t, back, 99)
			store2 := graph.NewStore()
			require.NoError(t, hf.LoadLlama(dir, m2, store2), typ)
			for i, p := range b.Params() {
				require.Equal(t, p.Name(), b2.Params()[i].Name())
				require.Equal(t, bitsOf(store.Float32(p.Name())), bitsOf(store2.Float32(p.Name())), "%s %s", typ, p.Name())
			}
			st := readST(t, filepath.Join(dir, hf.WeightsFile))
			names := strings.Join(st.Names(), " ")
			if cfg.NumExperts == 0 {
				continue
			}
			expert := map[string]string{"mixtral": "model.layers.0.block_sparse_moe.experts.3.w3.weight",
				"qwen3_moe": "model.layers.0.mlp.experts.7.up_proj.weight", "qwen2_moe": "model.layers.1.mlp.experts.3.down_proj.weight"}[typ]
			if stacked {
				expert = "model.layers.0.mlp.experts.gate_up_proj"
			}
			require.Contains(t, names, expert, typ)
			// A per-expert tensor is its slice of the stacked one.
			if !stacked {
				v, ok := st.Tensor(strings.Replace(expert, "experts.3.w3", "experts.1.w1", 1))
				if typ == "mixtral" {
					require.True(t, ok)
					I, H := cfg.IntermediateSize, cfg.HiddenSize
					gu := store.Float32("model.layers.0.mlp.experts.gate_up_proj")
					require.Equal(t, f32Bytes(gu[2*I*H:3*I*H]), v.Data(), "expert 1's w1 is rows 0…I of its gate_up_proj")
				}
			}
		}
	}
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 0, 4*len(v))
	for _, b := range bitsOf(v) {
		out = append(out, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
	}
	return out
}

// TestDecoderFP8ExpertsRoundTrip: an FP8 export quantizes every expert's
// weights as linear weights, and a load dequantizes them back into the
// stacked parameters.
func TestDecoderFP8ExpertsRoundTrip(t *testing.T) {
	cfg := moeConfigs()["mixtral"]
	m, _, store := newLlama(t, cfg, 3)
	dir := t.TempDir()
	require.NoError(t, hf.ExportLlama(dir, m, store, hf.Export{Format: hf.FP8Block}))
	ts := readRaw(t, filepath.Join(dir, hf.WeightsFile))
	require.Equal(t, "F8_E4M3", ts["model.layers.1.block_sparse_moe.experts.2.w2.weight"].dtype)
	require.Equal(t, "F32", ts["model.layers.1.block_sparse_moe.gate.weight"].dtype, "the router stays high precision")
	m2, _, _ := newLlama(t, cfg, 5)
	store2 := graph.NewStore()
	require.NoError(t, hf.LoadLlama(dir, m2, store2))
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	down := store2.Float32("model.layers.1.mlp.experts.down_proj")
	want := dequantRef(t, ts, hf.FP8Block, "model.layers.1.block_sparse_moe.experts.2.w2")
	require.Equal(t, bitsOf(want), bitsOf(down[2*H*I:3*H*I]))
	// Load then export gives the same file: each expert's codes are kept
	// (float32 tile scales, which a fresh cast of the dequantized weights
	// would not reproduce, too).
	for _, e := range []hf.Export{{Format: hf.FP8Block}, {Format: hf.FP8Block, FP32Scales: true}} {
		src, dst := t.TempDir(), t.TempDir()
		require.NoError(t, hf.ExportLlama(src, m, store, e))
		m3, _, _ := newLlama(t, cfg, 5)
		store3 := graph.NewStore()
		require.NoError(t, hf.LoadLlama(src, m3, store3))
		require.NoError(t, hf.ExportLlama(dst, m3, store3, e))
		a, err := os.ReadFile(filepath.Join(src, hf.WeightsFile))
		require.NoError(t, err)
		c, err := os.ReadFile(filepath.Join(dst, hf.WeightsFile))
		require.NoError(t, err)
		require.Equal(t, a, c, "FP32Scales %v", e.FP32Scales)
	}
}

// TestDecoderHostile: configs and checkpoints that cannot be the model
// are refused before anything is stored, naming the key or tensor.
func TestDecoderHostile(t *testing.T) {
	cfgs := moeConfigs()
	good := map[string]string{}
	for _, typ := range []string{"mixtral", "qwen3_moe", "qwen2_moe"} {
		m, _, store := newLlama(t, cfgs[typ], 5)
		good[typ] = t.TempDir()
		require.NoError(t, hf.SaveLlama(good[typ], m, store))
	}
	for _, c := range []struct{ typ, from, to, want string }{
		{"mixtral", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 5`, "num_experts_per_tok"},
		{"mixtral", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 0`, "num_experts_per_tok"},
		{"mixtral", `"num_local_experts": 4`, `"num_local_experts": -1`, "num_local_experts"},
		{"mixtral", `"num_local_experts": 4,`, ``, `key "num_local_experts" is missing`},
		{"mixtral", `"router_jitter_noise": 0`, `"router_jitter_noise": 0.01`, "router_jitter_noise"},
		{"mixtral", `"sliding_window": null`, `"sliding_window": 4`, "sliding_window"},
		{"qwen3_moe", `"mlp_only_layers": [`, `"mlp_only_layers": [7, `, "mlp_only_layers"},
		{"qwen3_moe", `"decoder_sparse_step": 1`, `"decoder_sparse_step": -2`, "decoder_sparse_step"},
		{"qwen3_moe", `"use_sliding_window": false`, `"use_sliding_window": true`, "use_sliding_window"},
		{"qwen3_moe", `"router_aux_loss_coef": 0.001`, `"router_aux_loss_coef": -1`, "router_aux_loss_coef"},
		{"qwen3_moe", `"model_type": "qwen3_moe"`, `"model_type": "deepseek_v3"`, "model_type"},
		{"qwen2_moe", `"shared_expert_intermediate_size": 32`, `"shared_expert_intermediate_size": -1`, "shared_expert_intermediate_size"},
		{"qwen2_moe", `"moe_intermediate_size": 16,`, ``, `key "moe_intermediate_size" is missing`},
		{"qwen2_moe", `"model_type": "qwen2_moe"`, `"layer_types": ["full_attention", "sliding_attention"], "model_type": "qwen2_moe"`, `layer 1 is "sliding_attention"`},
		{"qwen2_moe", `"model_type": "qwen2_moe"`, `"layer_types": "full", "model_type": "qwen2_moe"`, `key "layer_types"`},
		{"qwen3_moe", `"num_attention_heads": 4`, `"num_attention_heads": 0`, "num_attention_heads"},
	} {
		conf, err := os.ReadFile(filepath.Join(good[c.typ], hf.ConfigFile))
		require.NoError(t, err)
		edited := strings.Replace(string(conf), c.from, c.to, 1)
		require.NotEqual(t, string(conf), edited, "%s %s", c.typ, c.from)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), []byte(edited), 0o644))
		_, err = hf.ReadLlamaConfig(dir)
		require.Error(t, err, c.want)
		require.True(t, errors.Is(err, hf.ErrCheckpoint), "%v", err)
		require.Contains(t, err.Error(), c.want)
	}

	// Full attention in every layer, stated, is accepted.
	conf, err := os.ReadFile(filepath.Join(good["qwen2_moe"], hf.ConfigFile))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), []byte(strings.Replace(string(conf), `"model_type"`, `"layer_types": ["full_attention", "full_attention"], "model_type"`, 1)), 0o644))
	_, err = hf.ReadLlamaConfig(dir)
	require.NoError(t, err)

	// Tensors: a missing expert, a stacked tensor with the wrong number
	// of experts, NaN router weights.
	cfg := cfgs["mixtral"]
	m, _, store := newLlama(t, cfg, 5)
	perExpert, stacked := t.TempDir(), t.TempDir()
	require.NoError(t, hf.SaveLlama(perExpert, m, store))
	require.NoError(t, hf.ExportLlama(stacked, m, store, hf.Export{StackedExperts: true}))
	for _, c := range []struct {
		dir, name string
		edit      func(v rawTensor) (rawTensor, bool)
		want      string
	}{
		{perExpert, "model.layers.1.block_sparse_moe.experts.3.w2.weight", nil, `"model.layers.1.block_sparse_moe.experts.3.w2.weight" is missing`},
		{stacked, "model.layers.0.mlp.experts.down_proj", func(v rawTensor) (rawTensor, bool) {
			e, h, i := v.shape[0], v.shape[1], v.shape[2]
			v.shape, v.data = []int{e - 1, h, i}, v.data[:(e-1)*h*i*4]
			return v, true
		}, `"model.layers.0.mlp.experts.down_proj" has shape [3 32 48], the model wants [4 32 48]`},
		{perExpert, "model.layers.0.block_sparse_moe.gate.weight", func(v rawTensor) (rawTensor, bool) {
			v.data = append([]byte(nil), v.data...)
			copy(v.data[4*5:], []byte{0, 0, 0xc0, 0x7f}) // NaN
			return v, true
		}, `"model.layers.0.block_sparse_moe.gate.weight" element 5 is NaN`},
	} {
		ts := readRaw(t, filepath.Join(c.dir, hf.WeightsFile))
		if c.edit == nil {
			delete(ts, c.name)
		} else {
			v, _ := c.edit(ts[c.name])
			ts[c.name] = v
		}
		dir := t.TempDir()
		conf, err := os.ReadFile(filepath.Join(c.dir, hf.ConfigFile))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), conf, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, hf.WeightsFile), encodeRaw(t, ts), 0o644))
		fresh := graph.NewStore()
		err = hf.LoadLlama(dir, m, fresh)
		require.ErrorIs(t, err, hf.ErrCheckpoint, c.name)
		require.Contains(t, err.Error(), c.want)
		require.Nil(t, fresh.Float32("model.embed_tokens.weight"), "nothing stored")
	}
}

// TestDecoderTypeConflicts: a configuration no model type holds, or one
// its stated type cannot hold, is refused naming the field.
func TestDecoderTypeConflicts(t *testing.T) {
	cfgs := moeConfigs()
	for _, c := range []struct {
		edit func(*nn.LlamaConfig)
		want string
	}{
		{func(c *nn.LlamaConfig) { c.ModelType = "llama" }, "num_experts"},
		{func(c *nn.LlamaConfig) { c.NormTopKProb = false }, "norm_topk_prob"},
		{func(c *nn.LlamaConfig) { c.SharedExpertIntermediateSize = 8 }, "shared_expert_intermediate_size"},
		{func(c *nn.LlamaConfig) { c.ModelType = "qwen2_moe" }, "QKVBias"},
		{func(c *nn.LlamaConfig) { c.ModelType = "gemma" }, `model type "gemma"`},
	} {
		cfg := cfgs["mixtral"]
		c.edit(&cfg)
		_, err := hf.DecoderType(cfg)
		require.ErrorIs(t, err, hf.ErrCheckpoint)
		require.Contains(t, err.Error(), c.want)
		m, _, store := newLlama(t, cfgs["mixtral"], 1)
		m.Config = cfg
		require.ErrorIs(t, hf.SaveLlama(t.TempDir(), m, store), hf.ErrCheckpoint, fmt.Sprint(c.want))
	}
}
