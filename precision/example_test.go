package precision_test

import (
	"fmt"
	"os"

	"github.com/octetml/octet/precision"
)

// What a program sets in Go wins over the environment, as an argument
// to Accelerate's Accelerator wins over ACCELERATE_MIXED_PRECISION; the
// losing value is named in a warning, and Describe says where each
// setting came from.
func ExampleConfig_Resolve() {
	os.Setenv("ACCELERATE_MIXED_PRECISION", "bf16")
	os.Setenv("OCTET_FP8_MARGIN", "2")
	defer os.Unsetenv("ACCELERATE_MIXED_PRECISION")
	defer os.Unsetenv("OCTET_FP8_MARGIN")
	p := precision.Config{MixedPrecision: "fp8", FP8Format: "E4M3"}
	if err := p.Resolve(); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := p.Recipe()
	fmt.Println(precision.Label(r))
	fmt.Println(p.Describe())
	for _, w := range p.Warnings() {
		fmt.Println(w)
	}
	// Output:
	// te/E4M3
	// margin 2 (OCTET_FP8_MARGIN), fp8_format E4M3 (code); the rest defaults
	// ACCELERATE_MIXED_PRECISION=bf16 is not applied: mixed_precision fp8 set in Go wins (explicit beats ambient)
}

// -precision both trains a float32 baseline and an FP8 run from one
// configuration; FP8 settings reach the FP8 run only.
func ExampleConfig_Runs() {
	p := precision.Config{MixedPrecision: "both", Margin: 1}
	if err := p.Resolve(); err != nil {
		fmt.Println(err)
		return
	}
	runs, _ := p.Runs()
	for _, run := range runs {
		r, _ := run.Recipe()
		fmt.Println(run.Name(), precision.Label(r))
	}
	// Output:
	// fp32 -
	// fp8 te/HYBRID
}
