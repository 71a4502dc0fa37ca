package precision

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeConfig(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "accelerate.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func recipeOf(t *testing.T, p *Config) recipe.Recipe {
	t.Helper()
	r, err := p.Recipe()
	require.NoError(t, err)
	return r
}

// TestEverySourceGivesTheGoRecipe: each environment variable (both
// families) and each config key (both spellings) gives the same recipe
// as the Go struct with that field set.
func TestEverySourceGivesTheGoRecipe(t *testing.T) {
	tr, fa := true, false
	cases := []struct {
		name  string
		want  Config
		vars  [][2]string // name, value: each alone must give want
		yaml  []string    // fp8_config lines: each alone must give want
		top   []string    // top-level lines
		setup Config      // the base (mixed precision and backend)
	}{
		{name: "margin", want: Config{Margin: 3}, vars: [][2]string{{"OCTET_FP8_MARGIN", "3"}, {"ACCELERATE_FP8_MARGIN", " 3 "}}, yaml: []string{"margin: 3"}},
		{name: "interval", want: Config{Interval: 5}, vars: [][2]string{{"OCTET_FP8_INTERVAL", "5"}, {"ACCELERATE_FP8_INTERVAL", "5"}}, yaml: []string{"interval: 5"}},
		{name: "format", want: Config{FP8Format: "E4M3"}, vars: [][2]string{{"OCTET_FP8_FORMAT", "e4m3"}, {"ACCELERATE_FP8_FORMAT", "E4M3"}}, yaml: []string{"fp8_format: E4M3"}},
		{name: "history", want: Config{AmaxHistoryLen: 16}, vars: [][2]string{{"OCTET_FP8_AMAX_HISTORY_LEN", "16"}, {"ACCELERATE_FP8_AMAX_HISTORY_LEN", "16"}}, yaml: []string{"amax_history_len: 16", "amax_history_length: 16"}},
		{name: "algo", want: Config{AmaxComputeAlgo: "max"}, vars: [][2]string{{"OCTET_FP8_AMAX_COMPUTE_ALGO", "max"}, {"ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "MAX"}}, yaml: []string{"amax_compute_algo: max", "amax_compute_algorithm: max"}},
		{name: "fprop", want: Config{OverrideLinearPrecision: recipe.Override{Fprop: true}}, vars: [][2]string{{"OCTET_FP8_OVERRIDE_FPROP", "1"}, {"ACCELERATE_FP8_OVERRIDE_FPROP", "true"}}, yaml: []string{"override_linear_precision: [true, false, false]", `override_linear_precision: "(True, False, False)"`}},
		{name: "dgrad", want: Config{OverrideLinearPrecision: recipe.Override{Dgrad: true}}, vars: [][2]string{{"OCTET_FP8_OVERRIDE_DGRAD", "yes"}, {"ACCELERATE_FP8_OVERRIDE_DGRAD", "True"}}, yaml: []string{"override_linear_precision: [false, true, false]"}},
		{name: "wgrad", want: Config{OverrideLinearPrecision: recipe.Override{Wgrad: true}}, vars: [][2]string{{"OCTET_FP8_OVERRIDE_WGRAD", "on"}, {"ACCELERATE_FP8_OVERRIDE_WGRAD", "y"}}, yaml: []string{"override_linear_precision:\n    - false\n    - false\n    - true"}},
		{name: "autocast", want: Config{UseAutocastDuringEval: true}, vars: [][2]string{{"OCTET_FP8_USE_AUTOCAST_DURING_EVAL", "1"}, {"ACCELERATE_FP8_USE_AUTOCAST_DURING_EVAL", "true"}}, yaml: []string{"use_autocast_during_eval: true"}},
		{name: "mxfp8", want: Config{UseMXFP8BlockScaling: true}, vars: [][2]string{{"OCTET_FP8_USE_MXFP8_BLOCK_SCALING", "1"}, {"ACCELERATE_FP8_USE_MXFP8_BLOCK_SCALING", "true"}}, yaml: []string{"use_mxfp8_block_scaling: true"}},
		{name: "mxfp8 rule", want: Config{UseMXFP8BlockScaling: true, MXFP8Rule: "ocp_floor"}, setup: Config{UseMXFP8BlockScaling: true}, vars: [][2]string{{"OCTET_FP8_MXFP8_RULE", "ocp_floor"}}, yaml: []string{"mxfp8_rule: ocp_floor"}},
		{name: "ao recipe", want: Config{Backend: "ao", AORecipe: "rowwise"}, setup: Config{Backend: "ao"}, vars: [][2]string{{"OCTET_FP8_RECIPE_NAME", "rowwise"}}, yaml: []string{"recipe_name: rowwise"}},
		{name: "pad", want: Config{Backend: "ao", PadInnerDim: &fa}, setup: Config{Backend: "ao"}, vars: [][2]string{{"OCTET_FP8_PAD_INNER_DIM", "0"}, {"ACCELERATE_FP8_PAD_INNER_DIM", "false"}}, yaml: []string{"pad_inner_dim: false"}},
		{name: "fsdp ag", want: Config{Backend: "ao", EnableFSDPFloat8AllGather: &fa}, setup: Config{Backend: "ao"}, vars: [][2]string{{"OCTET_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER", "false"}, {"ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER", "no"}}, yaml: []string{"enable_fsdp_float8_all_gather: false"}},
		{name: "pow2", want: Config{Backend: "ao", RoundScalesToPowerOf2: &tr}, setup: Config{Backend: "ao"}, vars: [][2]string{{"OCTET_FP8_ROUND_SCALES_TO_POWER_OF_2", "true"}}, yaml: []string{"round_scales_to_power_of_2: true"}},
		{name: "opt level", want: Config{Backend: "msamp", OptLevel: "O1"}, setup: Config{Backend: "msamp"}, vars: [][2]string{{"OCTET_FP8_OPT_LEVEL", "o1"}, {"ACCELERATE_FP8_OPT_LEVEL", "O1"}}, yaml: []string{"opt_level: O1", "optimization_level: O1"}},
		{name: "backend", want: Config{Backend: "msamp"}, vars: [][2]string{{"ACCELERATE_FP8_BACKEND", "MSAMP"}}, yaml: []string{"backend: MS-AMP", "backend: msamp"}},
		{name: "backend ao", want: Config{Backend: "ao"}, vars: [][2]string{{"ACCELERATE_FP8_BACKEND", "AO"}}, yaml: []string{"backend: AO"}},
		{name: "backend block", want: Config{Backend: "block"}, vars: [][2]string{{"ACCELERATE_FP8_BACKEND", "BLOCK"}}, yaml: []string{"backend: block"}},
		{name: "block format", want: Config{Backend: "block", FP8Format: "HYBRID"}, setup: Config{Backend: "block"}, vars: [][2]string{{"OCTET_FP8_FORMAT", "hybrid"}}, yaml: []string{"fp8_format: HYBRID"}},
		{name: "x dim", want: Config{Backend: "block", XBlockScalingDim: 2, WBlockScalingDim: 1}, setup: Config{Backend: "block", WBlockScalingDim: 1}, vars: [][2]string{{"OCTET_FP8_X_BLOCK_SCALING_DIM", "2"}}, yaml: []string{"x_block_scaling_dim: 2"}},
		{name: "w dim", want: Config{Backend: "block", WBlockScalingDim: 1}, setup: Config{Backend: "block"}, vars: [][2]string{{"OCTET_FP8_W_BLOCK_SCALING_DIM", "1"}}, yaml: []string{"w_block_scaling_dim: 1"}},
		{name: "grad dim", want: Config{Backend: "block", GradBlockScalingDim: 2, WBlockScalingDim: 1}, setup: Config{Backend: "block", WBlockScalingDim: 1}, vars: [][2]string{{"OCTET_FP8_GRAD_BLOCK_SCALING_DIM", "2"}}, yaml: []string{"grad_block_scaling_dim: 2"}},
		{name: "fp32 scales", want: Config{Backend: "block", FP32Scales: true}, setup: Config{Backend: "block"}, vars: [][2]string{{"OCTET_FP8_BLOCK_SCALING_FP32_SCALES", "1"}, {"NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "1"}}, yaml: []string{"fp32_scales: true"}},
		{name: "backend nvfp4", want: Config{Backend: "nvfp4"}, vars: [][2]string{{"ACCELERATE_FP8_BACKEND", "NVFP4"}}, yaml: []string{"backend: nvfp4"}},
		{name: "no rht", want: Config{Backend: "nvfp4", DisableRHT: true}, setup: Config{Backend: "nvfp4"}, vars: [][2]string{{"OCTET_FP8_NVFP4_DISABLE_RHT", "1"}, {"NVTE_NVFP4_DISABLE_RHT", "1"}}, yaml: []string{"disable_rht: true"}},
		{name: "no sr", want: Config{Backend: "nvfp4", DisableStochasticRounding: true}, setup: Config{Backend: "nvfp4"}, vars: [][2]string{{"OCTET_FP8_NVFP4_DISABLE_STOCHASTIC_ROUNDING", "true"}, {"NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING", "1"}}, yaml: []string{"disable_stochastic_rounding: true"}},
		{name: "no 2d", want: Config{Backend: "nvfp4", Disable2DQuantization: true}, setup: Config{Backend: "nvfp4"}, vars: [][2]string{{"OCTET_FP8_NVFP4_DISABLE_2D_QUANTIZATION", "yes"}, {"NVTE_NVFP4_DISABLE_2D_QUANTIZATION", "1"}}, yaml: []string{"disable_2d_quantization: true"}},
		{name: "keep first", want: Config{Backend: "nvfp4", KeepFirst: 2}, setup: Config{Backend: "nvfp4"}, vars: [][2]string{{"OCTET_FP8_NVFP4_KEEP_FIRST", "2"}}, yaml: []string{"keep_first: 2"}},
		{name: "keep last", want: Config{Backend: "nvfp4", KeepLast: 3}, setup: Config{Backend: "nvfp4"}, vars: [][2]string{{"OCTET_FP8_NVFP4_KEEP_LAST", "3"}}, yaml: []string{"keep_last: 3"}},
		{name: "backward override", want: Config{BackwardOverride: "dequantized"}, vars: [][2]string{{"OCTET_FP8_BACKWARD_OVERRIDE", "dequantized"}, {"NVTE_BACKWARD_OVERRIDE", "DEQUANTIZED"}}, yaml: []string{"backward_override: dequantized"}},
		{name: "epsilon", want: Config{Backend: "block", AmaxEpsilon: 1e-12}, setup: Config{Backend: "block"}, vars: [][2]string{{"OCTET_FP8_AMAX_EPSILON", "1e-12"}}, yaml: []string{"amax_epsilon: 1e-12"}},
	}
	for _, c := range cases {
		c.want.MixedPrecision, c.setup.MixedPrecision = "fp8", "fp8"
		want := recipeOf(t, &c.want)
		for _, v := range c.vars {
			p := c.setup
			require.NoError(t, p.resolve(env(v[0], v[1])), c.name)
			require.Equal(t, want, recipeOf(t, &p), "%s from %s", c.name, v[0])
			require.Equal(t, FromEnv, p.Source(settingFor(t, v[0])).Kind, v[0])
		}
		for _, y := range c.yaml {
			p := c.setup
			p.flags = &flagValues{given: map[string]string{}, config: writeConfig(t, "mixed_precision: fp8\nfp8_config:\n  "+y+"\n")}
			require.NoError(t, p.resolve(env()), "%s from %q", c.name, y)
			require.Equal(t, want, recipeOf(t, &p), "%s from %q", c.name, y)
		}
	}
	// Accelerate's mixed_precision and num_processes, from the
	// environment and the file.
	for _, mp := range []string{"no", "bf16", "fp8"} {
		p := Config{}
		require.NoError(t, p.resolve(env("ACCELERATE_MIXED_PRECISION", mp)))
		q := Config{MixedPrecision: mp}
		require.Equal(t, recipeOf(t, &q), recipeOf(t, &p))
		p = Config{flags: &flagValues{given: map[string]string{}, config: writeConfig(t, "mixed_precision: "+mp+"\nnum_processes: 3\n")}}
		require.NoError(t, p.resolve(env()))
		require.Equal(t, recipeOf(t, &q), recipeOf(t, &p))
		require.Equal(t, 3, p.NumProcesses)
	}
}

// TestFloat8BlockPrecision: -recipe block gives TE's Float8BlockScaling
// defaults (E4M3, x1 w2 g1, power-of-two scales) and its label; E5M2,
// a GEMM of two 2-D operands and bad values are refused naming the
// setting and its source; a block setting with another recipe is
// refused by Resolve.
func TestFloat8BlockPrecision(t *testing.T) {
	p := Config{MixedPrecision: "fp8", Backend: "block"}
	r := recipeOf(t, &p)
	require.Equal(t, recipe.Float8Block{}, r)
	require.Equal(t, "block/E4M3/x1w2g1", Label(r))
	require.Equal(t, "block/HYBRID/x1w1g1/fp32-scales/eps=0.001", Label(recipe.Float8Block{Hybrid: true, WBlockDim: 1, FP32Scales: true, AmaxEpsilon: 1e-3}))
	require.Equal(t, "nvfp4", Label(recipe.NVFP4{}))
	require.Equal(t, "custom", Label(recipe.Custom{}))
	cq := Config{MixedPrecision: "fp8", Custom: &recipe.Custom{Quantizer: func(string, fp8.GEMM, fp8.TensorRole) fp8.Quantizer { return fp8.Quantizer{} }}}
	cr, err := cq.Recipe()
	require.NoError(t, err)
	require.IsType(t, recipe.Custom{}, cr)
	_, err = (&Config{MixedPrecision: "fp8", Custom: &recipe.Custom{}}).Recipe()
	require.ErrorIs(t, err, ErrInvalid)
	bo := Config{MixedPrecision: "fp8"}
	require.ErrorIs(t, bo.resolve(env("NVTE_BACKWARD_OVERRIDE", "sometimes")), ErrInvalid)
	require.NoError(t, bo.resolve(env("NVTE_BACKWARD_OVERRIDE", "high_precision")))
	require.Equal(t, recipe.BackwardHighPrecision, bo.Override())
	require.Equal(t, "nvfp4/no-rht/no-sr/no-2d/keep-first=1/keep-last=2", Label(recipe.NVFP4{DisableRHT: true, DisableStochasticRounding: true, Disable2DQuantization: true, KeepFirst: 1, KeepLast: 2}))
	q := Config{MixedPrecision: "fp8", Backend: "nvfp4"}
	err = q.resolve(env("OCTET_FP8_NVFP4_DISABLE_RHT", "1", "NVTE_NVFP4_DISABLE_RHT", "0"))
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "disagree")
	err = q.resolve(env("OCTET_FP8_NVFP4_KEEP_LAST", "-1"))
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "OCTET_FP8_NVFP4_KEEP_LAST")
	for _, c := range []struct {
		vars [][2]string
		says []string
	}{
		{[][2]string{{"OCTET_FP8_FORMAT", "E5M2"}}, []string{"E5M2", "OCTET_FP8_FORMAT"}},
		{[][2]string{{"OCTET_FP8_X_BLOCK_SCALING_DIM", "2"}}, []string{"x_block_scaling_dim", "w_block_scaling_dim", "OCTET_FP8_X_BLOCK_SCALING_DIM"}},
		{[][2]string{{"OCTET_FP8_GRAD_BLOCK_SCALING_DIM", "3"}}, []string{"OCTET_FP8_GRAD_BLOCK_SCALING_DIM", "1 or 2"}},
		{[][2]string{{"OCTET_FP8_AMAX_EPSILON", "-1"}}, []string{"OCTET_FP8_AMAX_EPSILON"}},
		{[][2]string{{"OCTET_FP8_AMAX_EPSILON", "NaN"}}, []string{"OCTET_FP8_AMAX_EPSILON"}},
		{[][2]string{{"NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "maybe"}}, []string{"NVTE_FP8_BLOCK_SCALING_FP32_SCALES"}},
	} {
		q := Config{MixedPrecision: "fp8", Backend: "block"}
		var kv []string
		for _, v := range c.vars {
			kv = append(kv, v[0], v[1])
		}
		err := q.resolve(env(kv...))
		require.Error(t, err, "%v", c.vars)
		require.ErrorIs(t, err, ErrInvalid)
		for _, s := range c.says {
			require.Contains(t, err.Error(), s, "%v", c.vars)
		}
	}
}

// settingFor maps a variable to its setting's key.
func settingFor(t *testing.T, name string) string {
	for _, s := range settings {
		if prefixed(s.octet) == name || s.accel == name {
			return s.key
		}
	}
	t.Fatalf("no setting reads %s", name)
	return ""
}

// TestAccelerateVariablesAreRead: every ACCELERATE_FP8_* variable
// Accelerate's launcher sets for these settings is read.
func TestAccelerateVariablesAreRead(t *testing.T) {
	vars := strings.Join(EnvVars(), " ")
	for _, v := range []string{"ACCELERATE_MIXED_PRECISION", "ACCELERATE_FP8_BACKEND", "ACCELERATE_FP8_FORMAT", "ACCELERATE_FP8_MARGIN",
		"ACCELERATE_FP8_INTERVAL", "ACCELERATE_FP8_AMAX_HISTORY_LEN", "ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "ACCELERATE_FP8_OVERRIDE_FPROP",
		"ACCELERATE_FP8_OVERRIDE_DGRAD", "ACCELERATE_FP8_OVERRIDE_WGRAD", "ACCELERATE_FP8_USE_AUTOCAST_DURING_EVAL",
		"ACCELERATE_FP8_USE_MXFP8_BLOCK_SCALING", "ACCELERATE_FP8_OPT_LEVEL", "ACCELERATE_FP8_PAD_INNER_DIM", "ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"} {
		require.Contains(t, vars, v)
	}
}

// TestBadValuesNameTheirSource: every setting's bad value is refused
// naming the variable or the file, line and key.
func TestBadValuesNameTheirSource(t *testing.T) {
	for _, s := range settings {
		bad := "bogus"
		for _, name := range []string{prefixed(s.octet), s.accel} {
			if name == "" {
				continue
			}
			p := Config{MixedPrecision: "fp8", Backend: s.backend}
			err := p.resolve(env(name, bad))
			require.ErrorIs(t, err, ErrInvalid, name)
			require.ErrorContains(t, err, name+`="bogus" is not valid`)
		}
		for _, k := range s.yaml {
			body := "fp8_config:\n  " + k + ": bogus\n"
			if s.top {
				body = k + ": bogus\n"
			}
			path := writeConfig(t, body)
			p := Config{MixedPrecision: "fp8", Backend: s.backend, flags: &flagValues{given: map[string]string{}, config: path}}
			err := p.resolve(env())
			require.ErrorIs(t, err, ErrInvalid, k)
			line := ":2:"
			if s.top {
				line = ":1:"
			}
			require.ErrorContains(t, err, path+line, k)
			require.ErrorContains(t, err, k+`: "bogus" is not valid`)
		}
	}
}

func TestConfigFileKeys(t *testing.T) {
	// Accelerate keys that do not concern precision are listed as
	// ignored; unknown ones are errors naming the key and line.
	path := writeConfig(t, "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nmachine_rank: 0\nmixed_precision: fp8\nfp8_config:\n  backend: TE\n  fp8_format: HYBRID\n")
	p := Config{flags: &flagValues{given: map[string]string{}, config: path}}
	require.NoError(t, p.resolve(env()))
	require.Equal(t, []string{"compute_environment (line 1)", "distributed_type (line 2)", "machine_rank (line 3)"}, p.Ignored())
	require.Equal(t, Source{Kind: FromFile, Name: path, Line: 7}, p.Source("fp8_format"))
	require.Equal(t, "fp8_format HYBRID ("+path+":7); the rest defaults", p.Describe())
	for body, want := range map[string]string{
		"mixed_precision: fp8\nlearning_rate: 3\n":                       `:2: unknown key "learning_rate"`,
		"fp8_config:\n  margin: 1\n  marign: 2\n":                        `:3: fp8_config: unknown key "marign"`,
		"fp8_config:\n  amax_history_len: 4\n  amax_history_length: 8\n": "amax_history_len is set twice (also on line 2)",
		"fp8_config: 3\n": ":1: fp8_config: want a mapping",
		"- a\n- b\n":      ":1: want a mapping",
		"fp8_config:\n  override_linear_precision: [true]\n": "want three booleans",
		"fp8_config:\n  margin: [1, 2]\n":                    "fp8_config.margin: want a single value",
		"mixed_precision: [\n":                               "accelerate.yaml",
		"mixed_precision: fp16\n":                            "fp16",
	} {
		path := writeConfig(t, body)
		p := Config{flags: &flagValues{given: map[string]string{}, config: path}}
		err := p.resolve(env())
		require.ErrorContains(t, err, want, body)
		require.ErrorIs(t, err, ErrInvalid, body)
	}
	// An empty file sets nothing; a missing one is an error.
	p = Config{flags: &flagValues{given: map[string]string{}, config: writeConfig(t, "")}}
	require.NoError(t, p.resolve(env()))
	p = Config{flags: &flagValues{given: map[string]string{}, config: filepath.Join(t.TempDir(), "none.yaml")}}
	require.ErrorContains(t, p.resolve(env()), "-config")
}

// TestSourcesDisagree: the two variable families, or a flag and a
// variable, that say different things are errors naming both; a file is
// overridden by the environment, which is overridden by a flag that agrees.
func TestSourcesDisagree(t *testing.T) {
	p := Config{MixedPrecision: "fp8"}
	err := p.resolve(env("OCTET_FP8_MARGIN", "1", "ACCELERATE_FP8_MARGIN", "2"))
	require.ErrorContains(t, err, "OCTET_FP8_MARGIN=1 and ACCELERATE_FP8_MARGIN=2 disagree")
	require.NoError(t, p.resolve(env("OCTET_FP8_FORMAT", "e4m3", "ACCELERATE_FP8_FORMAT", "E4M3")))

	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	p = Config{MixedPrecision: "both"}
	p.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-format", "E4M3", "-precision", "fp8"}))
	// A flag beats the environment; the variable's value is named in a
	// warning, not dropped silently.
	require.NoError(t, p.resolve(env("ACCELERATE_FP8_FORMAT", "E5M2")))
	require.Equal(t, "E4M3", p.FP8Format)
	require.Equal(t, []string{"ACCELERATE_FP8_FORMAT=E5M2 is not applied: -format E4M3 wins (explicit beats ambient)"}, p.Warnings())
	require.NoError(t, p.resolve(env("OCTET_FP8_MARGIN", "2")))
	require.Equal(t, "margin 2 (OCTET_FP8_MARGIN), fp8_format E4M3 (-format); the rest defaults", p.Describe())

	path := writeConfig(t, "mixed_precision: fp8\nfp8_config:\n  margin: 1\n")
	p = Config{flags: &flagValues{given: map[string]string{}, config: path}}
	require.NoError(t, p.resolve(env("OCTET_FP8_MARGIN", "4")))
	require.Equal(t, 4, p.Margin)
	require.Equal(t, "fp8", p.Name())
	require.Equal(t, []string{path + ":3: margin 1 is not applied: OCTET_FP8_MARGIN=4 wins (explicit beats ambient)"}, p.Warnings())
	// Under bf16 an FP8 variable is read by nothing: this run says so
	// (an FP8 run of the same program would read it).
	path = writeConfig(t, "mixed_precision: bf16\nfp8_config:\n  margin: 1\n")
	p = Config{flags: &flagValues{given: map[string]string{}, config: path}}
	require.NoError(t, p.resolve(env("OCTET_FP8_MARGIN", "4")))
	require.Contains(t, p.Warnings(), "OCTET_FP8_MARGIN=4 applies to FP8 runs only: this run is bf16 (from "+path+":1 bf16), which reads none")
}

// TestFlags: the examples' flags, their checks and messages.
func TestFlags(t *testing.T) {
	parse := func(args ...string) (*Config, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		p := &Config{MixedPrecision: "both"}
		p.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return p, p.resolve(env())
	}
	p, err := parse()
	require.NoError(t, err)
	runs, err := p.Runs()
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, "fp32", runs[0].Name())
	require.Equal(t, "fp8", runs[1].Name())
	require.Equal(t, "defaults", runs[1].Describe())
	require.Equal(t, "", runs[0].Describe())
	bf := Config{MixedPrecision: "bf16"}
	require.Equal(t, "none: bf16 has no recipe settings (mixed_precision from code)", bf.Describe())
	bf = Config{}
	require.NoError(t, bf.resolve(env("ACCELERATE_MIXED_PRECISION", "bf16")))
	require.Equal(t, "none: bf16 has no recipe settings (mixed_precision from ACCELERATE_MIXED_PRECISION=bf16)", bf.Describe())
	r, err := runs[1].Recipe()
	require.NoError(t, err)
	require.Equal(t, recipe.TE{}, r)
	_, err = p.Recipe()
	require.ErrorContains(t, err, "several runs")

	for args, want := range map[string]string{
		"-opt-level O1":               "-opt-level applies to -recipe msamp only; -recipe te reads -format",
		"-ao rowwise":                 "-ao applies to -recipe ao only",
		"-recipe ao -format E4M3":     "-format applies to -recipe te or block only; -recipe ao reads -ao",
		"-recipe xx":                  `-recipe "xx": want te, block, nvfp4, ao or msamp`,
		"-precision fp16":             "fp16",
		"-precision xx":               `-precision "xx": want fp32, bf16, fp8, both or all`,
		"-format E3M4":                `-format "E3M4": want HYBRID, E4M3 or E5M2`,
		"-recipe msamp -opt-level O3": "O3",
	} {
		_, err := parse(strings.Fields(args)...)
		require.ErrorContains(t, err, want, args)
		require.True(t, errors.Is(err, ErrInvalid), args)
	}
	p, err = parse("-recipe", "MSAMP", "-opt-level", "O1", "-precision", "fp8")
	require.NoError(t, err)
	require.Equal(t, recipe.MSAMP{OptLevel: "O1"}, recipeOf(t, p))
	require.Equal(t, "opt_level O1 (-opt-level); the rest defaults", p.Describe())
	require.True(t, p.Given("opt-level"))
	require.False(t, p.Given("format"))
}

// TestRecipeErrorsNameTheSetting: a value each source accepts but the
// recipe refuses says where it came from.
func TestRecipeErrorsNameTheSetting(t *testing.T) {
	p := Config{MixedPrecision: "fp8"}
	err := p.resolve(env("OCTET_FP8_MARGIN", "1000"))
	require.ErrorContains(t, err, "margin 1000")
	require.ErrorContains(t, err, "OCTET_FP8_MARGIN=1000")
	p = Config{MixedPrecision: "fp8", Backend: "msamp"}
	err = p.resolve(env("OCTET_FP8_OPT_LEVEL", "O3"))
	require.ErrorContains(t, err, "OCTET_FP8_OPT_LEVEL")
	p = Config{MixedPrecision: "fp8", UseMXFP8BlockScaling: true}
	err = p.resolve(env("ACCELERATE_FP8_AMAX_HISTORY_LEN", "16"))
	require.ErrorContains(t, err, "amax_history_len from ACCELERATE_FP8_AMAX_HISTORY_LEN=16")
	// The zero value is float32.
	var zero Config
	r, err := zero.Recipe()
	require.NoError(t, err)
	require.Nil(t, r)
	require.Equal(t, "fp32", zero.String())
}

// TestEnvironmentBounds: the smallest valid settings and the largest
// window are accepted from the environment, one beyond each refused
// naming the variable; MXFP8 with an amax setting given is refused
// even when the value is the default.
func TestEnvironmentBounds(t *testing.T) {
	for _, c := range []struct{ name, ok, bad string }{
		{"OCTET_FP8_MARGIN", "0", "-1"}, {"OCTET_FP8_INTERVAL", "1", "0"},
		{"OCTET_FP8_AMAX_HISTORY_LEN", "1", "0"}, {"OCTET_FP8_AMAX_HISTORY_LEN", "65536", "65537"},
	} {
		p := Config{MixedPrecision: "fp8"}
		require.NoError(t, p.resolve(env(c.name, c.ok)), c.name)
		r, err := p.Recipe()
		require.NoError(t, err)
		te := r.(recipe.TE)
		switch c.name {
		case "OCTET_FP8_MARGIN":
			require.Equal(t, 0, te.Margin)
		case "OCTET_FP8_INTERVAL":
			require.Equal(t, 1, te.EffectiveInterval())
		default:
			require.Equal(t, atoi(c.ok), te.HistoryLen())
		}
		p = Config{MixedPrecision: "fp8"}
		err = p.resolve(env(c.name, c.bad))
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, c.name+"="+`"`+c.bad+`"`)
	}
	p := Config{MixedPrecision: "fp8"}
	err := p.resolve(env("OCTET_FP8_USE_MXFP8_BLOCK_SCALING", "true", "OCTET_FP8_AMAX_COMPUTE_ALGO", "most_recent"))
	require.ErrorContains(t, err, "OCTET_FP8_AMAX_COMPUTE_ALGO")
}
