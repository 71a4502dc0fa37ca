package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// dequantFloat8Block is an operand as Transformer Engine defines it: a
// 1-D cast along axis 1 quantizes the rows; along axis 0 the source is
// transposed and cast row-wise (the column-wise copy), then transposed
// back; a 2-D cast is the tiles. It returns the dequantized values in
// src's layout.
func dequantFloat8Block(t *testing.T, src []float32, rows, cols, axis int, c fp8.Quantizer) []float64 {
	t.Helper()
	r, cl, s := rows, cols, src
	if c.Dim() == 1 && axis == 0 {
		r, cl = cols, rows
		s = make([]float32, len(src))
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				s[j*rows+i] = src[i*cols+j]
			}
		}
	}
	sr, sc := fp8.Float8BlockScaleShape(r, cl, c.Dim())
	codes, inv := make([]uint8, r*cl), make([]float32, sr*sc)
	if err := fp8.QuantizeFloat8Block(codes, inv, s, r, cl, c); err != nil {
		t.Fatal(err)
	}
	dq := make([]float32, r*cl)
	if err := fp8.DequantizeFloat8Block(dq, codes, inv, r, cl, c); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(dq))
	for i := 0; i < r; i++ {
		for j := 0; j < cl; j++ {
			if c.Dim() == 1 && axis == 0 {
				out[j*r+i] = float64(dq[i*cl+j])
			} else {
				out[i*cl+j] = float64(dq[i*cl+j])
			}
		}
	}
	return out
}

// TestFloat8BlockScaledMatMul runs a linear layer's three GEMMs on
// Float8BlockScaling casts in a compiled program — fprop x·Wᵀ (x 1-D,
// W 2-D), dgrad dy·W (the same 2-D cast of W, read along its rows),
// wgrad dyᵀ·x (both 1-D along their rows), and x 2-D × W 1-D — on ragged
// shapes, with power-of-two and float32 scales, and checks each against
// the float64 product of the operands dequantized as Transformer Engine
// defines them, within the float32 accumulation bound.
func TestFloat8BlockScaledMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 128))
	for _, sz := range [][3]int{{5, 17, 33}, {130, 70, 260}, {64, 129, 128}, {40, 260, 300}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, fp32 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%dx%d fp32=%v", m, n, k, fp32), func(t *testing.T) {
				g := graph.New()
				store := graph.NewStore()
				x := g.Input("x", graph.Float32, m, k)
				w := g.Input("w", graph.Float32, n, k)
				dy := g.Input("dy", graph.Float32, m, n)
				q := func(v *graph.Node, axis, dim int, f fp8.Format) *graph.Node {
					return ops.Quantize(v, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.Float8Blocks, Format: f, BlockDim: dim, FP32Scales: fp32}, Axis: axis})
				}
				wq := q(w, 0, 2, fp8.E4M3)
				outs := []*graph.Node{
					ops.ScaledMatMul("fprop", q(x, 1, 1, fp8.E4M3), wq, false, true, nil),
					ops.ScaledMatMul("dgrad", q(dy, 1, 1, fp8.E5M2), wq, false, false, nil),
					ops.ScaledMatMul("wgrad", q(dy, 0, 1, fp8.E4M3), q(x, 0, 1, fp8.E4M3), true, false, nil),
					ops.ScaledMatMul("x2d", q(x, 1, 2, fp8.E4M3), q(w, 1, 1, fp8.E4M3), false, true, nil),
				}
				if err := g.Err(); err != nil {
					t.Fatal(err)
				}
				p, err := graph.Compile(g, store, graph.Options{Training: true}, outs...)
				if err != nil {
					t.Fatal(err)
				}
				vals := map[*graph.Node][]float32{}
				for _, in := range []*graph.Node{x, w, dy} {
					v := make([]float32, in.Shape().Numel())
					for i := range v {
						v[i] = float32(rng.NormFloat64() * math.Exp(2*rng.NormFloat64()))
					}
					vals[in] = v
					if err := p.FeedFloat32(in, v); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				c := func(dim int, f fp8.Format) fp8.Quantizer {
					return fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: dim, Format: f, FP32Scales: fp32}
				}
				wd := dequantFloat8Block(t, vals[w], n, k, 0, c(2, fp8.E4M3))
				type ref struct {
					a, b                []float64
					rowsA, colsA, colsB int
					ta, tb              bool
				}
				refs := []ref{
					{dequantFloat8Block(t, vals[x], m, k, 1, c(1, fp8.E4M3)), wd, m, k, k, false, true},
					{dequantFloat8Block(t, vals[dy], m, n, 1, c(1, fp8.E5M2)), wd, m, n, k, false, false},
					{dequantFloat8Block(t, vals[dy], m, n, 0, c(1, fp8.E4M3)), dequantFloat8Block(t, vals[x], m, k, 0, c(1, fp8.E4M3)), m, n, k, true, false},
					{dequantFloat8Block(t, vals[x], m, k, 1, c(2, fp8.E4M3)), dequantFloat8Block(t, vals[w], n, k, 1, c(1, fp8.E4M3)), m, k, k, false, true},
				}
				// The float32 path (float32 scales, or no AVX512_BF16)
				// rounds each decoded value and product once more.
				const extra = 2
				for oi, r := range refs {
					got := p.Float32(outs[oi])
					// op(A) is [M K], op(B) [K N].
					M, K := r.rowsA, r.colsA
					if r.ta {
						M, K = K, M
					}
					N := len(r.b) / K
					at := func(i, pp int) float64 {
						if r.ta {
							return r.a[pp*M+i]
						}
						return r.a[i*K+pp]
					}
					bt := func(pp, j int) float64 {
						if r.tb {
							return r.b[j*K+pp]
						}
						return r.b[pp*N+j]
					}
					for i := 0; i < M; i++ {
						for j := 0; j < N; j++ {
							var s, abs float64
							for pp := 0; pp < K; pp++ {
								v := at(i, pp) * bt(pp, j)
								s += v
								abs += math.Abs(v)
							}
							bound := (float64(K) + extra) * 0x1p-24 * abs
							if d := math.Abs(float64(got[i*N+j]) - s); d > bound || math.IsNaN(d) {
								t.Fatalf("%s C[%d,%d] = %v, want %v (error %.3g > %.3g)", outs[oi].Name(), i, j, got[i*N+j], s, d, bound)
							}
						}
					}
				}
			})
		}
	}
}
