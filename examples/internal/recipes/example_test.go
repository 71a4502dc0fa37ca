package recipes_test

import (
	"fmt"

	"github.com/octetml/octet/examples/internal/recipes"
)

// The examples' -precision and recipe flags become one recipe per run.
func ExampleForPrecision() {
	runs, _ := recipes.Precisions("all")
	for _, p := range runs {
		r, _ := recipes.ForPrecision(p, "te", "HYBRID", "", "")
		fmt.Println(p, recipes.Label(r))
	}
	// Output:
	// fp32 -
	// bf16 bf16
	// fp8 te/HYBRID
}
