package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
)

// llamaRef is a float64 Llama written from Hugging Face's definition,
// independent of Octet's ops: the oracle for the model's loss and
// gradients.
type llamaRef struct {
	cfg nn.LlamaConfig
	p   map[string][]float64
}

func (r *llamaRef) linear(x []float64, rows int, w string, out, in int) []float64 {
	W := r.p[w]
	y := make([]float64, rows*out)
	for i := 0; i < rows; i++ {
		for o := 0; o < out; o++ {
			var s float64
			for k := 0; k < in; k++ {
				s += x[i*in+k] * W[o*in+k]
			}
			y[i*out+o] = s
		}
	}
	return y
}

func (r *llamaRef) rmsnorm(x []float64, rows, d int, w string) []float64 {
	W := r.p[w]
	y := make([]float64, len(x))
	for i := 0; i < rows; i++ {
		var ms float64
		for k := 0; k < d; k++ {
			ms += x[i*d+k] * x[i*d+k]
		}
		rs := 1 / math.Sqrt(ms/float64(d)+r.cfg.RMSNormEps)
		for k := 0; k < d; k++ {
			y[i*d+k] = x[i*d+k] * rs * W[k]
		}
	}
	return y
}

// loss returns the mean cross-entropy of the next-token logits for ids
// [b t] against labels.
func (r *llamaRef) loss(ids, labels []int32, b, t int) float64 {
	c := r.cfg
	C, F, H, KV := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads
	D := C / H
	n := b * t
	x := make([]float64, n*C)
	for i, id := range ids {
		copy(x[i*C:(i+1)*C], r.p["model.embed_tokens.weight"][int(id)*C:])
	}
	rope := func(v []float64, pos int) {
		h := D / 2
		for i := 0; i < h; i++ {
			f := math.Pow(c.RopeTheta, -float64(2*i)/float64(D))
			cs, sn := math.Cos(float64(pos)*f), math.Sin(float64(pos)*f)
			a, bb := v[i], v[i+h]
			v[i], v[i+h] = a*cs-bb*sn, bb*cs+a*sn
		}
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := "model.layers." + string(rune('0'+l)) + "."
		h := r.rmsnorm(x, n, C, p+"input_layernorm.weight")
		q := r.linear(h, n, p+"self_attn.q_proj.weight", H*D, C)
		k := r.linear(h, n, p+"self_attn.k_proj.weight", KV*D, C)
		v := r.linear(h, n, p+"self_attn.v_proj.weight", KV*D, C)
		for row := 0; row < n; row++ {
			for hh := 0; hh < H; hh++ {
				rope(q[row*H*D+hh*D:row*H*D+hh*D+D], row%t)
			}
			for hh := 0; hh < KV; hh++ {
				rope(k[row*KV*D+hh*D:row*KV*D+hh*D+D], row%t)
			}
		}
		att := make([]float64, n*H*D)
		for bi := 0; bi < b; bi++ {
			for hh := 0; hh < H; hh++ {
				g := hh / (H / KV)
				for i := 0; i < t; i++ {
					s := make([]float64, i+1)
					mx := math.Inf(-1)
					for j := 0; j <= i; j++ {
						for e := 0; e < D; e++ {
							s[j] += q[(bi*t+i)*H*D+hh*D+e] * k[(bi*t+j)*KV*D+g*D+e]
						}
						s[j] /= math.Sqrt(float64(D))
						mx = math.Max(mx, s[j])
					}
					var sum float64
					for j := range s {
						s[j] = math.Exp(s[j] - mx)
						sum += s[j]
					}
					for j := range s {
						for e := 0; e < D; e++ {
							att[(bi*t+i)*H*D+hh*D+e] += s[j] / sum * v[(bi*t+j)*KV*D+g*D+e]
						}
					}
				}
			}
		}
		o := r.linear(att, n, p+"self_attn.o_proj.weight", C, H*D)
		for i := range x {
			x[i] += o[i]
		}
		h = r.rmsnorm(x, n, C, p+"post_attention_layernorm.weight")
		gate, up := r.linear(h, n, p+"mlp.gate_proj.weight", F, C), r.linear(h, n, p+"mlp.up_proj.weight", F, C)
		for i := range gate {
			gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
		}
		down := r.linear(gate, n, p+"mlp.down_proj.weight", C, F)
		for i := range x {
			x[i] += down[i]
		}
	}
	head := "lm_head.weight"
	if c.TieWordEmbeddings {
		head = "model.embed_tokens.weight"
	}
	logits := r.linear(r.rmsnorm(x, n, C, "model.norm.weight"), n, head, c.VocabSize, C)
	var total float64
	for i := 0; i < n; i++ {
		row := logits[i*c.VocabSize : (i+1)*c.VocabSize]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - mx)
		}
		total += mx + math.Log(s) - row[labels[i]]
	}
	return total / float64(n)
}

// TestLlamaMatchesFloat64Reference: the loss and every parameter's
// gradient of a random 2-layer grouped-query Llama (tied and untied
// embeddings) match the float64 definition — the gradient by central
// differences of the float64 loss — to 1e-4 relative (max |diff| / max
// |ref| per tensor).
func TestLlamaMatchesFloat64Reference(t *testing.T) {
	for _, tied := range []bool{false, true} {
		cfg := nn.LlamaConfig{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
			VocabSize: 24, MaxPositionEmbeddings: 8, TieWordEmbeddings: tied, RopeTheta: 10000, RMSNormEps: 1e-5, InitializerRange: 0.3}
		const b, T = 2, 6
		g := graph.New()
		bl := nn.NewBuilder(g)
		m, err := nn.NewLlama(bl, cfg)
		require.NoError(t, err)
		ids, labels := g.Input("ids", graph.Int32, b, T), g.Input("labels", graph.Int32, b, T)
		loss := ops.CrossEntropy(m.Forward(ids), labels)
		grads, err := graph.Grad(loss, bl.Params()...)
		require.NoError(t, err)
		store := graph.NewStore()
		require.NoError(t, bl.Init(store, 11))
		for _, p := range bl.Params() { // norms away from 1 too
			if len(p.Shape()) == 1 {
				v := store.Float32(p.Name())
				for i := range v {
					v[i] = 1 + 0.3*float32(math.Sin(float64(i+len(p.Name()))))
				}
			}
		}
		prog, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
		require.NoError(t, err)
		xs, ys := make([]int32, b*T), make([]int32, b*T)
		for i := range xs {
			xs[i], ys[i] = int32(i*5%24), int32((i*7+3)%24)
		}
		require.NoError(t, prog.FeedInt32(ids, xs))
		require.NoError(t, prog.FeedInt32(labels, ys))
		require.NoError(t, prog.Run())

		ref := &llamaRef{cfg: cfg, p: map[string][]float64{}}
		for _, p := range bl.Params() {
			v := store.Float32(p.Name())
			f := make([]float64, len(v))
			for i, x := range v {
				f[i] = float64(x)
			}
			ref.p[p.Name()] = f
		}
		want := ref.loss(xs, ys, b, T)
		got := float64(prog.Float32(loss)[0])
		require.InEpsilon(t, want, got, 1e-5, "loss")
		for i, p := range bl.Params() {
			vals, gg := ref.p[p.Name()], prog.Float32(grads[i])
			var maxRef, maxDiff float64
			for j := range vals {
				v := vals[j]
				h := 1e-5 * math.Max(1, math.Abs(v))
				vals[j] = v + h
				lp := ref.loss(xs, ys, b, T)
				vals[j] = v - h
				lm := ref.loss(xs, ys, b, T)
				vals[j] = v
				fd := (lp - lm) / (2 * h)
				maxRef = math.Max(maxRef, math.Abs(fd))
				maxDiff = math.Max(maxDiff, math.Abs(fd-float64(gg[j])))
			}
			require.Less(t, maxDiff, 1e-4*maxRef, "tied=%v %s: max |diff| %.3g, max |ref| %.3g", tied, p.Name(), maxDiff, maxRef)
		}
	}
}
