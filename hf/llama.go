package hf

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
)

// ReadLlamaConfig reads a Hugging Face Llama config.json in dir. Keys
// Octet does not model are refused when they would change the model:
// rope_scaling other than absent or null, hidden_act other than silu,
// attention_bias or mlp_bias true, a head_dim other than hidden_size /
// num_attention_heads, a model_type other than llama. Other keys
// (architectures, torch_dtype, token ids, …) are ignored.
func ReadLlamaConfig(dir string) (nn.LlamaConfig, error) {
	raw, path, err := readHFConfig(dir)
	if err != nil {
		return nn.LlamaConfig{}, err
	}
	var c nn.LlamaConfig
	var act, modelType string
	var attnBias, mlpBias bool
	headDim := -1
	err = decodeHFKeys(path, raw, []hfKey{
		{"hidden_size", &c.HiddenSize, true}, {"intermediate_size", &c.IntermediateSize, true},
		{"num_hidden_layers", &c.NumHiddenLayers, true}, {"num_attention_heads", &c.NumAttentionHeads, true},
		{"num_key_value_heads", &c.NumKeyValueHeads, false}, {"rms_norm_eps", &c.RMSNormEps, false},
		{"rope_theta", &c.RopeTheta, false}, {"vocab_size", &c.VocabSize, true},
		{"max_position_embeddings", &c.MaxPositionEmbeddings, true}, {"tie_word_embeddings", &c.TieWordEmbeddings, false},
		{"initializer_range", &c.InitializerRange, false}, {"hidden_act", &act, false}, {"model_type", &modelType, false},
		{"attention_bias", &attnBias, false}, {"mlp_bias", &mlpBias, false}, {"head_dim", &headDim, false},
	})
	if err != nil {
		return c, err
	}
	if v, ok := raw["rope_scaling"]; ok && string(v) != "null" {
		return c, hfErr(path, "key \"rope_scaling\": %s: only unscaled rotary embeddings are supported (absent or null)", v)
	}
	switch {
	case modelType != "" && modelType != "llama":
		return c, hfErr(path, "key \"model_type\": %q, want \"llama\"", modelType)
	case act != "" && act != "silu":
		return c, hfErr(path, "key \"hidden_act\": %q, want \"silu\"", act)
	case attnBias:
		return c, hfErr(path, "key \"attention_bias\": true: projections with biases are not supported")
	case mlpBias:
		return c, hfErr(path, "key \"mlp_bias\": true: projections with biases are not supported")
	}
	if _, given := raw["num_key_value_heads"]; !given {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("hf: %w: %s: %w", ErrCheckpoint, path, err)
	}
	if headDim != -1 && headDim != c.HeadDim() {
		return c, hfErr(path, "key \"head_dim\": %d, want hidden_size / num_attention_heads = %d", headDim, c.HeadDim())
	}
	return c, nil
}

// llamaTensors returns the Llama's tensors in the layout.
func llamaTensors(m *nn.Llama) []hfTensor {
	ts := []hfTensor{{name: "model.embed_tokens.weight", param: m.Embed}}
	for i, l := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, t := range []struct {
			name string
			n    *graph.Node
		}{{"input_layernorm.weight", l.InputNorm.Weight}, {"self_attn.q_proj.weight", l.Q}, {"self_attn.k_proj.weight", l.K},
			{"self_attn.v_proj.weight", l.V}, {"self_attn.o_proj.weight", l.O}, {"post_attention_layernorm.weight", l.PostNorm.Weight},
			{"mlp.gate_proj.weight", l.Gate}, {"mlp.up_proj.weight", l.Up}, {"mlp.down_proj.weight", l.Down}} {
			ht := hfTensor{name: p + t.name, param: t.n, linear: strings.HasSuffix(t.name, "proj.weight")}
			switch t.n {
			case l.Q, l.K, l.V:
				ht.layer, _ = l.FusedNames()
			case l.Gate, l.Up:
				_, ht.layer = l.FusedNames()
			}
			ts = append(ts, ht)
		}
	}
	ts = append(ts, hfTensor{name: "model.norm.weight", param: m.Norm.Weight})
	if !m.Config.TieWordEmbeddings {
		ts = append(ts, hfTensor{name: "lm_head.weight", param: m.Head, linear: true})
	}
	return ts
}

// LoadLlama sets m's parameters in store from dir's
// model.safetensors (float32, bfloat16 or float16 tensors, converted to
// float32 exactly), checking every tensor first: one missing, one the
// model has no place for, a wrong shape or dtype is an error naming the
// tensor, and nothing is stored. Read the config with ReadLlamaConfig
// and build the model with it first.
func LoadLlama(dir string, m *nn.Llama, store *graph.Store) error {
	fs, err := openHF(dir)
	if err != nil {
		return err
	}
	return loadHFFrom(fs, store, llamaTensors(m), nil)
}

// SaveLlama writes m in the layout to dir (created if needed):
// config.json with its LlamaConfig (model_type llama, architectures
// LlamaForCausalLM) and model.safetensors with its float32 parameters
// under Hugging Face's names (no lm_head.weight when tied), each file
// replaced atomically.
func SaveLlama(dir string, m *nn.Llama, store *graph.Store) error {
	return ExportLlama(dir, m, store, Export{})
}

// ExportLlama writes m to dir as SaveLlama does, its linear weights
// in e.Format (see Format; the head is kept in high precision, as are
// e.Keep's modules) with the quantization_config the format defines.
// A weight that LoadLlama read from a checkpoint in the same format and
// that still equals that checkpoint's dequantized codes bit for bit is
// written with those codes (so load then export reproduces the file);
// any other weight is cast afresh. A NaN or infinite weight is refused,
// naming it, before anything is written.
func ExportLlama(dir string, m *nn.Llama, store *graph.Store, e Export) error {
	cfg := m.Config.Resolved()
	extra := map[string]any{"model_type": "llama", "architectures": []string{"LlamaForCausalLM"}, "hidden_act": "silu",
		"torch_dtype": "float32", "rope_scaling": nil, "attention_bias": false, "mlp_bias": false, "head_dim": cfg.HeadDim()}
	return exportHF(dir, store, cfg, extra, llamaTensors(m), e)
}

func newLlamaModel(dir string, b *nn.Builder) (*Model, error) {
	cfg, err := ReadLlamaConfig(dir)
	if err != nil {
		return nil, err
	}
	m, err := nn.NewLlama(b, cfg)
	if err != nil {
		return nil, err
	}
	return &Model{Type: "llama", Net: m,
		Load:   func(dir string, store *graph.Store) error { return LoadLlama(dir, m, store) },
		Export: func(dir string, store *graph.Store, e Export) error { return ExportLlama(dir, m, store, e) }}, nil
}
