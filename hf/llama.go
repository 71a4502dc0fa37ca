package hf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
)

// decoderType is what one model_type of the Llama family fixes: its
// architecture's name, its attention's biases and norms, whether it has
// experts and which keys configure them.
type decoderType struct {
	arch            string
	qkvBias, qkNorm bool
	moe             bool
	expertsKey      string // num_local_experts (Mixtral) or num_experts
	qwenMoE         bool   // moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers
	shared          bool   // shared_expert_intermediate_size
}

// decoderTypes are the model types nn.Llama builds.
var decoderTypes = map[string]decoderType{
	"llama":     {arch: "LlamaForCausalLM"},
	"qwen2":     {arch: "Qwen2ForCausalLM", qkvBias: true},
	"qwen3":     {arch: "Qwen3ForCausalLM", qkNorm: true},
	"mixtral":   {arch: "MixtralForCausalLM", moe: true, expertsKey: "num_local_experts"},
	"qwen2_moe": {arch: "Qwen2MoeForCausalLM", qkvBias: true, moe: true, expertsKey: "num_experts", qwenMoE: true, shared: true},
	"qwen3_moe": {arch: "Qwen3MoeForCausalLM", qkNorm: true, moe: true, expertsKey: "num_experts", qwenMoE: true},
}

// DecoderTypes lists the model types ReadLlamaConfig reads, sorted.
func DecoderTypes() []string {
	out := make([]string, 0, len(decoderTypes))
	for k := range decoderTypes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quotedTypes() string {
	ts := DecoderTypes()
	for i, t := range ts {
		ts[i] = fmt.Sprintf("%q", t)
	}
	return strings.Join(ts, ", ")
}

// DecoderType returns the model type cfg is written as: cfg.ModelType
// when set, after checking that the type can hold the configuration,
// else the type its fields imply (q/k norms: qwen3 or qwen3_moe; q/k/v
// biases: qwen2 or qwen2_moe; experts alone: mixtral; none: llama). A
// configuration no type holds is an error naming the field.
func DecoderType(cfg nn.LlamaConfig) (string, error) {
	name := cfg.ModelType
	if name == "" {
		moe := cfg.NumExperts > 0
		switch {
		case cfg.QKNorm && moe:
			name = "qwen3_moe"
		case cfg.QKNorm:
			name = "qwen3"
		case cfg.QKVBias && moe:
			name = "qwen2_moe"
		case cfg.QKVBias:
			name = "qwen2"
		case moe:
			name = "mixtral"
		default:
			name = "llama"
		}
	}
	dt, ok := decoderTypes[name]
	if !ok {
		return "", fmt.Errorf("hf: %w: model type %q, want one of %s", ErrCheckpoint, name, quotedTypes())
	}
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("hf: %w: model type %q: %s", ErrCheckpoint, name, fmt.Sprintf(format, args...))
	}
	switch {
	case cfg.QKVBias && !dt.qkvBias:
		return bad("QKVBias: its q/k/v projections have no biases (qwen2 and qwen2_moe have)")
	case !cfg.QKVBias && dt.qkvBias:
		return bad("QKVBias is false, but its q/k/v projections have biases")
	case cfg.QKNorm && !dt.qkNorm:
		return bad("QKNorm: it has no q/k norms (qwen3 and qwen3_moe have)")
	case !cfg.QKNorm && dt.qkNorm:
		return bad("QKNorm is false, but it normalises q and k")
	case cfg.NumExperts > 0 && !dt.moe:
		return bad("num_experts %d: it has no experts (mixtral, qwen2_moe and qwen3_moe have)", cfg.NumExperts)
	case name == "mixtral" && cfg.NumExperts == 0:
		return bad("num_local_experts is 0")
	case cfg.SharedExpertIntermediateSize > 0 && !dt.shared:
		return bad("shared_expert_intermediate_size %d: it has no shared expert (qwen2_moe has)", cfg.SharedExpertIntermediateSize)
	}
	if name == "mixtral" {
		switch {
		case !cfg.NormTopKProb:
			return bad("norm_topk_prob is false, but Mixtral always renormalises the top-k weights")
		case cfg.MoEIntermediateSize != 0 && cfg.MoEIntermediateSize != cfg.IntermediateSize:
			return bad("moe_intermediate_size %d: Mixtral's experts are intermediate_size %d wide", cfg.MoEIntermediateSize, cfg.IntermediateSize)
		case cfg.DecoderSparseStep > 1 || len(cfg.MLPOnlyLayers) > 0:
			return bad("decoder_sparse_step %d, mlp_only_layers %v: every Mixtral layer is sparse", cfg.DecoderSparseStep, cfg.MLPOnlyLayers)
		}
	}
	return name, nil
}

// WithDecoderType returns cfg made a model of type t (one of
// DecoderTypes): ModelType set, and the switches the type fixes — q/k/v
// biases (qwen2, qwen2_moe), q/k norms (qwen3, qwen3_moe), Mixtral's
// renormalised top-k weights — set to the type's; the sizes are kept. A
// configuration the type cannot hold (experts in a dense type, a shared
// expert outside qwen2_moe) is an error naming the field.
func WithDecoderType(cfg nn.LlamaConfig, t string) (nn.LlamaConfig, error) {
	dt, ok := decoderTypes[t]
	if !ok {
		return cfg, fmt.Errorf("hf: %w: model type %q, want one of %s", ErrCheckpoint, t, quotedTypes())
	}
	cfg.ModelType, cfg.QKVBias, cfg.QKNorm = t, dt.qkvBias, dt.qkNorm
	if t == "mixtral" {
		cfg.NormTopKProb = true
	}
	if _, err := DecoderType(cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// ReadLlamaConfig reads a Hugging Face config.json in dir whose
// model_type is one of DecoderTypes ("llama" when absent) into an
// nn.LlamaConfig: Llama; Qwen2 and Qwen3 (q/k/v biases, q/k norms,
// head_dim); Mixtral, Qwen2-MoE and Qwen3-MoE (experts, shared expert,
// norm_topk_prob, decoder_sparse_step, mlp_only_layers,
// router_aux_loss_coef, output_router_logits). Keys Octet does not model
// are refused, naming the key, when they would change the model:
// rope_scaling other than absent or null, hidden_act other than silu,
// attention_bias or mlp_bias true, sliding-window attention
// (use_sliding_window true, a Mixtral sliding_window shorter than
// max_position_embeddings, layer_types other than full_attention),
// router_jitter_noise above 0. Other keys (architectures, torch_dtype,
// token ids, …) are ignored. Types other than llama must state
// rms_norm_eps and rope_theta, whose defaults differ between types.
func ReadLlamaConfig(dir string) (nn.LlamaConfig, error) {
	raw, path, err := readHFConfig(dir)
	if err != nil {
		return nn.LlamaConfig{}, err
	}
	var c nn.LlamaConfig
	modelType := "llama"
	if err := decodeHFKeys(path, raw, []hfKey{{"model_type", &modelType, false}}); err != nil {
		return c, err
	}
	dt, ok := decoderTypes[modelType]
	if !ok {
		return c, hfErr(path, "key \"model_type\": %q, want one of %s", modelType, quotedTypes())
	}
	c.ModelType = modelType
	var act string
	var attnBias, mlpBias, slidingOn bool
	headDim, jitter, sliding := 0, 0.0, -1
	notLlama := modelType != "llama"
	if dt.moe {
		c.RouterAuxLossCoef, c.DecoderSparseStep = 0.001, 1
	}
	keys := []hfKey{
		{"hidden_size", &c.HiddenSize, true}, {"intermediate_size", &c.IntermediateSize, true},
		{"num_hidden_layers", &c.NumHiddenLayers, true}, {"num_attention_heads", &c.NumAttentionHeads, true},
		{"num_key_value_heads", &c.NumKeyValueHeads, false}, {"rms_norm_eps", &c.RMSNormEps, notLlama},
		{"rope_theta", &c.RopeTheta, notLlama}, {"vocab_size", &c.VocabSize, true},
		{"max_position_embeddings", &c.MaxPositionEmbeddings, true}, {"tie_word_embeddings", &c.TieWordEmbeddings, false},
		{"initializer_range", &c.InitializerRange, false}, {"hidden_act", &act, false},
		{"attention_bias", &attnBias, false}, {"mlp_bias", &mlpBias, false}, {"head_dim", &headDim, false},
		{"use_sliding_window", &slidingOn, false},
	}
	if dt.moe {
		keys = append(keys, hfKey{dt.expertsKey, &c.NumExperts, true}, hfKey{"num_experts_per_tok", &c.NumExpertsPerTok, true},
			hfKey{"router_aux_loss_coef", &c.RouterAuxLossCoef, false}, hfKey{"output_router_logits", &c.OutputRouterLogits, false},
			hfKey{"router_jitter_noise", &jitter, false})
	}
	if dt.qwenMoE {
		keys = append(keys, hfKey{"moe_intermediate_size", &c.MoEIntermediateSize, true}, hfKey{"norm_topk_prob", &c.NormTopKProb, false},
			hfKey{"decoder_sparse_step", &c.DecoderSparseStep, false}, hfKey{"mlp_only_layers", &c.MLPOnlyLayers, false})
	}
	if dt.shared {
		keys = append(keys, hfKey{"shared_expert_intermediate_size", &c.SharedExpertIntermediateSize, true})
	}
	if modelType == "mixtral" {
		keys = append(keys, hfKey{"sliding_window", &sliding, false})
	}
	if err := decodeHFKeys(path, raw, keys); err != nil {
		return c, err
	}
	if v, ok := raw["rope_scaling"]; ok && string(v) != "null" {
		return c, hfErr(path, "key \"rope_scaling\": %s: only unscaled rotary embeddings are supported (absent or null)", v)
	}
	if v, ok := raw["layer_types"]; ok && string(v) != "null" {
		var lt []string
		if err := decodeHFKeys(path, raw, []hfKey{{"layer_types", &lt, false}}); err != nil {
			return c, err
		}
		for i, t := range lt {
			if t != "full_attention" {
				return c, hfErr(path, "key \"layer_types\": layer %d is %q: only full attention is supported", i, t)
			}
		}
	}
	switch {
	case act != "" && act != "silu":
		return c, hfErr(path, "key \"hidden_act\": %q, want \"silu\"", act)
	case attnBias:
		return c, hfErr(path, "key \"attention_bias\": true: biases on every attention projection are not supported")
	case mlpBias:
		return c, hfErr(path, "key \"mlp_bias\": true: projections with biases are not supported")
	case slidingOn:
		return c, hfErr(path, "key \"use_sliding_window\": true: sliding-window attention is not supported")
	case sliding >= 0 && sliding < c.MaxPositionEmbeddings:
		return c, hfErr(path, "key \"sliding_window\": %d is shorter than max_position_embeddings %d: sliding-window attention is not supported", sliding, c.MaxPositionEmbeddings)
	case jitter != 0:
		return c, hfErr(path, "key \"router_jitter_noise\": %v: router jitter is not supported (want 0)", jitter)
	case headDim < 0:
		return c, hfErr(path, "key \"head_dim\": %d, want a positive number", headDim)
	}
	if _, given := raw["num_key_value_heads"]; !given {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.NumAttentionHeads > 0 && headDim != c.HiddenSize/c.NumAttentionHeads {
		c.HeadDimension = headDim // stated, and not the default
	}
	c.QKVBias, c.QKNorm = dt.qkvBias, dt.qkNorm
	if modelType == "mixtral" {
		c.NormTopKProb = true
	}
	if len(c.MLPOnlyLayers) == 0 {
		c.MLPOnlyLayers = nil
	}
	if c.NumExperts == 0 {
		// A Qwen-MoE config without experts is dense; its MoE keys are
		// unused.
		c.NumExpertsPerTok, c.MoEIntermediateSize, c.SharedExpertIntermediateSize, c.MLPOnlyLayers = 0, 0, 0, nil
	}
	if c.NumExperts < 0 { // under the type's own key (num_local_experts for Mixtral)
		return c, hfErr(path, "key %q: %d, want 0 (dense) or more", dt.expertsKey, c.NumExperts)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("hf: %w: %s: %w", ErrCheckpoint, path, err)
	}
	if _, err := DecoderType(c); err != nil {
		return c, fmt.Errorf("%w (%s)", err, path)
	}
	return c, nil
}

// expertNames are the names of one expert's three weights in the
// per-expert layout.
func expertNames(modelType string) (gate, up, down string) {
	if modelType == "mixtral" {
		return "w1", "w3", "w2"
	}
	return "gate_proj", "up_proj", "down_proj"
}

// llamaTensors returns the model's tensors in the layout of its model
// type; a sparse layer's experts are one tensor per expert, or stacked
// (transformers 5) where stacked says so for the layer's prefix.
func llamaTensors(m *nn.Llama, stacked func(prefix string) bool) ([]hfTensor, error) {
	modelType, err := DecoderType(m.Config)
	if err != nil {
		return nil, err
	}
	ts := []hfTensor{{name: "model.embed_tokens.weight", param: m.Embed}}
	for i, l := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		qkv, gateUp := l.FusedNames()
		add := func(name string, n *graph.Node, layer string) {
			if n != nil {
				ts = append(ts, hfTensor{name: p + name, param: n, linear: strings.HasSuffix(name, "proj.weight"), layer: layer})
			}
		}
		add("input_layernorm.weight", l.InputNorm.Weight, "")
		add("self_attn.q_proj.weight", l.Q, qkv)
		add("self_attn.k_proj.weight", l.K, qkv)
		add("self_attn.v_proj.weight", l.V, qkv)
		add("self_attn.q_proj.bias", l.QBias, "")
		add("self_attn.k_proj.bias", l.KBias, "")
		add("self_attn.v_proj.bias", l.VBias, "")
		if l.QNorm != nil {
			add("self_attn.q_norm.weight", l.QNorm.Weight, "")
			add("self_attn.k_norm.weight", l.KNorm.Weight, "")
		}
		add("self_attn.o_proj.weight", l.O, "")
		add("post_attention_layernorm.weight", l.PostNorm.Weight, "")
		if l.MoE == nil {
			add("mlp.gate_proj.weight", l.Gate, gateUp)
			add("mlp.up_proj.weight", l.Up, gateUp)
			add("mlp.down_proj.weight", l.Down, "")
			continue
		}
		ts = append(ts, expertTensors(l.MoE, p, modelType, stacked != nil && stacked(p))...)
	}
	ts = append(ts, hfTensor{name: "model.norm.weight", param: m.Norm.Weight})
	if !m.Config.TieWordEmbeddings {
		ts = append(ts, hfTensor{name: "lm_head.weight", param: m.Head, linear: true})
	}
	return ts, nil
}

// expertTensors returns an MoE block's tensors under the layer prefix p
// ("model.layers.3."): the router, the experts (stacked: gate_up_proj
// [E, 2I, H] and down_proj [E, H, I]; else each expert's three weights,
// slices of those), the shared expert and its gate.
func expertTensors(moe *nn.MoE, p, modelType string, stacked bool) []hfTensor {
	c := moe.Config
	e, h, in := c.Experts, c.Hidden, c.Intermediate
	block := p + "mlp."
	if modelType == "mixtral" && !stacked {
		block = p + "block_sparse_moe."
	}
	ts := []hfTensor{{name: block + "gate.weight", param: moe.Gate}}
	gateUpLayer, downLayer := moe.Name+".experts.gate_up", moe.Name+".experts.down"
	if stacked {
		ts = append(ts, hfTensor{name: block + "experts.gate_up_proj", param: moe.GateUp},
			hfTensor{name: block + "experts.down_proj", param: moe.Down})
	} else {
		g, u, d := expertNames(modelType)
		for j := 0; j < e; j++ {
			x := fmt.Sprintf("%sexperts.%d.", block, j)
			ts = append(ts,
				hfTensor{name: x + g + ".weight", param: moe.GateUp, off: j * 2 * in * h, shape: graph.Shape{in, h}, linear: true, layer: gateUpLayer},
				hfTensor{name: x + u + ".weight", param: moe.GateUp, off: (2*j + 1) * in * h, shape: graph.Shape{in, h}, linear: true, layer: gateUpLayer},
				hfTensor{name: x + d + ".weight", param: moe.Down, off: j * h * in, shape: graph.Shape{h, in}, linear: true, layer: downLayer})
		}
	}
	if moe.SharedDownProj != nil {
		s := block + "shared_expert."
		ts = append(ts, hfTensor{name: s + "gate_proj.weight", param: moe.SharedGateProj, linear: true},
			hfTensor{name: s + "up_proj.weight", param: moe.SharedUpProj, linear: true},
			hfTensor{name: s + "down_proj.weight", param: moe.SharedDownProj, linear: true},
			hfTensor{name: block + "shared_expert_gate.weight", param: moe.SharedExpertGate})
	}
	return ts
}

// LoadLlama sets m's parameters in store from dir's model.safetensors
// (or its shards; float32, bfloat16 or float16 tensors, converted to
// float32 exactly, or the FP8 layouts Format names), checking every
// tensor first: one missing, one the model has no place for, a wrong
// shape or dtype is an error naming the tensor, and nothing is stored.
// Each sparse layer's experts are read from either layout: one tensor
// per expert (…experts.N.gate_proj.weight, Mixtral's
// block_sparse_moe.experts.N.w1.weight) or transformers 5's stacked
// tensors (…mlp.experts.gate_up_proj [E, 2I, H], gate rows first, and
// …mlp.experts.down_proj [E, H, I]). Read the config with
// ReadLlamaConfig and build the model with it first.
func LoadLlama(dir string, m *nn.Llama, store *graph.Store) error {
	fs, err := openHF(dir)
	if err != nil {
		return err
	}
	ts, err := llamaTensors(m, func(p string) bool {
		_, _, ok := fs.get(p + "mlp.experts.gate_up_proj")
		return ok
	})
	if err != nil {
		return err
	}
	return loadHFFrom(fs, store, ts, nil)
}

// SaveLlama writes m in the layout to dir (created if needed):
// config.json with its LlamaConfig (model_type and architectures of
// its type, see DecoderType) and model.safetensors with its float32
// parameters under Hugging Face's names (no lm_head.weight when tied),
// each file replaced atomically.
func SaveLlama(dir string, m *nn.Llama, store *graph.Store) error {
	return ExportLlama(dir, m, store, Export{})
}

// ExportLlama writes m to dir as SaveLlama does, its linear weights
// in e.Format (see Format; the head is kept in high precision, as are
// e.Keep's modules) with the quantization_config the format defines,
// and its experts one tensor per expert or, with e.StackedExperts,
// stacked (stacked expert tensors are written in high precision).
// A weight that LoadLlama read from a checkpoint in the same format and
// that still equals that checkpoint's dequantized codes bit for bit is
// written with those codes (so load then export reproduces the file);
// any other weight is cast afresh. A NaN or infinite weight is refused,
// naming it, before anything is written.
func ExportLlama(dir string, m *nn.Llama, store *graph.Store, e Export) error {
	modelType, err := DecoderType(m.Config)
	if err != nil {
		return err
	}
	ts, err := llamaTensors(m, func(string) bool { return e.StackedExperts })
	if err != nil {
		return err
	}
	return exportHF(dir, store, nil, llamaConfigJSON(m.Config, modelType), ts, e)
}

// llamaConfigJSON is config.json for cfg as model type t writes it.
func llamaConfigJSON(cfg nn.LlamaConfig, t string) map[string]any {
	c := cfg.Resolved()
	dt := decoderTypes[t]
	out := map[string]any{"model_type": t, "architectures": []string{dt.arch}, "hidden_act": "silu", "rope_scaling": nil,
		"hidden_size": c.HiddenSize, "intermediate_size": c.IntermediateSize, "num_hidden_layers": c.NumHiddenLayers,
		"num_attention_heads": c.NumAttentionHeads, "num_key_value_heads": c.NumKeyValueHeads, "rms_norm_eps": c.RMSNormEps,
		"rope_theta": c.RopeTheta, "vocab_size": c.VocabSize, "max_position_embeddings": c.MaxPositionEmbeddings,
		"tie_word_embeddings": c.TieWordEmbeddings, "initializer_range": c.InitializerRange, "head_dim": c.HeadDim(),
		"attention_bias": false}
	switch t {
	case "llama":
		out["mlp_bias"] = false
	case "mixtral":
		out["sliding_window"], out["router_jitter_noise"] = nil, 0.0
	default:
		out["use_sliding_window"] = false
	}
	if dt.moe {
		out[dt.expertsKey] = c.NumExperts
		out["num_experts_per_tok"], out["router_aux_loss_coef"], out["output_router_logits"] = c.NumExpertsPerTok, c.RouterAuxLossCoef, c.OutputRouterLogits
	}
	if dt.qwenMoE {
		mlpOnly := c.MLPOnlyLayers
		if mlpOnly == nil {
			mlpOnly = []int{}
		}
		out["moe_intermediate_size"], out["norm_topk_prob"] = c.MoEIntermediateSize, c.NormTopKProb
		out["decoder_sparse_step"], out["mlp_only_layers"] = max(c.DecoderSparseStep, 1), mlpOnly
		if c.NumExperts == 0 {
			out["moe_intermediate_size"] = c.IntermediateSize
		}
	}
	if dt.shared {
		out["shared_expert_intermediate_size"] = c.SharedExpertIntermediateSize
	}
	return out
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
	return &Model{Type: cfg.ModelType, Net: m,
		Load:   func(dir string, store *graph.Store) error { return LoadLlama(dir, m, store) },
		Export: func(dir string, store *graph.Store, e Export) error { return ExportLlama(dir, m, store, e) }}, nil
}

// Tensor is one tensor of a model's Hugging Face layout: its name in
// the files and the part of a parameter it holds (a whole parameter, or
// one expert's weight in a stacked parameter).
type Tensor struct {
	// Name is the tensor's name in the files
	// ("model.layers.0.block_sparse_moe.experts.3.w1.weight").
	Name string
	// Param is the parameter holding it; Offset its first element there
	// and Shape its shape (Param's shape for a whole parameter).
	Param  *graph.Node
	Offset int
	Shape  graph.Shape
}

// Slice returns the tensor's values in v, a value of Param (a
// parameter's or its gradient's).
func (t Tensor) Slice(v []float32) []float32 { return v[t.Offset : t.Offset+t.Shape.Numel()] }

// LlamaTensors returns m's tensors in the layout of its model type (see
// DecoderType), a sparse layer's experts one tensor per expert or, with
// stacked, as transformers 5 stacks them: the names LoadLlama reads and
// ExportLlama writes, in the order of the layout.
func LlamaTensors(m *nn.Llama, stacked bool) ([]Tensor, error) {
	ts, err := llamaTensors(m, func(string) bool { return stacked })
	if err != nil {
		return nil, err
	}
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = Tensor{Name: t.name, Param: t.param, Offset: t.off, Shape: t.sliceShape()}
	}
	return out, nil
}
