package precision

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/internal/errkind"
	"github.com/octetml/octet/recipe"
)

// Config is a run's mixed-precision configuration in Accelerate's
// terms: Accelerator(mixed_precision=...) with the FP8 recipe's kwargs
// (TERecipeKwargs, AORecipeKwargs, MSAMPRecipeKwargs). The zero value is
// float32 training (mixed_precision "no"); every FP8 field's zero value is
// the recipe's documented default.
//
// Explicit beats ambient, as in Accelerate (an argument to Accelerator
// wins over ACCELERATE_MIXED_PRECISION): Resolve takes each setting from
// the first of these that gives it — a flag registered by RegisterFlags
// and given on the command line; the field set in Go (a field at its
// zero value is unset); an environment variable (Octet's OCTET_FP8_* or
// Accelerate's ACCELERATE_*, NVTE_*); an Accelerate config file
// (-config). A value that loses to another is not dropped silently: one
// warning (Warnings) names both. The two variable families disagreeing
// (OCTET_FP8_FORMAT and ACCELERATE_FP8_FORMAT) is an error naming both.
// A recipe set in Go (Use, Custom) is the recipe: a recipe setting from
// another source loses to it (a warning) or, when the recipe has no such
// setting, reaches nothing (an error). Every setting remembers where it
// came from (Source, Describe).
type Config struct {
	// MixedPrecision is "no" ("" or "fp32" too), "bf16" or "fp8"; "both"
	// and "all" name several runs (see Runs).
	MixedPrecision string
	// Backend is the FP8 backend (the recipe family), case-insensitive:
	// "te" ("", delayed scaling or MXFP8), "block" (Transformer Engine's
	// Float8BlockScaling), "ao" or "msamp" ("ms-amp").
	Backend string

	// Transformer Engine delayed scaling (backend te), as
	// TERecipeKwargs: FP8Format is "HYBRID" (""), "E4M3" or "E5M2";
	// AmaxComputeAlgo "most_recent" ("") or "max"; MXFP8Rule
	// "round_up" ("") or "ocp_floor".
	FP8Format               string
	Margin, Interval        int
	AmaxHistoryLen          int
	AmaxComputeAlgo         string
	OverrideLinearPrecision recipe.Override
	UseAutocastDuringEval   bool
	UseMXFP8BlockScaling    bool
	MXFP8Rule               string

	// ReduceAmax, when set to false, keeps each data-parallel rank's
	// delayed-scaling amaxes its own (TE's reduce_amax=False); nil or
	// true all-reduces them every step, TE's default.
	ReduceAmax *bool
	// CalibrationSteps, for delayed scaling (TE's recipe without MXFP8,
	// MS-AMP), runs that many first training steps with the converted
	// layers in float32 while their casts record amaxes, as Transformer
	// Engine's fp8_autocast(calibrating=True) does; FP8 training then
	// starts from scales computed from those amaxes rather than from
	// scale 1 (which flushes most small gradients to zero at the first
	// step). The calibrated state is kept in checkpoints.
	CalibrationSteps int

	// Float8BlockScaling (backend block), as Transformer Engine's
	// recipe: FP8Format "E4M3" ("") or "HYBRID"; the block dimensions
	// (0: the defaults 1, 2, 1), FP32Scales
	// (NVTE_FP8_BLOCK_SCALING_FP32_SCALES) and AmaxEpsilon.
	XBlockScalingDim, WBlockScalingDim, GradBlockScalingDim int
	FP32Scales                                              bool
	AmaxEpsilon                                             float32

	// NVFP4BlockScaling (backend nvfp4), as Transformer Engine's recipe
	// and its NVTE_NVFP4_DISABLE_* switches, with the layers kept in high
	// precision at each end (KeepFirst, KeepLast). Its stochastic
	// rounding is seeded by the run's seed (train.Config.Seed).
	DisableRHT, DisableStochasticRounding, Disable2DQuantization bool
	KeepFirst, KeepLast                                          int

	// torchao (backend ao), as AORecipeKwargs: AORecipe is
	// "tensorwise" (""), "rowwise" or "rowwise_with_gw_hp"; the three
	// switches, when nil, keep the named recipe's defaults
	// (EnableFSDPFloat8AllGather also applies to backend block, where it
	// is off unless set).
	AORecipe                  string
	PadInnerDim               *bool
	EnableFSDPFloat8AllGather *bool
	RoundScalesToPowerOf2     *bool

	// OptLevel is MS-AMP's optimization level (backend msamp): "O1" or
	// "O2" ("").
	OptLevel string

	// Custom, when set with MixedPrecision "fp8", is the recipe (TE's
	// CustomRecipe: a quantizer per layer, GEMM and tensor), whatever
	// Backend says; it is set in Go only.
	Custom *recipe.Custom
	// Use, when set with MixedPrecision "fp8", is the recipe, whatever
	// Backend and Custom say: any recipe.Recipe, one of package recipe's or one
	// of the program's own (see recipe.Recipe). It is set in Go only.
	Use recipe.Recipe

	// BackwardOverride is Transformer Engine's NVTE_BACKWARD_OVERRIDE for
	// every FP8 recipe: "" (the recipe's casts), "high_precision" or
	// "dequantized" (see recipe.BackwardOverride).
	BackwardOverride string

	// NumProcesses is the config file's num_processes (0: not given):
	// the data-parallel ranks a driver starts unless told otherwise.
	NumProcesses int

	src map[string]Source
	raw map[string]string
	// code holds each setting's Go value (canonical, "" unset) as the
	// first Resolve found it, applied what a source wrote into the field,
	// so that a second Resolve tells the two apart.
	code, applied map[string]string
	ignored       []string
	warnings      []string
	flags         *flagValues
}

// ErrInvalid is wrapped by every error about a precision setting (a
// value, a conflict between sources, a config file key).
var ErrInvalid = errors.New("precision configuration")

// precisionError is an error about a setting; it matches ErrPrecision.
type precisionError struct{ msg string }

func (e *precisionError) Error() string { return e.msg }
func (e *precisionError) Is(t error) bool {
	return t == ErrInvalid
}

func precisionErrorf(format string, args ...any) error {
	return &precisionError{fmt.Sprintf(format, args...)}
}

// wrapPrecision makes err match ErrPrecision too, keeping its chain.
func wrapPrecision(err error) error {
	if err == nil || errors.Is(err, ErrInvalid) {
		return err
	}
	return errkind.With(err, ErrInvalid)
}

// mode returns the canonical mixed precision: "no", "bf16", "fp8", "both"
// or "all".
func (p *Config) mode() (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(p.MixedPrecision)); m {
	case "", "no", "fp32":
		return "no", nil
	case "bf16", "fp8", "both", "all":
		return m, nil
	case "fp16":
		return "", precisionErrorf("-precision fp16 (mixed_precision): Octet offers no float16 mixed precision; use bf16 or fp8")
	default:
		return "", precisionErrorf("-precision %q (mixed_precision): want fp32 (no), bf16, fp8, both or all", p.MixedPrecision)
	}
}

// Runs expands a MixedPrecision of several runs ("both": float32 and FP8;
// "all": float32, bf16 and FP8) into one Precision each; a single
// precision gives itself.
func (p *Config) Runs() ([]Config, error) {
	m, err := p.mode()
	if err != nil {
		return nil, err
	}
	var modes []string
	switch m {
	case "both":
		modes = []string{"no", "fp8"}
	case "all":
		modes = []string{"no", "bf16", "fp8"}
	default:
		modes = []string{m}
	}
	out := make([]Config, len(modes))
	for i, m := range modes {
		out[i] = *p
		out[i].MixedPrecision = m
		if m == "fp8" || p.src == nil {
			continue
		}
		// The FP8 settings of the environment and config file are the FP8
		// run's: the others say so.
		out[i].warnings = append([]string(nil), p.warnings...)
		for _, s := range settings {
			if src, ok := p.src[s.key]; ok && src.Kind != FromCode && !s.top {
				out[i].warnings = append(out[i].warnings, fmt.Sprintf("%s applies to the FP8 run only", p.givenBy(s)))
			}
		}
	}
	return out, nil
}

// Name returns the run's precision as the examples print it: "fp32",
// "bf16" or "fp8" ("" for several runs or an invalid value).
func (p *Config) Name() string {
	switch m, _ := p.mode(); m {
	case "no":
		return "fp32"
	case "bf16", "fp8":
		return m
	}
	return ""
}

// backend returns the canonical FP8 backend.
func (p *Config) backend() (string, error) {
	switch b := strings.ToLower(strings.TrimSpace(p.Backend)); b {
	case "", "te":
		return "te", nil
	case "ao":
		return "ao", nil
	case "block":
		return "block", nil
	case "nvfp4":
		return "nvfp4", nil
	case "msamp", "ms-amp", "ms_amp":
		return "msamp", nil
	default:
		return "", precisionErrorf("-recipe %q (the FP8 backend): want te, block, nvfp4, ao or msamp", p.Backend)
	}
}

// FP8Recipe returns the FP8 recipe the settings describe, whatever
// MixedPrecision says (a program checks it before its float32 run too).
//
// A BackwardOverride wraps the recipe (recipe.WithBackward), so that it
// travels with the recipe into the compiler and its label.
func (p *Config) FP8Recipe() (recipe.Recipe, error) {
	o, err := recipe.ParseBackwardOverride(p.BackwardOverride)
	if err != nil {
		return nil, p.blame(err)
	}
	if p.Use != nil {
		if err := p.Use.Validate(); err != nil {
			return nil, wrapPrecision(err)
		}
		return recipe.WithBackward(p.Use, o), nil
	}
	if p.Custom != nil {
		if err := p.Custom.Validate(); err != nil {
			return nil, wrapPrecision(err)
		}
		return recipe.WithBackward(*p.Custom, o), nil
	}
	b, err := p.backend()
	if err != nil {
		return nil, err
	}
	var r recipe.Recipe
	switch b {
	case "te":
		r, err = p.teRecipe()
	case "ao":
		r, err = p.aoRecipe()
	case "block":
		r, err = p.blockRecipe()
	case "nvfp4":
		r = recipe.NVFP4{DisableRHT: p.DisableRHT, DisableStochasticRounding: p.DisableStochasticRounding,
			Disable2DQuantization: p.Disable2DQuantization, KeepFirst: p.KeepFirst, KeepLast: p.KeepLast,
			UseAutocastDuringEval: p.UseAutocastDuringEval}
	case "msamp":
		r = recipe.MSAMP{OptLevel: strings.ToUpper(strings.TrimSpace(p.OptLevel))}
	}
	if err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, p.blame(err)
	}
	return recipe.WithBackward(r, o), nil
}

// Recipe returns what passes.Prepare takes for this precision: nil for
// float32, recipe.BF16 for bf16, the FP8 recipe for fp8.
func (p *Config) Recipe() (recipe.Recipe, error) {
	m, err := p.mode()
	if err != nil {
		return nil, err
	}
	switch m {
	case "no":
		return nil, nil
	case "bf16":
		return recipe.BF16{}, nil
	case "fp8":
		return p.FP8Recipe()
	}
	return nil, precisionErrorf("-precision %s names several runs; train each of them (Config.Runs)", p.MixedPrecision)
}

func (p *Config) teRecipe() (recipe.Recipe, error) {
	r := recipe.TE{Margin: p.Margin, Interval: p.Interval, AmaxHistoryLen: p.AmaxHistoryLen,
		OverrideLinearPrecision: p.OverrideLinearPrecision, UseAutocastDuringEval: p.UseAutocastDuringEval,
		UseMXFP8BlockScaling: p.UseMXFP8BlockScaling, DisableAmaxReduction: p.ReduceAmax != nil && !*p.ReduceAmax}
	if p.FP8Format != "" {
		f, err := recipe.ParseFormats(p.FP8Format)
		if err != nil {
			return nil, p.blame(err)
		}
		r.Format = f
	}
	if p.CalibrationSteps > 0 && p.UseMXFP8BlockScaling {
		return nil, p.blame(fmt.Errorf("recipe: TE recipe: calibration_steps %d: MXFP8 block scaling has no amax history to calibrate; unset it or set use_mxfp8_block_scaling=false", p.CalibrationSteps), "calibration_steps", "use_mxfp8_block_scaling")
	}
	if p.AmaxComputeAlgo != "" && p.UseMXFP8BlockScaling {
		// Given at all, even as the default, it was meant for delayed
		// scaling, which MXFP8 replaces.
		return nil, p.blame(fmt.Errorf("recipe: TE recipe: amax_compute_algo %q does not apply to MXFP8 block scaling; unset it or set use_mxfp8_block_scaling=false", p.AmaxComputeAlgo), "amax_compute_algo", "use_mxfp8_block_scaling")
	}
	if p.AmaxComputeAlgo != "" {
		a, err := fp8.ParseAmaxAlgo(p.AmaxComputeAlgo)
		if err != nil {
			return nil, p.blame(err, "amax_compute_algo")
		}
		r.AmaxComputeAlgo = a
	}
	switch strings.TrimSpace(p.MXFP8Rule) {
	case "", "round_up":
	case "ocp_floor":
		r.MXFP8Rule = fp8.ExpOCPFloor
	default:
		return nil, p.blame(fmt.Errorf("fp8: mxfp8_rule %q, want round_up or ocp_floor", p.MXFP8Rule), "mxfp8_rule")
	}
	return r, nil
}

func (p *Config) blockRecipe() (recipe.Recipe, error) {
	hybrid, err := recipe.ParseFloat8BlockFormat(p.FP8Format)
	if err != nil {
		return nil, p.blame(err)
	}
	return recipe.Float8Block{Hybrid: hybrid, XBlockDim: p.XBlockScalingDim, WBlockDim: p.WBlockScalingDim,
		GradBlockDim: p.GradBlockScalingDim, FP32Scales: p.FP32Scales, AmaxEpsilon: p.AmaxEpsilon,
		UseAutocastDuringEval: p.UseAutocastDuringEval,
		FSDPFloat8AllGather:   p.EnableFSDPFloat8AllGather != nil && *p.EnableFSDPFloat8AllGather}, nil
}

func (p *Config) aoRecipe() (recipe.Recipe, error) {
	r, err := recipe.NewAO(strings.ToLower(strings.TrimSpace(p.AORecipe)))
	if err != nil {
		return nil, p.blame(err)
	}
	if p.PadInnerDim != nil {
		r.PadInnerDim = *p.PadInnerDim
	}
	if p.EnableFSDPFloat8AllGather != nil {
		r.EnableFSDPFloat8AllGather = *p.EnableFSDPFloat8AllGather
	}
	if p.RoundScalesToPowerOf2 != nil {
		r.RoundScalesToPowerOf2 = *p.RoundScalesToPowerOf2
	}
	return r, nil
}

// blame adds to an error the sources of the settings it refuses: those
// a recipe.SettingError names, and keys ("margin 1000 ... (margin from
// OCTET_FP8_MARGIN=1000)"). A setting set only in Go needs no source.
func (p *Config) blame(err error, keys ...string) error {
	var se *recipe.SettingError
	if errors.As(err, &se) {
		keys = append(keys, se.Settings...)
	}
	var from []string
	for _, s := range settings { // in the table's order, each once
		src, ok := p.src[s.key]
		if !ok || src.Kind == FromCode || !slices.Contains(keys, s.key) {
			continue
		}
		from = append(from, fmt.Sprintf("%s from %s", s.key, src.describe(p.raw[s.key])))
	}
	if len(from) == 0 {
		return wrapPrecision(err)
	}
	return errkind.With(fmt.Errorf("%w (%s)", err, strings.Join(from, ", ")), ErrInvalid)
}

// Label names the run's recipe as summaries print it: "-" for float32
// (nil), else the recipe's own Label ("bf16", "te/HYBRID",
// "block/E4M3/x1w2g1", "nvfp4/no-rht", "custom", "ao/rowwise", "msamp/O2").
func Label(r recipe.Recipe) string {
	if r == nil {
		return "-"
	}
	return r.Label()
}

// Override returns the backward override the settings ask for.
func (p *Config) Override() recipe.BackwardOverride {
	o, _ := recipe.ParseBackwardOverride(p.BackwardOverride)
	return o
}

// Source returns where a setting (by its Accelerate name: "margin",
// "fp8_format", "mixed_precision", ...) came from; the zero Source
// (FromCode) when nothing but the Go value set it.
func (p *Config) Source(key string) Source { return p.src[key] }

// Ignored lists the config file's keys that were accepted and ignored
// (Accelerate keys that do not concern precision), with their lines.
func (p *Config) Ignored() []string { return append([]string(nil), p.ignored...) }

// Describe says where the settings of the run's recipe came from, as the
// examples' summaries print it: "margin 2 (OCTET_FP8_MARGIN), fp8_format
// E4M3 (-format); the rest defaults" (a value set in Go says "code"), or
// "defaults" when nothing was set; only settings the run's recipe reads
// are listed. A recipe set in Go says so ("the program's recipe
// (Config.Use): block/E4M3/x1w2g1"). For bf16, that it has none and where
// mixed_precision came from ("none: bf16 has no recipe settings
// (mixed_precision from -precision bf16)"); "" for float32.
func (p *Config) Describe() string {
	m, _ := p.mode()
	if m == "bf16" {
		from := "code"
		if src, ok := p.src["mixed_precision"]; ok && src.Kind != FromCode {
			from = src.describe(p.raw["mixed_precision"])
		}
		return "none: bf16 has no recipe settings (mixed_precision from " + from + ")"
	}
	if m != "fp8" {
		return ""
	}
	var parts []string
	of := func(s setting) bool { return false }
	if p.Use != nil || p.Custom != nil {
		field, label, _ := p.goRecipe()
		parts = append(parts, fmt.Sprintf("the program's recipe (%s): %s", field, label))
		of = func(s setting) bool { return !s.top && !s.recipeSetting() }
	} else if b, err := p.backend(); err == nil {
		of = func(s setting) bool { return s.of(b) }
	}
	for _, s := range settings {
		if !of(s) {
			continue
		}
		if src, ok := p.src[s.key]; ok && src.Kind != FromCode {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", s.key, p.raw[s.key], src))
		} else if v := s.get(p); v != "" {
			parts = append(parts, fmt.Sprintf("%s %s (code)", s.key, v))
		}
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, ", ") + "; the rest defaults"
}

// Settings lists every setting given by a source other than Go code, in
// a fixed order, as "key value (source)".
func (p *Config) Settings() []string {
	var out []string
	for _, s := range settings {
		if src, ok := p.src[s.key]; ok && src.Kind != FromCode {
			out = append(out, fmt.Sprintf("%s %s (%s)", s.key, p.raw[s.key], src))
		}
	}
	return out
}

// SourceKind says what kind of source set a setting.
type SourceKind uint8

const (
	// FromCode: the value the program set in Go (or the default).
	FromCode SourceKind = iota
	// FromFile: an Accelerate config file.
	FromFile
	// FromEnv: an environment variable.
	FromEnv
	// FromFlag: a command-line flag.
	FromFlag
)

// Source is where one setting came from.
type Source struct {
	Kind SourceKind
	// Name is the variable ("OCTET_FP8_MARGIN"), flag ("-format") or
	// file.
	Name string
	// Line is the config file's line (FromFile).
	Line int
}

// String names the source: "OCTET_FP8_MARGIN", "-format",
// "accelerate.yaml:7", or "code".
func (s Source) String() string {
	switch s.Kind {
	case FromFile:
		return fmt.Sprintf("%s:%d", s.Name, s.Line)
	case FromCode:
		return "code"
	}
	return s.Name
}

func (s Source) describe(raw string) string {
	if s.Kind == FromEnv {
		return s.Name + "=" + raw
	}
	return fmt.Sprintf("%s %s", s, raw)
}

// DisplayName is a run's precision as summaries say it: "FP8",
// "float32" (for "fp32") or the name itself ("bf16").
func DisplayName(p string) string {
	switch p {
	case "fp8":
		return "FP8"
	case "fp32":
		return "float32"
	}
	return p
}
