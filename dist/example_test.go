package dist_test

import (
	"fmt"
	"sync"

	"github.com/octetml/octet/dist"
)

// In-process ranks run as goroutines; every rank calls the same
// collectives. AllReduce adds the ranks' buffers in rank order.
func ExampleNewLocal() {
	comms, _ := dist.NewLocal(3)
	out := make([][]float32, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := []float32{float32(r), 1}
			_ = c.AllReduceF32(buf, dist.Sum)
			out[r] = buf
		}()
	}
	wg.Wait()
	fmt.Println(out, dist.Split(10, 3))
	// Output: [[3 3] [3 3] [3 3]] [4 3 3]
}
