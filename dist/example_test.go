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

// Three ranks swap values with uneven counts: rank r sends r+1 values to
// every rank, and each receives, in rank order, what every rank sent it.
func ExampleCommunicator_allToAll() {
	got := make([][]float32, 3)
	err := dist.RunLocal(3, func(c dist.Communicator) error {
		r := c.Rank()
		send := []int{r + 1, r + 1, r + 1}
		recv := []int{1, 2, 3} // rank q sends q+1
		src := make([]float32, 3*(r+1))
		for i := range src {
			src[i] = float32(10*r + i/(r+1)) // 10·sender + receiver
		}
		dst := make([]float32, 6)
		if err := c.AllToAllF32(dst, src, send, recv); err != nil {
			return err
		}
		got[r] = dst
		return nil
	})
	fmt.Println(err)
	for r, v := range got {
		fmt.Println("rank", r, v)
	}
	// Output:
	// <nil>
	// rank 0 [0 10 10 20 20 20]
	// rank 1 [1 11 11 21 21 21]
	// rank 2 [2 12 12 22 22 22]
}

// Six ranks form data-parallel and expert-parallel groups, as
// MPI_Comm_split does: the blocks of three consecutive ranks, and the
// ranks at the same place in each block.
func ExampleSubgroup() {
	sizes := make([]string, 6)
	err := dist.RunLocal(6, func(c dist.Communicator) error {
		block, err := dist.Subgroup(c, c.Rank()/3, c.Rank())
		if err != nil {
			return err
		}
		across, err := dist.Subgroup(c, c.Rank()%3, c.Rank())
		if err != nil {
			return err
		}
		sizes[c.Rank()] = fmt.Sprintf("%d/%d %d/%d", block.Rank(), block.Size(), across.Rank(), across.Size())
		return nil
	})
	fmt.Println(err)
	for r, s := range sizes {
		fmt.Println("rank", r, "block", s[:3], "across", s[4:])
	}
	// Output:
	// <nil>
	// rank 0 block 0/3 across 0/2
	// rank 1 block 1/3 across 0/2
	// rank 2 block 2/3 across 0/2
	// rank 3 block 0/3 across 1/2
	// rank 4 block 1/3 across 1/2
	// rank 5 block 2/3 across 1/2
}
