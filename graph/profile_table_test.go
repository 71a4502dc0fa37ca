package graph_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// TestProfileTable: the table's figures are per step and shares of the
// step, op types in decreasing time with the step end among them.
func TestProfileTable(t *testing.T) {
	pr := graph.Profile{Steps: 2, Total: 8 * time.Millisecond, StepEnd: 2 * time.Millisecond,
		Ops:    []graph.ProfileRow{{Name: "MatMul", Calls: 4, Total: 5 * time.Millisecond}, {Name: "ReLU", Calls: 2, Total: time.Millisecond}},
		Layers: []graph.ProfileRow{{Name: "fc1", Calls: 6, Total: 6 * time.Millisecond}}}
	var b bytes.Buffer
	pr.WriteTable(&b, 10)
	out := b.String()
	require.Contains(t, out, "profile: 2 steps, 4.000 ms/step")
	require.Regexp(t, `MatMul +4 +2\.500 +62\.5%`, out)
	require.Regexp(t, `ReLU +2 +0\.500 +12\.5%`, out)
	require.Regexp(t, `fc1 +6 +3\.000 +75\.0%`, out)
	m, s, r := strings.Index(out, "MatMul"), strings.Index(out, "(step end"), strings.Index(out, "ReLU")
	require.True(t, m < s && s < r, "by decreasing time:\n%s", out)
	b.Reset()
	pr.WriteTable(&b, 1)
	require.Contains(t, b.String(), "… 2 more")
	require.Equal(t, "", graph.LayerOf("/relu"))
}

// TestProfiledRunsCountSteps: a profiled program counts its steps as an
// unprofiled one does.
func TestProfiledRunsCountSteps(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4)
	y := ops.ReLU(x)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, []float32{1, -1, 2, -2}))
	p.SetProfiling(true)
	require.NoError(t, p.Run())
	require.NoError(t, p.Run())
	require.Equal(t, int64(2), p.Step())
	require.Equal(t, int64(2), p.Profile().Steps)
}
