package recipe_test

import (
	"errors"
	"fmt"

	"github.com/octetml/octet/recipe"
)

func ExampleNewAO() {
	r, _ := recipe.NewAO("rowwise")
	fmt.Println(r.Input, r.GradOutput, r.RoundScalesToPowerOf2)
	r.EnableFSDPFloat8AllGather = true
	fmt.Println(r.Validate())
	// Output:
	// current scaling E4M3 axiswise current scaling E4M3 axiswise true
	// recipe: AO recipe "rowwise": enable_fsdp_float8_all_gather needs tensorwise FP8 weights (weight cast is current scaling E4M3 axiswise); turn it off or use the tensorwise recipe
}

// A backward override travels with the recipe: every layer the recipe
// converts runs its dgrad and wgrad unquantized, and the label says so.
func ExampleWithBackward() {
	r := recipe.WithBackward(recipe.TE{}, recipe.BackwardDequantized)
	p, _ := r.Lower(recipe.Layer{FQN: "fc", Out: 64, In: 32, Rows: 8, Count: 1})
	fmt.Println(r.Label(), p.Backward)
	// Output:
	// te/HYBRID/backward=dequantized dequantized
}

// A refused recipe names the settings at fault as a SettingError, by
// the names Accelerate's fp8_config gives them.
func ExampleSettingError() {
	err := recipe.Float8Block{XBlockDim: 2, WBlockDim: 2}.Validate()
	var se *recipe.SettingError
	if errors.As(err, &se) {
		fmt.Println(se.Settings)
	}
	// Output:
	// [x_block_scaling_dim w_block_scaling_dim]
}
