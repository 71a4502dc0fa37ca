package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// unfusedAttention is causal self-attention from the unfused ops, the
// graph nn built before the fused op: heads sliced and permuted out of
// qkv, softmax(mask(q·kᵀ/√D))·v, heads permuted back.
func unfusedAttention(qkv *graph.Node, heads int) *graph.Node {
	s := qkv.Shape()
	b, t, c := s[0], s[1], s[2]/3
	d := c / heads
	head := func(i int) *graph.Node {
		return ops.Permute(ops.Reshape(ops.Slice(qkv, 2, i*c, (i+1)*c), b, t, heads, d), 0, 2, 1, 3)
	}
	att := ops.Scale(ops.BatchMatMul(head(0), head(1), false, true), float32(1/math.Sqrt(float64(d))))
	y := ops.BatchMatMul(ops.Softmax(ops.CausalMask(att)), head(2), false, false)
	return ops.Reshape(ops.Permute(y, 0, 2, 1, 3), b, t, c)
}

// TestGradCausalAttention checks the fused op's gradient against finite
// differences, on one tile and on several (T = 70 crosses a tile edge).
func TestGradCausalAttention(t *testing.T) {
	checkGrad(t, gradCase{name: "fused attention", params: []graph.Shape{s(2, 5, 3*8)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.CausalAttention(ps[0], 2) }})
	checkGrad(t, gradCase{name: "fused attention, two tiles", params: []graph.Shape{s(1, 70, 3*16)}, sample: 300,
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.CausalAttention(ps[0], 1) }})
}

// TestCausalAttentionMatchesUnfused runs the fused op and the unfused
// graph on the same input, forward and backward, at the baby GPT's
// shape and at shapes with several tiles and ragged edges.
func TestCausalAttentionMatchesUnfused(t *testing.T) {
	for _, sh := range []struct{ b, t, h, d int }{{12, 64, 4, 32}, {2, 130, 3, 20}, {1, 1, 2, 4}} {
		g := graph.New()
		c := sh.h * sh.d
		qkv := g.Param("qkv", sh.b, sh.t, 3*c)
		fused, ref := ops.CausalAttention(qkv, sh.h), unfusedAttention(qkv, sh.h)
		r := g.Input("R", graph.Float32, sh.b, sh.t, c)
		gf, err := graph.Grad(ops.Sum(ops.Mul(fused, r)), qkv)
		if err != nil {
			t.Fatal(err)
		}
		gr, err := graph.Grad(ops.Sum(ops.Mul(ref, r)), qkv)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(sh.t)))
		store := graph.NewStore()
		vals := make([]float32, sh.b*sh.t*3*c)
		for i := range vals {
			vals[i] = float32(2 * rng.NormFloat64())
		}
		if err := store.SetFloat32("qkv", vals, sh.b, sh.t, 3*c); err != nil {
			t.Fatal(err)
		}
		p, err := graph.Compile(g, store, graph.Options{Training: true}, fused, ref, gf[0], gr[0])
		if err != nil {
			t.Fatal(err)
		}
		rv := make([]float32, sh.b*sh.t*c)
		for i := range rv {
			rv[i] = float32(rng.NormFloat64())
		}
		if err := p.FeedFloat32(r, rv); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		for _, pair := range [][2]*graph.Node{{fused, ref}, {gf[0], gr[0]}} {
			a, b := p.Float32(pair[0]), p.Float32(pair[1])
			var num, den float64
			for i := range a {
				d := float64(a[i] - b[i])
				num += d * d
				den += float64(b[i]) * float64(b[i])
			}
			if e := math.Sqrt(num / den); !(e < 1e-5) {
				t.Errorf("%v: %s differs from the unfused graph by %.3g (relative)", sh, pair[0].Name(), e)
			}
		}
	}
}

// TestCausalAttentionRefusesBadShapes checks the shape errors name the
// input and the shape.
func TestCausalAttentionRefusesBadShapes(t *testing.T) {
	for _, c := range []struct {
		shape graph.Shape
		heads int
		want  string
	}{{s(2, 3), 1, "want [B T 3C]"}, {s(1, 2, 10), 1, "is not 3C"}, {s(1, 2, 12), 3, "not a multiple of 3 heads"}, {s(1, 2, 12), 0, "0 heads"}} {
		g := graph.New()
		ops.CausalAttention(g.Param("x", c.shape...), c.heads)
		if err := g.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("%v heads %d: %v, want an error naming \"x\" with %q", c.shape, c.heads, err, c.want)
		}
	}
}

// TestCausalAttentionDropout checks the fused attention's dropout: an
// evaluation program drops nothing (the output equals p = 0's), a
// training step's mask depends on the step only (the same step twice
// gives the same output, the next another), and the backward uses the
// forward's mask (central differences of the loss at a fixed step).
func TestCausalAttentionDropout(t *testing.T) {
	const b, tt, h, d = 2, 20, 2, 8
	g := graph.New()
	qkv := g.Param("qkv", b, tt, 3*h*d)
	y := ops.CausalAttentionDropout(qkv, h, 0.3, 9)
	y0 := ops.CausalAttention(qkv, h)
	r := g.Input("R", graph.Float32, b, tt, h*d)
	loss := ops.Sum(ops.Mul(y, r))
	grads, err := graph.Grad(loss, qkv)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	vals := make([]float32, b*tt*3*h*d)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	rv := make([]float32, b*tt*h*d)
	for i := range rv {
		rv[i] = float32(rng.NormFloat64())
	}
	store := graph.NewStore()
	if err := store.SetFloat32("qkv", vals, b, tt, 3*h*d); err != nil {
		t.Fatal(err)
	}
	compile := func(opts graph.Options, outs ...*graph.Node) *graph.Program {
		p, err := graph.Compile(g, store, opts, outs...)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(outs, loss) {
			if err := p.FeedFloat32(r, rv); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	run := func(p *graph.Program, step int64, out *graph.Node) []float32 {
		p.SetStep(step)
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), p.Float32(out)...)
	}
	eval := compile(graph.Options{}, y, y0)
	if a, c := run(eval, 0, y), run(eval, 0, y0); !slices.Equal(a, c) {
		t.Fatal("evaluation dropped attention probabilities")
	}
	train := compile(graph.Options{Training: true}, y, loss, grads[0])
	a, a2, next := run(train, 4, y), run(train, 4, y), run(train, 5, y)
	if !slices.Equal(a, a2) || slices.Equal(a, next) {
		t.Fatal("the mask is not a function of the step")
	}
	run(train, 4, y)
	grad := append([]float32(nil), train.Float32(grads[0])...)
	fwd := compile(graph.Options{Training: true}, loss)
	w := store.Float32("qkv")
	var num, den float64
	for _, i := range rng.Perm(len(w))[:200] {
		v := w[i]
		const eps = 1e-2
		w[i] = v + eps
		up := float64(run(fwd, 4, loss)[0])
		w[i] = v - eps
		down := float64(run(fwd, 4, loss)[0])
		w[i] = v
		fd := (up - down) / (2 * eps)
		num += (fd - float64(grad[i])) * (fd - float64(grad[i]))
		den += fd * fd
	}
	if e := math.Sqrt(num / den); !(e < 1e-3) {
		t.Fatalf("gradient with dropout differs from central differences by %.3g (relative)", e)
	}
}

// TestGradFusedAttentionGQARoPE checks the fused attention with grouped
// key/value heads and rotary embeddings against central finite
// differences of its [B T (H+2·Hkv)·D] input.
func TestGradFusedAttentionGQARoPE(t *testing.T) {
	for _, c := range []ops.AttentionConfig{
		{Heads: 4, KVHeads: 2, RoPETheta: 10000},
		{Heads: 3, KVHeads: 1, RoPETheta: 500000},
		{Heads: 2, RoPETheta: 100},
		{Heads: 4, KVHeads: 1},
	} {
		kv := c.KVHeads
		if kv == 0 {
			kv = c.Heads
		}
		width := (c.Heads + 2*kv) * 4 // head width 4
		checkGrad(t, gradCase{name: fmt.Sprintf("FusedAttention %+v", c), params: []graph.Shape{s(2, 7, width)},
			build: func(ps, _ []*graph.Node) *graph.Node { return ops.FusedAttention(ps[0], c) }, tol: 2e-3})
	}
}

// TestFusedAttentionRefusesBadConfigs checks the configuration errors
// name the input and say what is wrong, before any work.
func TestFusedAttentionRefusesBadConfigs(t *testing.T) {
	for _, c := range []struct {
		shape graph.Shape
		cfg   ops.AttentionConfig
		want  string
	}{
		{s(1, 2, 32), ops.AttentionConfig{Heads: 4, KVHeads: 3}, "3 key/value heads do not divide 4"},
		{s(1, 2, 32), ops.AttentionConfig{Heads: 4, KVHeads: -1}, "do not divide"},
		{s(1, 2, 30), ops.AttentionConfig{Heads: 4, KVHeads: 2}, "is not (4 + 2·2)·D"},
		{s(2, 24), ops.AttentionConfig{Heads: 4, KVHeads: 2}, "want [B T (H+2·Hkv)·D]"},
		{s(1, 2, 24), ops.AttentionConfig{Heads: 4, KVHeads: 2, RoPETheta: 10000}, "head width 3 is odd"},
		{s(1, 2, 24), ops.AttentionConfig{Heads: 2, RoPETheta: -1}, "θ = -1"},
		{s(1, 2, 24), ops.AttentionConfig{Heads: 2, RoPETheta: math.NaN()}, "θ = NaN"},
	} {
		g := graph.New()
		ops.FusedAttention(g.Param("x", c.shape...), c.cfg)
		if err := g.Err(); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"x"`) {
			t.Errorf("%v %+v: %v, want an error naming \"x\" with %q", c.shape, c.cfg, err, c.want)
		}
	}
}
