package graph_test

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// The tests in this file pin behaviours that mutation testing found
// unguarded: each fails when the behaviour it names changes.

// Verify finds a cycle a rewrite made, and Compile refuses the graph.
func TestVerifyFindsACycle(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	a := ops.Neg(x)
	b := ops.Neg(a)
	c := ops.Neg(b)
	require.NoError(t, graph.Verify(g))
	require.NoError(t, g.ReplaceUses(a, c)) // b now reads c, which reads b
	err := graph.Verify(g)
	require.ErrorContains(t, err, "verify: cycle through node")
	_, err = graph.Compile(g, nil, graph.Options{}, c)
	require.Error(t, err)
}

// The memory plan of a chain x → a → b → c reuses a's buffer for c: the
// arena holds two 32-element buffers; one buffer per node would take
// four; the input has its own.
func TestArenaOfAChain(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 8)
	c := ops.Neg(ops.Neg(ops.Neg(x)))
	p, err := graph.Compile(g, nil, graph.Options{}, c)
	require.NoError(t, err)
	st := p.Stats()
	require.Equal(t, 2*32*4, st.ArenaBytes)
	require.Equal(t, 4*32*4, st.NaiveBytes)
	require.Equal(t, 32*4, st.InputBytes)
	in := make([]float32, 32)
	for i := range in {
		in[i] = float32(i)
	}
	require.NoError(t, p.FeedFloat32(x, in))
	require.NoError(t, p.Run())
	for i, v := range p.Float32(c) {
		require.Equal(t, -float32(i), v)
	}
}

// A reshape is a view: it shares its input's buffer, takes no arena
// space of its own, and its consumers read the same values.
func TestReshapeSharesItsInputsBuffer(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 8)
	a := ops.Neg(x)
	r := ops.Reshape(a, 8, 4)
	out := ops.Neg(r)
	p, err := graph.Compile(g, nil, graph.Options{}, a, r, out)
	require.NoError(t, err)
	require.Same(t, &p.Float32(a)[0], &p.Float32(r)[0])
	require.Equal(t, 32, len(p.Float32(r)))
	require.Equal(t, 3*32*4, p.Stats().NaiveBytes, "x, a and out; the view adds nothing")
	in := make([]float32, 32)
	in[5] = 2
	require.NoError(t, p.FeedFloat32(x, in))
	require.NoError(t, p.Run())
	require.Equal(t, float32(2), p.Float32(out)[5])
}

func TestDTypeValidBounds(t *testing.T) {
	require.False(t, graph.Invalid.Valid())
	for _, d := range []graph.DType{graph.Float32, graph.Int32, graph.Float8E4M3, graph.Float8E5M2, graph.Float4E2M1} {
		require.True(t, d.Valid(), d.String())
	}
	require.False(t, (graph.Float4E2M1 + 1).Valid())
	require.Equal(t, "dtype(6)", (graph.Float4E2M1 + 1).String())
	// NVFP4 values: half a byte each, plus a pad nibble per row or column.
	require.Equal(t, 8+5, graph.Float4E2M1.Bytes(graph.Shape{3, 5})) // ≥ 3·⌈5/2⌉ and 5·⌈3/2⌉
	require.Equal(t, 8+4, graph.Float4E2M1.Bytes(graph.Shape{4, 4}))
	require.Equal(t, 12, graph.Float32.Bytes(graph.Shape{3}))
	require.Zero(t, graph.Float4E2M1.Bytes(graph.Shape{0, 4}))
	require.True(t, graph.Float4E2M1.IsQuantized())
	require.False(t, graph.Float4E2M1.IsFloat8())
	require.Equal(t, 1, graph.Float8E4M3.Size())
	require.Equal(t, 4, graph.Int32.Size())
	require.Zero(t, graph.Invalid.Size())
}
