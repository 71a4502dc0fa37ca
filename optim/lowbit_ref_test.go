package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

// refLowBitStep is MS-AMP's update written plainly, one tensor at a
// time with x448/float16 and fp8.Amax: the oracle for the split, fused
// Step.
func refLowBitStep(o *LowBitAdam, st *refState, lr float32) {
	st.steps++
	t := float64(st.steps)
	bc1 := 1 - math.Pow(float64(o.Beta1), t)
	bc2s := float32(math.Sqrt(1 - math.Pow(float64(o.Beta2), t)))
	step := float32(float64(lr) / bc1)
	enc16 := func(src []float32) ([]uint16, float32) {
		s := pow2Scale(fp8.Amax(src), fp16Max)
		b := make([]uint16, len(src))
		for i, v := range src {
			b[i] = float16.Fromfloat32(v * s).Bits()
		}
		return b, s
	}
	dec16 := func(b []uint16, s float32) []float32 {
		out := make([]float32, len(b))
		for i, v := range b {
			out[i] = float16.Frombits(v).Float32() * (1 / s)
		}
		return out
	}
	enc8 := func(src []float32) ([]uint8, float32) {
		s := pow2Scale(fp8.Amax(src), fp8.E4M3.Max())
		c := make([]uint8, len(src))
		fp8.Quantize(c, src, fp8.E4M3, s)
		return c, s
	}
	dec8 := func(c []uint8, s float32) []float32 {
		out := make([]float32, len(c))
		fp8.Dequantize(out, c, fp8.E4M3, 1/s)
		return out
	}
	for i, p := range o.Params {
		gc, gs := enc8(p.G)
		g := dec8(gc, gs)
		w := dec16(st.w16[i], st.ws[i])
		m, v := st.m[i], st.v[i]
		if o.Level == "O2" {
			m, v = dec8(st.m8[i], st.ms[i]), dec16(st.v16[i], st.vs[i])
		}
		// The update of kernels.Adam: an L2 term (0 when off) is always
		// added to the gradient and a decay factor (1 when off) always
		// applied to the weight.
		l2, df := float32(0), float32(1)
		if p.Decay {
			if o.Decoupled {
				df = 1 - lr*o.WeightDecay
			} else {
				l2 = o.WeightDecay
			}
		}
		for j := range w {
			gj := g[j] + l2*w[j]
			wj := w[j] * df
			m[j] = o.Beta1*m[j] + (1-o.Beta1)*gj
			v[j] = o.Beta2*v[j] + (1-o.Beta2)*gj*gj
			w[j] = wj - step*m[j]/(float32(math.Sqrt(float64(v[j])))/bc2s+o.Eps)
		}
		if o.Level == "O2" {
			st.m8[i], st.ms[i] = enc8(m)
			st.v16[i], st.vs[i] = enc16(v)
		}
		st.w16[i], st.ws[i] = enc16(w)
		copy(p.W, dec16(st.w16[i], st.ws[i]))
	}
}

type refState struct {
	steps      int
	w16, v16   [][]uint16
	m8         [][]uint8
	ws, ms, vs []float32
	m, v       [][]float32
}

// TestLowBitStepMatchesReference runs the optimizer and the plain
// reference side by side on the MNIST MLP's parameters (big enough to be
// split over the cores) and demands bit-identical weights and state
// after every step, at O1 and O2, with decoupled and L2 weight decay.
func TestLowBitStepMatchesReference(t *testing.T) {
	for _, level := range []string{"O1", "O2"} {
		for _, decoupled := range []bool{true, false} {
			ps, rps := benchParams(), benchParams()
			// The largest values sit in the last part, so a scale taken
			// from any one part alone would differ.
			for _, set := range [][]Param{ps, rps} {
				for _, p := range set {
					for j := len(p.W) * 3 / 4; j < len(p.W); j++ {
						p.W[j] *= 16
					}
				}
			}
			o, err := NewLowBitAdam(ps, recipe.MSAMP{OptLevel: level}, 0.01, nil)
			require.NoError(t, err)
			o.Decoupled = decoupled
			ref, err := NewLowBitAdam(rps, recipe.MSAMP{OptLevel: level}, 0.01, nil) // only for its settings
			require.NoError(t, err)
			ref.Decoupled = decoupled
			st := &refState{}
			for i, p := range rps {
				b, s := o.w[i].Bits, o.w[i].Scale
				st.w16 = append(st.w16, append([]uint16(nil), b...))
				st.ws = append(st.ws, s)
				n := len(p.W)
				st.m = append(st.m, make([]float32, n))
				st.v = append(st.v, make([]float32, n))
				st.m8 = append(st.m8, make([]uint8, n))
				st.v16 = append(st.v16, make([]uint16, n))
				st.ms, st.vs = append(st.ms, 1), append(st.vs, 1)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for s := 0; s < 4; s++ {
				for i := range ps {
					for j := range ps[i].G {
						g := float32(rng.NormFloat64()*1e-3) - ps[i].W[j]*1e-2
						if j >= len(ps[i].G)*3/4 {
							g *= 16
						}
						ps[i].G[j], rps[i].G[j] = g, g
					}
				}
				o.Step(1e-3)
				refLowBitStep(ref, st, 1e-3)
				for i := range ps {
					require.Equal(t, bitsOf(rps[i].W), bitsOf(ps[i].W), "%s decoupled=%v step %d param %d: weights", level, decoupled, s, i)
					require.Equal(t, st.w16[i], o.w[i].Bits)
					if level == "O2" {
						require.Equal(t, st.m8[i], o.m8[i].Codes)
						require.Equal(t, st.v16[i], o.v16[i].Bits)
						require.Equal(t, []float32{st.ms[i], st.vs[i]}, []float32{o.m8[i].Scale, o.v16[i].Scale})
					} else {
						require.Equal(t, bitsOf(st.m[i]), bitsOf(o.m32[i]))
						require.Equal(t, bitsOf(st.v[i]), bitsOf(o.v32[i]))
					}
				}
			}
		}
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
