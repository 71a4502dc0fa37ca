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

// dequantNVFP4 is an operand as Transformer Engine defines it, in src's
// layout: a 1-D cast along axis 1 quantizes the rows; along axis 0 the
// source is transposed, optionally transformed, cast row-wise, and the
// dequantized values transposed back; a 2-D cast is the tiles.
func dequantNVFP4(t *testing.T, src []float32, rows, cols, axis int, c fp8.Quantizer) []float64 {
	t.Helper()
	r, cl, s := rows, cols, src
	trans := axis == 0 && !(c.BlockDim == 2)
	if trans {
		r, cl = cols, rows
		s = make([]float32, len(src))
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				s[j*rows+i] = src[i*cols+j]
			}
		}
	}
	q, err := fp8.QuantizeNVFP4(s, r, cl, c)
	if err != nil {
		t.Fatal(err)
	}
	dq := make([]float32, r*cl)
	if err := q.Dequantize(dq); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(dq))
	for i := 0; i < r; i++ {
		for j := 0; j < cl; j++ {
			if trans {
				out[j*r+i] = float64(dq[i*cl+j])
			} else {
				out[i*cl+j] = float64(dq[i*cl+j])
			}
		}
	}
	return out
}

// TestNVFP4ScaledMatMul runs a linear layer's three GEMMs on NVFP4 casts
// in a compiled program as Transformer Engine's recipe makes them —
// fprop x·Wᵀ (x 1×16, W 16×16 tiles), dgrad dy·W (the same tiles read
// along W's rows), wgrad dyᵀ·x (both column-wise copies, after the
// random Hadamard transform along the batch) — and checks each against
// the float64 product of the operands dequantized as defined (the
// transformed ones for the wgrad: the transform is orthogonal), within
// the float32 accumulation bound; and that stochastic rounding draws the
// same codes for the same step and seed, other codes at another step.
func TestNVFP4ScaledMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 16))
	for _, sz := range [][3]int{{16, 17, 33}, {48, 40, 70}, {32, 130, 20}} {
		m, n, k := sz[0], sz[1], sz[2]
		t.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(t *testing.T) {
			g := graph.New()
			x := g.Input("x", graph.Float32, m, k)
			w := g.Input("w", graph.Float32, n, k)
			dy := g.Input("dy", graph.Float32, m, n)
			q := func(v *graph.Node, axis, dim int, rht bool) *graph.Node {
				return ops.Quantize(v, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: dim, RHT: rht}, Axis: axis})
			}
			wq := q(w, 0, 2, false)
			outs := []*graph.Node{
				ops.ScaledMatMul("fprop", q(x, 1, 1, false), wq, false, true, nil),
				ops.ScaledMatMul("dgrad", q(dy, 1, 1, false), wq, false, false, nil),
				ops.ScaledMatMul("wgrad", q(dy, 0, 1, true), q(x, 0, 1, true), true, false, nil),
			}
			sr := ops.Quantize(dy, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 1, Stochastic: true, Seed: 5}, Axis: 1})
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			p, err := graph.Compile(g, graph.NewStore(), graph.Options{Training: true}, append(outs, sr)...)
			if err != nil {
				t.Fatal(err)
			}
			vals := map[*graph.Node][]float32{}
			for _, in := range []*graph.Node{x, w, dy} {
				v := make([]float32, in.Shape().Numel())
				for i := range v {
					v[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
				}
				vals[in] = v
				if err := p.FeedFloat32(in, v); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			wd := dequantNVFP4(t, vals[w], n, k, 0, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2})
			type ref struct {
				a, b   []float64
				M, K   int
				ta, tb bool
			}
			refs := []ref{
				{dequantNVFP4(t, vals[x], m, k, 1, fp8.Quantizer{Kind: fp8.NVFP4Blocks}), wd, m, k, false, true},
				{dequantNVFP4(t, vals[dy], m, n, 1, fp8.Quantizer{Kind: fp8.NVFP4Blocks}), wd, m, n, false, false},
				{dequantNVFP4(t, vals[dy], m, n, 0, fp8.Quantizer{Kind: fp8.NVFP4Blocks, RHT: true}), dequantNVFP4(t, vals[x], m, k, 0, fp8.Quantizer{Kind: fp8.NVFP4Blocks, RHT: true}), n, m, true, false},
			}
			for oi, r := range refs {
				got := p.Float32(outs[oi])
				N := len(r.b) / r.K
				for i := 0; i < r.M; i++ {
					for j := 0; j < N; j++ {
						var s, abs float64
						for pp := 0; pp < r.K; pp++ {
							av := r.a[i*r.K+pp]
							if r.ta {
								av = r.a[pp*r.M+i]
							}
							bv := r.b[pp*N+j]
							if r.tb {
								bv = r.b[j*r.K+pp]
							}
							s += av * bv
							abs += math.Abs(av * bv)
						}
						bound := (float64(r.K) + 4) * 0x1p-24 * abs
						if d := math.Abs(float64(got[i*N+j]) - s); d > bound || math.IsNaN(d) {
							t.Fatalf("%s C[%d,%d] = %v, want %v (error %.3g > %.3g)", outs[oi].Name(), i, j, got[i*N+j], s, d, bound)
						}
					}
				}
			}
			// Stochastic rounding: the same step draws the same codes
			// (a resumed run), another step others.
			codes := func() []uint8 {
				v, err := p.Value(sr)
				if err != nil {
					t.Fatal(err)
				}
				return append([]uint8(nil), v.U8...)
			}
			first := codes()
			p.SetStep(0)
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			if string(codes()) != string(first) {
				t.Fatal("stochastic rounding differs at the same step")
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			if string(codes()) == string(first) {
				t.Fatal("stochastic rounding repeats at the next step")
			}
		})
	}
}
