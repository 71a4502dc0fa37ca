package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// FakeQuant is Dequantize(Quantize(x·s))/s with s the current scale of
// x, value for value, and passes the gradient straight through.
func TestFakeQuantValues(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 3, 4)
	y := ops.FakeQuant("fq", x, fp8.E4M3)
	p, err := graph.Compile(g, nil, graph.Options{}, y)
	require.NoError(t, err)
	in := []float32{0.1, -3, 7.5, 1e-6, 2, 2.2, -0.5, 448, 3, 0, -1, 100}
	require.NoError(t, p.FeedFloat32(x, in))
	require.NoError(t, p.Run())
	s := fp8.CurrentScale(448, fp8.E4M3, false)
	for i, v := range in {
		want := fp8.E4M3.Decode(fp8.E4M3.Encode(v*s)) * (1 / s)
		require.Equal(t, want, p.Float32(y)[i], "%v", v)
	}
	grads, err := graph.Grad(ops.Sum(y), x)
	require.NoError(t, err)
	gp, err := graph.Compile(g, nil, graph.Options{Training: true}, grads...)
	require.NoError(t, err)
	require.NoError(t, gp.Run())
	for _, v := range gp.Float32(grads[0]) {
		require.Equal(t, float32(1), v, "straight through")
	}
	ops.FakeQuant("bad", g.Input("i", graph.Int32, 2), fp8.E4M3)
	require.Error(t, g.Err())
}

// FP8TensorStats against a direct computation through package fp8 (the
// cast redone with its slice functions, dequantized, compared with the
// source): counts exact, mse to 1e-6 relative, for both formats and
// every scaling — delayed, current, rowwise (both axes), MXFP8 (both
// axes).
func TestFP8TensorStatsMatchDirect(t *testing.T) {
	const rows, cols = 24, 40
	rng := rand.New(rand.NewPCG(8, 8))
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(30)-20)))
	}
	src[3], src[9] = 1e30, -1e-30 // one saturates under a fixed scale, one flushes
	names := []string{"underflows%", "flushed%", "overflows%", "scale_inv_min", "scale_inv_max", "mse"}
	for _, f := range []fp8.Format{fp8.E4M3, fp8.E5M2} {
		for _, qc := range []ops.QuantizeConfig{
			{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling}}, {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling}}, {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true}, Axis: 1}, {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true}, Axis: 0},
			{Quantizer: fp8.Quantizer{Kind: fp8.MXFP8Blocks}, Axis: 1}, {Quantizer: fp8.Quantizer{Kind: fp8.MXFP8Blocks}, Axis: 0},
		} {
			qc.Format = f
			if qc.Kind == fp8.DelayedScaling {
				qc.Meta = fp8.NewMeta(f, 4, 0, fp8.MostRecent, 1)
				qc.Meta.Scale, qc.Meta.ScaleInv = 64, 1.0/64
			}
			// The direct computation: codes and per-element inverse
			// scales from package fp8, then the definitions.
			codes := make([]uint8, len(src))
			inv := make([]float32, len(src))
			var invs []float32
			switch {
			case qc.Kind == fp8.DelayedScaling || qc.Kind == fp8.CurrentScaling && !qc.Axiswise:
				s := fp8.CurrentScale(fp8.Amax(src), f, false)
				if qc.Kind == fp8.DelayedScaling {
					s = qc.Meta.Scale
				}
				_, err := fp8.Quantize(codes, src, f, s)
				require.NoError(t, err)
				for i := range inv {
					inv[i] = 1 / s
				}
				invs = []float32{1 / s}
			case qc.Kind == fp8.CurrentScaling:
				outer := map[int]int{0: cols, 1: rows}[qc.Axis]
				sc := make([]float32, outer)
				require.NoError(t, fp8.QuantizeAxiswise(codes, sc, nil, src, rows, cols, qc.Axis, f, false))
				for i := range inv {
					k := i / cols
					if qc.Axis == 0 {
						k = i % cols
					}
					inv[i] = 1 / sc[k]
				}
				for _, s := range sc {
					invs = append(invs, 1/s)
				}
			default:
				bs := make([]fp8.E8M0, fp8.MXScaleCount(rows, cols, qc.Axis))
				_, err := fp8.QuantizeMX(codes, bs, src, rows, cols, qc.Axis, f, fp8.ExpRoundUp)
				require.NoError(t, err)
				for i := range inv {
					r, c := i/cols, i%cols
					k := r*((cols+31)/32) + c/32
					if qc.Axis == 0 {
						k = c*((rows+31)/32) + r/32
					}
					inv[i] = bs[k].Float32()
				}
				for _, s := range bs {
					invs = append(invs, s.Float32())
				}
			}
			var under, flushed, over int
			var sq float64
			for i, x := range src {
				dq := f.Decode(codes[i]) * inv[i]
				if codes[i] == 0x00 { // Transformer Engine's underflow: the code 0x00
					under++
				}
				if x != 0 && dq == 0 {
					flushed++
				}
				lim := float64(f.Max()) * float64(inv[i])
				if math.Abs(float64(x)) > lim && math.Abs(float64(dq)) == lim {
					over++
				}
				sq += (float64(dq) - float64(x)) * (float64(dq) - float64(x))
			}
			imin, imax := math.Inf(1), math.Inf(-1)
			for _, s := range invs {
				imin, imax = math.Min(imin, float64(s)), math.Max(imax, float64(s))
			}
			want := []float64{100 * float64(under) / float64(len(src)), 100 * float64(flushed) / float64(len(src)), 100 * float64(over) / float64(len(src)), imin, imax, sq / float64(len(src))}

			g := graph.New()
			x := g.Input("x", graph.Float32, rows, cols)
			q := ops.Quantize(x, qc)
			dir := t.TempDir()
			log, err := inspect.OpenLog(dir, 0)
			require.NoError(t, err)
			st := ops.FP8TensorStats("s", x, q, ops.StatsConfig{Layer: "l", Tensor: inspect.Activation, Log: log,
				Requests: []inspect.StatRequest{{Tensor: inspect.Activation, Stats: names, Schedule: inspect.Schedule{Freq: 1, EndStep: -1}}}})
			p, err := graph.Compile(g, nil, graph.Options{}, st)
			require.NoError(t, err)
			require.NoError(t, p.FeedFloat32(x, src))
			require.NoError(t, p.Run())
			require.NoError(t, log.Close())
			stats, err := inspect.ReadStats(dir)
			require.NoError(t, err)
			require.Len(t, stats, len(names))
			what := fmt.Sprintf("%v %v axis %d", f, qc.Quantizer, qc.Axis)
			for i, s := range stats {
				if i < 3 {
					require.Equal(t, want[i], s.Value, "%s %s (counts exact)", what, s.Stat)
				} else {
					require.InDelta(t, want[i], s.Value, 1e-6*math.Abs(want[i]), "%s %s", what, s.Stat)
				}
			}
			if qc.Kind == fp8.DelayedScaling {
				require.Positive(t, want[1], "%s: the flushed value", what)
				require.Positive(t, want[2], "%s: the saturated value", what)
			}
		}
	}
}
