package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// lossCase is one loss with its float64 definition per element.
type lossCase struct {
	name   string
	build  func(pred, target, mask *graph.Node) *graph.Node
	ref    func(x, t float64) float64
	target bool // takes a target
	// targets draws a target value (nil: standard normal).
	targets func(rng *rand.Rand) float32
}

func lossCases() []lossCase {
	huber := func(delta float64) func(x, t float64) float64 {
		return func(x, t float64) float64 {
			d := math.Abs(x - t)
			if d < delta {
				return 0.5 * d * d
			}
			return delta * (d - 0.5*delta)
		}
	}
	return []lossCase{
		{name: "MaskedMean", build: func(p, _, m *graph.Node) *graph.Node { return ops.MaskedMean(p, m) }, ref: func(x, _ float64) float64 { return x }},
		{name: "MSELoss", build: ops.MSELoss, target: true, ref: func(x, t float64) float64 { return (x - t) * (x - t) }},
		{name: "L1Loss", build: ops.L1Loss, target: true, ref: func(x, t float64) float64 { return math.Abs(x - t) }},
		{name: "HuberLoss", build: func(p, t, m *graph.Node) *graph.Node { return ops.HuberLoss(p, t, m, 0.7) }, target: true, ref: huber(0.7)},
		{name: "BCEWithLogits", build: ops.BCEWithLogits, target: true,
			// The textbook definition, −t·log σ(x) − (1−t)·log(1−σ(x)).
			ref: func(x, t float64) float64 {
				s := 1 / (1 + math.Exp(-x))
				return -t*math.Log(s) - (1-t)*math.Log(1-s)
			},
			targets: func(rng *rand.Rand) float32 { return float32(rng.Float64()) }},
	}
}

// lossRun builds c on pred [shape] (and a target), masked by mask (nil:
// none), and returns the loss and the gradients with respect to pred and
// target.
func lossRun(t *testing.T, c lossCase, shape graph.Shape, x, y, mask []float32) (loss float32, dx, dy []float32) {
	t.Helper()
	g := graph.New()
	store := graph.NewStore()
	pred := g.Param("pred", shape...)
	require.NoError(t, store.SetFloat32("pred", x, shape...))
	var target, m *graph.Node
	params := []*graph.Node{pred}
	if c.target {
		target = g.Param("target", shape...)
		require.NoError(t, store.SetFloat32("target", y, shape...))
		params = append(params, target)
	}
	if mask != nil {
		m = g.Input("mask", graph.Float32, shape[0])
	}
	l := c.build(pred, target, m)
	require.NoError(t, g.Err())
	grads, err := graph.Grad(l, params...)
	require.NoError(t, err)
	p, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{l}, grads...)...)
	require.NoError(t, err)
	if m != nil {
		require.NoError(t, p.FeedFloat32(m, mask))
	}
	require.NoError(t, p.Run())
	loss, err = p.Scalar(l)
	require.NoError(t, err)
	dx = append([]float32(nil), p.Float32(grads[0])...)
	if c.target {
		dy = append([]float32(nil), p.Float32(grads[1])...)
	}
	return loss, dx, dy
}

// lossRef is the float64 definition: the mean of the element losses over
// the rows mask keeps.
func lossRef(c lossCase, rows int, x, y []float64, mask []float32) float64 {
	cols := len(x) / rows
	var s, w float64
	for r := 0; r < rows; r++ {
		if mask != nil && mask[r] == 0 {
			continue
		}
		w++
		for j := r * cols; j < (r+1)*cols; j++ {
			tv := 0.0
			if y != nil {
				tv = y[j]
			}
			s += c.ref(x[j], tv)
		}
	}
	if w == 0 {
		return 0
	}
	return s / (w * float64(cols))
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestLossesAgainstFloat64 checks every loss's value against its float64
// definition and its gradients (prediction and target) against central
// differences of that definition, with and without a mask, on a matrix
// and on a vector of rows; masked rows get exactly zero gradient.
func TestLossesAgainstFloat64(t *testing.T) {
	for _, c := range lossCases() {
		for _, shape := range []graph.Shape{{6, 3}, {6}, {5, 2, 2}} {
			for _, masked := range []bool{false, true} {
				name := fmt.Sprintf("%s %v masked=%v", c.name, shape, masked)
				rng := rand.New(rand.NewPCG(3, uint64(len(name))))
				n := shape.Numel()
				x, y := make([]float32, n), make([]float32, n)
				for i := range x {
					x[i] = float32(2 * rng.NormFloat64())
					if c.targets != nil {
						y[i] = c.targets(rng)
					} else {
						y[i] = float32(rng.NormFloat64())
					}
				}
				var mask []float32
				if masked {
					mask = make([]float32, shape[0])
					for r := range mask {
						mask[r] = float32(r % 2) // rows 1, 3, 5 count
					}
				}
				loss, dx, dy := lossRun(t, c, shape, x, y, mask)
				xs, ys := f64s(x), f64s(y)
				if !c.target {
					ys = nil
				}
				want := lossRef(c, shape[0], xs, ys, mask)
				require.InEpsilon(t, want, float64(loss), 1e-6, name)
				cols := n / shape[0]
				check := func(what string, vals []float64, got []float32) {
					for i := range vals {
						if mask != nil && mask[i/cols] == 0 {
							require.Zero(t, got[i], "%s: d%s[%d] of a masked row", name, what, i)
							continue
						}
						h := 1e-6 * math.Max(1, math.Abs(vals[i]))
						v := vals[i]
						vals[i] = v + h
						hi := lossRef(c, shape[0], xs, ys, mask)
						vals[i] = v - h
						lo := lossRef(c, shape[0], xs, ys, mask)
						vals[i] = v
						fd := (hi - lo) / (2 * h)
						require.InDelta(t, fd, float64(got[i]), 1e-6+1e-5*math.Abs(fd), "%s: d%s[%d]", name, what, i)
					}
				}
				check("pred", xs, dx)
				if c.target {
					check("target", ys, dy)
				}
			}
		}
	}
}

// TestMaskedLossEqualsUnpaddedLoss: a batch padded with rows the mask
// leaves out (even rows of NaN) has the loss and gradients of the real
// rows alone, bit for bit.
func TestMaskedLossEqualsUnpaddedLoss(t *testing.T) {
	for _, c := range lossCases() {
		rng := rand.New(rand.NewPCG(5, 9))
		const real, padded, cols = 5, 8, 3
		x, y := make([]float32, padded*cols), make([]float32, padded*cols)
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.Float64())
			if i >= real*cols {
				x[i], y[i] = float32(math.NaN()), float32(math.NaN())
			}
		}
		mask := make([]float32, padded)
		for r := range real {
			mask[r] = 1
		}
		l1, dx1, dy1 := lossRun(t, c, graph.Shape{padded, cols}, x, y, mask)
		l0, dx0, dy0 := lossRun(t, c, graph.Shape{real, cols}, x[:real*cols], y[:real*cols], nil)
		require.Equal(t, l0, l1, c.name)
		require.Equal(t, dx0, dx1[:real*cols], c.name)
		require.Equal(t, make([]float32, (padded-real)*cols), dx1[real*cols:], c.name)
		if c.target {
			require.Equal(t, dy0, dy1[:real*cols], c.name)
		}
		// A mask of zeros: loss 0, no gradient.
		l, dx, _ := lossRun(t, c, graph.Shape{padded, cols}, x, y, make([]float32, padded))
		require.Zero(t, l, c.name)
		require.Equal(t, make([]float32, padded*cols), dx, c.name)
	}
}

// TestBCEWithLogitsLargeLogits: no overflow at logits of ±100 (the
// textbook form gives log 0 there).
func TestBCEWithLogitsLargeLogits(t *testing.T) {
	c := lossCases()[4]
	l, dx, _ := lossRun(t, c, graph.Shape{2}, []float32{100, -100}, []float32{0, 0}, nil)
	require.InEpsilon(t, 50.0, float64(l), 1e-6) // (100 + 0)/2
	require.InDelta(t, 0.5, float64(dx[0]), 1e-7)
	require.InDelta(t, 0, float64(dx[1]), 1e-7)
}

// TestLossBadInput: a target of another shape (the [n 1] against [n]
// that numpy would broadcast), a mask of the wrong length, a scalar
// prediction with a mask and a Huber delta of 0 are refused when the node
// is built, naming the nodes; a negative mask weight fails the run,
// naming the mask and row.
func TestLossBadInput(t *testing.T) {
	for _, c := range []struct {
		build func(g *graph.Graph) *graph.Node
		want  []string
	}{
		{func(g *graph.Graph) *graph.Node {
			return ops.MSELoss(g.Input("pred", graph.Float32, 4, 1), g.Input("y", graph.Float32, 4), nil)
		}, []string{`"y" [4]`, `"pred" [4 1]`, "never broadcast"}},
		{func(g *graph.Graph) *graph.Node {
			return ops.L1Loss(g.Input("pred", graph.Float32, 4, 2), g.Input("y", graph.Float32, 4, 2), g.Input("mask", graph.Float32, 3))
		}, []string{`mask "mask" [3]`, "want [4]"}},
		{func(g *graph.Graph) *graph.Node {
			return ops.MaskedMean(g.Input("x", graph.Float32), g.Input("mask", graph.Float32, 1))
		}, []string{"scalar"}},
		{func(g *graph.Graph) *graph.Node {
			return ops.HuberLoss(g.Input("pred", graph.Float32, 4), g.Input("y", graph.Float32, 4), nil, 0)
		}, []string{"delta 0"}},
		{func(g *graph.Graph) *graph.Node {
			return ops.BCEWithLogits(g.Input("pred", graph.Float32, 4), g.Input("y", graph.Int32, 4), nil)
		}, []string{`"y" is int32`}},
	} {
		g := graph.New()
		c.build(g)
		err := g.Err()
		require.Error(t, err)
		for _, w := range c.want {
			require.Contains(t, err.Error(), w)
		}
	}
	g := graph.New()
	x, m := g.Input("x", graph.Float32, 3), g.Input("rowmask", graph.Float32, 3)
	l := ops.MaskedMean(x, m)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, l)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, []float32{1, 2, 3}))
	require.NoError(t, p.FeedFloat32(m, []float32{1, -1, 1}))
	err = p.Run()
	require.ErrorContains(t, err, `mask "rowmask" row 1 is -1`)
	require.NoError(t, p.FeedFloat32(m, []float32{1, 0.5, 1}))
	require.NoError(t, p.Run())
	v, err := p.Scalar(l)
	require.NoError(t, err)
	require.InEpsilon(t, (1+1+3)/2.5, float64(v), 1e-7) // weights weight their rows
}
