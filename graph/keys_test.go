package graph_test

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/stretchr/testify/require"
)

// TestTypedKeys: what is stored under a key comes back with its type,
// only through that key.
func TestTypedKeys(t *testing.T) {
	g := graph.New()
	a, b := graph.NewKey[[]int]("a"), graph.NewKey[[]int]("a")
	_, ok := graph.Annotation(g, a)
	require.False(t, ok)
	graph.Annotate(g, a, []int{1, 2})
	got, ok := graph.Annotation(g, a)
	require.True(t, ok)
	require.Equal(t, []int{1, 2}, got)
	_, ok = graph.Annotation(g, b)
	require.False(t, ok, "a key of the same name is another key")
	require.Equal(t, "a", a.String())

	v := &graph.Value{}
	k, k2 := graph.NewValueKey[*int]("scales"), graph.NewValueKey[string]("other")
	_, ok = graph.Meta(v, k)
	require.False(t, ok)
	x, y := 1, 2
	graph.SetMeta(v, k, &x)
	graph.SetMeta(v, k2, "s")
	graph.SetMeta(v, k, &y)
	p, ok := graph.Meta(v, k)
	require.True(t, ok)
	require.Equal(t, 2, *p)
	s, ok := graph.Meta(v, k2)
	require.True(t, ok)
	require.Equal(t, "s", s)
	require.Equal(t, "scales", k.String())
}
