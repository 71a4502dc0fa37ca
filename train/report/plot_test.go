package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWritePNG(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loss.png")
	losses := make([]float32, 200)
	for i := range losses {
		losses[i] = float32(2.3 * math.Exp(-float64(i)/50))
	}
	require.NoError(t, PlotLosses(path, "title", "loss", 10, []Curve{{Label: "fp32", Losses: losses}, {Label: "fp8", Losses: losses[:150]}}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "not a PNG")
	left, err := filepath.Glob(filepath.Join(dir, ".plot-*"))
	require.NoError(t, err)
	require.Empty(t, left, "temporary file left behind")
}

// A one-step run or a flat curve used to make gonum/plot widen the axis
// to [0, 2], which a log scale cannot take.
func TestWriteFlatCurve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flat.png")
	require.NoError(t, PlotLosses(path, "t", "y", 50, []Curve{{Label: "one step", Losses: []float32{1}}}))
	require.NoError(t, PlotLosses(path, "t", "y", 3, []Curve{{Label: "flat", Losses: []float32{0.5, 0.5, 0.5}}}))
}

func TestWriteRefusesBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loss.png")
	nan := float32(math.NaN())
	for _, c := range []struct {
		window int
		curves []Curve
		want   string
	}{
		{0, []Curve{{Label: "a", Losses: []float32{1}}}, "window 0"},
		{5, nil, "no curves"},
		{5, []Curve{{Label: "fp8", Losses: []float32{1, nan}}}, `"fp8" step 1`},
		{5, []Curve{{Label: "fp32", Losses: []float32{0}}}, `"fp32" step 0`},
		{5, []Curve{{Label: "x", Losses: []float32{float32(math.Inf(1))}}}, `"x" step 0`},
	} {
		require.ErrorContains(t, PlotLosses(path, "t", "y", c.window, c.curves), c.want)
	}
	_, err := os.Stat(path)
	require.True(t, os.IsNotExist(err), "a refused plot must not write the file")
	require.Error(t, PlotLosses(filepath.Join(t.TempDir(), "missing", "loss.png"), "t", "y", 1, []Curve{{Label: "a", Losses: []float32{1}}}))
}

// TestDecadeTicksLabelEveryDecade: a log axis from 1e-4 to 20 labels each
// power of ten in range; one within a decade still gets two labels or more.
func TestDecadeTicksLabelEveryDecade(t *testing.T) {
	labels := func(min, max float64) []string {
		var out []string
		for _, tk := range (decadeTicks{}).Ticks(min, max) {
			if tk.Label != "" && tk.Value >= min && tk.Value <= max {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	require.Equal(t, []string{"0.0001", "0.001", "0.01", "0.1", "1", "10"}, labels(1e-4, 20))
	require.Equal(t, []string{"2", "5"}, labels(1.5, 6))
	require.GreaterOrEqual(t, len(labels(2.1, 2.9)), 2)
	var svg bytes.Buffer
	require.NoError(t, PanelsSVG(&svg, []Panel{{Title: "activation", LogY: true, Lines: []Line{{Label: "amax", X: []float64{0, 1}, Y: []float64{10, 12}}}},
		{Title: "gradient", LogY: true, Lines: []Line{{Label: "amax", X: []float64{0, 1}, Y: []float64{1e-3, 2e-3}}}}}))
	require.Contains(t, svg.String(), "activation")
	require.Contains(t, svg.String(), "0.001")
	require.Error(t, PanelsSVG(&svg, nil))
}
