package ops_test

import (
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// FakeQuant is Dequantize(Quantize(x·s))/s with s the current scale of
// x, value for value, and passes the gradient straight through.
func TestFakeQuantValues(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 3, 4)
	y := ops.FakeQuant("fq", x, fp8.E4M3)
	p, err := graph.Compile(g, nil, graph.Options{}, y)
	require.NoError(t, err)
	in := []float32{0.1, -3, 7.5, 1e-6, 2, 2.2, -0.5, 448, 3, 0, -1, 100}
	require.NoError(t, p.FeedFloat32(x, in))
	require.NoError(t, p.Run())
	s := fp8.CurrentScale(448, fp8.E4M3, false)
	for i, v := range in {
		want := fp8.E4M3.Decode(fp8.E4M3.Encode(v*s)) * (1 / s)
		require.Equal(t, want, p.Float32(y)[i], "%v", v)
	}
	grads, err := graph.Grad(ops.Sum(y), x)
	require.NoError(t, err)
	gp, err := graph.Compile(g, nil, graph.Options{Training: true}, grads...)
	require.NoError(t, err)
	require.NoError(t, gp.Run())
	for _, v := range gp.Float32(grads[0]) {
		require.Equal(t, float32(1), v, "straight through")
	}
	ops.FakeQuant("bad", g.Input("i", graph.Int32, 2), fp8.E4M3)
	require.Error(t, g.Err())
}
