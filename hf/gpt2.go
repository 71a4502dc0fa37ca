package hf

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
)

// ReadGPTConfig reads a Hugging Face GPT-2 config.json in dir into a
// GPTConfig (Block from n_positions). Keys that would change the model
// are refused: activation_function other than gelu_new (Octet's GELU is
// the tanh form), layer_norm_epsilon other than 1e-5, model_type other
// than gpt2.
func ReadGPTConfig(dir string) (nn.GPTConfig, error) {
	raw, path, err := readHFConfig(dir)
	if err != nil {
		return nn.GPTConfig{}, err
	}
	var c nn.GPTConfig
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
		return c, fmt.Errorf("hf: %w: %s: %w", ErrCheckpoint, path, err)
	}
	return c, nil
}

// gptTensors returns the GPT's tensors in GPT-2's layout; lm_head only
// when the model's head differs from its embeddings (untied).
func gptTensors(m *nn.GPT, withHead bool) []hfTensor {
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

// LoadGPT sets the GPT m's parameters in store from dir's GPT-2
// model.safetensors (Conv1D weights transposed into the model's [out
// in]); the LM head takes lm_head.weight when the file has it, else the
// token embeddings (GPT-2 ties them). The attention-mask buffers some
// GPT-2 files hold (attn.bias, attn.masked_bias) are skipped. Errors as
// LoadLlama.
func LoadGPT(dir string, m *nn.GPT, store *graph.Store) error {
	fs, err := openHF(dir)
	if err != nil {
		return err
	}
	_, _, withHead := fs.get("lm_head.weight")
	buffer := func(name string) bool {
		return strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias")
	}
	ts := gptTensors(m, withHead)
	if !withHead {
		// lm_head = wte: loaded from the same tensor.
		ts = append(ts, hfTensor{name: "transformer.wte.weight", param: m.Head.Weight})
	}
	return loadHFFrom(fs, store, ts, buffer)
}

// SaveGPT writes the GPT m in GPT-2's layout to dir: config.json
// (model_type gpt2, n_embd, n_layer, n_head, n_positions, vocab_size,
// activation gelu_new) and model.safetensors with Conv1D weights
// transposed to [in out]. When the LM head equals the token embeddings
// bit for bit the file ties them (no lm_head.weight); otherwise it
// writes lm_head.weight with tie_word_embeddings false.
func SaveGPT(dir string, m *nn.GPT, store *graph.Store) error {
	return ExportGPT(dir, m, store, Export{})
}

// ExportGPT writes m as SaveGPT does, its linear (Conv1D) weights
// in e.Format, as ExportLlama. GPT-2 stores them [in out]: the
// formats whose scales do not depend on the orientation are offered
// (FP8Block's 128×128 tiles and FP8Tensor, whose codes are the
// model's transposed); the per-row formats (FP8Channel, MXFP8,
// NVFP4) would block along the stored tensor's output axis, which no
// reader expects, and are refused.
func ExportGPT(dir string, m *nn.GPT, store *graph.Store, e Export) error {
	switch e.Format {
	case FP8Channel, MXFP8, NVFP4:
		return fmt.Errorf("hf: %w: format %s: GPT-2's Conv1D weights are stored [in out], and %s blocks along rows; use %s or %s", ErrCheckpoint, e.Format, e.Format, FP8Block, FP8Tensor)
	}
	head, wte := store.Float32(m.Head.Weight.Name()), store.Float32(m.WTE.Weight.Name())
	tied := slices.EqualFunc(head, wte, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	c := m.Config
	cfg := map[string]any{"model_type": "gpt2", "architectures": []string{"GPT2LMHeadModel"}, "n_embd": c.Embd, "n_layer": c.Layers,
		"n_head": c.Heads, "n_positions": c.Block, "n_ctx": c.Block, "vocab_size": c.Vocab, "activation_function": "gelu_new",
		"layer_norm_epsilon": 1e-5, "tie_word_embeddings": tied, "torch_dtype": "float32",
		"resid_pdrop": c.Dropout, "embd_pdrop": c.Dropout, "attn_pdrop": c.Dropout}
	return exportHF(dir, store, nil, cfg, gptTensors(m, !tied), e)
}

func newGPTModel(dir string, b *nn.Builder) (*Model, error) {
	cfg, err := ReadGPTConfig(dir)
	if err != nil {
		return nil, err
	}
	m, err := nn.NewGPT(b, "gpt", cfg)
	if err != nil {
		return nil, err
	}
	return &Model{Type: "gpt2", Net: m,
		Load:   func(dir string, store *graph.Store) error { return LoadGPT(dir, m, store) },
		Export: func(dir string, store *graph.Store, e Export) error { return ExportGPT(dir, m, store, e) }}, nil
}
