package nn

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nlpodyssey/safetensors"
	"github.com/x448/float16"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/atomicfile"
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
			ts = append(ts, hfTensor{name: p + t.name, param: t.n})
		}
	}
	ts = append(ts, hfTensor{name: "model.norm.weight", param: m.Norm.Weight})
	if !m.Config.TieWordEmbeddings {
		ts = append(ts, hfTensor{name: "lm_head.weight", param: m.Head})
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
	return loadHF(dir, store, m.hfTensors(), nil)
}

// SaveHF writes the model in the layout to dir (created if needed):
// config.json with its LlamaConfig (model_type llama, architectures
// LlamaForCausalLM) and model.safetensors with its float32 parameters
// under Hugging Face's names (no lm_head.weight when tied), each file
// replaced atomically.
func (m *Llama) SaveHF(dir string, store *graph.Store) error {
	cfg := m.Config
	if cfg.NumKeyValueHeads == 0 {
		cfg.NumKeyValueHeads = cfg.NumAttentionHeads
	}
	cfg.RMSNormEps, cfg.RopeTheta, cfg.InitializerRange = cfg.eps(), cfg.theta(), cfg.initRange()
	extra := map[string]any{"model_type": "llama", "architectures": []string{"LlamaForCausalLM"}, "hidden_act": "silu",
		"torch_dtype": "float32", "rope_scaling": nil, "attention_bias": false, "mlp_bias": false, "head_dim": cfg.HeadDim()}
	return saveHF(dir, store, cfg, extra, m.hfTensors())
}

// hfTensors returns the GPT's tensors in GPT-2's layout; lm_head only
// when the model's head differs from its embeddings (untied).
func (m *GPT) hfTensors(withHead bool) []hfTensor {
	ts := []hfTensor{{name: "transformer.wte.weight", param: m.WTE.Weight}, {name: "transformer.wpe.weight", param: m.WPE.Weight}}
	for i, blk := range m.Blocks {
		p := fmt.Sprintf("transformer.h.%d.", i)
		ts = append(ts,
			hfTensor{name: p + "ln_1.weight", param: blk.LN1.Weight}, hfTensor{name: p + "ln_1.bias", param: blk.LN1.Bias},
			hfTensor{name: p + "attn.c_attn.weight", param: blk.Attn.QKV.Weight, transpose: true},
			hfTensor{name: p + "attn.c_attn.bias", param: blk.Attn.QKV.Bias},
			hfTensor{name: p + "attn.c_proj.weight", param: blk.Attn.Proj.Weight, transpose: true},
			hfTensor{name: p + "attn.c_proj.bias", param: blk.Attn.Proj.Bias},
			hfTensor{name: p + "ln_2.weight", param: blk.LN2.Weight}, hfTensor{name: p + "ln_2.bias", param: blk.LN2.Bias},
			hfTensor{name: p + "mlp.c_fc.weight", param: blk.FC.Weight, transpose: true}, hfTensor{name: p + "mlp.c_fc.bias", param: blk.FC.Bias},
			hfTensor{name: p + "mlp.c_proj.weight", param: blk.Proj.Weight, transpose: true}, hfTensor{name: p + "mlp.c_proj.bias", param: blk.Proj.Bias})
	}
	ts = append(ts, hfTensor{name: "transformer.ln_f.weight", param: m.LNF.Weight}, hfTensor{name: "transformer.ln_f.bias", param: m.LNF.Bias})
	if withHead {
		ts = append(ts, hfTensor{name: "lm_head.weight", param: m.Head.Weight})
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
	path := filepath.Join(dir, HFWeightsFile)
	st, _, err := readSafetensors(path)
	if err != nil {
		return err
	}
	withHead := slices.Contains(st.Names(), "lm_head.weight")
	buffer := func(name string) bool {
		return strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias")
	}
	ts := m.hfTensors(withHead)
	if !withHead {
		// lm_head = wte: loaded from the same tensor.
		ts = append(ts, hfTensor{name: "transformer.wte.weight", param: m.Head.Weight})
	}
	return loadHFFrom(path, st, store, ts, buffer)
}

// SaveHF writes the GPT in GPT-2's layout to dir: config.json
// (model_type gpt2, n_embd, n_layer, n_head, n_positions, vocab_size,
// activation gelu_new) and model.safetensors with Conv1D weights
// transposed to [in out]. When the LM head equals the token embeddings
// bit for bit the file ties them (no lm_head.weight); otherwise it
// writes lm_head.weight with tie_word_embeddings false.
func (m *GPT) SaveHF(dir string, store *graph.Store) error {
	head, wte := store.Float32(m.Head.Weight.Name()), store.Float32(m.WTE.Weight.Name())
	tied := slices.EqualFunc(head, wte, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	c := m.Config
	cfg := map[string]any{"model_type": "gpt2", "architectures": []string{"GPT2LMHeadModel"}, "n_embd": c.Embd, "n_layer": c.Layers,
		"n_head": c.Heads, "n_positions": c.Block, "n_ctx": c.Block, "vocab_size": c.Vocab, "activation_function": "gelu_new",
		"layer_norm_epsilon": 1e-5, "tie_word_embeddings": tied, "torch_dtype": "float32",
		"resid_pdrop": c.Dropout, "embd_pdrop": c.Dropout, "attn_pdrop": c.Dropout}
	return saveHF(dir, store, nil, cfg, m.hfTensors(!tied))
}

// readSafetensors reads and parses a safetensors file.
func readSafetensors(path string) (safetensors.SafeTensors, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return safetensors.SafeTensors{}, nil, fmt.Errorf("nn: %w: %w", ErrHF, err)
	}
	st, err := safetensors.Deserialize(data)
	if err != nil {
		return st, nil, hfErr(path, "not a valid safetensors file: %v", err)
	}
	return st, data, nil
}

// loadHF reads dir's weights into store for ts; skip names tensors of
// the file that belong to no parameter and are not an error.
func loadHF(dir string, store *graph.Store, ts []hfTensor, skip func(string) bool) error {
	path := filepath.Join(dir, HFWeightsFile)
	st, _, err := readSafetensors(path)
	if err != nil {
		return err
	}
	return loadHFFrom(path, st, store, ts, skip)
}

func loadHFFrom(path string, st safetensors.SafeTensors, store *graph.Store, ts []hfTensor, skip func(string) bool) error {
	// Check everything before storing anything.
	wanted := map[string]bool{}
	for _, t := range ts {
		wanted[t.name] = true
	}
	names := st.Names()
	sort.Strings(names)
	for _, name := range names {
		if !wanted[name] && (skip == nil || !skip(name)) {
			return hfErr(path, "tensor %q is not a parameter of the model", name)
		}
	}
	values := make([][]float32, len(ts))
	for i, t := range ts {
		v, ok := st.Tensor(t.name)
		if !ok {
			return hfErr(path, "tensor %q is missing", t.name)
		}
		want := t.param.Shape()
		if t.transpose {
			want = graph.Shape{want[1], want[0]}
		}
		got := make(graph.Shape, len(v.Shape()))
		for j, d := range v.Shape() {
			got[j] = int(d)
		}
		if !got.Equal(want) {
			return hfErr(path, "tensor %q has shape %v, the model wants %v", t.name, got, want)
		}
		data, err := hfFloat32(v)
		if err != nil {
			return hfErr(path, "tensor %q: %v", t.name, err)
		}
		if t.transpose {
			r, c := want[0], want[1]
			tr := make([]float32, len(data))
			for a := 0; a < r; a++ {
				for b := 0; b < c; b++ {
					tr[b*r+a] = data[a*c+b]
				}
			}
			data = tr
		}
		values[i] = data
	}
	for i, t := range ts {
		if err := store.SetFloat32(t.param.Name(), values[i], t.param.Shape()...); err != nil {
			return err
		}
	}
	return nil
}

// hfFloat32 converts a tensor's data to float32: F32 as it is, BF16 and
// F16 exactly.
func hfFloat32(v safetensors.TensorView) ([]float32, error) {
	raw := v.Data()
	switch v.DType() {
	case safetensors.F32:
		out := make([]float32, len(raw)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	case safetensors.BF16:
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
		return out, nil
	case safetensors.F16:
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32()
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %v is not supported (F32, BF16 or F16)", v.DType())
}

// saveHF writes config.json (cfg's fields, then extra's keys) and
// model.safetensors with ts's parameters as float32.
func saveHF(dir string, store *graph.Store, cfg any, extra map[string]any, ts []hfTensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("nn: save HF: %w", err)
	}
	fields := map[string]any{}
	if cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return err
		}
	}
	for k, v := range extra {
		fields[k] = v
	}
	conf, err := json.MarshalIndent(fields, "", "  ")
	if err != nil {
		return err
	}
	views := map[string]safetensors.TensorView{}
	for _, t := range ts {
		vals := store.Float32(t.param.Name())
		if vals == nil {
			return fmt.Errorf("nn: save HF: parameter %q has no value in the store", t.param.Name())
		}
		sh := t.param.Shape()
		if t.transpose {
			r, c := sh[0], sh[1]
			tr := make([]float32, len(vals))
			for a := 0; a < r; a++ {
				for b := 0; b < c; b++ {
					tr[b*r+a] = vals[a*c+b]
				}
			}
			vals, sh = tr, graph.Shape{c, r}
		}
		raw := make([]byte, 4*len(vals))
		for i, x := range vals {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		dims := make([]uint64, len(sh))
		for i, d := range sh {
			dims[i] = uint64(d)
		}
		v, err := safetensors.NewTensorView(safetensors.F32, dims, raw)
		if err != nil {
			return fmt.Errorf("nn: save HF: tensor %q: %w", t.name, err)
		}
		views[t.name] = v
	}
	weights, err := safetensors.Serialize(views, map[string]string{"format": "pt"})
	if err != nil {
		return fmt.Errorf("nn: save HF: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{HFWeightsFile, weights}, {HFConfigFile, append(conf, '\n')}} {
		data := f.data
		if err := atomicfile.Write(filepath.Join(dir, f.name), func(w io.Writer) error {
			_, err := io.Copy(w, bytes.NewReader(data))
			return err
		}); err != nil {
			return fmt.Errorf("nn: save HF: %w", err)
		}
	}
	return nil
}
