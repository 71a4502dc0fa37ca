package mnist_test

import (
	"testing"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/data/mnist"
	"github.com/stretchr/testify/require"
)

// TestDataLoaderKeepsTheMNISTOrder: data.Loader with DropLast, Shuffle and
// the default stream serves exactly the batches of the MNIST loader, over
// several epochs, so runs moved onto it train as before.
func TestDataLoaderKeepsTheMNISTOrder(t *testing.T) {
	set := &mnist.Set{Images: make([]float32, 103*mnist.Pixels), Labels: make([]int32, 103)}
	for i := range set.Labels {
		set.Labels[i] = int32(i % 10)
		set.Images[i*mnist.Pixels] = float32(i)
	}
	old, err := mnist.NewLoader(set, 16, true, 5)
	require.NoError(t, err)
	l, err := data.NewLoader(set, data.Config{BatchSize: 16, Shuffle: true, Seed: 5, DropLast: true})
	require.NoError(t, err)
	require.Equal(t, old.BatchesPerEpoch(), l.BatchesPerEpoch())
	x, y := make([]float32, 16*mnist.Pixels), make([]int32, 16)
	for i := 0; i < 4*old.BatchesPerEpoch(); i++ {
		old.Next(x, y)
		b, err := l.Next()
		require.NoError(t, err)
		require.Equal(t, x, b.Float32("x"), "batch %d", i)
		require.Equal(t, y, b.Int32("label"), "batch %d", i)
	}
}
