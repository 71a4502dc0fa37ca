package precision

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/octetml/octet/recipe"
)

// setting is one precision setting and every name it goes by.
type setting struct {
	// key is its name in Accelerate's config file (and in messages).
	key string
	// backend is the FP8 backend it belongs to ("" for all; several are
	// separated by spaces).
	backend string
	// octet is the OCTET_FP8_ variable's suffix, accel Accelerate's
	// variable, flag the command-line flag ("" where there is none).
	octet, accel, flag string
	// yaml are its keys in a config file (under fp8_config unless top).
	yaml []string
	top  bool
	// allowed says what values it takes; canon checks and canonicalises
	// one; apply stores a canonical value.
	allowed string
	canon   func(string) (string, bool)
	apply   func(p *Config, v string)
	// get returns the field's value set in Go, canonical as canon gives
	// it, or "" when the field holds its zero value (not set: any other
	// source may set it). apply(p, "") restores the zero value.
	get func(p *Config) string
}

// of reports whether the setting belongs to backend b.
func (s setting) of(b string) bool {
	for _, x := range strings.Fields(s.backend) {
		if x == b {
			return true
		}
	}
	return false
}

// nonNegFloat accepts a finite float32 ≥ 0.
func nonNegFloat(s string) (string, bool) {
	f, err := strconv.ParseFloat(s, 32)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		return "", false
	}
	return strconv.FormatFloat(f, 'g', -1, 32), true
}

func intAtLeast(min, max int) func(string) (string, bool) {
	return func(s string) (string, bool) {
		n, err := strconv.Atoi(s)
		if err != nil || n < min || n > max {
			return "", false
		}
		return strconv.Itoa(n), true
	}
}

// boolean reads a switch with the words every reader takes
// (ParseSwitch).
func boolean(s string) (string, bool) {
	b, ok := ParseSwitch(s)
	if !ok {
		return "", false
	}
	return strconv.FormatBool(b), true
}

// oneOf accepts the names (any case) and aliases (alias → name).
func oneOf(names []string, aliases map[string]string) func(string) (string, bool) {
	return func(s string) (string, bool) {
		l := strings.ToLower(s)
		for _, n := range names {
			if strings.ToLower(n) == l {
				return n, true
			}
		}
		if a, ok := aliases[l]; ok {
			return a, true
		}
		return "", false
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// ptrSwitch is a switch that is nil until set ("" leaves it unset).
func ptrSwitch(v string) *bool {
	if v == "" {
		return nil
	}
	b := v == "true"
	return &b
}

// canonModeName canonicalises a mixed precision's name.
var canonModeName = oneOf([]string{"no", "bf16", "fp8", "both", "all", "fp16"}, map[string]string{"fp32": "no"})

// canonMode is the canonical mixed precision of a Go value ("" unset).
func canonMode(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	c, ok := canonModeName(strings.TrimSpace(s))
	if !ok {
		return s // invalid: mode() names it
	}
	return c
}

// canonOr canonicalises a Go string field ("" unset; an invalid value is
// kept as it is, for the recipe's check to name).
func canonOr(s string, canon func(string) (string, bool)) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if c, ok := canon(s); ok {
		return c
	}
	return s
}

func intOr(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func boolOr(b bool) string {
	if !b {
		return ""
	}
	return "true"
}

func floatOr(f float32) string {
	if f == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(f), 'g', -1, 32)
}

func ptrOr(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

const boolAllowed = SwitchWords

// settings lists every setting, the one table every source (Go, flags,
// environment, config files) is read through; Describe keeps its order.
var settings = []setting{
	{key: "mixed_precision", get: func(p *Config) string { return canonMode(p.MixedPrecision) }, flag: "precision", accel: "ACCELERATE_MIXED_PRECISION", yaml: []string{"mixed_precision"}, top: true,
		allowed: "no, bf16 or fp8", canon: canonModeName,
		apply: func(p *Config, v string) { p.MixedPrecision = v }},
	{key: "backend", get: func(p *Config) string {
		return canonOr(p.Backend, oneOf([]string{"te", "block", "nvfp4", "ao", "msamp"}, map[string]string{"ms-amp": "msamp", "ms_amp": "msamp"}))
	}, flag: "recipe", accel: "ACCELERATE_FP8_BACKEND", yaml: []string{"backend"},
		allowed: "te, block, nvfp4, ao or msamp", canon: oneOf([]string{"te", "block", "nvfp4", "ao", "msamp"}, map[string]string{"ms-amp": "msamp", "ms_amp": "msamp"}),
		apply: func(p *Config, v string) { p.Backend = v }},
	{key: "backward_override", get: func(p *Config) string {
		return canonOr(p.BackwardOverride, oneOf([]string{"high_precision", "dequantized"}, nil))
	}, backend: "te block nvfp4 ao msamp", octet: "BACKWARD_OVERRIDE", accel: "NVTE_BACKWARD_OVERRIDE", yaml: []string{"backward_override"},
		allowed: "high_precision or dequantized", canon: oneOf([]string{"high_precision", "dequantized", "none"}, nil),
		apply: func(p *Config, v string) {
			if v == "none" {
				v = ""
			}
			p.BackwardOverride = v
		}},
	{key: "num_processes", get: func(p *Config) string { return intOr(p.NumProcesses) }, yaml: []string{"num_processes"}, top: true,
		allowed: "an integer ≥ 1", canon: intAtLeast(1, 1<<20),
		apply: func(p *Config, v string) { p.NumProcesses = atoi(v) }},

	{key: "margin", get: func(p *Config) string { return intOr(p.Margin) }, backend: "te", octet: "MARGIN", accel: "ACCELERATE_FP8_MARGIN", yaml: []string{"margin"},
		allowed: "an integer ≥ 0", canon: intAtLeast(0, 1<<30), apply: func(p *Config, v string) { p.Margin = atoi(v) }},
	{key: "interval", get: func(p *Config) string { return intOr(p.Interval) }, backend: "te", octet: "INTERVAL", accel: "ACCELERATE_FP8_INTERVAL", yaml: []string{"interval"},
		allowed: "an integer ≥ 1", canon: intAtLeast(1, 1<<30), apply: func(p *Config, v string) { p.Interval = atoi(v) }},
	{key: "fp8_format", get: func(p *Config) string { return canonOr(p.FP8Format, oneOf([]string{"HYBRID", "E4M3", "E5M2"}, nil)) }, backend: "te block", octet: "FORMAT", accel: "ACCELERATE_FP8_FORMAT", flag: "format", yaml: []string{"fp8_format"},
		allowed: "HYBRID, E4M3 or E5M2", canon: oneOf([]string{"HYBRID", "E4M3", "E5M2"}, nil), apply: func(p *Config, v string) { p.FP8Format = v }},
	{key: "amax_history_len", get: func(p *Config) string { return intOr(p.AmaxHistoryLen) }, backend: "te", octet: "AMAX_HISTORY_LEN", accel: "ACCELERATE_FP8_AMAX_HISTORY_LEN", yaml: []string{"amax_history_len", "amax_history_length"},
		allowed: fmt.Sprintf("an integer from 1 to %d", recipe.MaxAmaxHistoryLen), canon: intAtLeast(1, recipe.MaxAmaxHistoryLen),
		apply: func(p *Config, v string) { p.AmaxHistoryLen = atoi(v) }},
	{key: "amax_compute_algo", get: func(p *Config) string { return canonOr(p.AmaxComputeAlgo, oneOf([]string{"max", "most_recent"}, nil)) }, backend: "te", octet: "AMAX_COMPUTE_ALGO", accel: "ACCELERATE_FP8_AMAX_COMPUTE_ALGO", yaml: []string{"amax_compute_algo", "amax_compute_algorithm"},
		allowed: "max or most_recent", canon: oneOf([]string{"max", "most_recent"}, nil), apply: func(p *Config, v string) { p.AmaxComputeAlgo = v }},
	{key: "override_fprop", get: func(p *Config) string { return boolOr(p.OverrideLinearPrecision.Fprop) }, backend: "te", octet: "OVERRIDE_FPROP", accel: "ACCELERATE_FP8_OVERRIDE_FPROP",
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.OverrideLinearPrecision.Fprop = v == "true" }},
	{key: "override_dgrad", get: func(p *Config) string { return boolOr(p.OverrideLinearPrecision.Dgrad) }, backend: "te", octet: "OVERRIDE_DGRAD", accel: "ACCELERATE_FP8_OVERRIDE_DGRAD",
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.OverrideLinearPrecision.Dgrad = v == "true" }},
	{key: "override_wgrad", get: func(p *Config) string { return boolOr(p.OverrideLinearPrecision.Wgrad) }, backend: "te", octet: "OVERRIDE_WGRAD", accel: "ACCELERATE_FP8_OVERRIDE_WGRAD",
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.OverrideLinearPrecision.Wgrad = v == "true" }},
	{key: "use_autocast_during_eval", get: func(p *Config) string { return boolOr(p.UseAutocastDuringEval) }, backend: "te block nvfp4", octet: "USE_AUTOCAST_DURING_EVAL", accel: "ACCELERATE_FP8_USE_AUTOCAST_DURING_EVAL", yaml: []string{"use_autocast_during_eval"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.UseAutocastDuringEval = v == "true" }},
	{key: "use_mxfp8_block_scaling", get: func(p *Config) string { return boolOr(p.UseMXFP8BlockScaling) }, backend: "te", octet: "USE_MXFP8_BLOCK_SCALING", accel: "ACCELERATE_FP8_USE_MXFP8_BLOCK_SCALING", yaml: []string{"use_mxfp8_block_scaling"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.UseMXFP8BlockScaling = v == "true" }},
	{key: "reduce_amax", backend: "te", octet: "REDUCE_AMAX", yaml: []string{"reduce_amax"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.ReduceAmax = ptrSwitch(v) },
		get: func(p *Config) string { return ptrOr(p.ReduceAmax) }},
	{key: "calibration_steps", backend: "te msamp", octet: "CALIBRATION_STEPS", flag: "calibrate", yaml: []string{"calibration_steps"},
		allowed: "an integer ≥ 0", canon: intAtLeast(0, 1<<30), apply: func(p *Config, v string) { p.CalibrationSteps = atoi(v) },
		get: func(p *Config) string { return intOr(p.CalibrationSteps) }},
	{key: "mxfp8_rule", get: func(p *Config) string { return canonOr(p.MXFP8Rule, oneOf([]string{"round_up", "ocp_floor"}, nil)) }, backend: "te", octet: "MXFP8_RULE", yaml: []string{"mxfp8_rule"},
		allowed: "round_up or ocp_floor", canon: oneOf([]string{"round_up", "ocp_floor"}, nil), apply: func(p *Config, v string) { p.MXFP8Rule = v }},

	{key: "x_block_scaling_dim", get: func(p *Config) string { return intOr(p.XBlockScalingDim) }, backend: "block", octet: "X_BLOCK_SCALING_DIM", yaml: []string{"x_block_scaling_dim"},
		allowed: "1 or 2", canon: intAtLeast(1, 2), apply: func(p *Config, v string) { p.XBlockScalingDim = atoi(v) }},
	{key: "w_block_scaling_dim", get: func(p *Config) string { return intOr(p.WBlockScalingDim) }, backend: "block", octet: "W_BLOCK_SCALING_DIM", yaml: []string{"w_block_scaling_dim"},
		allowed: "1 or 2", canon: intAtLeast(1, 2), apply: func(p *Config, v string) { p.WBlockScalingDim = atoi(v) }},
	{key: "grad_block_scaling_dim", get: func(p *Config) string { return intOr(p.GradBlockScalingDim) }, backend: "block", octet: "GRAD_BLOCK_SCALING_DIM", yaml: []string{"grad_block_scaling_dim"},
		allowed: "1 or 2", canon: intAtLeast(1, 2), apply: func(p *Config, v string) { p.GradBlockScalingDim = atoi(v) }},
	{key: "fp32_scales", get: func(p *Config) string { return boolOr(p.FP32Scales) }, backend: "block", octet: "BLOCK_SCALING_FP32_SCALES", accel: "NVTE_FP8_BLOCK_SCALING_FP32_SCALES", yaml: []string{"fp32_scales"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.FP32Scales = v == "true" }},
	{key: "amax_epsilon", get: func(p *Config) string { return floatOr(p.AmaxEpsilon) }, backend: "block", octet: "AMAX_EPSILON", yaml: []string{"amax_epsilon"},
		allowed: "a finite number ≥ 0", canon: nonNegFloat, apply: func(p *Config, v string) {
			f, _ := strconv.ParseFloat(v, 32)
			p.AmaxEpsilon = float32(f)
		}},

	{key: "disable_rht", get: func(p *Config) string { return boolOr(p.DisableRHT) }, backend: "nvfp4", octet: "NVFP4_DISABLE_RHT", accel: "NVTE_NVFP4_DISABLE_RHT", yaml: []string{"disable_rht"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.DisableRHT = v == "true" }},
	{key: "disable_stochastic_rounding", get: func(p *Config) string { return boolOr(p.DisableStochasticRounding) }, backend: "nvfp4", octet: "NVFP4_DISABLE_STOCHASTIC_ROUNDING", accel: "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING", yaml: []string{"disable_stochastic_rounding"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.DisableStochasticRounding = v == "true" }},
	{key: "disable_2d_quantization", get: func(p *Config) string { return boolOr(p.Disable2DQuantization) }, backend: "nvfp4", octet: "NVFP4_DISABLE_2D_QUANTIZATION", accel: "NVTE_NVFP4_DISABLE_2D_QUANTIZATION", yaml: []string{"disable_2d_quantization"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.Disable2DQuantization = v == "true" }},
	{key: "keep_first", get: func(p *Config) string { return intOr(p.KeepFirst) }, backend: "nvfp4", octet: "NVFP4_KEEP_FIRST", yaml: []string{"keep_first"},
		allowed: "an integer ≥ 0", canon: intAtLeast(0, 1<<20), apply: func(p *Config, v string) { p.KeepFirst = atoi(v) }},
	{key: "keep_last", get: func(p *Config) string { return intOr(p.KeepLast) }, backend: "nvfp4", octet: "NVFP4_KEEP_LAST", yaml: []string{"keep_last"},
		allowed: "an integer ≥ 0", canon: intAtLeast(0, 1<<20), apply: func(p *Config, v string) { p.KeepLast = atoi(v) }},

	{key: "recipe_name", get: func(p *Config) string {
		return canonOr(p.AORecipe, oneOf([]string{recipe.AOTensorwise, recipe.AORowwise, recipe.AORowwiseWithGWHP}, nil))
	}, backend: "ao", octet: "RECIPE_NAME", flag: "ao", yaml: []string{"recipe_name"},
		allowed: "tensorwise, rowwise or rowwise_with_gw_hp", canon: oneOf([]string{recipe.AOTensorwise, recipe.AORowwise, recipe.AORowwiseWithGWHP}, nil),
		apply: func(p *Config, v string) { p.AORecipe = v }},
	{key: "pad_inner_dim", get: func(p *Config) string { return ptrOr(p.PadInnerDim) }, backend: "ao", octet: "PAD_INNER_DIM", accel: "ACCELERATE_FP8_PAD_INNER_DIM", yaml: []string{"pad_inner_dim"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.PadInnerDim = ptrSwitch(v) }},
	{key: "enable_fsdp_float8_all_gather", get: func(p *Config) string { return ptrOr(p.EnableFSDPFloat8AllGather) }, backend: "ao block", octet: "ENABLE_FSDP_FLOAT8_ALL_GATHER", accel: "ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER", yaml: []string{"enable_fsdp_float8_all_gather"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.EnableFSDPFloat8AllGather = ptrSwitch(v) }},
	{key: "round_scales_to_power_of_2", get: func(p *Config) string { return ptrOr(p.RoundScalesToPowerOf2) }, backend: "ao", octet: "ROUND_SCALES_TO_POWER_OF_2", yaml: []string{"round_scales_to_power_of_2"},
		allowed: boolAllowed, canon: boolean, apply: func(p *Config, v string) { p.RoundScalesToPowerOf2 = ptrSwitch(v) }},

	{key: "opt_level", get: func(p *Config) string { return canonOr(p.OptLevel, oneOf([]string{"O1", "O2", "O3"}, nil)) }, backend: "msamp", octet: "OPT_LEVEL", accel: "ACCELERATE_FP8_OPT_LEVEL", flag: "opt-level", yaml: []string{"opt_level", "optimization_level"},
		allowed: "O1 or O2", canon: oneOf([]string{"O1", "O2", "O3"}, nil), apply: func(p *Config, v string) { p.OptLevel = v }},
}

// overrideKeys are the three settings that a config file's
// override_linear_precision list sets, in its order.
var overrideKeys = [3]string{"override_fprop", "override_dgrad", "override_wgrad"}

func settingByKey(key string) *setting {
	for i := range settings {
		if settings[i].key == key {
			return &settings[i]
		}
	}
	return nil
}

// EnvVars lists every environment variable Resolve reads.
func EnvVars() []string {
	var out []string
	for _, s := range settings {
		if s.octet != "" {
			out = append(out, EnvPrefix+s.octet)
		}
		if s.accel != "" {
			out = append(out, s.accel)
		}
	}
	return out
}
