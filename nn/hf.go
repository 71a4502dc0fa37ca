package nn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/octetml/octet/graph"
)

// Hugging Face's transformers layout: a directory with config.json (the
// model's configuration) and model.safetensors (its tensors by name),
// which LlamaForCausalLM.from_pretrained and
// GPT2LMHeadModel.from_pretrained read.

// ErrHF is the error every problem with a Hugging Face directory matches
// (errors.Is): a missing or malformed config.json or model.safetensors,
// a key with a bad or unsupported value, a tensor missing, extra, of the
// wrong shape or of an unsupported dtype. The message names the file and
// the key or tensor.
var ErrHF = errors.New("Hugging Face checkpoint")

// The files of the layout.
const (
	HFConfigFile  = "config.json"
	HFWeightsFile = "model.safetensors"
)

// hfTensor maps one tensor of the layout to a parameter: transposed for
// GPT-2's Conv1D weights, which are stored [in out].
type hfTensor struct {
	name      string
	param     *graph.Node
	transpose bool
	linear    bool   // a linear layer's weight: quantized by ExportHF's FP8 formats
	layer     string // the FP8 layer the weight belongs to, when not its parameter's name less ".weight" (fused q/k/v, gate/up)
}

func hfErr(file, format string, args ...any) error {
	return fmt.Errorf("nn: %w: %s: %s", ErrHF, file, fmt.Sprintf(format, args...))
}

// readHFConfig reads dir/config.json into a map of raw values.
func readHFConfig(dir string) (map[string]json.RawMessage, string, error) {
	path := filepath.Join(dir, HFConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("nn: %w: %w", ErrHF, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, path, hfErr(path, "not a JSON object: %v", err)
	}
	return raw, path, nil
}

// hfKeys reads the named keys of a config into the pointers, refusing a
// missing required key or a value of the wrong type, naming the key.
type hfKey struct {
	key      string
	dst      any
	required bool
}

func decodeHFKeys(path string, raw map[string]json.RawMessage, keys []hfKey) error {
	for _, k := range keys {
		v, ok := raw[k.key]
		if !ok || string(v) == "null" {
			if k.required {
				return hfErr(path, "key %q is missing", k.key)
			}
			continue
		}
		if err := json.Unmarshal(v, k.dst); err != nil {
			return hfErr(path, "key %q: %s is not a %s", k.key, v, hfKind(k.dst))
		}
	}
	return nil
}

func hfKind(dst any) string {
	switch dst.(type) {
	case *int:
		return "whole number"
	case *float64:
		return "number"
	case *bool:
		return "boolean"
	case *string:
		return "string"
	}
	return "value of the expected type"
}

// ReadLlamaConfigHF reads a Hugging Face Llama config.json in dir. Keys
// Octet does not model are refused when they would change the model:
// rope_scaling other than absent or null, hidden_act other than silu,
// attention_bias or mlp_bias true, a head_dim other than hidden_size /
// num_attention_heads, a model_type other than llama. Other keys
// (architectures, torch_dtype, token ids, …) are ignored.
func ReadLlamaConfigHF(dir string) (LlamaConfig, error) {
	raw, path, err := readHFConfig(dir)
	if err != nil {
		return LlamaConfig{}, err
	}
	var c LlamaConfig
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
		return c, fmt.Errorf("nn: %w: %s: %w", ErrHF, path, err)
	}
	if headDim != -1 && headDim != c.HeadDim() {
		return c, hfErr(path, "key \"head_dim\": %d, want hidden_size / num_attention_heads = %d", headDim, c.HeadDim())
	}
	return c, nil
}

// ReadGPTConfigHF reads a Hugging Face GPT-2 config.json in dir into a
// GPTConfig (Block from n_positions). Keys that would change the model
// are refused: activation_function other than gelu_new (Octet's GELU is
// the tanh form), layer_norm_epsilon other than 1e-5, model_type other
// than gpt2.
func ReadGPTConfigHF(dir string) (GPTConfig, error) {
	raw, path, err := readHFConfig(dir)
	if err != nil {
		return GPTConfig{}, err
	}
	var c GPTConfig
	eps := 1e-5
	var act, modelType string
	err = decodeHFKeys(path, raw, []hfKey{
		{"n_embd", &c.Embd, true}, {"n_layer", &c.Layers, true}, {"n_head", &c.Heads, true},
		{"n_positions", &c.Block, true}, {"vocab_size", &c.Vocab, true},
		{"layer_norm_epsilon", &eps, false}, {"activation_function", &act, false}, {"model_type", &modelType, false},
	})
	if err != nil {
		return c, err
	}
	switch {
	case modelType != "" && modelType != "gpt2":
		return c, hfErr(path, "key \"model_type\": %q, want \"gpt2\"", modelType)
	case act != "" && act != "gelu_new":
		return c, hfErr(path, "key \"activation_function\": %q, want \"gelu_new\" (GELU's tanh form)", act)
	case eps != 1e-5:
		return c, hfErr(path, "key \"layer_norm_epsilon\": %v, want 1e-05", eps)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("nn: %w: %s: %w", ErrHF, path, err)
	}
	return c, nil
}

// hfTensors returns the Llama's tensors in the layout.
func (m *Llama) hfTensors() []hfTensor {
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
				ht.layer = l.qkvName
			case l.Gate, l.Up:
				ht.layer = l.mlpName
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

// LoadHF sets the model's parameters in store from dir's
// model.safetensors (float32, bfloat16 or float16 tensors, converted to
// float32 exactly), checking every tensor first: one missing, one the
// model has no place for, a wrong shape or dtype is an error naming the
// tensor, and nothing is stored. Read the config with ReadLlamaConfigHF
// and build the model with it first.
func (m *Llama) LoadHF(dir string, store *graph.Store) error {
	fs, err := openHF(dir)
	if err != nil {
		return err
	}
	return loadHFFrom(fs, store, m.hfTensors(), nil)
}

// SaveHF writes the model in the layout to dir (created if needed):
// config.json with its LlamaConfig (model_type llama, architectures
// LlamaForCausalLM) and model.safetensors with its float32 parameters
// under Hugging Face's names (no lm_head.weight when tied), each file
// replaced atomically.
func (m *Llama) SaveHF(dir string, store *graph.Store) error {
	return m.ExportHF(dir, store, HFExport{})
}

// ExportHF writes the model to dir as SaveHF does, its linear weights
// in e.Format (see HFFormat; the head is kept in high precision, as are
// e.Keep's modules) with the quantization_config the format defines.
// A weight that LoadHF read from a checkpoint in the same format and
// that still equals that checkpoint's dequantized codes bit for bit is
// written with those codes (so load then export reproduces the file);
// any other weight is cast afresh. A NaN or infinite weight is refused,
// naming it, before anything is written.
func (m *Llama) ExportHF(dir string, store *graph.Store, e HFExport) error {
	cfg := m.Config
	if cfg.NumKeyValueHeads == 0 {
		cfg.NumKeyValueHeads = cfg.NumAttentionHeads
	}
	cfg.RMSNormEps, cfg.RopeTheta, cfg.InitializerRange = cfg.eps(), cfg.theta(), cfg.initRange()
	extra := map[string]any{"model_type": "llama", "architectures": []string{"LlamaForCausalLM"}, "hidden_act": "silu",
		"torch_dtype": "float32", "rope_scaling": nil, "attention_bias": false, "mlp_bias": false, "head_dim": cfg.HeadDim()}
	return exportHF(dir, store, cfg, extra, m.hfTensors(), e)
}

// hfTensors returns the GPT's tensors in GPT-2's layout; lm_head only
// when the model's head differs from its embeddings (untied).
func (m *GPT) hfTensors(withHead bool) []hfTensor {
	ts := []hfTensor{{name: "transformer.wte.weight", param: m.WTE.Weight}, {name: "transformer.wpe.weight", param: m.WPE.Weight}}
	for i, blk := range m.Blocks {
		p := fmt.Sprintf("transformer.h.%d.", i)
		ts = append(ts,
			hfTensor{name: p + "ln_1.weight", param: blk.LN1.Weight}, hfTensor{name: p + "ln_1.bias", param: blk.LN1.Bias},
			hfTensor{name: p + "attn.c_attn.weight", param: blk.Attn.QKV.Weight, transpose: true, linear: true},
			hfTensor{name: p + "attn.c_attn.bias", param: blk.Attn.QKV.Bias},
			hfTensor{name: p + "attn.c_proj.weight", param: blk.Attn.Proj.Weight, transpose: true, linear: true},
			hfTensor{name: p + "attn.c_proj.bias", param: blk.Attn.Proj.Bias},
			hfTensor{name: p + "ln_2.weight", param: blk.LN2.Weight}, hfTensor{name: p + "ln_2.bias", param: blk.LN2.Bias},
			hfTensor{name: p + "mlp.c_fc.weight", param: blk.FC.Weight, transpose: true, linear: true}, hfTensor{name: p + "mlp.c_fc.bias", param: blk.FC.Bias},
			hfTensor{name: p + "mlp.c_proj.weight", param: blk.Proj.Weight, transpose: true, linear: true}, hfTensor{name: p + "mlp.c_proj.bias", param: blk.Proj.Bias})
	}
	ts = append(ts, hfTensor{name: "transformer.ln_f.weight", param: m.LNF.Weight}, hfTensor{name: "transformer.ln_f.bias", param: m.LNF.Bias})
	if withHead {
		ts = append(ts, hfTensor{name: "lm_head.weight", param: m.Head.Weight, linear: true})
	}
	return ts
}

// LoadHF sets the GPT's parameters in store from dir's GPT-2
// model.safetensors (Conv1D weights transposed into the model's [out
// in]); the LM head takes lm_head.weight when the file has it, else the
// token embeddings (GPT-2 ties them). The attention-mask buffers some
// GPT-2 files hold (attn.bias, attn.masked_bias) are skipped. Errors as
// Llama.LoadHF.
func (m *GPT) LoadHF(dir string, store *graph.Store) error {
	fs, err := openHF(dir)
	if err != nil {
		return err
	}
	_, _, withHead := fs.get("lm_head.weight")
	buffer := func(name string) bool {
		return strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias")
	}
	ts := m.hfTensors(withHead)
	if !withHead {
		// lm_head = wte: loaded from the same tensor.
		ts = append(ts, hfTensor{name: "transformer.wte.weight", param: m.Head.Weight})
	}
	return loadHFFrom(fs, store, ts, buffer)
}

// SaveHF writes the GPT in GPT-2's layout to dir: config.json
// (model_type gpt2, n_embd, n_layer, n_head, n_positions, vocab_size,
// activation gelu_new) and model.safetensors with Conv1D weights
// transposed to [in out]. When the LM head equals the token embeddings
// bit for bit the file ties them (no lm_head.weight); otherwise it
// writes lm_head.weight with tie_word_embeddings false.
func (m *GPT) SaveHF(dir string, store *graph.Store) error {
	return m.ExportHF(dir, store, HFExport{})
}

// ExportHF writes the GPT as SaveHF does, its linear (Conv1D) weights
// in e.Format, as Llama.ExportHF. GPT-2 stores them [in out]: the
// formats whose scales do not depend on the orientation are offered
// (HFFP8Block's 128×128 tiles and HFFP8Tensor, whose codes are the
// model's transposed); the per-row formats (HFFP8Channel, HFMXFP8,
// HFNVFP4) would block along the stored tensor's output axis, which no
// reader expects, and are refused.
func (m *GPT) ExportHF(dir string, store *graph.Store, e HFExport) error {
	switch e.Format {
	case HFFP8Channel, HFMXFP8, HFNVFP4:
		return fmt.Errorf("nn: %w: format %s: GPT-2's Conv1D weights are stored [in out], and %s blocks along rows; use %s or %s", ErrHF, e.Format, e.Format, HFFP8Block, HFFP8Tensor)
	}
	head, wte := store.Float32(m.Head.Weight.Name()), store.Float32(m.WTE.Weight.Name())
	tied := slices.EqualFunc(head, wte, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	c := m.Config
	cfg := map[string]any{"model_type": "gpt2", "architectures": []string{"GPT2LMHeadModel"}, "n_embd": c.Embd, "n_layer": c.Layers,
		"n_head": c.Heads, "n_positions": c.Block, "n_ctx": c.Block, "vocab_size": c.Vocab, "activation_function": "gelu_new",
		"layer_norm_epsilon": 1e-5, "tie_word_embeddings": tied, "torch_dtype": "float32",
		"resid_pdrop": c.Dropout, "embd_pdrop": c.Dropout, "attn_pdrop": c.Dropout}
	return exportHF(dir, store, nil, cfg, m.hfTensors(!tied), e)
}
