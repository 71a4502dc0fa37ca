package fp8

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkCasts times one cast of a 512 × 512 float32 tensor (one
// core: the calls here do not split over the workers, except NVFP4's
// quantizer, which does) in each recipe: TE's tensorwise cast with its
// amax, Float8BlockScaling's row-wise and column-wise 1×128 casts and
// 128×128 tiles, and NVFP4's row-wise and column-wise casts, plain and
// with the transform and stochastic rounding (the wgrad operand of a
// gradient), and its 16×16 tiles (a weight).
//
//	go test -run xxx -bench Casts ./fp8/
func BenchmarkCasts(b *testing.B) {
	const rows, cols = 512, 512
	rng := rand.New(rand.NewPCG(1, 1))
	src, _ := normal(rng, rows*cols, 1)
	dst := make([]uint8, rows*cols)
	b.Run("tensorwise", func(b *testing.B) {
		b.SetBytes(4 * rows * cols)
		for i := 0; i < b.N; i++ {
			Quantize(dst, src, E4M3, 2)
		}
	})
	for _, c := range []struct {
		name      string
		axis, dim int
	}{{"block-rows", 1, 1}, {"block-cols", 0, 1}, {"block-tiles", 1, 2}} {
		cast := Quantizer{Kind: Float8Blocks, BlockDim: c.dim, Format: E4M3}
		inv := make([]float32, Float8BlockScaleCount(rows, cols, c.axis, c.dim))
		work := make([]float32, 2*cols+rows*cols/Float8BlockSize)
		n := float8BlockSlices(rows, cols, c.axis, c.dim)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * rows * cols)
			for i := 0; i < b.N; i++ {
				if _, err := quantizeFloat8BlockRange(dst, inv, src, rows, cols, c.axis, cast, 0, n, work); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, axis := range []int{1, 0} {
		for _, c := range []Quantizer{{Kind: NVFP4Blocks}, {Kind: NVFP4Blocks, RHT: true, Stochastic: true}, {Kind: NVFP4Blocks, BlockDim: 2}} {
			if c.twoD() && axis == 0 {
				continue // tiles are cast along the rows
			}
			z, err := NewNVFP4Quantizer(rows, cols, axis, c)
			if err != nil {
				b.Fatal(err)
			}
			q := NewNVFP4(rows, cols, c.twoD())
			name := fmt.Sprintf("nvfp4-axis%d-rht%v-sr%v", axis, c.RHT, c.Stochastic)
			if c.twoD() {
				name = "nvfp4-tiles"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(4 * rows * cols)
				for i := 0; i < b.N; i++ {
					if err := z.Quantize(q, src, uint64(i)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
