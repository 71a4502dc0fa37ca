package ops_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
)

// CrossEntropyGradQuantize is CrossEntropyGrad then Quantize, bit for
// bit: codes, the scales the GEMMs read, the recorded amax and so the
// next step's scale, over steps, with ignored rows, rows split over the
// workers, and wild logits.
func TestCrossEntropyGradQuantizeMatchesUnfused(t *testing.T) {
	for _, sz := range [][2]int{{3, 5}, {96, 1000}} {
		rows, classes := sz[0], sz[1]
		g := graph.New()
		x := g.Input("logits", graph.Float32, rows, classes)
		y := g.Input("labels", graph.Int32, rows)
		grads, err := graph.Grad(ops.CrossEntropy(x, y), x)
		require.NoError(t, err)
		ceg := grads[0]
		require.True(t, ceg.Is(ops.KindCrossEntropyGrad))
		mk := func() (ops.QuantizeConfig, *fp8.Meta) {
			meta := recipe.TE{AmaxHistoryLen: 4, Format: recipe.Hybrid}.NewMeta(true)
			return ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E5M2}, Meta: meta, Tensor: fp8.RoleGradOutput}, meta
		}
		qu, mu := mk()
		qf, mf := mk()
		unfused := ops.QuantizeNamed("ce/q", ceg, qu)
		fused := ops.CrossEntropyGradQuantize("ce/fp8", ceg.Input(0), ceg.Input(1), ceg.Input(2), qf)
		require.NoError(t, g.Err())
		p, err := graph.Compile(g, nil, graph.Options{Training: true}, unfused, fused)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(5, 6))
		for step := 0; step < 4; step++ {
			logits := make([]float32, rows*classes)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * 8)
			}
			labels := make([]int32, rows)
			for i := range labels {
				labels[i] = int32(rng.IntN(classes))
				if i%7 == 3 {
					labels[i] = ops.IgnoreLabel
				}
			}
			require.NoError(t, p.FeedFloat32(x, logits))
			require.NoError(t, p.FeedInt32(y, labels))
			require.NoError(t, p.Run())
			vu, err := p.Value(unfused)
			require.NoError(t, err)
			vf, err := p.Value(fused)
			require.NoError(t, err)
			require.Equal(t, vu.U8, vf.U8, "codes, step %d, %dx%d", step, rows, classes)
			require.Equal(t, math.Float32bits(mu.Scale), math.Float32bits(mf.Scale), "scale after step %d", step)
			require.Equal(t, mu.History, mf.History, "amax history after step %d", step)
			require.NotEqual(t, float32(1), mf.Scale, "the scale moved: the amax was recorded")
		}
	}
}

// A bad label is the same error as CrossEntropyGrad's, and other
// scalings are refused when the node is built.
func TestCrossEntropyGradQuantizeRefuses(t *testing.T) {
	g := graph.New()
	x := g.Input("logits", graph.Float32, 2, 4)
	y := g.Input("labels", graph.Int32, 2)
	dl := g.Input("dloss", graph.Float32)
	ops.CrossEntropyGradQuantize("bad", x, y, dl, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E5M2}})
	require.ErrorContains(t, g.Err(), "delayed tensorwise")
	g = graph.New()
	x = g.Input("logits", graph.Float32, 2, 4)
	y = g.Input("labels", graph.Int32, 2)
	dl = g.Input("dloss", graph.Float32)
	meta := recipe.TE{AmaxHistoryLen: 4, Format: recipe.Hybrid}.NewMeta(true)
	out := ops.CrossEntropyGradQuantize("ce", x, y, dl, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E5M2}, Meta: meta})
	p, err := graph.Compile(g, nil, graph.Options{Training: true}, out)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, make([]float32, 8)))
	require.NoError(t, p.FeedInt32(y, []int32{1, 9}))
	require.NoError(t, p.FeedFloat32(dl, []float32{1}))
	require.ErrorContains(t, p.Run(), "9")
}

// In place over its logits (a planned buffer nothing reads later), the
// FP8 gradient is the same as in a buffer of its own, and the arena
// holds the logits alone.
func TestCrossEntropyGradQuantizeInPlace(t *testing.T) {
	const rows, classes = 64, 1024 // above the parallel threshold
	run := func(inPlace bool) ([]uint8, int) {
		g := graph.New()
		x := g.Input("x", graph.Float32, rows, classes)
		y := g.Input("labels", graph.Int32, rows)
		dl := g.Input("dloss", graph.Float32)
		logits := ops.Neg(x)
		meta := recipe.TE{AmaxHistoryLen: 4, Format: recipe.Hybrid}.NewMeta(true)
		q := ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E5M2}, Meta: meta, Tensor: fp8.RoleGradOutput}
		out := ops.CrossEntropyGradQuantize("ce/fp8", logits, y, dl, q)
		outs := []*graph.Node{out}
		if !inPlace {
			outs = append(outs, logits) // an output: the logits stay
		}
		p, err := graph.Compile(g, nil, graph.Options{Training: true}, outs...)
		require.NoError(t, err)
		in := make([]float32, rows*classes)
		rng := rand.New(rand.NewPCG(7, 8))
		for i := range in {
			in[i] = float32(rng.NormFloat64() * 4)
		}
		labels := make([]int32, rows)
		for i := range labels {
			labels[i] = int32(rng.IntN(classes))
		}
		require.NoError(t, p.FeedFloat32(x, in))
		require.NoError(t, p.FeedInt32(y, labels))
		require.NoError(t, p.FeedFloat32(dl, []float32{1}))
		require.NoError(t, p.Run())
		v, err := p.Value(out)
		require.NoError(t, err)
		return append([]uint8(nil), v.U8...), p.Stats().ArenaBytes
	}
	got, arena := run(true)
	want, separate := run(false)
	require.Equal(t, want, got)
	require.Equal(t, 4*rows*classes, arena, "the codes in the logits' bytes")
	require.Equal(t, 5*rows*classes, separate, "logits kept as an output: they and the codes coexist")
}
