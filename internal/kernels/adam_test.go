package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestAdamVectorMatchesScalar(t *testing.T) { withISA(t, testAdamVectorMatchesScalar) }

func testAdamVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 16, 37, 1000} {
		for _, c := range []AdamConsts{
			{0, 1, 0.9, 0.1, 0.999, 0.001, 0.01, 0.03, 1e-8},
			{0, 0.999, 0.9, 0.1, 0.999, 0.001, 0.002, 0.5, 1e-8},
			{0.01, 1, 0.8, 0.2, 0.99, 0.01, 0.1, 0.9, 1e-6},
		} {
			w, g, m, v := randSlice(rng, n), randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)
			for i := range v {
				v[i] = v[i] * v[i]
			}
			w2, m2, v2 := append([]float32(nil), w...), append([]float32(nil), m...), append([]float32(nil), v...)
			Adam(w, g, m, v, &c)
			adamRef(w2, g, m2, v2, &c)
			for i := range w {
				if math.Float32bits(w[i]) != math.Float32bits(w2[i]) || m[i] != m2[i] || v[i] != v2[i] {
					t.Fatalf("n=%d c=%v: [%d] w %v/%v m %v/%v v %v/%v", n, c, i, w[i], w2[i], m[i], m2[i], v[i], v2[i])
				}
			}
		}
	}
}
