package ops_test

import (
	"math"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// ceRun compiles CrossEntropy over logits [rows, 5] and returns the loss
// and the gradient of the logits.
func ceRun(t *testing.T, logits []float32, labels []int32) (float32, []float32) {
	t.Helper()
	g := graph.New()
	rows := len(labels)
	x := g.Param("x", rows, 5)
	y := g.Input("y", graph.Int32, rows)
	loss := ops.CrossEntropy(x, y)
	grads, err := graph.Grad(loss, x)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("x", logits, rows, 5))
	p, err := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0])
	require.NoError(t, err)
	require.NoError(t, p.FeedInt32(y, labels))
	require.NoError(t, p.Run())
	l, err := p.Scalar(loss)
	require.NoError(t, err)
	return l, append([]float32(nil), p.Float32(grads[0])...)
}

// TestCrossEntropyIgnoresLabel: rows labelled IgnoreLabel leave the mean
// and get a zero gradient; the other rows' loss and gradient equal those
// of the batch without them, computed in float64.
func TestCrossEntropyIgnoresLabel(t *testing.T) {
	logits := []float32{1, 2, 3, 4, 5, -1, 0.5, 2, 0, 1, 3, 3, 3, 3, 3, 0.1, 0.2, 0.3, 0.4, 9}
	labels := []int32{4, ops.IgnoreLabel, 2, ops.IgnoreLabel}
	loss, grad := ceRun(t, logits, labels)
	var want float64
	kept := 0
	for r, lab := range labels {
		row := logits[r*5 : r*5+5]
		if lab == ops.IgnoreLabel {
			for _, g := range grad[r*5 : r*5+5] {
				require.Zero(t, g)
			}
			continue
		}
		kept++
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v))
		}
		want += math.Log(sum) - float64(row[lab])
	}
	want /= float64(kept)
	require.InDelta(t, want, float64(loss), 1e-6)
	// The same rows alone give the same loss and gradient rows.
	sub := append(append([]float32(nil), logits[0:5]...), logits[10:15]...)
	l2, g2 := ceRun(t, sub, []int32{4, 2})
	require.Equal(t, l2, loss)
	require.Equal(t, g2[0:5], grad[0:5])
	require.Equal(t, g2[5:10], grad[10:15])
	// Only ignored rows: loss 0, no gradient.
	l0, g0 := ceRun(t, logits[:10], []int32{ops.IgnoreLabel, ops.IgnoreLabel})
	require.Zero(t, l0)
	for _, g := range g0 {
		require.Zero(t, g)
	}
	// Other negative labels are still refused.
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 5)
	y := g.Input("y", graph.Int32, 2)
	loss2 := ops.CrossEntropy(x, y)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, loss2)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, logits[:10]))
	require.NoError(t, p.FeedInt32(y, []int32{-1, 0}))
	require.ErrorContains(t, p.Run(), "label -1 at row 0")
}
