package optim

import (
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/recipe"
)

// benchParams returns the MNIST MLP's parameter set (784-512-512-10,
// 669,706 values) with random weights and gradients.
func benchParams() []Param {
	rng := rand.New(rand.NewPCG(1, 2))
	var ps []Param
	for i, n := range []int{784 * 512, 512, 512 * 512, 512, 512 * 10, 10} {
		w, g := make([]float32, n), make([]float32, n)
		for j := range w {
			w[j] = float32(rng.NormFloat64() * 0.05)
			g[j] = float32(rng.NormFloat64() * 1e-3)
		}
		ps = append(ps, Param{Name: string(rune('a' + i)), W: w, G: g, Decay: i%2 == 0})
	}
	return ps
}

// BenchmarkOptimizerStep compares one update of float32 AdamW with
// MS-AMP's low-bit Adam at O1 and O2 on the MNIST MLP's parameters.
func BenchmarkOptimizerStep(b *testing.B) {
	b.Run("AdamW", func(b *testing.B) {
		o := NewAdamW(benchParams(), 0.01)
		b.ReportAllocs()
		for b.Loop() {
			o.Step(1e-3)
		}
	})
	for _, level := range []string{"O1", "O2"} {
		b.Run("LowBit"+level, func(b *testing.B) {
			o, err := NewLowBitAdam(benchParams(), recipe.MSAMP{OptLevel: level}, 0.01, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				o.Step(1e-3)
			}
		})
	}
}

// BenchmarkClipGradNorm times the global-norm clipping of GPT-2 124M's
// gradients (124,475,904 values in its 148 tensors' sizes: the tied
// embedding, then per layer two LayerNorms, the attention and MLP
// weights and biases), each call scaling them.
func BenchmarkClipGradNorm(b *testing.B) {
	sizes := []int{50304 * 768, 1024 * 768}
	for range 12 {
		sizes = append(sizes, 768, 768, 768*2304, 2304, 768*768, 768, 768, 768, 768*3072, 3072, 3072*768, 768)
	}
	sizes = append(sizes, 768, 768)
	var ps []Param
	for _, n := range sizes {
		g := make([]float32, n)
		for j := range g {
			g[j] = float32(j%101) * 1e-3
		}
		ps = append(ps, Param{G: g})
	}
	b.SetBytes(int64(8 * 124475904))
	b.ReportAllocs()
	for b.Loop() {
		ClipGradNorm(ps, 1e-3)
	}
}
