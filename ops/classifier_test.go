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

// ClassifierCrossEntropy and ClassifierLoss are ScaledMatMul,
// CrossEntropy, CrossEntropyGrad and Quantize, bit for bit: the loss,
// the gradient's codes, the recorded amax and so the next step's scale,
// over steps, with and without a bias, ignored rows, one band of rows
// and several (the last one short), rows split over the workers.
func TestClassifierCrossEntropyMatchesUnfused(t *testing.T) {
	for _, sz := range [][3]int{{5, 48, 32}, {600, 1040, 64}} {
		for _, withBias := range []bool{false, true} {
			rows, classes, k := sz[0], sz[1], sz[2]
			g := graph.New()
			x := g.Input("x", graph.Float32, rows, k)
			w := g.Input("w", graph.Float32, classes, k)
			y := g.Input("labels", graph.Int32, rows)
			dl := g.Input("dloss", graph.Float32)
			var bias *graph.Node
			if withBias {
				bias = g.Input("bias", graph.Float32, classes)
			}
			rec := recipe.TE{AmaxHistoryLen: 4, Format: recipe.Hybrid}
			cast := func(name string, n *graph.Node) *graph.Node {
				return ops.QuantizeNamed(name, n, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E4M3}, Meta: rec.NewMeta(false)})
			}
			xq, wq := cast("xq", x), cast("wq", w)
			mk := func() (ops.QuantizeConfig, *fp8.Meta) {
				meta := rec.NewMeta(true)
				return ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E5M2}, Meta: meta, Tensor: fp8.RoleGradOutput}, meta
			}
			qu, mu := mk()
			qf, mf := mk()
			logits := ops.ScaledMatMul("logits", xq, wq, false, true, bias)
			loss := ops.CrossEntropy(logits, y)
			unfused := ops.CrossEntropyGradQuantize("ce/fp8", logits, y, dl, qu)
			fused := ops.ClassifierCrossEntropy("cls", xq, wq, bias, y, dl, qf)
			floss := ops.ClassifierLoss("cls/loss", fused, y)
			require.NoError(t, g.Err())
			p, err := graph.Compile(g, nil, graph.Options{Training: true}, loss, unfused, fused, floss)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(rows), 6))
			fill := func(n *graph.Node, size int, sd float64) {
				v := make([]float32, size)
				for i := range v {
					v[i] = float32(rng.NormFloat64() * sd)
				}
				require.NoError(t, p.FeedFloat32(n, v))
			}
			for step := 0; step < 4; step++ {
				fill(x, rows*k, 2)
				fill(w, classes*k, 0.5)
				if withBias {
					fill(bias, classes, 1)
				}
				labels := make([]int32, rows)
				for i := range labels {
					labels[i] = int32(rng.IntN(classes))
					if i%7 == 3 {
						labels[i] = ops.IgnoreLabel
					}
				}
				require.NoError(t, p.FeedInt32(y, labels))
				require.NoError(t, p.FeedFloat32(dl, []float32{[]float32{1, 0.5}[step%2]}))
				require.NoError(t, p.Run())
				value := func(n *graph.Node) *graph.Value {
					v, err := p.Value(n)
					require.NoError(t, err)
					return v
				}
				require.Equal(t, math.Float32bits(value(loss).F32[0]), math.Float32bits(value(floss).F32[0]), "loss, step %d, %v", step, sz)
				require.Equal(t, value(unfused).U8, value(fused).U8, "codes, step %d, %v bias %v", step, sz, withBias)
				require.Equal(t, math.Float32bits(mu.Scale), math.Float32bits(mf.Scale), "scale after step %d", step)
				require.Equal(t, mu.History, mf.History, "amax history after step %d", step)
			}
			require.NotEqual(t, float32(1), mf.Scale, "the scale moved: the amax was recorded")
		}
	}
}

// A bad label is an error naming it, other gradient scalings and
// mismatched inputs are refused when the node is built, and operands
// with more than one scale when it is compiled.
func TestClassifierCrossEntropyRefuses(t *testing.T) {
	rec := recipe.TE{AmaxHistoryLen: 4, Format: recipe.Hybrid}
	delayed, current := fp8.Quantizer{Kind: fp8.DelayedScaling}, fp8.Quantizer{Kind: fp8.CurrentScaling}
	axiswise := fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true}
	build := func(xScaling, gradScaling fp8.Quantizer, labelRows int) (*graph.Graph, *graph.Node, [4]*graph.Node) {
		g := graph.New()
		x := g.Input("x", graph.Float32, 4, 16)
		w := g.Input("w", graph.Float32, 8, 16)
		y := g.Input("labels", graph.Int32, labelRows)
		dl := g.Input("dloss", graph.Float32)
		xq := ops.QuantizeNamed("xq", x, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: xScaling.Kind, Axiswise: xScaling.Axiswise, Format: fp8.E4M3}, Meta: rec.NewMeta(false), Axis: 1})
		wq := ops.QuantizeNamed("wq", w, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E4M3}, Meta: rec.NewMeta(false)})
		q := ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: gradScaling.Kind, Axiswise: gradScaling.Axiswise, Format: fp8.E5M2}, Meta: rec.NewMeta(true)}
		fused := ops.ClassifierCrossEntropy("cls", xq, wq, nil, y, dl, q)
		return g, ops.ClassifierLoss("cls/loss", fused, y), [4]*graph.Node{x, w, y, dl}
	}
	g, _, _ := build(delayed, current, 4)
	require.ErrorContains(t, g.Err(), "delayed tensorwise")
	g, _, _ = build(delayed, delayed, 5)
	require.ErrorContains(t, g.Err(), "labels")
	g, loss, _ := build(axiswise, delayed, 4)
	require.NoError(t, g.Err())
	_, err := graph.Compile(g, nil, graph.Options{Training: true}, loss)
	require.ErrorContains(t, err, "tensorwise")
	g, loss, in := build(delayed, delayed, 4)
	p, err := graph.Compile(g, nil, graph.Options{Training: true}, loss)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(in[0], make([]float32, 64)))
	require.NoError(t, p.FeedFloat32(in[1], make([]float32, 128)))
	require.NoError(t, p.FeedInt32(in[2], []int32{1, 2, 9, 0}))
	require.NoError(t, p.FeedFloat32(in[3], []float32{1}))
	require.ErrorContains(t, p.Run(), "label 9 at row 2")
	// A batch of only ignored rows: loss 0, as CrossEntropy's.
	ig := int32(ops.IgnoreLabel)
	require.NoError(t, p.FeedInt32(in[2], []int32{ig, ig, ig, ig}))
	require.NoError(t, p.Run())
	l, err := p.Scalar(loss)
	require.NoError(t, err)
	require.Equal(t, float32(0), l)
}
