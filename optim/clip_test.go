package optim

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// clipParams returns gradients of sizes around the chunk boundaries, the
// total above splitMin, with values of widely spread magnitudes.
func clipParams(seed uint64) []Param {
	rng := rand.New(rand.NewPCG(seed, 7))
	sizes := []int{0, 1, 7, normChunk - 1, normChunk, normChunk + 1, 3*normChunk + 5, 9}
	ps := make([]Param, len(sizes))
	for i, n := range sizes {
		g := make([]float32, n)
		for j := range g {
			g[j] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
		}
		ps[i] = Param{G: g}
	}
	return ps
}

// refSumSquares is GradSumSquares's documented order, written out: per
// parameter, chunks of normChunk values, eight running sums a chunk
// added pairwise, the tail in order; the chunks' sums in order.
func refSumSquares(params []Param) float64 {
	var total float64
	for _, p := range params {
		for c0 := 0; c0 < len(p.G); c0 += normChunk {
			x := p.G[c0:min(len(p.G), c0+normChunk)]
			var a [8]float64
			n := len(x) / 8 * 8
			for j, v := range x[:n] {
				a[j%8] += float64(v) * float64(v)
			}
			t := ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
			for _, v := range x[n:] {
				t += float64(v) * float64(v)
			}
			total += t
		}
	}
	return total
}

// GradSumSquares sums in its documented order whatever the number of
// workers, and lands within a few float64 roundings of the exact sum.
func TestGradSumSquaresOrder(t *testing.T) {
	ps := clipParams(1)
	want := refSumSquares(ps)
	s := &clipping
	s.lock()
	s.mu.Unlock()
	defer s.split.setParts(s.split.parts)
	for _, parts := range []int{1, 2, 3, 5} {
		s.split.setParts(parts)
		got := GradSumSquares(ps)
		require.Equal(t, math.Float64bits(want), math.Float64bits(got), "%d parts: %v, want %v", parts, got, want)
	}
	exact := new(big.Float).SetPrec(2000)
	for _, p := range ps {
		for _, v := range p.G {
			sq := new(big.Float).SetPrec(2000).SetFloat64(float64(v))
			exact.Add(exact, sq.Mul(sq, sq))
		}
	}
	e, _ := exact.Float64()
	require.InEpsilon(t, e, want, 1e-12)
	// Exactly representable sums come out exact: 3² + 4² per pair.
	q := []Param{{G: make([]float32, 2*normChunk+3)}}
	for j := range q[0].G {
		q[0].G[j] = float32(3 + j%2)
	}
	require.Equal(t, float64((2*normChunk+3)/2*25+9), GradSumSquares(q))
}

// ScaleGrads multiplies every value once, by the float32 product, over
// the workers; ClipGradNorm scales by maxNorm/(norm+1e-6) only above the
// limit and allocates nothing once sized.
func TestScaleGradsAndClip(t *testing.T) {
	ps, ref := clipParams(2), clipParams(2)
	ScaleGrads(ps, 0.37)
	for i := range ps {
		for j, v := range ps[i].G {
			require.Equal(t, math.Float32bits(ref[i].G[j]*0.37), math.Float32bits(v), "param %d value %d", i, j)
		}
	}
	ps, ref = clipParams(3), clipParams(3)
	norm := float32(math.Sqrt(refSumSquares(ref)))
	require.Equal(t, norm, ClipGradNorm(ps, norm/4))
	f := norm / 4 / (norm + 1e-6)
	for i := range ps {
		for j, v := range ps[i].G {
			require.Equal(t, math.Float32bits(ref[i].G[j]*f), math.Float32bits(v), "param %d value %d", i, j)
		}
	}
	require.Zero(t, testing.AllocsPerRun(5, func() { ClipGradNorm(ps, 1e-3) }))
}

// sumSquares adds in exactly the documented order: checked chunk by
// chunk on values of one magnitude, where another order rounds
// differently.
func TestSumSquaresOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	differs := 0
	for trial := 0; trial < 200; trial++ {
		x := make([]float32, 8+rng.IntN(300))
		for j := range x {
			x[j] = float32(1 + rng.Float64())
		}
		want := refSumSquares([]Param{{G: x}})
		require.Equal(t, math.Float64bits(want), math.Float64bits(sumSquares(x)), "trial %d", trial)
		var seq float64
		for _, v := range x {
			seq += float64(v) * float64(v)
		}
		if seq != want {
			differs++
		}
	}
	require.Positive(t, differs, "the values never tell the orders apart")
}
