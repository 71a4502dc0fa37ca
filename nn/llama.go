package nn

import (
	"errors"
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// LlamaConfig describes a Llama-style decoder in the terms of Hugging
// Face's LlamaConfig (the JSON keys of its config.json).
type LlamaConfig struct {
	// ModelType is the Hugging Face model_type the configuration was
	// read as or is exported as: "llama", "qwen2", "qwen3", "mixtral",
	// "qwen2_moe" or "qwen3_moe" (package hf; "" means the type the
	// other fields imply). It names the tensors in files; the model
	// itself follows the fields below.
	ModelType             string  `json:"model_type,omitempty"`
	HiddenSize            int     `json:"hidden_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumKeyValueHeads      int     `json:"num_key_value_heads"` // 0 means NumAttentionHeads
	RMSNormEps            float64 `json:"rms_norm_eps"`        // 0 means 1e-6
	RopeTheta             float64 `json:"rope_theta"`          // 0 means 10000
	VocabSize             int     `json:"vocab_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TieWordEmbeddings     bool    `json:"tie_word_embeddings"`
	InitializerRange      float64 `json:"initializer_range"` // 0 means 0.02

	// HeadDimension is head_dim, the width of one attention head; 0
	// means hidden_size / num_attention_heads (Qwen3 states it).
	HeadDimension int `json:"head_dim,omitempty"`
	// QKVBias gives q_proj, k_proj and v_proj a bias (Qwen2's
	// attention; o_proj has none).
	QKVBias bool `json:"-"`
	// QKNorm normalises each head of q and k by an RMSNorm of its own
	// (self_attn.q_norm and k_norm, [head_dim]) before the rotary
	// embeddings, as Qwen3 does.
	QKNorm bool `json:"-"`

	// NumExperts above 0 makes the decoder a Mixture of Experts: the
	// MLP of every sparse layer (see SparseLayer) is an MoE block
	// (nn.MoE, named model.layers.N.mlp) of NumExperts SwiGLU experts,
	// NumExpertsPerTok of which each token goes through (Mixtral's
	// num_local_experts, Qwen-MoE's num_experts).
	NumExperts       int `json:"num_experts,omitempty"`
	NumExpertsPerTok int `json:"num_experts_per_tok,omitempty"`
	// MoEIntermediateSize is each expert's SwiGLU width
	// (moe_intermediate_size); 0 means intermediate_size, as in Mixtral.
	// intermediate_size stays the width of the dense layers.
	MoEIntermediateSize int `json:"moe_intermediate_size,omitempty"`
	// SharedExpertIntermediateSize above 0 adds Qwen2-MoE's shared
	// expert of that width, with its sigmoid gate, to every MoE block.
	SharedExpertIntermediateSize int `json:"shared_expert_intermediate_size,omitempty"`
	// NormTopKProb renormalises a token's k routing weights to sum to 1
	// (norm_topk_prob; Mixtral always does).
	NormTopKProb bool `json:"norm_topk_prob,omitempty"`
	// DecoderSparseStep makes every DecoderSparseStep-th layer sparse
	// (decoder_sparse_step: layer i is when (i+1) % step == 0); 0 means
	// 1, every layer. MLPOnlyLayers lists layers kept dense
	// (mlp_only_layers).
	DecoderSparseStep int   `json:"decoder_sparse_step,omitempty"`
	MLPOnlyLayers     []int `json:"mlp_only_layers,omitempty"`
	// RouterAuxLossCoef weighs the load-balancing loss that AuxLoss
	// returns when OutputRouterLogits is set (router_aux_loss_coef,
	// output_router_logits), as transformers adds it to the training
	// loss.
	RouterAuxLossCoef  float64 `json:"router_aux_loss_coef,omitempty"`
	OutputRouterLogits bool    `json:"output_router_logits,omitempty"`
}

// SparseLayer reports whether layer i's MLP is an MoE block:
// NumExperts > 0, i not in MLPOnlyLayers and (i+1) a multiple of
// DecoderSparseStep (transformers' rule for Qwen2-MoE and Qwen3-MoE;
// every layer for Mixtral).
func (c LlamaConfig) SparseLayer(i int) bool {
	if c.NumExperts <= 0 {
		return false
	}
	for _, d := range c.MLPOnlyLayers {
		if d == i {
			return false
		}
	}
	return (i+1)%max(c.DecoderSparseStep, 1) == 0
}

// MoE returns the configuration of the decoder's MoE blocks.
func (c LlamaConfig) MoE() MoEConfig {
	inter := c.MoEIntermediateSize
	if inter == 0 {
		inter = c.IntermediateSize
	}
	return MoEConfig{Experts: c.NumExperts, TopK: c.NumExpertsPerTok, Hidden: c.HiddenSize, Intermediate: inter,
		NormTopKProb: c.NormTopKProb, SharedIntermediate: c.SharedExpertIntermediateSize, Init: Normal(c.initRange())}
}

// ErrLlamaConfig is the error every invalid LlamaConfig matches.
var ErrLlamaConfig = errors.New("invalid Llama config")

// kvHeads returns the number of key/value heads.
func (c LlamaConfig) kvHeads() int {
	if c.NumKeyValueHeads == 0 {
		return c.NumAttentionHeads
	}
	return c.NumKeyValueHeads
}

// HeadDim returns the width of one attention head: HeadDimension, or
// hidden_size / num_attention_heads.
func (c LlamaConfig) HeadDim() int {
	if c.HeadDimension > 0 {
		return c.HeadDimension
	}
	if c.NumAttentionHeads <= 0 {
		return 0
	}
	return c.HiddenSize / c.NumAttentionHeads
}

func (c LlamaConfig) eps() float64 {
	if c.RMSNormEps == 0 {
		return 1e-6
	}
	return c.RMSNormEps
}

func (c LlamaConfig) theta() float64 {
	if c.RopeTheta == 0 {
		return 10000
	}
	return c.RopeTheta
}

func (c LlamaConfig) initRange() float64 {
	if c.InitializerRange == 0 {
		return 0.02
	}
	return c.InitializerRange
}

// Resolved returns the configuration with its defaults written out, as
// a config.json states them: num_key_value_heads (num_attention_heads
// when 0), rms_norm_eps (1e-6), rope_theta (10000) and
// initializer_range (0.02).
func (c LlamaConfig) Resolved() LlamaConfig {
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	c.RMSNormEps, c.RopeTheta, c.InitializerRange = c.eps(), c.theta(), c.initRange()
	c.HeadDimension = c.HeadDim()
	if c.NumExperts > 0 {
		c.MoEIntermediateSize = c.MoE().Intermediate
		c.DecoderSparseStep = max(c.DecoderSparseStep, 1)
	}
	return c
}

// Validate reports a configuration that cannot build, naming the key.
func (c LlamaConfig) Validate() error {
	bad := func(key string, format string, args ...any) error {
		return fmt.Errorf("nn: %w: %s: %s", ErrLlamaConfig, key, fmt.Sprintf(format, args...))
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"vocab_size", c.VocabSize}, {"max_position_embeddings", c.MaxPositionEmbeddings}} {
		if f.v <= 0 {
			return bad(f.key, "%d, want a positive number", f.v)
		}
	}
	switch kv := c.kvHeads(); {
	case c.NumKeyValueHeads < 0:
		return bad("num_key_value_heads", "%d, want a positive number", c.NumKeyValueHeads)
	case c.HeadDimension < 0:
		return bad("head_dim", "%d, want a positive number (or 0 for hidden_size / num_attention_heads)", c.HeadDimension)
	case c.HeadDimension == 0 && c.HiddenSize%c.NumAttentionHeads != 0:
		return bad("num_attention_heads", "%d heads do not divide hidden_size %d", c.NumAttentionHeads, c.HiddenSize)
	case c.NumAttentionHeads%kv != 0:
		return bad("num_key_value_heads", "%d key/value heads do not divide num_attention_heads %d", kv, c.NumAttentionHeads)
	case c.HeadDimension > 0 && c.HeadDimension%2 != 0:
		return bad("head_dim", "%d is odd; rotary embeddings rotate halves", c.HeadDimension)
	case c.HeadDim()%2 != 0:
		return bad("num_attention_heads", "head width %d (hidden_size / num_attention_heads) is odd; rotary embeddings rotate halves", c.HeadDim())
	case !(c.RMSNormEps >= 0) || math.IsInf(c.RMSNormEps, 0):
		return bad("rms_norm_eps", "%v, want a non-negative number", c.RMSNormEps)
	case !(c.RopeTheta >= 0) || math.IsInf(c.RopeTheta, 0):
		return bad("rope_theta", "%v, want a positive number", c.RopeTheta)
	case !(c.InitializerRange >= 0) || math.IsInf(c.InitializerRange, 0):
		return bad("initializer_range", "%v, want a non-negative number", c.InitializerRange)
	}
	return c.validateMoE(bad)
}

// validateMoE checks the Mixture-of-Experts keys (none when NumExperts
// is 0, as a dense config may carry them unused).
func (c LlamaConfig) validateMoE(bad func(key string, format string, args ...any) error) error {
	switch {
	case c.NumExperts < 0:
		return bad("num_experts", "%d, want 0 (dense) or more", c.NumExperts)
	case c.NumExperts == 0:
		return nil
	case c.NumExpertsPerTok < 1 || c.NumExpertsPerTok > c.NumExperts:
		return bad("num_experts_per_tok", "%d, want 1 to num_experts %d", c.NumExpertsPerTok, c.NumExperts)
	case c.MoEIntermediateSize < 0:
		return bad("moe_intermediate_size", "%d, want a positive number (or 0 for intermediate_size)", c.MoEIntermediateSize)
	case c.SharedExpertIntermediateSize < 0:
		return bad("shared_expert_intermediate_size", "%d, want 0 (none) or more", c.SharedExpertIntermediateSize)
	case c.DecoderSparseStep < 0:
		return bad("decoder_sparse_step", "%d, want a positive number", c.DecoderSparseStep)
	case !(c.RouterAuxLossCoef >= 0) || math.IsInf(c.RouterAuxLossCoef, 0):
		return bad("router_aux_loss_coef", "%v, want a finite number ≥ 0", c.RouterAuxLossCoef)
	}
	for _, l := range c.MLPOnlyLayers {
		if l < 0 || l >= c.NumHiddenLayers {
			return bad("mlp_only_layers", "layer %d, want 0 to num_hidden_layers−1 = %d", l, c.NumHiddenLayers-1)
		}
	}
	return nil
}

// LlamaLayer is one decoder layer: x + o_proj(attention(input_layernorm
// (x))), then x + down_proj(silu(gate_proj(h))·up_proj(h)) with h =
// post_attention_layernorm(x) — or x + MoE(h) in a sparse layer.
type LlamaLayer struct {
	Name string
	// InputNorm and PostNorm are input_layernorm and
	// post_attention_layernorm.
	InputNorm, PostNorm *RMSNorm
	// Q, K, V, O are self_attn.{q,k,v}_proj's weights (Hugging Face's
	// names and shapes); QBias, KBias, VBias their biases (QKVBias,
	// else nil); QNorm and KNorm self_attn.q_norm and k_norm (QKNorm,
	// else nil).
	Q, K, V, O          *graph.Node
	QBias, KBias, VBias *graph.Node
	QNorm, KNorm        *RMSNorm
	// Gate, Up, Down are a dense layer's mlp.{gate,up,down}_proj
	// weights (nil in a sparse layer); MoE is a sparse layer's block
	// (nil in a dense one).
	Gate, Up, Down   *graph.Node
	MoE              *MoE
	Attention        ops.AttentionConfig
	qkvName, mlpName string
	heads, kvHeads   int
	headDim          int
}

// FusedNames returns the names of the layer's two fused linear nodes —
// q, k and v's one GEMM ("model.layers.0.self_attn.qkv_proj") and gate
// and up's ("model.layers.0.mlp.gate_up_proj", "" in a sparse layer) —
// under which the FP8 passes keep their scaling state.
func (l *LlamaLayer) FusedNames() (qkv, gateUp string) { return l.qkvName, l.mlpName }

// Llama is a Llama-style decoder (Hugging Face's LlamaForCausalLM, and
// with its configuration's options Qwen2, Qwen3, Mixtral, Qwen2-MoE and
// Qwen3-MoE):
// token embeddings (model.embed_tokens), NumHiddenLayers layers
// (model.layers.0 …), a final RMSNorm (model.norm) and an LM head
// (lm_head, or the embeddings' transpose with TieWordEmbeddings).
//
// Its parameters have Hugging Face's fully qualified names, so a
// checkpoint in the transformers layout loads by name (see hf.LoadLlama). Each
// layer runs its q, k and v projections as one GEMM (the three weights
// stacked: the FP8 compiler sees one linear layer,
// model.layers.i.self_attn.qkv_proj, whose input cast the RMSNorm
// writes) and its gate and up projections likewise (mlp.gate_up_proj,
// followed by the fused SwiGLU); the attention is fused, with grouped
// key/value heads and rotary embeddings inside the kernel.
type Llama struct {
	Config LlamaConfig
	Embed  *graph.Node // model.embed_tokens.weight [vocab hidden]
	Layers []*LlamaLayer
	Norm   *RMSNorm
	Head   *graph.Node // lm_head.weight, or Embed when tied
}

// NewLlama creates the model's parameters, initialised as Hugging Face's
// Llama does: every projection and the embeddings N(0,
// initializer_range²), the norms' weights 1.
func NewLlama(b *Builder, cfg LlamaConfig) (*Llama, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, f, d := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim()
	h, kv := cfg.NumAttentionHeads, cfg.kvHeads()
	init := Normal(cfg.initRange())
	norm := ops.RMSNormConfig{Eps: float32(cfg.eps())}
	model := b.Scope("model")
	m := &Llama{Config: cfg}
	m.Embed = model.Scope("embed_tokens").Param("weight", init, cfg.VocabSize, c)
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		ls := model.Scope(fmt.Sprintf("layers.%d", i))
		attn, mlp := ls.Scope("self_attn"), ls.Scope("mlp")
		w := func(s *Builder, name string, out, in int) *graph.Node {
			return s.Scope(name).Param("weight", init, out, in)
		}
		l := &LlamaLayer{
			Name:      ls.Name(""),
			InputNorm: NewRMSNorm(ls, "input_layernorm", c, norm),
			Q:         w(attn, "q_proj", h*d, c),
			K:         w(attn, "k_proj", kv*d, c),
			V:         w(attn, "v_proj", kv*d, c),
			O:         w(attn, "o_proj", c, h*d),
			PostNorm:  NewRMSNorm(ls, "post_attention_layernorm", c, norm),
			Attention: ops.AttentionConfig{Heads: h, KVHeads: kv, RoPETheta: cfg.theta()},
			qkvName:   attn.Name("qkv_proj"),
			heads:     h, kvHeads: kv, headDim: d,
		}
		if cfg.QKVBias {
			l.QBias = attn.Scope("q_proj").Param("bias", Zeros, h*d)
			l.KBias = attn.Scope("k_proj").Param("bias", Zeros, kv*d)
			l.VBias = attn.Scope("v_proj").Param("bias", Zeros, kv*d)
		}
		if cfg.QKNorm {
			l.QNorm = NewRMSNorm(attn, "q_norm", d, norm)
			l.KNorm = NewRMSNorm(attn, "k_norm", d, norm)
		}
		if cfg.SparseLayer(i) {
			moe, err := NewMoE(ls, "mlp", cfg.MoE())
			if err != nil {
				return nil, fmt.Errorf("nn: %w: layer %d: %w", ErrLlamaConfig, i, err)
			}
			l.MoE = moe
		} else {
			l.Gate, l.Up, l.Down = w(mlp, "gate_proj", f, c), w(mlp, "up_proj", f, c), w(mlp, "down_proj", c, f)
			l.mlpName = mlp.Name("gate_up_proj")
		}
		m.Layers = append(m.Layers, l)
	}
	m.Norm = NewRMSNorm(model, "norm", c, norm)
	m.Head = m.Embed
	if !cfg.TieWordEmbeddings {
		m.Head = b.Scope("lm_head").Param("weight", init, cfg.VocabSize, c)
	}
	return m, nil
}

// Forward maps x [B T hidden] through the layer.
func (l *LlamaLayer) Forward(x *graph.Node) *graph.Node {
	y, _ := l.ForwardRouter(x)
	return y
}

// ForwardRouter is Forward that also returns a sparse layer's router
// logits [B·T, experts] (nil in a dense layer), for the balancing
// losses.
func (l *LlamaLayer) ForwardRouter(x *graph.Node) (y, router *graph.Node) {
	name := func(s string) string { return l.Name + "." + s }
	qkvW := ops.Concat(0, l.Q, l.K, l.V) // [(H+2·Hkv)·D hidden]
	var qkvB *graph.Node
	if l.QBias != nil {
		qkvB = ops.Concat(0, l.QBias, l.KBias, l.VBias)
	}
	qkv := ops.Linear(l.qkvName, l.InputNorm.Forward(x), qkvW, qkvB) // [B T (H+2·Hkv)·D]
	if l.QNorm != nil {
		qkv = l.normQK(qkv)
	}
	att := ops.Linear(name("self_attn.o_proj"), ops.FusedAttention(qkv, l.Attention), l.O, nil) // [B T hidden]
	x = ops.Add(x, att)
	h := l.PostNorm.Forward(x)
	if l.MoE != nil {
		y, router = l.MoE.Forward(h)
		return ops.Add(x, y), router
	}
	gateUp := ops.Linear(l.mlpName, h, ops.Concat(0, l.Gate, l.Up), nil) // [B T 2F]
	return ops.Add(x, ops.Linear(name("mlp.down_proj"), ops.SwiGLUHalves(gateUp), l.Down, nil)), nil
}

// normQK applies q_norm and k_norm to the heads of q and k in the fused
// projection's output [B T (H+2·Hkv)·D].
func (l *LlamaLayer) normQK(qkv *graph.Node) *graph.Node {
	s := qkv.Shape()
	if s.Rank() != 3 {
		return qkv.Graph().Failed(fmt.Errorf("nn: %s: q/k norm of %q with shape %v, want [B T width]", l.Name, qkv.Name(), s))
	}
	h, kv := l.heads, l.kvHeads
	heads := ops.Reshape(qkv, s[0], s[1], h+2*kv, l.headDim)
	q := l.QNorm.Forward(ops.Slice(heads, 2, 0, h))
	k := l.KNorm.Forward(ops.Slice(heads, 2, h, h+kv))
	v := ops.Slice(heads, 2, h+kv, h+2*kv)
	return ops.Reshape(ops.Concat(2, q, k, v), s...)
}

// Forward maps token ids [B T] (int32; positions 0…T−1, T at most
// max_position_embeddings) to logits [B T vocab].
func (m *Llama) Forward(ids *graph.Node) *graph.Node {
	logits, _ := m.ForwardRouter(ids)
	return logits
}

// ForwardRouter is Forward that also returns the router logits of
// every sparse layer, in layer order (none for a dense model): what
// AuxLoss, LoadBalancingLoss and RouterZLoss take.
func (m *Llama) ForwardRouter(ids *graph.Node) (logits *graph.Node, router []*graph.Node) {
	g := ids.Graph()
	if s := ids.Shape(); len(s) != 2 || s[1] > m.Config.MaxPositionEmbeddings {
		return g.Failed(fmt.Errorf("nn: Llama: ids %q have shape %v, want [B T] with T ≤ max_position_embeddings %d", ids.Name(), s, m.Config.MaxPositionEmbeddings)), nil
	}
	x := ops.Embedding("model.embed_tokens", m.Embed, ids)
	for _, l := range m.Layers {
		var r *graph.Node
		x, r = l.ForwardRouter(x)
		if r != nil {
			router = append(router, r)
		}
	}
	return ops.Linear("lm_head", m.Norm.Forward(x), m.Head, nil), router
}

// AuxLoss is what transformers adds to a Mixture of Experts' training
// loss: router_aux_loss_coef × LoadBalancingLoss over router (the
// logits ForwardRouter returned) when output_router_logits is set; nil
// otherwise, or for a dense model.
func (m *Llama) AuxLoss(router []*graph.Node) *graph.Node {
	c := m.Config
	if !c.OutputRouterLogits || len(router) == 0 || c.NumExperts == 0 {
		return nil
	}
	return ops.Scale(LoadBalancingLoss(router, c.NumExperts, c.NumExpertsPerTok), float32(c.RouterAuxLossCoef))
}
