package optim

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

func sqnrDB(ref []float64, got []float32) float64 {
	var num, den float64
	for i := range ref {
		d := ref[i] - float64(got[i])
		num += d * d
		den += ref[i] * ref[i]
	}
	return 10 * math.Log10(den/num)
}

func TestMemoryStats(t *testing.T) {
	p := []Param{{Name: "w", W: make([]float32, 4), G: make([]float32, 4), Decay: true}}
	o1, err := NewLowBitAdam(p, recipe.MSAMP{OptLevel: "O1"}, 0.01, nil)
	require.NoError(t, err)
	o2, err := NewLowBitAdam(p, recipe.MSAMP{OptLevel: "O2"}, 0.01, nil)
	require.NoError(t, err)
	require.Equal(t, 8.0, Float32MemoryStats().StateBytes)
	require.Equal(t, 8.0, o1.MemoryStats().StateBytes)
	require.Equal(t, 3.0, o2.MemoryStats().StateBytes)
	require.Equal(t, 62.5, 100*(1-o2.MemoryStats().StateBytes/Float32MemoryStats().StateBytes))
	require.Equal(t, 2.0, o1.MemoryStats().WeightBytes)
	require.Equal(t, 2.0, o2.MemoryStats().WeightBytes)
	require.Equal(t, 1.0, o2.MemoryStats().GradBytes)
	require.Len(t, o2.m8[0].Codes, 4, "the first moment is one byte per value")
	require.Len(t, o2.v16[0].Bits, 4)
	require.Nil(t, o2.m32)
	_, err = NewLowBitAdam(p, recipe.MSAMP{OptLevel: "O3"}, 0, nil)
	require.ErrorContains(t, err, "DeepSpeed")
}

func TestLowBitRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	n := 4096
	src := make([]float32, n)
	ref := make([]float64, n)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 1e-3) // a first moment's size
		ref[i] = float64(src[i])
	}
	m := FP8Tensor{Codes: make([]uint8, n)}
	require.NoError(t, m.Encode(src))
	out := make([]float32, n)
	require.NoError(t, m.Decode(out))
	s := sqnrDB(ref, out)
	t.Logf("first moment (FP8 E4M3, pow2 scale): SQNR %.1f dB", s)
	require.GreaterOrEqual(t, s, 25.0)
	require.Equal(t, float32(math.Exp2(math.Floor(math.Log2(float64(448/maxAbs(src)))))), m.Scale, "scale = largest power of two with amax·scale ≤ 448")
	v := FP16Tensor{Bits: make([]uint16, n)}
	sq := make([]float32, n)
	for i := range sq {
		sq[i] = src[i] * src[i] // a second moment: ~1e-6, below FP16's normal range unscaled
		ref[i] = float64(sq[i])
	}
	v.Encode(sq)
	v.Decode(out)
	s = sqnrDB(ref, out)
	t.Logf("second moment (FP16, pow2 scale): SQNR %.1f dB", s)
	require.GreaterOrEqual(t, s, 60.0)
	// Scales are powers of two.
	for _, sc := range []float32{m.Scale, v.Scale} {
		_, e := math.Frexp(float64(sc))
		require.Equal(t, math.Ldexp(0.5, e), float64(sc))
	}
}

func maxAbs(s []float32) float32 {
	var m float32
	for _, v := range s {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// TestFP8AllReduceScaling averages gradients over 1, 2 and 4 ranks with
// MS-AMP's FP8 all-reduce and compares with the exact mean.
func TestFP8AllReduceScaling(t *testing.T) {
	const n = 2048
	for _, size := range []int{1, 2, 4} {
		comms, _ := dist.NewLocal(size)
		grads := make([][]float32, size)
		mean := make([]float64, n)
		rng := rand.New(rand.NewPCG(uint64(size), 3))
		for r := range grads {
			grads[r] = make([]float32, n)
			for i := range grads[r] {
				grads[r][i] = float32(rng.NormFloat64() * 0.01)
				mean[i] += float64(grads[r][i]) / float64(size)
			}
		}
		outs := make([][]float32, size)
		var wg sync.WaitGroup
		for r := 0; r < size; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				ar := NewFP8AllReduce(comms[r], n)
				outs[r] = make([]float32, n)
				_, _, err := ar.Average(grads[r], outs[r])
				require.NoError(t, err)
			}(r)
		}
		wg.Wait()
		for r := 1; r < size; r++ {
			require.Equal(t, outs[0], outs[r], "every rank gets the same average")
		}
		s := sqnrDB(mean, outs[0])
		t.Logf("%d ranks: SQNR of the FP8-reduced mean %.1f dB", size, s)
		require.GreaterOrEqual(t, s, 20.0)
	}
	// Equal maxima on 4 ranks: each cast is max/√4, the sum 2·max
	// saturates, and the overflow is counted.
	comms, _ := dist.NewLocal(4)
	var wg sync.WaitGroup
	ov := make([]int, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			g := []float32{1, -1, 0.25}
			out := make([]float32, 3)
			var err error
			ov[r], _, err = NewFP8AllReduce(comms[r], 3).Average(g, out)
			require.NoError(t, err)
		}(r)
	}
	wg.Wait()
	require.Equal(t, 2, ov[0], "the two saturated sums are counted")
}

// TestLowBitAdamTracksAdamW trains a quadratic with both optimizers: the
// low-bit levels follow float32 AdamW closely, and the weights stay
// exactly FP16-representable (after their power-of-two scale).
func TestLowBitAdamTracksAdamW(t *testing.T) {
	target := make([]float32, 256)
	for i := range target {
		target[i] = float32(math.Sin(float64(i))) * 0.5
	}
	train := func(o Optimizer, p []Param) []float32 {
		for s := 0; s < 300; s++ {
			for i := range p[0].W {
				p[0].G[i] = p[0].W[i] - target[i]
			}
			o.Step(0.01)
		}
		return p[0].W
	}
	mk := func() []Param {
		return []Param{{Name: "w", W: make([]float32, 256), G: make([]float32, 256), Decay: true}}
	}
	pf := mk()
	ref := train(NewAdamW(pf, 0.001), pf)
	for _, level := range []string{"O1", "O2"} {
		p := mk()
		o, err := NewLowBitAdam(p, recipe.MSAMP{OptLevel: level}, 0.001, nil)
		require.NoError(t, err)
		got := train(o, p)
		var num, den float64
		for i := range ref {
			d := float64(got[i] - ref[i])
			num += d * d
			den += float64(ref[i] * ref[i])
		}
		require.Less(t, math.Sqrt(num/den), 0.02, level)
		for _, w := range got {
			s := o.w[0].Scale
			require.Equal(t, w, float16.Fromfloat32(w*s).Float32()/s, "%s: weights are FP16 master values", level)
		}
	}
}
