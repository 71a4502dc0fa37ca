// Package recipes turns the example programs' recipe flags into an FP8
// recipe, applying the OCTET_FP8_* environment variables.
package recipes

import (
	"fmt"

	"github.com/octetml/octet/fp8"
)

// Make returns the recipe for backend "te" (fp8_format format), "ao"
// (named torchao recipe ao) or "msamp" (opt_level level).
func Make(backend, format, ao, level string) (fp8.Recipe, error) {
	switch backend {
	case "te":
		f, err := fp8.ParseFormatRecipe(format)
		if err != nil {
			return nil, fmt.Errorf("-format: %w", err)
		}
		return fp8.TERecipeFromEnv(fp8.TERecipe{Format: f})
	case "ao":
		r, err := fp8.NewAORecipe(ao)
		if err != nil {
			return nil, fmt.Errorf("-ao: %w", err)
		}
		return fp8.AORecipeFromEnv(r)
	case "msamp":
		r, err := fp8.MSAMPRecipeFromEnv(fp8.MSAMPRecipe{OptLevel: level})
		if err != nil {
			return nil, fmt.Errorf("-opt-level: %w", err)
		}
		return r, nil
	}
	return nil, fmt.Errorf("-recipe %q: want te, ao or msamp", backend)
}

// Label names a recipe in summaries, as it is after the environment
// overrides: "te/HYBRID", "te/E4M3/mxfp8", "ao/rowwise", "msamp/O2";
// "-" for no recipe (the float32 run).
func Label(r fp8.Recipe) string {
	switch r := r.(type) {
	case fp8.TERecipe:
		if r.UseMXFP8BlockScaling {
			return "te/" + r.Format.String() + "/mxfp8"
		}
		return "te/" + r.Format.String()
	case fp8.AORecipe:
		return "ao/" + r.Name
	case fp8.MSAMPRecipe:
		return "msamp/" + r.Level()
	case nil:
		return "-"
	}
	return r.Backend()
}

// MeanTail returns the mean of the last n values (all if fewer).
func MeanTail(v []float32, n int) float64 {
	tail := v[max(0, len(v)-n):]
	if len(tail) == 0 {
		return 0
	}
	var s float64
	for _, x := range tail {
		s += float64(x)
	}
	return s / float64(len(tail))
}
