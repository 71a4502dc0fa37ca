package precision

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// twoValues returns two values s accepts with different meanings, the
// first one a Go field can hold (not its zero value).
func twoValues(t *testing.T, s setting) (a, b string) {
	switch s.key {
	case "mixed_precision":
		return "fp8", "bf16"
	case "backend":
		return "te", "ao"
	}
	for _, v := range []string{"1", "2", "true", "false", "E4M3", "HYBRID", "max", "most_recent", "O1", "O2",
		"tensorwise", "rowwise", "round_up", "ocp_floor", "high_precision", "dequantized"} {
		c, ok := s.canon(v)
		if !ok {
			continue
		}
		if a == "" {
			var p Config
			s.apply(&p, c)
			if s.get(&p) != c {
				continue
			}
			a = c
			continue
		}
		if c != a {
			return a, c
		}
	}
	t.Fatalf("%s: no two values", s.key)
	return "", ""
}

// TestExplicitBeatsAmbient: every setting set in Go keeps its value
// against each of its environment variables and its config file key, and
// a warning names both; a flag beats them all.
func TestExplicitBeatsAmbient(t *testing.T) {
	for _, s := range settings {
		a, b := twoValues(t, s)
		base := func() Config {
			p := Config{MixedPrecision: "fp8"}
			if fam := strings.Fields(s.backend); len(fam) > 0 {
				p.Backend = fam[0]
			}
			s.apply(&p, a)
			return p
		}
		want := fmt.Sprintf("is not applied: %s %s set in Go wins (explicit beats ambient)", s.key, a)
		sources := 0
		for _, name := range []string{prefixed(s.octet), s.accel} {
			if name == "" {
				continue
			}
			sources++
			p := base()
			require.NoError(t, p.resolve(env(name, b)), name)
			require.Equal(t, a, s.get(&p), "%s=%s against Go's %s", name, b, a)
			require.Equal(t, []string{name + "=" + b + " " + want}, p.Warnings(), name)
			require.Equal(t, FromCode, p.Source(s.key).Kind, name)
			// Resolved again, the Go value is still the one kept.
			require.NoError(t, p.resolve(env()), name)
			require.Equal(t, a, s.get(&p))
			require.Empty(t, p.Warnings())
		}
		for _, y := range s.yaml {
			sources++
			body := "fp8_config:\n  " + y + ": " + b + "\n"
			line := 2
			if s.top {
				body, line = y+": "+b+"\n", 1
			}
			path := writeConfig(t, body)
			p := base()
			p.flags = &flagValues{given: map[string]string{}, config: path}
			require.NoError(t, p.resolve(env()), y)
			require.Equal(t, a, s.get(&p), "%s: %s against Go's %s", path, y, a)
			require.Equal(t, []string{fmt.Sprintf("%s:%d: %s %s %s", path, line, s.key, b, want)}, p.Warnings(), y)
		}
		require.Positive(t, sources, s.key)
		if s.flag == "" {
			continue
		}
		// A flag beats the Go value (its default) silently, and the
		// environment with a warning.
		p := base()
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		p.RegisterFlags(fs)
		require.NoError(t, fs.Parse([]string{"-" + s.flag, b}))
		lookup := env()
		if s.accel != "" {
			lookup = env(s.accel, a)
		} else if s.octet != "" {
			lookup = env(prefixed(s.octet), a)
		}
		if s.key == "mixed_precision" {
			b = "bf16"
		}
		require.NoError(t, p.resolve(lookup), s.flag)
		require.Equal(t, b, s.get(&p), "-%s %s", s.flag, b)
		if s.accel != "" || s.octet != "" {
			require.Len(t, p.Warnings(), 1, s.flag)
			require.Contains(t, p.Warnings()[0], fmt.Sprintf("is not applied: -%s %s wins", s.flag, b))
		}
	}
}

// TestMixedPrecisionInGoWins is the case a user met: fp8 with a recipe
// of the program's own, set in Go, against ACCELERATE_MIXED_PRECISION.
func TestMixedPrecisionInGoWins(t *testing.T) {
	p := Config{MixedPrecision: "fp8", Use: recipe.Float8Block{}}
	require.NoError(t, p.resolve(env("ACCELERATE_MIXED_PRECISION", "bf16")))
	r, err := p.Recipe()
	require.NoError(t, err)
	require.Equal(t, recipe.Float8Block{}, r)
	require.Equal(t, []string{"ACCELERATE_MIXED_PRECISION=bf16 is not applied: mixed_precision fp8 set in Go wins (explicit beats ambient)"}, p.Warnings())
	require.Equal(t, "the program's recipe (Config.Use): block/E4M3/x1w2g1; the rest defaults", p.Describe())
}

// TestGoRecipeSettings: beside a recipe set in Go, a variable of a
// setting that recipe has loses to it with a warning; one it does not
// have reaches nothing and is refused naming the variable and the
// recipe; so is a recipe flag.
func TestGoRecipeSettings(t *testing.T) {
	p := Config{MixedPrecision: "fp8", Use: recipe.Float8Block{}}
	err := p.resolve(env("OCTET_FP8_MARGIN", "2"))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "OCTET_FP8_MARGIN=2 reaches nothing: the run's recipe is set in Go (Config.Use: block/E4M3/x1w2g1), which has no margin")

	p = Config{MixedPrecision: "fp8", Use: recipe.TE{Margin: 1}}
	require.NoError(t, p.resolve(env("OCTET_FP8_MARGIN", "2")))
	require.Equal(t, []string{"OCTET_FP8_MARGIN=2 is not applied: the recipe set in Go (Config.Use: te/HYBRID) wins (explicit beats ambient)"}, p.Warnings())
	require.Equal(t, 0, p.Margin)
	require.Equal(t, "the program's recipe (Config.Use): te/HYBRID; the rest defaults", p.Describe())
	r, err := p.Recipe()
	require.NoError(t, err)
	require.Equal(t, recipe.TE{Margin: 1}, r)

	c := recipe.Custom{}
	p = Config{MixedPrecision: "fp8", Custom: &c}
	require.ErrorContains(t, p.resolve(env("ACCELERATE_FP8_AMAX_HISTORY_LEN", "4")), "ACCELERATE_FP8_AMAX_HISTORY_LEN=4 reaches nothing: the run's recipe is set in Go (Config.Custom: custom)")

	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	p = Config{MixedPrecision: "fp8", Use: recipe.TE{}}
	p.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-format", "E4M3"}))
	require.ErrorContains(t, p.resolve(env()), "-format E4M3 reaches nothing: the recipe is set in Go (Config.Use: te/HYBRID)")
	// The backward override applies to a Go recipe too.
	p = Config{MixedPrecision: "fp8", Use: recipe.TE{}}
	require.NoError(t, p.resolve(env("NVTE_BACKWARD_OVERRIDE", "high_precision")))
	require.Equal(t, "te/HYBRID/backward=high_precision", Label(recipeOf(t, &p)))
}

// TestSettingsOfAnotherRecipe: a variable or config key of another
// recipe than the run's is refused naming it and the recipe; Describe
// lists only the recipe's settings, Go values included.
func TestSettingsOfAnotherRecipe(t *testing.T) {
	p := Config{MixedPrecision: "fp8", Backend: "block"}
	err := p.resolve(env("OCTET_FP8_MARGIN", "2"))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "OCTET_FP8_MARGIN=2 reaches nothing: margin is a setting of -recipe te, and this run's recipe is block (set in Go)")
	p = Config{MixedPrecision: "fp8"}
	err = p.resolve(env("ACCELERATE_FP8_BACKEND", "ao", "ACCELERATE_FP8_AMAX_HISTORY_LEN", "16"))
	require.ErrorContains(t, err, "ACCELERATE_FP8_AMAX_HISTORY_LEN=16 reaches nothing: amax_history_len is a setting of -recipe te, and this run's recipe is ao (from ACCELERATE_FP8_BACKEND=ao)")
	path := writeConfig(t, "mixed_precision: fp8\nfp8_config:\n  backend: msamp\n  margin: 3\n")
	p = Config{flags: &flagValues{given: map[string]string{}, config: path}}
	require.ErrorContains(t, p.resolve(env()), path+":4: margin 3 reaches nothing")

	p = Config{MixedPrecision: "fp8", Margin: 1, AORecipe: "rowwise"}
	require.NoError(t, p.resolve(env("OCTET_FP8_FORMAT", "E4M3")))
	require.Equal(t, "margin 1 (code), fp8_format E4M3 (OCTET_FP8_FORMAT); the rest defaults", p.Describe())
}

// TestOneEnvironmentServesEveryRun: a program that trains a float32
// baseline and an FP8 run in one process, under one environment: the
// FP8 variable reaches the FP8 run, and the float32 run says that it
// applies to FP8 runs only.
func TestOneEnvironmentServesEveryRun(t *testing.T) {
	lookup := env("OCTET_FP8_MARGIN", "2")
	base := Config{}
	require.NoError(t, base.resolve(lookup))
	require.Equal(t, []string{"OCTET_FP8_MARGIN=2 applies to FP8 runs only: this run is float32 (by default), which reads none"}, base.Warnings())
	fp := Config{MixedPrecision: "fp8"}
	require.NoError(t, fp.resolve(lookup))
	require.Equal(t, recipe.TE{Margin: 2}, recipeOf(t, &fp))
	require.Empty(t, fp.Warnings())
	// -precision both: the float32 run says so, the FP8 run reads it.
	both := Config{MixedPrecision: "both"}
	require.NoError(t, both.resolve(lookup))
	runs, err := both.Runs()
	require.NoError(t, err)
	require.Equal(t, []string{"OCTET_FP8_MARGIN=2 applies to the FP8 run only"}, runs[0].Warnings())
	require.Empty(t, runs[1].Warnings())
	require.Equal(t, recipe.TE{Margin: 2}, recipeOf(t, &runs[1]))
}

// TestFloat32RunChecksTheRecipe: a float32 run still checks the FP8
// recipe its Go fields describe (a program checks it before its float32
// baseline), while FP8 variables only warn there.
func TestFloat32RunChecksTheRecipe(t *testing.T) {
	p := Config{MixedPrecision: "fp32", Backend: "msamp", OptLevel: "O3"}
	require.ErrorContains(t, p.resolve(env()), "O3")
	p = Config{MixedPrecision: "fp32", Backend: "block"}
	require.NoError(t, p.resolve(env("OCTET_FP8_MARGIN", "2")))
	require.Len(t, p.Warnings(), 1)
}

// TestErrorsNameTheirSources: a refused recipe names the sources of the
// settings it refuses from the recipe's typed error, not from its text:
// the margin too large for E5M2 names the format's variable although
// the message names the format only as "E5M2", and a setting the
// message happens to contain is not blamed when the error is not about
// it.
func TestErrorsNameTheirSources(t *testing.T) {
	p := Config{MixedPrecision: "fp8"}
	err := p.resolve(env("OCTET_FP8_FORMAT", "E5M2", "OCTET_FP8_MARGIN", "40"))
	if err == nil {
		_, err = p.FP8Recipe()
	}
	require.ErrorContains(t, err, "margin from OCTET_FP8_MARGIN=40, fp8_format from OCTET_FP8_FORMAT=E5M2")
	var se *recipe.SettingError
	require.ErrorAs(t, err, &se)
	require.Equal(t, []string{"margin", "fp8_format"}, se.Settings)

	p = Config{MixedPrecision: "fp8", Backend: "block"}
	err = p.resolve(env("OCTET_FP8_X_BLOCK_SCALING_DIM", "2", "OCTET_FP8_W_BLOCK_SCALING_DIM", "2", "OCTET_FP8_FORMAT", "E4M3"))
	if err == nil {
		_, err = p.FP8Recipe()
	}
	require.ErrorContains(t, err, "x_block_scaling_dim from OCTET_FP8_X_BLOCK_SCALING_DIM=2, w_block_scaling_dim from OCTET_FP8_W_BLOCK_SCALING_DIM=2")
	require.NotContains(t, err.Error(), "fp8_format from")
}

// TestRecipeSettingErrors: each recipe refusal names its settings as a
// recipe.SettingError.
func TestRecipeSettingErrors(t *testing.T) {
	for _, c := range []struct {
		r    recipe.Recipe
		want []string
	}{
		{recipe.TE{Margin: -1}, []string{"margin"}},
		{recipe.TE{Interval: -1}, []string{"interval"}},
		{recipe.TE{AmaxHistoryLen: recipe.MaxAmaxHistoryLen + 1}, []string{"amax_history_len"}},
		{recipe.TE{UseMXFP8BlockScaling: true, AmaxHistoryLen: 4}, []string{"amax_history_len", "amax_compute_algo", "use_mxfp8_block_scaling"}},
		{recipe.Float8Block{WBlockDim: 5}, []string{"w_block_scaling_dim"}},
		{recipe.Float8Block{XBlockDim: 2, WBlockDim: 2}, []string{"x_block_scaling_dim", "w_block_scaling_dim"}},
		{recipe.NVFP4{KeepLast: -1}, []string{"keep_first", "keep_last"}},
		{recipe.MSAMP{OptLevel: "O3"}, []string{"opt_level"}},
	} {
		var se *recipe.SettingError
		require.ErrorAs(t, c.r.Validate(), &se, "%+v", c.r)
		require.Equal(t, c.want, se.Settings, "%+v", c.r)
	}
}
