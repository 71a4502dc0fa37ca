// Package recipes turns the example programs' -precision and recipe
// flags into recipes, applying the OCTET_FP8_* environment variables.
package recipes

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/optim"
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
			if v, fromEnv := os.LookupEnv(fp8.EnvPrefix + "OPT_LEVEL"); fromEnv {
				if strings.Contains(err.Error(), fp8.EnvPrefix+"OPT_LEVEL") {
					return nil, err
				}
				return nil, fmt.Errorf("%sOPT_LEVEL=%s: %w", fp8.EnvPrefix, v, err)
			}
			return nil, fmt.Errorf("-opt-level: %w", err)
		}
		return r, nil
	}
	return nil, fmt.Errorf("-recipe %q: want te, ao or msamp", backend)
}

// recipeFlags are the flags that set one backend's recipe, with the
// environment variable that sets the same field.
var recipeFlags = []struct{ flag, backend, env string }{
	{"format", "te", fp8.EnvPrefix + "FORMAT"},
	{"ao", "ao", fp8.EnvPrefix + "RECIPE_NAME"},
	{"opt-level", "msamp", fp8.EnvPrefix + "OPT_LEVEL"},
}

// Settings says where the settings of a recipe came from: each field set
// by an OCTET_FP8_* variable (with its value) or by a recipe flag given
// on the command line, the rest being the defaults; "" for no recipe
// (float32) or a recipe without settings (bf16), and "defaults" when
// nothing was set.
func Settings(r fp8.Recipe, given map[string]string) string {
	if r == nil || len(fp8.EnvFields(r.Backend())) == 0 {
		return ""
	}
	b := r.Backend()
	var parts []string
	for _, field := range fp8.EnvFields(b) {
		name := strings.ToLower(field)
		if field == "FORMAT" {
			name = "fp8_format" // TE's name
		}
		if v, ok := os.LookupEnv(fp8.EnvPrefix + field); ok {
			parts = append(parts, fmt.Sprintf("%s %s (%s%s)", name, strings.TrimSpace(v), fp8.EnvPrefix, field))
			continue
		}
		for _, f := range recipeFlags {
			if f.backend == b.String() && f.env == fp8.EnvPrefix+field {
				if v, ok := given[f.flag]; ok {
					parts = append(parts, fmt.Sprintf("%s %s (-%s)", name, v, f.flag))
				}
			}
		}
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ") + "; the rest defaults"
}

// GivenFlags returns the flags of the command line's FlagSet that were
// set explicitly, with their values.
func GivenFlags() map[string]string {
	given := map[string]string{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	return given
}

// CheckRecipeFlags refuses recipe flags given on the command line (given
// maps their names to their values) that the chosen backend does not
// read, saying which flag it does read, and a flag whose environment
// variable says otherwise (the variable would win).
func CheckRecipeFlags(backend string, given map[string]string) error {
	var mine string
	for _, f := range recipeFlags {
		if f.backend == backend {
			mine = f.flag
		}
	}
	for _, f := range recipeFlags {
		v, ok := given[f.flag]
		if !ok {
			continue
		}
		if f.backend != backend {
			return fmt.Errorf("-%s applies to -recipe %s only; -recipe %s reads -%s", f.flag, f.backend, backend, mine)
		}
		if env, ok := os.LookupEnv(f.env); ok && !strings.EqualFold(strings.TrimSpace(env), v) {
			return fmt.Errorf("-%s %s and %s=%s disagree; set one of them", f.flag, v, f.env, env)
		}
	}
	return nil
}

// Precisions expands a -precision value into the runs it asks for:
// fp32, bf16, fp8, both (fp32 and fp8) or all (fp32, bf16 and fp8).
func Precisions(s string) ([]string, error) {
	switch s {
	case "fp32", "bf16", "fp8":
		return []string{s}, nil
	case "both":
		return []string{"fp32", "fp8"}, nil
	case "all":
		return []string{"fp32", "bf16", "fp8"}, nil
	}
	return nil, fmt.Errorf("-precision %q: want fp32, bf16, fp8, both or all", s)
}

// ForPrecision returns the recipe of one run: nil for fp32,
// fp8.BF16Recipe for bf16, and for fp8 the one Make builds from the
// recipe flags.
func ForPrecision(precision, backend, format, ao, level string) (fp8.Recipe, error) {
	switch precision {
	case "fp32":
		return nil, nil
	case "bf16":
		return fp8.BF16Recipe{}, nil
	case "fp8":
		return Make(backend, format, ao, level)
	}
	return nil, fmt.Errorf("-precision %q: want fp32, bf16 or fp8", precision)
}

// ForPrecisions builds the recipe of every precision (and of fp8, which
// the flag checks need even when only fp32 runs) once, reading the
// OCTET_FP8_* variables once.
func ForPrecisions(precisions []string, backend, format, ao, level string) (map[string]fp8.Recipe, error) {
	recs := map[string]fp8.Recipe{}
	for _, p := range append([]string{"fp8"}, precisions...) {
		r, err := ForPrecision(p, backend, format, ao, level)
		if err != nil {
			return nil, err
		}
		recs[p] = r
	}
	return recs, nil
}

// Optimizer is the one place the examples choose their optimizer: MS-AMP's
// low-bit AdamW at the recipe's level for an fp8.MSAMPRecipe (its FP8
// gradient all-reduce over comm when comm is set), AdamW otherwise; with
// the optimizer's storage per parameter.
func Optimizer(recipe fp8.Recipe, params []optim.Param, weightDecay float32, comm dist.Communicator) (optim.Stateful, optim.MemoryStats, error) {
	if ms, ok := recipe.(fp8.MSAMPRecipe); ok {
		lb, err := optim.NewLowBitAdam(params, ms, weightDecay, comm)
		if err != nil {
			return nil, optim.MemoryStats{}, err
		}
		return lb, lb.MemoryStats(), nil
	}
	return optim.NewAdamW(params, weightDecay), optim.Float32MemoryStats(), nil
}

// PrecisionName is the name of a precision in summary lines: "FP8",
// "bf16" or "float32".
func PrecisionName(p string) string {
	switch p {
	case "fp8":
		return "FP8"
	case "fp32":
		return "float32"
	}
	return p
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
	case fp8.BF16Recipe:
		return "bf16"
	case nil:
		return "-"
	}
	return r.Backend().String()
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
