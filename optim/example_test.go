package optim_test

import (
	"fmt"

	"github.com/octetml/octet/optim"
)

// An optimizer updates parameters in place from their gradients (here set
// by hand; optim.Bind pairs them with a compiled program's buffers).
func ExampleNewSGD() {
	w, g := []float32{1, 2}, []float32{0.5, -1}
	opt := optim.NewSGD([]optim.Param{{Name: "w", W: w, G: g}}, 0, 0, false)
	opt.Step(0.1)
	fmt.Println(w, opt.Steps())
	// Output: [0.95 2.1] 1
}

// A schedule gives the learning rate of each step: linear warm-up, then a
// cosine down to Min.
func ExampleWarmupCosine() {
	s := optim.WarmupCosine{Base: 1, Min: 0.1, Warmup: 2, Total: 10}
	for _, step := range []int{0, 1, 2, 6, 10} {
		fmt.Printf("%.3f ", s.LR(step))
	}
	fmt.Println()
	// Output: 0.500 1.000 1.000 0.550 0.100
}

// ExampleClipGradNorm clips two gradients whose global L2 norm is 5 to
// norm 1: each is scaled by 1/(5+1e-6).
func ExampleClipGradNorm() {
	params := []optim.Param{{G: []float32{3}}, {G: []float32{4}}}
	fmt.Println(optim.GradSumSquares(params))
	norm := optim.ClipGradNorm(params, 1)
	fmt.Printf("%.4g %.4f %.4f\n", norm, params[0].G[0], params[1].G[0])
	// Output:
	// 25
	// 5 0.6000 0.8000
}
