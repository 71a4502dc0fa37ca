package train

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The accumulator split over the workers writes exactly w·g, then
// acc + w·g, for every element of every buffer, as one part does.
func TestAccumulatorSplitsBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	sizes := []int{0, 3, accumulateMin + 7, 1, 2*accumulateMin - 1}
	mk := func() (acc, src [][]float32) {
		for _, n := range sizes {
			acc = append(acc, make([]float32, n))
			s := make([]float32, n)
			for j := range s {
				s[j] = float32(rng.NormFloat64())
			}
			src = append(src, s)
		}
		return acc, src
	}
	acc, src := mk()
	a := newAccumulator(acc, src)
	a.sh.SetParts(3) // split even on one core
	want := make([][]float32, len(acc))
	for i := range acc {
		want[i] = make([]float32, len(acc[i]))
	}
	for step, w := range []float32{3, 0.7, 128} {
		a.add(w, step == 0)
		for i, g := range src {
			for j, v := range g {
				if step == 0 {
					want[i][j] = w * v
				} else {
					want[i][j] += w * v
				}
			}
		}
		for i := range acc {
			for j := range acc[i] {
				if math.Float32bits(acc[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("step %d buffer %d element %d: %v, want %v", step, i, j, acc[i][j], want[i][j])
				}
			}
		}
		for _, g := range src { // the next micro-batch's gradients
			for j := range g {
				g[j] = float32(rng.NormFloat64())
			}
		}
	}
	if n := testing.AllocsPerRun(5, func() { a.add(1, false) }); n != 0 {
		t.Fatalf("add allocates %v times", n)
	}
}

// BenchmarkAccumulate adds one micro-batch's gradients of GPT-2 124M's
// size (124,475,904 values in two buffers of its largest shapes' sizes)
// into the accumulators.
func BenchmarkAccumulate(b *testing.B) {
	sizes := []int{50304 * 768, 124475904 - 50304*768}
	var acc, src [][]float32
	for _, n := range sizes {
		acc = append(acc, make([]float32, n))
		src = append(src, make([]float32, n))
	}
	a := newAccumulator(acc, src)
	a.add(1, true) // the pages, touched before the clock starts
	b.SetBytes(12 * 124475904)
	for b.Loop() {
		a.add(0.5, false)
	}
}
