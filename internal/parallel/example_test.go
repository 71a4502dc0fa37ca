package parallel_test

import (
	"fmt"

	"github.com/octetml/octet/internal/parallel"
)

// A Group made once (at bind time) runs indexed tasks on the workers; the
// call allocates nothing.
func ExampleGroup_For() {
	var g parallel.Group
	sums := make([]int, 4)
	data := []int{1, 2, 3, 4, 5, 6, 7, 8}
	g.For(len(sums), func(i int) { sums[i] = data[2*i] + data[2*i+1] })
	fmt.Println(sums)
	// Output: [3 7 11 15]
}
