package trainloop_test

import (
	"fmt"

	"github.com/octetml/octet/examples/internal/trainloop"
)

// A loop of five steps that resumes at step 2 and stops early, at 4.
func ExampleLoop() {
	l := &trainloop.Loop{Total: 5, First: 2, End: 4,
		Step: func(step int) (float32, error) { return 1 / float32(step), nil },
	}
	st, err := l.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Losses, st.Ran(), "steps run")
	// Output: [0.5 0.33333334] 2 steps run
}
