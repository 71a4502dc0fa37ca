package passes_test

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/stretchr/testify/require"
)

// TestCommutativePatterns: one pattern with Commutative matches either
// operand order; without it only the order written.
func TestCommutativePatterns(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4)
	y := g.Input("y", graph.Float32, 4)
	a := ops.Add(ops.Neg(x), y) // Neg first
	b := ops.Add(y, ops.Neg(x)) // Neg second
	p := &passes.Pattern{Kind: ops.KindAdd, Inputs: []*passes.Pattern{{Kind: ops.KindNeg, Inputs: []*passes.Pattern{{Bind: "x"}}}, {Bind: "other"}}}
	m, ok := p.Match(a)
	require.True(t, ok)
	require.Equal(t, x, m["x"])
	require.Equal(t, y, m["other"])
	_, ok = p.Match(b)
	require.False(t, ok, "not commutative: the order written only")
	p.Commutative = true
	m, ok = p.Match(b)
	require.True(t, ok)
	require.Equal(t, x, m["x"])
	require.Equal(t, y, m["other"])
	// A failed first try leaves no bindings behind.
	q := &passes.Pattern{Kind: ops.KindAdd, Commutative: true, Inputs: []*passes.Pattern{
		{Bind: "first", Where: func(n *graph.Node) bool { return n == y }}, {Kind: ops.KindNeg, Bind: "neg"}}}
	m, ok = q.Match(a)
	require.True(t, ok)
	require.Equal(t, y, m["first"])
	require.Len(t, m, 2)
	_, ok = q.Match(ops.Add(x, y))
	require.False(t, ok)
}
