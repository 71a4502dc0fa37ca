package mnist_test

import (
	"fmt"

	"github.com/octetml/octet/data/mnist"
)

// Load reads the real MNIST files (from the GoMNIST module, or a
// directory); a Loader serves shuffled batches into the caller's buffers.
func ExampleNewLoader() {
	train, test, err := mnist.Load("")
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := mnist.NewLoader(train, 128, true, 1)
	x, y := make([]float32, 128*mnist.Pixels), make([]int32, 128)
	l.Next(x, y)
	fmt.Println(train.Len(), test.Len(), l.BatchesPerEpoch())
	// Output: 60000 10000 468
}
