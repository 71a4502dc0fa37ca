package optim

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// The tests in this file pin behaviours that mutation testing found
// unguarded: each fails when the behaviour it names changes.

// SGD with momentum, dampening and weight decay, against the update
// written out in float64; Steps counts updates, and a parameter without
// Decay is not decayed.
func TestSGDDampeningAndDecay(t *testing.T) {
	gs := []float32{1, 2, -1, 0.5}
	p := []Param{{Name: "w", W: []float32{0.5}, G: []float32{0}, Decay: true}, {Name: "b", W: []float32{0.5}, G: []float32{0}}}
	o := NewSGD(p, 0.9, 0.01, false)
	o.Dampening = 0.3
	require.Zero(t, o.Steps())
	w, b := 0.5, 0.0
	wb, bb := 0.5, 0.0
	for i, g := range gs {
		p[0].G[0], p[1].G[0] = g, g
		o.Step(0.1)
		d := float64(g) + 0.01*w
		db := float64(g)
		if i == 0 {
			b, bb = d, db
		} else {
			b = 0.9*b + 0.7*d
			bb = 0.9*bb + 0.7*db
		}
		w -= 0.1 * b
		wb -= 0.1 * bb
		near(t, w, float64(p[0].W[0]), "decayed")
		near(t, wb, float64(p[1].W[0]), "not decayed")
		require.Equal(t, i+1, o.Steps())
	}
	// Without momentum: plain decayed SGD, and no state buffers.
	q := []Param{{Name: "w", W: []float32{2}, G: []float32{1}, Decay: true}}
	plain := NewSGD(q, 0, 0.5, false)
	plain.Step(0.1)
	near(t, 2-0.1*(1+0.5*2), float64(q[0].W[0]), "plain")
	require.Empty(t, plain.StateBuffers())
	require.Len(t, o.StateBuffers(), 2)
	o.SetSteps(7)
	require.Equal(t, 7, o.Steps())
}

func TestStepDecay(t *testing.T) {
	s := StepDecay{Base: 1, Gamma: 0.5, Every: 3}
	for step, want := range []float32{1, 1, 1, 0.5, 0.5, 0.5, 0.25} {
		require.Equal(t, want, s.LR(step), "step %d", step)
	}
	require.Equal(t, float32(1), StepDecay{Base: 1, Gamma: 0.5}.LR(10), "Every 0: no decay, no division by zero")
	require.Equal(t, float32(1), StepDecay{Base: 1, Gamma: 0.5, Every: -2}.LR(10))
	require.Equal(t, float32(0.3), Constant(0.3).LR(99))
}

// The FP8 all-reduce counts the non-zero values its cast flushes to zero,
// on this rank's cast, and only those.
func TestFP8AllReduceCountsUnderflows(t *testing.T) {
	comms, _ := dist.NewLocal(2)
	// With amax 1 on both ranks the scale is 256/√2: values below about
	// 2^-9/181 ≈ 1.1e-5 flush to zero; 0 itself is not an underflow.
	g := [][]float32{{1, 1e-7, -2e-7, 0, 0.5}, {1, 0.25, 1e-8, 0, 0}}
	un := make([]int, 2)
	ov := make([]int, 2)
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			out := make([]float32, 5)
			var err error
			ov[r], un[r], err = NewFP8AllReduce(comms[r], 5).Average(g[r], out)
			require.NoError(t, err)
			require.InDelta(t, 1.0, out[0], 0.05, "an FP8 cast of 1·256/√2")
			require.Zero(t, out[3])
		}(r)
	}
	wg.Wait()
	require.Equal(t, []int{2, 1}, un)
	require.Equal(t, []int{0, 0}, ov)
	_, _, err := NewFP8AllReduce(comms[0], 2).Average(make([]float32, 3), make([]float32, 3))
	require.ErrorContains(t, err, "3 values, buffers for 2")
}

// LowBitAdam's state buffers round trip: a second optimizer given the
// first's buffers (as a checkpoint load does) continues exactly as the
// first, at both levels.
func TestLowBitAdamStateRoundTrip(t *testing.T) {
	for _, level := range []string{"O1", "O2"} {
		mk := func() ([]Param, *LowBitAdam) {
			p := []Param{{Name: "w", W: []float32{0.5, -1, 2, 0.25, 3, -0.125, 1, 1}, G: make([]float32, 8), Decay: true},
				{Name: "b", W: []float32{0.1, 0.2}, G: make([]float32, 2)}}
			o, err := NewLowBitAdam(p, recipe.MSAMP{OptLevel: level}, 0.01, nil)
			require.NoError(t, err)
			return p, o
		}
		grad := func(p []Param, s int) {
			for _, q := range p {
				for i := range q.G {
					q.G[i] = float32(math.Sin(float64(s*7+i))) * 0.1
				}
			}
		}
		pa, a := mk()
		for s := 0; s < 3; s++ {
			grad(pa, s)
			a.Step(1e-2)
		}
		pb, b := mk()
		for k, buf := range a.StateBuffers() {
			copy(b.StateBuffers()[k], buf)
		}
		for k, buf := range a.RawStateBuffers() {
			copy(b.RawStateBuffers()[k], buf)
		}
		bufs := b.StateBuffers()
		for k, buf := range a.StateBuffers() {
			copy(bufs[k], buf)
		}
		b.StateLoaded()
		b.SetSteps(a.Steps())
		for i := range pa {
			copy(pb[i].W, pa[i].W)
		}
		for s := 3; s < 6; s++ {
			grad(pa, s)
			grad(pb, s)
			a.Step(1e-2)
			b.Step(1e-2)
		}
		for i := range pa {
			require.Equal(t, pa[i].W, pb[i].W, "%s %s", level, pa[i].Name)
		}
	}
}

// The summed cast of the FP8 all-reduce counts a sum beyond 448 as an
// overflow, and a sum of exactly 448 (representable) not.
func TestFP8AllReduceOverflowBoundary(t *testing.T) {
	comms, _ := dist.NewLocal(4)
	ov := make([]int, 4)
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			// amax 1: scale 256/√4 = 128, so 1 → 128 and 0.875 → 112,
			// exactly; four ranks sum to 512 (saturates) and 448 (fits).
			out := make([]float32, 2)
			var err error
			ov[r], _, err = NewFP8AllReduce(comms[r], 2).Average([]float32{1, 0.875}, out)
			require.NoError(t, err)
			require.Equal(t, float32(0.875), out[1])
			require.Equal(t, float32(448.0/512), out[0], "the saturated sum")
		}(r)
	}
	wg.Wait()
	require.Equal(t, []int{1, 1, 1, 1}, ov)
}

// ClipGradNorm leaves gradients whose norm is exactly the bound alone,
// and scales larger ones by maxNorm/(norm+1e-6).
func TestClipGradNormBoundary(t *testing.T) {
	p := []Param{{G: []float32{1, 0}}}
	require.Equal(t, float32(1), ClipGradNorm(p, 1))
	require.Equal(t, []float32{1, 0}, p[0].G, "at the bound: unchanged")
	p = []Param{{G: []float32{2, 0}}}
	require.Equal(t, float32(2), ClipGradNorm(p, 1))
	require.Equal(t, []float32{2 * (1 / (2 + 1e-6)), 0}, p[0].G)
	p = []Param{{G: []float32{float32(math.Inf(1))}}}
	require.True(t, math.IsInf(float64(ClipGradNorm(p, 1)), 1))
	require.True(t, math.IsInf(float64(p[0].G[0]), 1), "a non-finite norm scales nothing")
}

// The splitter runs loops below splitMin in one part and larger ones in
// one part per worker, each element exactly once.
func TestSplitterParts(t *testing.T) {
	s := newSplitter()
	count := func(n int) (int, []int) {
		seen := make([]int, n)
		parts := s.do(n, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		return parts, seen
	}
	for _, n := range []int{0, 1, splitMin - 1, splitMin, 3*splitMin + 7} {
		parts, seen := count(n)
		want := 1
		if n >= splitMin {
			want = s.parts
		}
		require.Equal(t, want, parts, "n=%d", n)
		for i, c := range seen {
			require.Equal(t, 1, c, "n=%d element %d", n, i)
		}
	}
}

// shares runs small loops as one part and larger ones as one part per
// worker, and each part's share of every array covers it exactly once.
func TestSplitterShares(t *testing.T) {
	s := newSplitter()
	sizes := []int{0, 1, 5, 2*splitMin + 3}
	for _, total := range []int{splitMin - 1, splitMin} {
		seen := make([][]int, len(sizes))
		for i, n := range sizes {
			seen[i] = make([]int, n)
		}
		var mu sync.Mutex
		used := map[int]int{}
		s.shares(total, func(k, parts int) {
			mu.Lock()
			used[k] = parts
			mu.Unlock()
			for i, n := range sizes {
				lo, hi := share(n, k, parts)
				for j := lo; j < hi; j++ {
					seen[i][j]++ // parts touch disjoint elements
				}
			}
		})
		want := 1
		if total >= splitMin {
			want = s.parts
		}
		require.Len(t, used, want, "total=%d", total)
		for k, parts := range used {
			require.Equal(t, want, parts, "total=%d part %d", total, k)
		}
		for i := range seen {
			for j, c := range seen[i] {
				require.Equal(t, 1, c, "total=%d array %d element %d", total, i, j)
			}
		}
	}
}

// Adam split over the workers, each taking its share of every
// parameter, writes exactly what one part writes, parameter by
// parameter with its own decay.
func TestAdamSplitMatchesSerial(t *testing.T) {
	// The reference: one optimizer per parameter, in one part.
	split, serial := splitParams(), splitParams()
	a := NewAdamW(split, 0.1)
	var refs []*Adam
	for i := range serial {
		r := NewAdamW(serial[i:i+1], 0.1)
		r.split.setParts(1)
		refs = append(refs, r)
	}
	for step := 0; step < 3; step++ {
		a.Step(0.01)
		for _, r := range refs {
			r.Step(0.01)
		}
	}
	for i := range split {
		for j := range split[i].W {
			if math.Float32bits(split[i].W[j]) != math.Float32bits(serial[i].W[j]) {
				t.Fatalf("%s[%d] = %v split, %v in one part", split[i].Name, j, split[i].W[j], serial[i].W[j])
			}
		}
		ma, va := a.Moments(i)
		mb, vb := refs[i].Moments(0)
		require.Equal(t, mb, ma, "m of %s", split[i].Name)
		require.Equal(t, vb, va, "v of %s", split[i].Name)
	}
}

// SGD split over the workers (momentum, Nesterov, decay on some
// parameters) writes exactly what one optimizer per parameter, in one
// part, writes.
func TestSGDSplitMatchesSerial(t *testing.T) {
	for _, nesterov := range []bool{false, true} {
		split, serial := splitParams(), splitParams()
		a := NewSGD(split, 0.9, 0.01, nesterov)
		a.Dampening = 0.1
		var refs []*SGD
		for i := range serial {
			r := NewSGD(serial[i:i+1], 0.9, 0.01, nesterov)
			r.Dampening = 0.1
			r.split = newSplitter()
			r.split.setParts(1)
			r.body = r.update
			refs = append(refs, r)
		}
		for step := 0; step < 3; step++ {
			a.Step(0.05)
			for _, r := range refs {
				r.Step(0.05)
			}
		}
		for i := range split {
			for j := range split[i].W {
				if math.Float32bits(split[i].W[j]) != math.Float32bits(serial[i].W[j]) {
					t.Fatalf("nesterov=%v %s[%d] = %v split, %v in one part", nesterov, split[i].Name, j, split[i].W[j], serial[i].W[j])
				}
			}
		}
	}
}

// splitParams returns parameters around splitMin in size (the total above
// it), decay on every other one, with deterministic weights and
// gradients: the split tests' input.
func splitParams() []Param {
	sizes := []int{3, splitMin + 5, 7, 2*splitMin - 1}
	ps := make([]Param, len(sizes))
	for i, n := range sizes {
		ps[i] = Param{Name: fmt.Sprint("p", i), W: make([]float32, n), G: make([]float32, n), Decay: i%2 == 1}
		for j := range ps[i].W {
			ps[i].W[j] = float32(math.Sin(float64(7*j+i))) * 2
			ps[i].G[j] = float32(math.Cos(float64(3*j+i*5))) / float32(1+j%13)
		}
	}
	return ps
}
