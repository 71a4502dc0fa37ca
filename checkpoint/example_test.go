package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/graph"
)

// Save writes a store (and optimizer, step, generator states) atomically;
// Load checks everything against the target first and then fills it.
func ExampleSave() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "step.safetensors")

	src := graph.NewStore()
	_ = src.SetFloat32("fc.weight", []float32{1, 2, 3, 4}, 2, 2)
	if err := checkpoint.Save(path, &checkpoint.State{Store: src, Step: 7, Meta: map[string]string{"model": "toy"}}); err != nil {
		fmt.Println(err)
		return
	}
	dst := graph.NewStore()
	_ = dst.SetFloat32("fc.weight", make([]float32, 4), 2, 2)
	st := &checkpoint.State{Store: dst, Meta: map[string]string{"model": "toy"}}
	if err := checkpoint.Load(path, st); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(dst.Float32("fc.weight"), st.Step)
	// A store of another shape is refused, naming the tensor.
	other := graph.NewStore()
	_ = other.SetFloat32("fc.weight", make([]float32, 3), 3)
	fmt.Println(checkpoint.Load(path, &checkpoint.State{Store: other}) != nil)
	// Output:
	// [1 2 3 4] 7
	// true
}
