package graph_test

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// TestScalarSaysWhatIsWrong: a node the program does not output, and an
// output that is not one float32 value, are told apart.
func TestScalarSaysWhatIsWrong(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	s := ops.Sum(x)
	y := ops.Scale(x, 2)
	p, err := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, []float32{1, 2, 3, 4, 5, 6}))
	require.NoError(t, p.Run())
	_, err = p.Scalar(s)
	require.ErrorContains(t, err, "is not an output of this program")
	_, err = p.Scalar(y)
	require.ErrorContains(t, err, "not one float32 value")
	q, err := graph.Compile(g, graph.NewStore(), graph.Options{}, s)
	require.NoError(t, err)
	require.NoError(t, q.FeedFloat32(x, []float32{1, 2, 3, 4, 5, 6}))
	require.NoError(t, q.Run())
	v, err := q.Scalar(s)
	require.NoError(t, err)
	require.Equal(t, float32(21), v)
}
