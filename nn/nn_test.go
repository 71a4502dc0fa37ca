package nn

import (
	"math"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

func TestNamesAndParams(t *testing.T) {
	g := graph.New()
	b := NewBuilder(g)
	x := g.Input("x", graph.Float32, 4, 8)
	mlp, err := NewMLP(b, "mlp", []int{8, 16, 4}, ReLU, Dropout{P: 0.1, Seed: 1})
	require.NoError(t, err)
	y := mlp.Forward(x)
	require.Equal(t, graph.Shape{4, 4}, y.Shape())
	var names []string
	for _, p := range b.Params() {
		names = append(names, p.Name())
	}
	require.Equal(t, []string{"mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"}, names)
	require.NotNil(t, g.Lookup("mlp.fc1"))
	require.Equal(t, graph.Fprop, g.Lookup("mlp.fc2").Role())
	require.Equal(t, 8*16+16+16*4+4, b.NumParams())

	enc := b.Scope("enc")
	ln := NewLayerNorm(enc, "ln", 8, ops.LayerNormConfig{ZeroCenteredGamma: true})
	emb := NewEmbedding(enc, "wte", 100, 8, nil)
	require.Equal(t, "enc.ln", ln.Name)
	require.Equal(t, "enc.wte.weight", emb.Weight.Name())
	ids := g.Input("ids", graph.Int32, 4)
	require.Equal(t, graph.Shape{4, 8}, ln.Forward(emb.Forward(ids)).Shape())
	require.NoError(t, g.Err())

	store := graph.NewStore()
	require.NoError(t, b.Init(store, 7))
	for _, v := range store.Float32("enc.ln.weight") {
		require.Zero(t, v, "zero-centred γ starts at 0")
	}
	_, err = NewMLP(b, "bad", []int{8}, ReLU, Dropout{})
	require.Error(t, err)
	_, err = NewMLP(b, "bad", []int{8, 0}, ReLU, Dropout{})
	require.Error(t, err)
	_, err = NewMLP(b, "bad", []int{8, 2}, "swish", Dropout{})
	require.ErrorContains(t, err, "swish")
}

func TestInitIsSeededByName(t *testing.T) {
	build := func(order []string) *graph.Store {
		g := graph.New()
		b := NewBuilder(g)
		for _, n := range order {
			b.Param(n, KaimingUniform, 16, 32)
		}
		s := graph.NewStore()
		require.NoError(t, b.Init(s, 42))
		return s
	}
	a := build([]string{"a", "b"})
	c := build([]string{"b", "a"})
	require.Equal(t, a.Float32("a"), c.Float32("a"), "values do not depend on creation order")
	require.NotEqual(t, a.Float32("a"), a.Float32("b"))
	// Existing values are kept.
	g := graph.New()
	b := NewBuilder(g)
	b.Param("a", KaimingUniform, 16, 32)
	s := graph.NewStore()
	require.NoError(t, s.SetFloat32("a", make([]float32, 512), 16, 32))
	require.NoError(t, b.Init(s, 1))
	require.Zero(t, s.Float32("a")[0])
	require.NoError(t, s.SetFloat32("b", make([]float32, 4), 4))
	b.Param("b", Zeros, 2, 2)
	require.ErrorContains(t, b.Init(s, 1), `"b"`)
}

func TestInitializerStatistics(t *testing.T) {
	shape := graph.Shape{256, 512}
	for _, c := range []struct {
		name string
		init Initializer
		std  float64
	}{
		{"KaimingUniform", KaimingUniform, math.Sqrt(2.0 / 512)},
		{"KaimingNormal", KaimingNormal, math.Sqrt(2.0 / 512)},
		{"XavierUniform", XavierUniform, math.Sqrt(2.0 / (512 + 256))},
		{"XavierNormal", XavierNormal, math.Sqrt(2.0 / (512 + 256))},
		{"LinearDefault", LinearDefault, 1 / math.Sqrt(3*512)},
	} {
		data := make([]float32, shape.Numel())
		c.init(paramRNG(1, c.name), shape, data)
		var s, q float64
		for _, v := range data {
			s += float64(v)
			q += float64(v) * float64(v)
		}
		n := float64(len(data))
		mean, std := s/n, math.Sqrt(q/n-(s/n)*(s/n))
		require.InDelta(t, 0, mean, 0.01*c.std*10, c.name)
		require.InEpsilon(t, c.std, std, 0.02, c.name)
	}
}
