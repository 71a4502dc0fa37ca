package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
)

// TestDequantizeIsWhatTheGEMMReads: Dequantize of every kind of cast
// (delayed, current, axiswise both axes, MXFP8 both axes, Float8Block
// 1-D both axes and 2-D, NVFP4 1-D both axes and 2-D) gives, bit for
// bit, each element decoded times its scale_inv (the factor the GEMMs
// multiply by), in the source's layout, on a ragged shape, as the fp8
// package's casts of the same source define them; a float32 input is
// refused.
func TestDequantizeIsWhatTheGEMMReads(t *testing.T) {
	const rows, cols = 33, 130
	rng := rand.New(rand.NewPCG(61, 62))
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	meta := recipe.TE{}.NewMeta(false)
	meta.Scale, meta.ScaleInv = 4, 0.25
	type ref func() []float32
	transposed := func(v []float32, r, c int) []float32 {
		out := make([]float32, len(v))
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				out[j*r+i] = v[i*c+j]
			}
		}
		return out
	}
	cases := []struct {
		cfg  ops.QuantizeConfig
		want ref
	}{
		{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E4M3}, Meta: meta}, func() []float32 {
			q, d := make([]uint8, len(src)), make([]float32, len(src))
			fp8.Quantize(q, src, fp8.E4M3, 4)
			fp8.Dequantize(d, q, fp8.E4M3, 0.25)
			return d
		}},
		{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E5M2}}, func() []float32 {
			s := fp8.CurrentScale(fp8.Amax(src), fp8.E5M2, false)
			q, d := make([]uint8, len(src)), make([]float32, len(src))
			fp8.Quantize(q, src, fp8.E5M2, s)
			fp8.Dequantize(d, q, fp8.E5M2, 1/s)
			return d
		}},
	}
	for _, axis := range []int{0, 1} {
		axis := axis
		cases = append(cases,
			struct {
				cfg  ops.QuantizeConfig
				want ref
			}{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3}, Axis: axis}, func() []float32 {
				n := rows
				if axis == 0 {
					n = cols
				}
				q, s, d := make([]uint8, len(src)), make([]float32, n), make([]float32, len(src))
				_ = fp8.QuantizeAxiswise(q, s, nil, src, rows, cols, axis, fp8.E4M3, false)
				// The GEMM multiplies by each scale's inverse (one
				// rounding), not divides.
				for r := 0; r < rows; r++ {
					for j := 0; j < cols; j++ {
						f := s[r]
						if axis == 0 {
							f = s[j]
						}
						d[r*cols+j] = fp8.E4M3.Decode(q[r*cols+j]) * (1 / f)
					}
				}
				return d
			}},
			struct {
				cfg  ops.QuantizeConfig
				want ref
			}{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.MXFP8Blocks, Format: fp8.E4M3}, Axis: axis}, func() []float32 {
				q, s, d := make([]uint8, len(src)), make([]fp8.E8M0, fp8.MXScaleCount(rows, cols, axis)), make([]float32, len(src))
				_, _ = fp8.QuantizeMX(q, s, src, rows, cols, axis, fp8.E4M3, fp8.ExpRoundUp)
				_ = fp8.DequantizeMX(d, q, s, rows, cols, axis, fp8.E4M3)
				return d
			}},
			struct {
				cfg  ops.QuantizeConfig
				want ref
			}{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.Float8Blocks, Format: fp8.E4M3, BlockDim: 1}, Axis: axis}, func() []float32 {
				r, c, s := rows, cols, src
				if axis == 0 {
					r, c, s = cols, rows, transposed(src, rows, cols)
				}
				bc := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}
				sr, sc := fp8.Float8BlockScaleShape(r, c, 1)
				q, inv, d := make([]uint8, len(src)), make([]float32, sr*sc), make([]float32, len(src))
				_ = fp8.QuantizeFloat8Block(q, inv, s, r, c, bc)
				_ = fp8.DequantizeFloat8Block(d, q, inv, r, c, bc)
				if axis == 0 {
					return transposed(d, cols, rows)
				}
				return d
			}},
			struct {
				cfg  ops.QuantizeConfig
				want ref
			}{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 1}, Axis: axis}, func() []float32 {
				r, c, s := rows, cols, src
				if axis == 0 {
					r, c, s = cols, rows, transposed(src, rows, cols)
				}
				q, _ := fp8.QuantizeNVFP4(s, r, c, fp8.Quantizer{Kind: fp8.NVFP4Blocks})
				d := make([]float32, len(src))
				_ = q.Dequantize(d)
				if axis == 0 {
					return transposed(d, cols, rows)
				}
				return d
			}})
	}
	cases = append(cases,
		struct {
			cfg  ops.QuantizeConfig
			want ref
		}{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.Float8Blocks, Format: fp8.E4M3, BlockDim: 2}}, func() []float32 {
			bc := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 2, Format: fp8.E4M3}
			sr, sc := fp8.Float8BlockScaleShape(rows, cols, 2)
			q, inv, d := make([]uint8, len(src)), make([]float32, sr*sc), make([]float32, len(src))
			_ = fp8.QuantizeFloat8Block(q, inv, src, rows, cols, bc)
			_ = fp8.DequantizeFloat8Block(d, q, inv, rows, cols, bc)
			return d
		}},
		struct {
			cfg  ops.QuantizeConfig
			want ref
		}{ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2}}, func() []float32 {
			q, _ := fp8.QuantizeNVFP4(src, rows, cols, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2})
			d := make([]float32, len(src))
			_ = q.Dequantize(d)
			return d
		}})
	for _, c := range cases {
		name := fmt.Sprintf("%v axis %d dim %d", c.cfg.Quantizer, c.cfg.Axis, c.cfg.BlockDim)
		g := graph.New()
		x := g.Input("x", graph.Float32, rows, cols)
		d := ops.Dequantize("d", ops.Quantize(x, c.cfg))
		if err := g.Err(); err != nil {
			t.Fatal(name, err)
		}
		p, err := graph.Compile(g, graph.NewStore(), graph.Options{Training: true}, d)
		if err != nil {
			t.Fatal(name, err)
		}
		if err := p.FeedFloat32(x, src); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(name, err)
		}
		got, want := p.Float32(d), c.want()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d = %v, want %v", name, i, got[i], want[i])
			}
		}
	}
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 2)
	ops.Dequantize("d", x)
	if g.Err() == nil {
		t.Fatal("Dequantize of float32: no error")
	}
}
