package ops_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// TestBF16MatMul checks BF16MatMul through a compiled program against a
// float64 product of the bf16-rounded operands: A of rank 3 (its leading
// axes kept) with a bias, and a transposed A, within the float32
// accumulation bound.
func TestBF16MatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	bf := func(v float32) float64 { return float64(kernels.BF16ToFloat32(kernels.BF16FromFloat32(v))) }
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, transA := range []bool{false, true} {
		g := graph.New()
		var a *graph.Node
		m, k, n := 6, 40, 24
		if transA {
			a = g.Input("a", graph.Float32, k, m)
		} else {
			a = g.Input("a", graph.Float32, 2, 3, k)
		}
		w, bias := g.Input("w", graph.Float32, n, k), g.Input("bias", graph.Float32, n)
		var y *graph.Node
		if transA {
			y = ops.BF16MatMul("y", a, w, true, true, nil)
		} else {
			y = ops.BF16MatMul("y", a, w, false, true, bias)
			require.Equal(t, graph.Shape{2, 3, n}, y.Shape())
		}
		require.NoError(t, g.Err())
		p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
		require.NoError(t, err)
		as, ws, bs := fill(m*k), fill(n*k), fill(n)
		require.NoError(t, p.FeedFloat32(a, as))
		require.NoError(t, p.FeedFloat32(w, ws))
		if !transA {
			require.NoError(t, p.FeedFloat32(bias, bs))
		}
		require.NoError(t, p.Run())
		got := p.Float32(y)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s, abs float64
				for q := 0; q < k; q++ {
					av := as[i*k+q]
					if transA {
						av = as[q*m+i]
					}
					v := bf(av) * bf(ws[j*k+q])
					s, abs = s+v, abs+math.Abs(v)
				}
				if !transA {
					s += float64(bs[j])
				}
				require.InDelta(t, s, float64(got[i*n+j]), float64(k+1)*0x1p-24*(abs+math.Abs(s)), "transA=%v C[%d,%d]", transA, i, j)
			}
		}
	}
}
