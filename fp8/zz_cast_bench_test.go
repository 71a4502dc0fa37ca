package fp8

import (
	"fmt"
	"github.com/octetml/octet/internal/kernels"
	"math/rand/v2"
	"testing"
)

func BenchmarkZZCasts(b *testing.B) {
	const rows, cols = 512, 512
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	dst := make([]uint8, rows*cols)
	b.Run("tensorwise", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Quantize(dst, src, E4M3, 2)
		}
	})
	for _, axis := range []int{1, 0} {
		c := Float8BlockCast{Dim: 1, Format: E4M3}
		inv := make([]float32, Float8BlockScaleCount(rows, cols, axis, 1))
		work := make([]float32, 2*cols)
		n := Float8BlockSlices(rows, cols, axis, 1)
		b.Run([]string{"block-axis0", "block-axis1"}[axis], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				QuantizeFloat8BlockRange(dst, inv, src, rows, cols, axis, c, 0, n, work)
			}
		})
	}
	for _, axis := range []int{1, 0} {
		z, _ := NewNVFP4Quantizer(rows, cols, axis, NVFP4Cast{RHT: axis == 0, Stochastic: true})
		q := NewNVFP4(rows, cols, false)
		b.Run([]string{"nvfp4-axis0-rht", "nvfp4-axis1"}[axis], func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				z.Quantize(q, src, 1)
			}
		})
	}
}

func BenchmarkZZTiles(b *testing.B) {
	const rows, cols = 512, 784
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	dst := make([]uint8, rows*cols)
	b.Run("tensorwise", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Quantize(dst, src, E4M3, 2)
		}
	})
	c := Float8BlockCast{Dim: 2, Format: E4M3}
	inv := make([]float32, Float8BlockScaleCount(rows, cols, 1, 2))
	work := make([]float32, 2*cols)
	n := Float8BlockSlices(rows, cols, 1, 2)
	b.Run("tiles", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			QuantizeFloat8BlockRange(dst, inv, src, rows, cols, 1, c, 0, n, work)
		}
	})
	am := make([]uint32, cols)
	b.Run("amaxband", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for r := 0; r < rows; r += 128 {
				kernels.AmaxColsBand(am, src[r*cols:], cols, 128, cols)
			}
		}
	})
	sc := make([]float32, 7)
	for i := range sc {
		sc[i] = 3
	}
	b.Run("castrows", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for r := 0; r < rows; r++ {
				kernels.QuantizeFP8Blocks(formats[E4M3].cast, dst[r*cols:(r+1)*cols], src[r*cols:(r+1)*cols], sc)
			}
		}
	})
}

func BenchmarkZZNVFP4Stages(b *testing.B) {
	const rows, cols = 512, 512
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	w := make([]float32, rows*cols)
	b.Run("transpose", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			kernels.Transpose(w, src, rows, cols, 0, cols)
		}
	})
	b.Run("rht", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(w, src)
			kernels.RHT16(w)
		}
	})
	b.Run("copy", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(w, src)
		}
	})
	am := make([]uint32, rows*cols/16)
	b.Run("amax16", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			kernels.Amax16(am, src)
		}
	})
	sf := make([]uint8, len(am))
	es := make([]float32, len(am))
	b.Run("scales", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			kernels.NVFP4BlockScales(sf, es, am, 100, 0.01)
		}
	})
	codes := make([]uint8, rows*cols/2)
	b.Run("cast-rn", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			kernels.QuantizeE2M1Blocks(codes, src, es)
		}
	})
	b.Run("cast-sr", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			kernels.E2M1StochasticBlocks(codes, src, es, 7, 0)
		}
	})
	for _, axis := range []int{1, 0} {
		for _, c := range []NVFP4Cast{{}, {RHT: true, Stochastic: true}} {
			z, _ := NewNVFP4Quantizer(rows, cols, axis, c)
			q := NewNVFP4(rows, cols, false)
			b.Run(fmt.Sprintf("quantizer-axis%d-rht%v-sr%v", axis, c.RHT, c.Stochastic), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					z.Quantize(q, src, 1)
				}
			})
		}
	}
}
