// Package llamaref is a float64 Llama from Hugging Face's definition
// (with Qwen2's q/k/v biases, Qwen3's q/k norms and explicit head_dim,
// and the Mixture-of-Experts blocks of Mixtral, Qwen2-MoE and Qwen3-MoE
// with transformers' load-balancing loss) and central-difference
// gradients of its loss: the oracle the tests of nn.Llama and of
// examples/llama compare with.
package llamaref

import (
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
)

// Model is a float64 Llama written from Hugging Face's definition,
// independent of Octet's ops: the oracle for a model's loss and
// gradients. P holds every parameter under its Hugging Face name.
type Model struct {
	Cfg nn.LlamaConfig
	P   map[string][]float64
}

func (r *Model) linear(x []float64, rows int, w string, out, in int) []float64 {
	W := r.P[w]
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

func (r *Model) rmsnorm(x []float64, rows, d int, w string) []float64 {
	W := r.P[w]
	y := make([]float64, len(x))
	for i := 0; i < rows; i++ {
		var ms float64
		for k := 0; k < d; k++ {
			ms += x[i*d+k] * x[i*d+k]
		}
		rs := 1 / math.Sqrt(ms/float64(d)+r.Cfg.RMSNormEps)
		for k := 0; k < d; k++ {
			y[i*d+k] = x[i*d+k] * rs * W[k]
		}
	}
	return y
}

// Loss returns the mean cross-entropy of the next-token logits for ids
// [b t] against labels.
func (r *Model) Loss(ids, labels []int32, b, t int) float64 {
	c := r.Cfg
	C, F, H, KV := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads
	D := c.HeadDim()
	var router []float64 // every sparse layer's logits, stacked
	n := b * t
	x := make([]float64, n*C)
	for i, id := range ids {
		copy(x[i*C:(i+1)*C], r.P["model.embed_tokens.weight"][int(id)*C:])
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
		p := fmt.Sprintf("model.layers.%d.", l)
		h := r.rmsnorm(x, n, C, p+"input_layernorm.weight")
		q := r.linear(h, n, p+"self_attn.q_proj.weight", H*D, C)
		k := r.linear(h, n, p+"self_attn.k_proj.weight", KV*D, C)
		v := r.linear(h, n, p+"self_attn.v_proj.weight", KV*D, C)
		if c.QKVBias {
			r.addBias(q, p+"self_attn.q_proj.bias")
			r.addBias(k, p+"self_attn.k_proj.bias")
			r.addBias(v, p+"self_attn.v_proj.bias")
		}
		if c.QKNorm {
			q = r.rmsnorm(q, n*H, D, p+"self_attn.q_norm.weight")
			k = r.rmsnorm(k, n*KV, D, p+"self_attn.k_norm.weight")
		}
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
		if c.SparseLayer(l) {
			y, logits := r.moe(h, n, p+"mlp.")
			for i := range x {
				x[i] += y[i]
			}
			router = append(router, logits...)
			continue
		}
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
	loss := total / float64(n)
	if c.OutputRouterLogits && len(router) > 0 {
		loss += c.RouterAuxLossCoef * balancing(router, c.NumExperts, c.NumExpertsPerTok)
	}
	return loss
}

func (r *Model) addBias(y []float64, b string) {
	B := r.P[b]
	for i := range y {
		y[i] += B[i%len(B)]
	}
}

func softmax(z []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = math.Max(mx, v)
	}
	p := make([]float64, len(z))
	var s float64
	for i, v := range z {
		p[i] = math.Exp(v - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// topK returns the indices of the k largest values, the lower index
// first among equals (torch.topk's order on CPU for distinct values).
func topK(p []float64, k int) []int {
	used := make([]bool, len(p))
	out := make([]int, 0, k)
	for range k {
		best := -1
		for e, v := range p {
			if !used[e] && (best < 0 || v > p[best]) {
				best = e
			}
		}
		used[best] = true
		out = append(out, best)
	}
	return out
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func silu(v float64) float64 { return v / (1 + math.Exp(-v)) }

// moe is transformers' sparse MoE block (Mixtral's, Qwen2-MoE's with its
// shared expert, Qwen3-MoE's) over h [n C], with the experts' weights
// stacked (prefix+"experts.gate_up_proj" [E 2I C], gate rows first, and
// prefix+"experts.down_proj" [E C I]); it returns the output and the
// router logits [n E].
func (r *Model) moe(h []float64, n int, prefix string) (y, logits []float64) {
	c := r.Cfg
	E, K, C := c.NumExperts, c.NumExpertsPerTok, c.HiddenSize
	I := c.MoEIntermediateSize
	if I == 0 {
		I = c.IntermediateSize
	}
	logits = r.linear(h, n, prefix+"gate.weight", E, C)
	gu, dn := r.P[prefix+"experts.gate_up_proj"], r.P[prefix+"experts.down_proj"]
	y = make([]float64, n*C)
	act := make([]float64, I)
	for i := 0; i < n; i++ {
		x := h[i*C : (i+1)*C]
		prob := softmax(logits[i*E : (i+1)*E])
		chosen := topK(prob, K)
		var sum float64
		for _, e := range chosen {
			sum += prob[e]
		}
		for _, e := range chosen {
			w := prob[e]
			if c.NormTopKProb {
				w /= sum
			}
			for u := 0; u < I; u++ {
				act[u] = silu(dot(gu[(e*2*I+u)*C:(e*2*I+u+1)*C], x)) * dot(gu[(e*2*I+I+u)*C:(e*2*I+I+u+1)*C], x)
			}
			for o := 0; o < C; o++ {
				y[i*C+o] += w * dot(dn[(e*C+o)*I:(e*C+o+1)*I], act)
			}
		}
	}
	if S := c.SharedExpertIntermediateSize; S > 0 {
		sp := prefix + "shared_expert."
		g, u := r.linear(h, n, sp+"gate_proj.weight", S, C), r.linear(h, n, sp+"up_proj.weight", S, C)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		d := r.linear(g, n, sp+"down_proj.weight", C, S)
		gate := r.linear(h, n, prefix+"shared_expert_gate.weight", 1, C)
		for i := 0; i < n; i++ {
			s := 1 / (1 + math.Exp(-gate[i]))
			for o := 0; o < C; o++ {
				y[i*C+o] += s * d[i*C+o]
			}
		}
	}
	return y, logits
}

// balancing is transformers' load_balancing_loss_func over router logits
// [rows E] (every sparse layer's, stacked): E · Σ_e f_e · P_e, f_e the
// number of the rows' top-k choices that went to e over the rows, P_e
// the mean probability of e.
func balancing(logits []float64, E, K int) float64 {
	rows := len(logits) / E
	f, P := make([]float64, E), make([]float64, E)
	for i := 0; i < rows; i++ {
		p := softmax(logits[i*E : (i+1)*E])
		for _, e := range topK(p, K) {
			f[e]++
		}
		for e := range p {
			P[e] += p[e]
		}
	}
	var s float64
	for e := range f {
		s += f[e] / float64(rows) * P[e] / float64(rows)
	}
	return float64(E) * s
}

// FromStore returns the model with the parameters of store.
func FromStore(cfg nn.LlamaConfig, store *graph.Store, params []*graph.Node) *Model {
	r := &Model{Cfg: cfg, P: map[string][]float64{}}
	for _, p := range params {
		v := store.Float32(p.Name())
		f := make([]float64, len(v))
		for i, x := range v {
			f[i] = float64(x)
		}
		r.P[p.Name()] = f
	}
	return r
}

// Grad returns the gradient of Loss with respect to parameter name by
// central differences (step 1e-5 relative to each value).
func (r *Model) Grad(name string, ids, labels []int32, b, t int) []float64 {
	vals := r.P[name]
	g := make([]float64, len(vals))
	for j, v := range vals {
		h := 1e-5 * math.Max(1, math.Abs(v))
		vals[j] = v + h
		lp := r.Loss(ids, labels, b, t)
		vals[j] = v - h
		lm := r.Loss(ids, labels, b, t)
		vals[j] = v
		g[j] = (lp - lm) / (2 * h)
	}
	return g
}

// RelErr returns max |got − want| / max |want|.
func RelErr(got []float32, want []float64) float64 {
	var maxRef, maxDiff float64
	for i, w := range want {
		maxRef = math.Max(maxRef, math.Abs(w))
		maxDiff = math.Max(maxDiff, math.Abs(w-float64(got[i])))
	}
	return maxDiff / math.Max(maxRef, 1e-300)
}
