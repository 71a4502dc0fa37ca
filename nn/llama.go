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

// HeadDim returns the width of one attention head.
func (c LlamaConfig) HeadDim() int {
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
	case c.HiddenSize%c.NumAttentionHeads != 0:
		return bad("num_attention_heads", "%d heads do not divide hidden_size %d", c.NumAttentionHeads, c.HiddenSize)
	case c.NumAttentionHeads%kv != 0:
		return bad("num_key_value_heads", "%d key/value heads do not divide num_attention_heads %d", kv, c.NumAttentionHeads)
	case c.HeadDim()%2 != 0:
		return bad("num_attention_heads", "head width %d (hidden_size / num_attention_heads) is odd; rotary embeddings rotate halves", c.HeadDim())
	case !(c.RMSNormEps >= 0) || math.IsInf(c.RMSNormEps, 0):
		return bad("rms_norm_eps", "%v, want a non-negative number", c.RMSNormEps)
	case !(c.RopeTheta >= 0) || math.IsInf(c.RopeTheta, 0):
		return bad("rope_theta", "%v, want a positive number", c.RopeTheta)
	case !(c.InitializerRange >= 0) || math.IsInf(c.InitializerRange, 0):
		return bad("initializer_range", "%v, want a non-negative number", c.InitializerRange)
	}
	return nil
}

// LlamaLayer is one decoder layer: x + o_proj(attention(input_layernorm
// (x))), then x + down_proj(silu(gate_proj(h))·up_proj(h)) with h =
// post_attention_layernorm(x).
type LlamaLayer struct {
	Name string
	// InputNorm and PostNorm are input_layernorm and
	// post_attention_layernorm.
	InputNorm, PostNorm *RMSNorm
	// Q, K, V, O are self_attn.{q,k,v,o}_proj's weights; Gate, Up, Down
	// mlp.{gate,up,down}_proj's (Hugging Face's names and shapes, no
	// biases).
	Q, K, V, O       *graph.Node
	Gate, Up, Down   *graph.Node
	Attention        ops.AttentionConfig
	qkvName, mlpName string
}

// FusedNames returns the names of the layer's two fused linear nodes —
// q, k and v's one GEMM ("model.layers.0.self_attn.qkv_proj") and gate
// and up's ("model.layers.0.mlp.gate_up_proj") — under which the FP8
// passes keep their scaling state.
func (l *LlamaLayer) FusedNames() (qkv, gateUp string) { return l.qkvName, l.mlpName }

// Llama is a Llama-style decoder (Hugging Face's LlamaForCausalLM):
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
		m.Layers = append(m.Layers, &LlamaLayer{
			Name:      ls.Name(""),
			InputNorm: NewRMSNorm(ls, "input_layernorm", c, norm),
			Q:         w(attn, "q_proj", h*d, c),
			K:         w(attn, "k_proj", kv*d, c),
			V:         w(attn, "v_proj", kv*d, c),
			O:         w(attn, "o_proj", c, h*d),
			PostNorm:  NewRMSNorm(ls, "post_attention_layernorm", c, norm),
			Gate:      w(mlp, "gate_proj", f, c),
			Up:        w(mlp, "up_proj", f, c),
			Down:      w(mlp, "down_proj", c, f),
			Attention: ops.AttentionConfig{Heads: h, KVHeads: kv, RoPETheta: cfg.theta()},
			qkvName:   attn.Name("qkv_proj"),
			mlpName:   mlp.Name("gate_up_proj"),
		})
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
	name := func(s string) string { return l.Name + "." + s }
	qkvW := ops.Concat(0, l.Q, l.K, l.V)                                                      // [(H+2·Hkv)·D hidden]
	qkv := ops.Linear(l.qkvName, l.InputNorm.Forward(x), qkvW, nil)                           // [B T (H+2·Hkv)·D]
	y := ops.Linear(name("self_attn.o_proj"), ops.FusedAttention(qkv, l.Attention), l.O, nil) // [B T hidden]
	x = ops.Add(x, y)
	gateUp := ops.Linear(l.mlpName, l.PostNorm.Forward(x), ops.Concat(0, l.Gate, l.Up), nil) // [B T 2F]
	return ops.Add(x, ops.Linear(name("mlp.down_proj"), ops.SwiGLUHalves(gateUp), l.Down, nil))
}

// Forward maps token ids [B T] (int32; positions 0…T−1, T at most
// max_position_embeddings) to logits [B T vocab].
func (m *Llama) Forward(ids *graph.Node) *graph.Node {
	g := ids.Graph()
	if s := ids.Shape(); len(s) != 2 || s[1] > m.Config.MaxPositionEmbeddings {
		return g.Failed(fmt.Errorf("nn: Llama: ids %q have shape %v, want [B T] with T ≤ max_position_embeddings %d", ids.Name(), s, m.Config.MaxPositionEmbeddings))
	}
	x := ops.Embedding("model.embed_tokens", m.Embed, ids)
	for _, l := range m.Layers {
		x = l.Forward(x)
	}
	return ops.Linear("lm_head", m.Norm.Forward(x), m.Head, nil)
}
