package passes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestPassErrorsDoNotStutter: a pass whose error already speaks for
// passes is not prefixed again; another pass's error is named.
func TestPassErrorsDoNotStutter(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 16)
	w := g.Param("fc.weight", 16, 16)
	y := ops.Linear("fc", x, w, nil)
	store := graph.NewStore()
	require.NoError(t, store.Init(g, func(*graph.Node, []float32) {}))
	_, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{Margin: -1}, EvalOutputs: []*graph.Node{y}})
	require.Error(t, err)
	require.Equal(t, 1, strings.Count(err.Error(), "passes:"), err.Error())

	mine := errors.New("my pass failed")
	_, err = passes.Prepare(g, store, passes.Config{EvalOutputs: []*graph.Node{y},
		Passes: []passes.Pass{{Name: "Mine", Run: func(*graph.Graph) (string, error) { return "", mine }}}})
	require.ErrorIs(t, err, mine)
	require.EqualError(t, err, "passes: Mine: my pass failed")
}

// TestFloat32ReportIsEmpty: a run that converted nothing prints no
// conversion table.
func TestFloat32ReportIsEmpty(t *testing.T) {
	require.Equal(t, "", passes.Report{}.String())
	notes := passes.Report{Notes: []string{"mlp.fc1: statistics by debug section \"report\""}}.String()
	require.NotContains(t, notes, "FP8 conversion")
	require.Contains(t, notes, "no conversion (float32)")
	require.Contains(t, passes.Report{Backend: "te"}.String(), "FP8 conversion (te backend)")
	require.Contains(t, passes.Report{Backend: "te", Recipe: "block/E4M3/x1w2g1"}.String(), "FP8 conversion (recipe block/E4M3/x1w2g1, te backend)")
}
