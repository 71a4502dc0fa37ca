package dense_test

import (
	"fmt"
	"testing"

	"github.com/octetml/octet/dense"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// A program fed and read through gorgonia tensors.
func Example() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 2)
	w := g.Param("w", 2, 2)
	y := ops.MatMul(x, w, false, false)
	store := graph.NewStore()
	_ = dense.SetParam(store, "w", tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 0, 0, 2})))
	p, _ := graph.Compile(g, store, graph.Options{}, y)
	_ = dense.Feed(p, x, tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4})))
	_ = p.Run()
	out, _ := dense.Output(p, y)
	fmt.Println(out.Shape(), out.Data())
	// Output: (2, 2) [1 4 3 8]
}

func TestDense(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 3)
	ids := g.Input("ids", graph.Int32, 2)
	s := g.Input("s", graph.Float32)
	y := ops.Add(ops.Scale(x, 2), ops.BroadcastTo(s, graph.Shape{3}))
	store := graph.NewStore()
	p, err := graph.Compile(g, store, graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, dense.Feed(p, x, tensor.New(tensor.WithShape(3), tensor.WithBacking([]float32{1, 2, 3}))))
	require.NoError(t, dense.Feed(p, s, tensor.New(tensor.FromScalar(float32(0.5)))))
	require.ErrorContains(t, dense.Feed(p, x, tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))), `"x"`)
	require.ErrorContains(t, dense.Feed(p, x, tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{1, 2, 3}))), "float64")
	require.ErrorContains(t, dense.Feed(p, x, nil), "nil")
	require.Error(t, dense.Feed(p, ids, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int32{1, 2}))), "not an input of this program")
	require.NoError(t, p.Run())
	out, err := dense.Output(p, y)
	require.NoError(t, err)
	require.Equal(t, []float32{2.5, 4.5, 6.5}, out.Data())
	_, err = dense.Output(p, ids)
	require.Error(t, err)

	require.NoError(t, dense.SetParam(store, "w", tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))))
	w, ok := dense.Param(store, "w")
	require.True(t, ok)
	w.Data().([]float32)[0] = 7 // a view
	require.Equal(t, []float32{7, 2}, store.Float32("w"))
	_, ok = dense.Param(store, "nope")
	require.False(t, ok)
	require.ErrorContains(t, dense.SetParam(store, "w", nil), "nil")
	require.ErrorContains(t, dense.SetParam(store, "v", tensor.New(tensor.WithShape(2), tensor.WithBacking([]int32{1, 2}))), "float32")
}
