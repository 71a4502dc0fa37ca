package output_test

import (
	"fmt"

	"github.com/octetml/octet/examples/internal/output"
)

// Summary folds the runs of an example into one JSON object (the last
// run's fields at the top, every run under "runs"); DecodeLast reads the
// last JSON line of a program's output back.
func ExampleDecodeLast() {
	var v struct {
		Precision string `json:"precision"`
	}
	err := output.DecodeLast("training...\n{\"precision\":\"fp8\"}\n", &v)
	fmt.Println(v.Precision, err)
	// Output: fp8 <nil>
}
