package ops

import (
	"fmt"
	"math"
	"strconv"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// AttentionConfig configures the fused causal self-attention
// (FusedAttention).
type AttentionConfig struct {
	// Heads is the number of query heads H.
	Heads int
	// KVHeads is the number of key/value heads Hkv (grouped-query
	// attention, Llama's num_key_value_heads): each serves H/Hkv
	// consecutive query heads. 0 means Heads (multi-head attention); it
	// must divide Heads.
	KVHeads int
	// RoPETheta is the base θ of rotary position embeddings applied to q
	// and k (Llama's rope_theta: 10000 for Llama 2, 500000 for Llama 3);
	// 0 means none.
	RoPETheta float64
	// Dropout is the probability of dropping each attention probability
	// while training (0 for none); Seed keys its masks.
	Dropout float32
	Seed    uint64
}

// causalAttentionOp is fused causal self-attention over the output of a
// fused QKV projection (see FusedAttention).
type causalAttentionOp struct {
	heads, kvHeads int     // kvHeads 0: heads
	theta          float64 // rotary embeddings' base, 0 for none
	p              float32 // attention dropout (training only)
	seed           uint64
}

func (o causalAttentionOp) Type() string     { return KindCausalAttention.String() }
func (o causalAttentionOp) Kind() graph.Kind { return KindCausalAttention }
func (o causalAttentionOp) Attrs() string {
	s := "heads=" + strconv.Itoa(o.heads)
	if o.kvHeads > 0 && o.kvHeads != o.heads {
		s += ",kv_heads=" + strconv.Itoa(o.kvHeads)
	}
	if o.theta > 0 {
		s += ",rope_theta=" + strconv.FormatFloat(o.theta, 'g', -1, 64)
	}
	if o.p > 0 {
		s += fmt.Sprintf(",dropout=%g,seed=%d", o.p, o.seed)
	}
	return s
}

// kv returns the number of key/value heads.
func (o causalAttentionOp) kv() int {
	if o.kvHeads == 0 {
		return o.heads
	}
	return o.kvHeads
}

// attentionDims checks a [B T (H+2·Hkv)·D] qkv input for the op's heads
// and returns B, T, the output width C = H·D and the head width D.
func (o causalAttentionOp) attentionDims(qkv *graph.Node) (b, t, c, d int, err error) {
	s := qkv.Shape()
	h, kv := o.heads, o.kv()
	parts := h + 2*kv
	if kv == h {
		// Multi-head attention: [B T 3C].
		switch {
		case len(s) != 3:
			return 0, 0, 0, 0, fmt.Errorf("input %q has shape %v, want [B T 3C]", qkv.Name(), s)
		case s[2]%3 != 0:
			return 0, 0, 0, 0, fmt.Errorf("input %q %v: last axis %d is not 3C (q, k and v side by side)", qkv.Name(), s, s[2])
		case h <= 0 || s[2]/3%h != 0:
			return 0, 0, 0, 0, fmt.Errorf("input %q %v: width %d is not a multiple of %d heads", qkv.Name(), s, s[2]/3, h)
		}
	} else {
		switch {
		case h <= 0 || kv < 0 || kv > h || h%kv != 0:
			return 0, 0, 0, 0, fmt.Errorf("input %q: %d key/value heads do not divide %d attention heads", qkv.Name(), kv, h)
		case len(s) != 3:
			return 0, 0, 0, 0, fmt.Errorf("input %q has shape %v, want [B T (H+2·Hkv)·D]", qkv.Name(), s)
		case s[2]%parts != 0:
			return 0, 0, 0, 0, fmt.Errorf("input %q %v: last axis %d is not (%d + 2·%d)·D (query, key and value heads side by side)", qkv.Name(), s, s[2], h, kv)
		}
	}
	switch {
	case math.IsNaN(o.theta) || math.IsInf(o.theta, 0) || o.theta < 0:
		return 0, 0, 0, 0, fmt.Errorf("input %q: rotary embeddings' base θ = %v, want a positive number (or 0 for none)", qkv.Name(), o.theta)
	case o.theta > 0 && (s[2]/parts)%2 != 0:
		return 0, 0, 0, 0, fmt.Errorf("input %q %v: head width %d is odd; rotary embeddings rotate pairs of halves", qkv.Name(), s, s[2]/parts)
	}
	d = s[2] / parts
	return s[0], s[1], h * d, d, nil
}

func (o causalAttentionOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if !(o.p >= 0 && o.p < 1) {
		return nil, graph.Invalid, fmt.Errorf("attention dropout %v is outside [0, 1)", o.p)
	}
	b, t, c, _, err := o.attentionDims(in[0])
	if err != nil {
		return nil, graph.Invalid, err
	}
	return graph.Shape{b, t, c}, graph.Float32, nil
}

// attentionState travels with the forward's output (its graph.Value
// metadata under attentionKey) to
// the backward: the kernel with its scratch and each query row's
// log-sum-exp of the scaled scores, all that FlashAttention-2's backward
// needs besides q, k, v and the output.
// attentionKey is the metadata CausalAttention's output carries.
var attentionKey = graph.NewValueKey[*attentionState]("attention state")

type attentionState struct {
	att *kernels.Attention
	lse []float32 // [B·H·T]
}

// newAttention builds the fused kernel for a [B T (H+2·Hkv)·D] input,
// scores scaled by 1/√D.
func (o causalAttentionOp) newAttention(s graph.Shape) *kernels.Attention {
	h, kv := o.heads, o.kv()
	b, t, d := s[0], s[1], s[2]/(h+2*kv)
	a := kernels.NewAttention(b, t, h, d, float32(1/math.Sqrt(float64(d))), parallel.Workers())
	a.KVHeads = kv
	if o.theta > 0 {
		a.SetRoPE(kernels.NewRoPE(t, d, o.theta))
	}
	return a
}

// attentionChunker spreads units of work (the forward's (batch, head)
// pairs or the backward's (batch, key/value head) groups) over the
// workers, each with its own scratch.
func attentionChunker(att *kernels.Attention, units int, unit func(worker, i int)) *chunker {
	return newPartChunker(units, att.Heads()*att.T*att.T*att.D, func(part, lo, hi int) {
		for i := lo; i < hi; i++ {
			unit(part, i)
		}
	})
}

func (o causalAttentionOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	qkv, y := b.In[0].F32, b.Out.F32
	st := &attentionState{att: o.newAttention(b.In[0].Shape)}
	st.lse = make([]float32, st.att.Heads()*st.att.T)
	graph.SetMeta(b.Out, attentionKey, st)
	run := attentionChunker(st.att, st.att.Heads(), func(w, bh int) { st.att.Forward(w, bh, qkv, y, st.lse) }).kernel()
	if !b.Training || o.p == 0 {
		return run, nil
	}
	st.att.Dropout = o.p
	step, id := b.Step(), b.Node.ID()
	return func() error {
		st.att.Key = dropoutKey(o.seed, id, *step)
		return run()
	}, nil
}

// dropoutKey is the attention dropout's key for a step: like the
// Dropout op's masks it depends only on the seed, the node and the
// step, so a resumed run drops the same probabilities.
func dropoutKey(seed uint64, node int, step int64) uint64 {
	return seed ^ uint64(node)<<40 ^ uint64(step)*0x9e3779b97f4a7c15
}

func (o causalAttentionOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(causalAttentionGradOp(o), n.Name()+".grad", n.Input(0), n, dy)}
}

// causalAttentionGradOp computes the gradient of the fused attention's
// [B T 3C] input from (qkv, y, dy), recomputing each tile of
// probabilities from the forward's saved log-sum-exps.
type causalAttentionGradOp causalAttentionOp

func (o causalAttentionGradOp) Type() string     { return KindCausalAttentionGrad.String() }
func (o causalAttentionGradOp) Kind() graph.Kind { return KindCausalAttentionGrad }
func (o causalAttentionGradOp) Attrs() string    { return causalAttentionOp(o).Attrs() }

func (o causalAttentionGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	if _, ok := in[1].Op().(causalAttentionOp); !ok {
		return nil, graph.Invalid, fmt.Errorf("input 1 %q is a %s, want the CausalAttention whose gradient this is", in[1].Name(), in[1].Op().Type())
	}
	b, t, c, _, err := causalAttentionOp(o).attentionDims(in[0])
	if err != nil {
		return nil, graph.Invalid, err
	}
	if want := (graph.Shape{b, t, c}); !in[1].Shape().Equal(want) || !in[2].Shape().Equal(want) {
		return nil, graph.Invalid, fmt.Errorf("output %q %v and its gradient %q %v, want %v", in[1].Name(), in[1].Shape(), in[2].Name(), in[2].Shape(), want)
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o causalAttentionGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	st, ok := graph.Meta(b.In[1], attentionKey)
	if !ok {
		return nil, fmt.Errorf("input %q carries no attention state (bound out of order?)", b.Node.Input(1).Name())
	}
	qkv, y, dy, dqkv := b.In[0].F32, b.In[1].F32, b.In[2].F32, b.Out.F32
	// The backward has its own scratch: in a program that runs both, the
	// forward and backward kernels never overlap, but sharing would tie
	// their sizes together for nothing.
	att := causalAttentionOp(o).newAttention(b.In[0].Shape)
	run := attentionChunker(att, att.Groups(), func(w, gi int) { att.Backward(w, gi, qkv, y, st.lse, dy, dqkv) }).kernel()
	if !b.Training || o.p == 0 {
		return run, nil
	}
	att.Dropout = o.p
	step, id := b.Step(), b.Node.Input(1).ID()
	return func() error {
		att.Key = dropoutKey(o.seed, id, *step) // the forward's mask
		return run()
	}, nil
}

// CausalAttention is multi-head causal self-attention fused into one op,
// forward and backward (FlashAttention-2's tiling and online softmax):
// qkv [B T 3C] holds each token's query, key and value side by side (as
// a fused QKV projection writes them; head h in columns h·D of each, C =
// heads·D), and the result [B T C] is, per head, softmax(mask(q·kᵀ/√D))·v
// with the heads concatenated. No T×T matrix is kept between the forward
// and the backward, which recomputes it from each row's log-sum-exp; the
// gradient comes back in qkv's layout, so no slice or permute surrounds
// the op.
func CausalAttention(qkv *graph.Node, heads int) *graph.Node {
	return apply(causalAttentionOp{heads: heads}, "", qkv)
}

// FusedAttention is CausalAttention with its whole configuration:
// grouped-query attention (qkv [B T (H+2·Hkv)·D]: the H query heads, then
// the Hkv key heads, then the Hkv value heads, as one projection whose
// weight stacks Llama's q_proj, k_proj and v_proj writes them; the result
// [B T H·D]; each key/value head serves H/Hkv consecutive query heads
// and the backward sums their gradients), rotary position embeddings on
// q and k inside the kernel (Hugging Face Llama's rotate-half
// convention, positions 0…T−1, frequencies θ^(−2i/D)), and attention
// dropout. A bad configuration (Hkv not dividing H, a width that is not
// (H+2·Hkv)·D, an odd D with rotary embeddings) is an error naming the
// input.
func FusedAttention(qkv *graph.Node, cfg AttentionConfig) *graph.Node {
	return apply(causalAttentionOp{heads: cfg.Heads, kvHeads: cfg.KVHeads, theta: cfg.RoPETheta, p: cfg.Dropout, seed: cfg.Seed}, "", qkv)
}

// CausalAttentionDropout is CausalAttention whose probabilities are
// dropped with probability p while training (the rest scaled by
// 1/(1−p)), as dropout after the softmax does: the mask is a hash of the
// seed, the node, the step and the element's position, so the backward
// recomputes it and a resumed run draws the same masks. Evaluation
// programs drop nothing.
func CausalAttentionDropout(qkv *graph.Node, heads int, p float32, seed uint64) *graph.Node {
	return apply(causalAttentionOp{heads: heads, p: p, seed: seed}, "", qkv)
}
