package ops

import (
	"fmt"
	"math"
	"strconv"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// causalAttentionOp is fused multi-head causal self-attention over the
// output of a fused QKV projection (see CausalAttention).
type causalAttentionOp struct {
	heads int
	p     float32 // attention dropout (training only)
	seed  uint64
}

func (o causalAttentionOp) Type() string     { return KindCausalAttention.String() }
func (o causalAttentionOp) Kind() graph.Kind { return KindCausalAttention }
func (o causalAttentionOp) Attrs() string {
	s := "heads=" + strconv.Itoa(o.heads)
	if o.p > 0 {
		s += fmt.Sprintf(",dropout=%g,seed=%d", o.p, o.seed)
	}
	return s
}

// attentionDims checks a [B T 3C] qkv input for heads heads and returns
// B, T, C and the head width D.
func attentionDims(qkv *graph.Node, heads int) (b, t, c, d int, err error) {
	s := qkv.Shape()
	switch {
	case len(s) != 3:
		return 0, 0, 0, 0, fmt.Errorf("input %q has shape %v, want [B T 3C]", qkv.Name(), s)
	case s[2]%3 != 0:
		return 0, 0, 0, 0, fmt.Errorf("input %q %v: last axis %d is not 3C (q, k and v side by side)", qkv.Name(), s, s[2])
	case heads <= 0 || s[2]/3%heads != 0:
		return 0, 0, 0, 0, fmt.Errorf("input %q %v: width %d is not a multiple of %d heads", qkv.Name(), s, s[2]/3, heads)
	}
	c = s[2] / 3
	return s[0], s[1], c, c / heads, nil
}

func (o causalAttentionOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if !(o.p >= 0 && o.p < 1) {
		return nil, graph.Invalid, fmt.Errorf("attention dropout %v is outside [0, 1)", o.p)
	}
	b, t, c, _, err := attentionDims(in[0], o.heads)
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

// newAttention builds the fused kernel for a [B T 3C] input of heads
// heads, scores scaled by 1/√D.
func newAttention(s graph.Shape, heads int) *kernels.Attention {
	b, t, c := s[0], s[1], s[2]/3
	d := c / heads
	return kernels.NewAttention(b, t, heads, d, float32(1/math.Sqrt(float64(d))), parallel.Workers())
}

// attentionChunker spreads the (batch, head) pairs over the workers,
// each with its own scratch.
func attentionChunker(att *kernels.Attention, head func(worker, bh int)) *chunker {
	return newPartChunker(att.Heads(), att.Heads()*att.T*att.T*att.D, func(part, lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			head(part, bh)
		}
	})
}

func (o causalAttentionOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	qkv, y := b.In[0].F32, b.Out.F32
	st := &attentionState{att: newAttention(b.In[0].Shape, o.heads)}
	st.lse = make([]float32, st.att.Heads()*st.att.T)
	graph.SetMeta(b.Out, attentionKey, st)
	run := attentionChunker(st.att, func(w, bh int) { st.att.Forward(w, bh, qkv, y, st.lse) }).kernel()
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
	b, t, c, _, err := attentionDims(in[0], o.heads)
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
	att := newAttention(b.In[0].Shape, o.heads)
	run := attentionChunker(att, func(w, bh int) { att.Backward(w, bh, qkv, y, st.lse, dy, dqkv) }).kernel()
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

// CausalAttentionDropout is CausalAttention whose probabilities are
// dropped with probability p while training (the rest scaled by
// 1/(1−p)), as dropout after the softmax does: the mask is a hash of the
// seed, the node, the step and the element's position, so the backward
// recomputes it and a resumed run draws the same masks. Evaluation
// programs drop nothing.
func CausalAttentionDropout(qkv *graph.Node, heads int, p float32, seed uint64) *graph.Node {
	return apply(causalAttentionOp{heads: heads, p: p, seed: seed}, "", qkv)
}
