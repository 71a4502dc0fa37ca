package nn

import (
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// CausalSelfAttention is multi-head causal self-attention with one fused
// QKV projection (name.qkv, [3C C]) and an output projection (name.proj).
type CausalSelfAttention struct {
	Name    string
	Heads   int
	Embd    int
	QKV     *Linear
	Proj    *Linear
	Dropout Dropout
	// Unfused builds attention from separate ops (slices, permutes,
	// batched GEMMs, mask, softmax, dropout) instead of the fused
	// ops.CausalAttentionDropout; without dropout the two agree to
	// float32 rounding (with it they draw different masks). Tests and
	// comparisons use it.
	Unfused bool
}

// NewCausalSelfAttention creates the attention layer; embd must be a
// multiple of heads.
func NewCausalSelfAttention(b *Builder, name string, embd, heads int, dropout Dropout, projInit Initializer) (*CausalSelfAttention, error) {
	if heads <= 0 || embd%heads != 0 {
		return nil, fmt.Errorf("nn: attention %q: embedding size %d is not a multiple of %d heads", b.Name(name), embd, heads)
	}
	s := b.Scope(name)
	return &CausalSelfAttention{
		Name: s.Name(""), Heads: heads, Embd: embd, Dropout: dropout,
		QKV:  NewLinear(s, "qkv", embd, 3*embd, WithInit(Normal(0.02)), WithBiasInit(Zeros)),
		Proj: NewLinear(s, "proj", embd, embd, WithInit(projInit), WithBiasInit(Zeros)),
	}, nil
}

// Forward maps x [B T C] to [B T C]: per head softmax(mask(q·kᵀ/√d))·v,
// heads concatenated, then projected.
func (a *CausalSelfAttention) Forward(x *graph.Node) *graph.Node {
	s := x.Shape()
	if len(s) != 3 {
		return x.Graph().Failed(fmt.Errorf("nn: attention %q: input %q has shape %v, want [B T C]", a.Name, x.Name(), s))
	}
	bsz, t, c := s[0], s[1], s[2]
	h, d := a.Heads, c/a.Heads
	qkv := a.QKV.Forward(x) // [B T 3C]
	if !a.Unfused {
		y := ops.CausalAttentionDropout(qkv, h, a.Dropout.P, a.Dropout.Seed)
		return a.Dropout.Forward(a.Proj.Forward(y))
	}
	head := func(i int) *graph.Node {
		part := ops.Slice(qkv, 2, i*c, (i+1)*c)                         // [B T C]
		return ops.Permute(ops.Reshape(part, bsz, t, h, d), 0, 2, 1, 3) // [B H T D]
	}
	q, k, v := head(0), head(1), head(2)
	att := ops.Scale(ops.BatchMatMul(q, k, false, true), float32(1/math.Sqrt(float64(d)))) // [B H T T]
	att = a.Dropout.Forward(ops.Softmax(ops.CausalMask(att)))
	y := ops.BatchMatMul(att, v, false, false)             // [B H T D]
	y = ops.Reshape(ops.Permute(y, 0, 2, 1, 3), bsz, t, c) // [B T C]
	return a.Dropout.Forward(a.Proj.Forward(y))
}

// Block is a pre-LayerNorm transformer block:
// x + attn(ln1(x)), then x + mlp(ln2(x)) with a GELU MLP of width 4C.
type Block struct {
	Name     string
	LN1, LN2 *LayerNorm
	Attn     *CausalSelfAttention
	FC, Proj *Linear
	Dropout  Dropout
}

// GPTConfig describes a GPT model.
type GPTConfig struct {
	Layers, Heads, Embd int
	// Block is the context length; Vocab the number of tokens.
	Block, Vocab int
	// Dropout is the drop probability after attention, projections and
	// embeddings (0 for none); Seed seeds the masks.
	Dropout float32
	Seed    uint64
	// UnfusedAttention builds every block's attention from separate ops
	// (see CausalSelfAttention.Unfused).
	UnfusedAttention bool
}

// Validate reports a configuration that cannot build.
func (c GPTConfig) Validate() error {
	switch {
	case c.Layers <= 0 || c.Heads <= 0 || c.Embd <= 0 || c.Block <= 0 || c.Vocab <= 0:
		return fmt.Errorf("nn: GPT config %+v: every size must be positive", c)
	case c.Embd%c.Heads != 0:
		return fmt.Errorf("nn: GPT config: embedding size %d is not a multiple of %d heads", c.Embd, c.Heads)
	case c.Dropout < 0 || c.Dropout >= 1:
		return fmt.Errorf("nn: GPT config: dropout %v is outside [0, 1)", c.Dropout)
	}
	return nil
}

// GPT is a decoder-only transformer: token and position embeddings
// (wte, wpe), Layers pre-LN blocks (h.0 …), a final LayerNorm (ln_f) and
// an LM head (lm_head).
type GPT struct {
	Config GPTConfig
	Name   string
	WTE    *Embedding
	WPE    *Embedding
	Blocks []*Block
	LNF    *LayerNorm
	Head   *Linear
}

// NewGPT creates the model's parameters in scope name (GPT-2's
// initialisation: N(0, 0.02²), residual projections scaled by
// 1/√(2·layers)).
func NewGPT(b *Builder, name string, cfg GPTConfig) (*GPT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := b.Scope(name)
	m := &GPT{Config: cfg, Name: s.Name("")}
	m.WTE = NewEmbedding(s, "wte", cfg.Vocab, cfg.Embd, nil)
	m.WPE = NewEmbedding(s, "wpe", cfg.Block, cfg.Embd, nil)
	drop := Dropout{P: cfg.Dropout, Seed: cfg.Seed}
	residual := Normal(0.02 / math.Sqrt(2*float64(cfg.Layers)))
	for i := 0; i < cfg.Layers; i++ {
		hs := s.Scope(fmt.Sprintf("h.%d", i))
		attn, err := NewCausalSelfAttention(hs, "attn", cfg.Embd, cfg.Heads, drop, residual)
		if err != nil {
			return nil, err
		}
		attn.Unfused = cfg.UnfusedAttention
		mlp := hs.Scope("mlp")
		m.Blocks = append(m.Blocks, &Block{
			Name:    hs.Name(""),
			LN1:     NewLayerNorm(hs, "ln1", cfg.Embd, ops.LayerNormConfig{}),
			LN2:     NewLayerNorm(hs, "ln2", cfg.Embd, ops.LayerNormConfig{}),
			Attn:    attn,
			FC:      NewLinear(mlp, "fc", cfg.Embd, 4*cfg.Embd, WithInit(Normal(0.02)), WithBiasInit(Zeros)),
			Proj:    NewLinear(mlp, "proj", 4*cfg.Embd, cfg.Embd, WithInit(residual), WithBiasInit(Zeros)),
			Dropout: drop,
		})
	}
	m.LNF = NewLayerNorm(s, "ln_f", cfg.Embd, ops.LayerNormConfig{})
	m.Head = NewLinear(s, "lm_head", cfg.Embd, cfg.Vocab, WithInit(Normal(0.02)), NoBias())
	return m, nil
}

// Forward maps x [B T C] through the block.
func (blk *Block) Forward(x *graph.Node) *graph.Node {
	x = ops.Add(x, blk.Attn.Forward(blk.LN1.Forward(x)))
	h := ops.GELU(blk.FC.Forward(blk.LN2.Forward(x)))
	return ops.Add(x, blk.Dropout.Forward(blk.Proj.Forward(h)))
}

// Forward maps token ids [B T] (int32) and positions [T] (int32, 0…T−1)
// to logits [B T Vocab].
func (m *GPT) Forward(ids, pos *graph.Node) *graph.Node {
	x := ops.Add(m.WTE.Forward(ids), m.WPE.Forward(pos)) // [B T C] + [T C]
	x = Dropout{P: m.Config.Dropout, Seed: m.Config.Seed}.Forward(x)
	for _, blk := range m.Blocks {
		x = blk.Forward(x)
	}
	return m.Head.Forward(m.LNF.Forward(x))
}
