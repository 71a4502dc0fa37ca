package fp8

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Recipe is a mixed-precision recipe: TERecipe (delayed scaling, MXFP8),
// Float8BlockRecipe, NVFP4Recipe, CustomRecipe, AORecipe, MSAMPRecipe or
// BF16Recipe. The compiler and the trainer ask it what they need through
// these methods, never by its type.
type Recipe interface {
	// Backend names the backend.
	Backend() Backend
	// Validate reports settings that cannot work.
	Validate() error
	// Label names the recipe as summaries and checkpoints say it:
	// "te/HYBRID", "te/E4M3/mxfp8", "block/E4M3/x1w2g1" (with
	// "/fp32-scales" and "/eps=…" when set), "nvfp4" (with "/no-rht",
	// "/no-sr", "/no-2d", "/keep-first=N", "/keep-last=N"), "custom",
	// "ao/rowwise", "msamp/O2", "bf16".
	Label() string
	// EvalQuantized reports whether evaluation programs run the
	// converted layers as training does (TE's use_autocast_during_eval;
	// always for the AO and MS-AMP recipes and bf16) rather than in
	// float32.
	EvalQuantized() bool
	// Float8AllGather reports whether, under FSDP, sharded weights are
	// all-gathered as their FP8 casts (1 byte a weight on the wire).
	Float8AllGather() bool
	// LowBitOptimizer returns the MS-AMP recipe whose low-bit AdamW
	// (optim.NewLowBitAdam) the weights train with, and false for a
	// recipe that leaves the optimizer to the caller.
	LowBitOptimizer() (MSAMPRecipe, bool)
	// Lowerer lowers each linear layer to quantizers of its GEMMs'
	// operands and gives its scaling state: passes.ConvertLinear asks
	// nothing else.
	Lowerer
}

// Backend returns BackendTE.
func (TERecipe) Backend() Backend { return BackendTE }

// Backend returns BackendAO.
func (AORecipe) Backend() Backend { return BackendAO }

// Backend returns BackendMSAMP.
func (MSAMPRecipe) Backend() Backend { return BackendMSAMP }

// BF16Recipe is bf16 mixed precision, Accelerate's mixed_precision="bf16"
// for linear layers: each converted layer's three GEMMs (fprop, dgrad,
// wgrad) read their float32 operands rounded to bfloat16 (nearest even)
// and accumulate in float32; weights, gradients and optimizer states stay
// float32 (the master copy), and nothing else changes. Unlike the FP8
// recipes there is no scaling state and no shape condition: every linear
// layer converts unless a filter excludes it, and evaluation runs in bf16
// too, as under Accelerate's autocast. On CPUs with AVX512_BF16 the
// GEMMs run on the bf16 dot-product units at about twice the float32 rate.
type BF16Recipe struct{}

// Backend returns BackendBF16.
func (BF16Recipe) Backend() Backend { return BackendBF16 }

// Validate accepts the recipe (it has no settings).
func (BF16Recipe) Validate() error { return nil }

// FormatRecipe chooses the FP8 format of each tensor of a linear layer.
type FormatRecipe uint8

const (
	// Hybrid uses E4M3 for forward tensors (input, weight, output) and
	// E5M2 for backward ones (grad_output, grad_input). The default.
	Hybrid FormatRecipe = iota
	// AllE4M3 uses E4M3 for every tensor.
	AllE4M3
	// AllE5M2 uses E5M2 for every tensor. Transformer Engine refuses it;
	// Octet allows it, but E5M2's 2-bit mantissa makes forward GEMMs
	// coarse and training may diverge.
	AllE5M2
)

// String returns "HYBRID", "E4M3" or "E5M2".
func (r FormatRecipe) String() string {
	switch r {
	case AllE4M3:
		return "E4M3"
	case AllE5M2:
		return "E5M2"
	}
	return "HYBRID"
}

// ParseFormatRecipe maps "HYBRID", "E4M3" or "E5M2" (any case) to a
// FormatRecipe.
func ParseFormatRecipe(s string) (FormatRecipe, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "HYBRID":
		return Hybrid, nil
	case "E4M3":
		return AllE4M3, nil
	case "E5M2":
		return AllE5M2, nil
	}
	return 0, fmt.Errorf("fp8: unknown fp8_format %q (want HYBRID, E4M3 or E5M2)", s)
}

// Forward returns the format of forward tensors.
func (r FormatRecipe) Forward() Format {
	if r == AllE5M2 {
		return E5M2
	}
	return E4M3
}

// Backward returns the format of backward tensors (gradients).
func (r FormatRecipe) Backward() Format {
	if r == AllE4M3 {
		return E4M3
	}
	return E5M2
}

// Override keeps some of a linear layer's GEMMs in high precision
// (Accelerate's override_linear_precision = (fprop, dgrad, wgrad)).
type Override struct {
	Fprop, Dgrad, Wgrad bool
}

// String formats the override as "(fprop=false, dgrad=false, wgrad=true)".
func (o Override) String() string {
	return fmt.Sprintf("(fprop=%v, dgrad=%v, wgrad=%v)", o.Fprop, o.Dgrad, o.Wgrad)
}

// TERecipe is Transformer Engine delayed scaling as Accelerate's
// TERecipeKwargs configures it. The zero value is the documented default:
// margin 0, interval 1, HYBRID, a 1024-step history, most_recent, no
// precision override, no FP8 in evaluation, no MXFP8.
type TERecipe struct {
	// Margin divides the scale by 2^Margin.
	Margin int
	// Interval is how many steps pass between scale updates; 0 means 1.
	Interval int
	// Format chooses E4M3/E5M2 per tensor.
	Format FormatRecipe
	// AmaxHistoryLen is the length of the amax window; 0 means 1024.
	AmaxHistoryLen int
	// AmaxComputeAlgo is most_recent (the zero value) or max.
	AmaxComputeAlgo AmaxAlgo
	// OverrideLinearPrecision keeps the named GEMMs in float32.
	OverrideLinearPrecision Override
	// UseAutocastDuringEval runs FP8 in evaluation programs too.
	UseAutocastDuringEval bool
	// UseMXFP8BlockScaling replaces delayed scaling with MXFP8 block
	// scaling (32 values per E8M0 scale, elements in Format's forward
	// format). The amax settings do not apply and must stay unset.
	UseMXFP8BlockScaling bool
	// MXFP8Rule chooses the block exponent rule (TE's round-up by
	// default).
	MXFP8Rule ExpRule

	amaxSet bool // an amax setting came from the environment
}

// DefaultAmaxHistoryLen is the window length when none is given.
const DefaultAmaxHistoryLen = 1024

// MaxAmaxHistoryLen bounds the window (64 Ki entries, 256 KiB per
// tensor): far beyond what delayed scaling uses (TE's default is 1024),
// and a guard against a typo allocating gigabytes per layer.
const MaxAmaxHistoryLen = 1 << 16

// HistoryLen returns the effective amax window length.
func (r TERecipe) HistoryLen() int {
	if r.AmaxHistoryLen == 0 {
		return DefaultAmaxHistoryLen
	}
	return r.AmaxHistoryLen
}

// EffectiveInterval returns the effective update interval.
func (r TERecipe) EffectiveInterval() int { return max(r.Interval, 1) }

// Validate reports settings that cannot work, naming the field.
func (r TERecipe) Validate() error {
	switch {
	case r.Margin < 0:
		return fmt.Errorf("fp8: TE recipe: margin %d, want ≥ 0", r.Margin)
	case r.Interval < 0:
		return fmt.Errorf("fp8: TE recipe: interval %d, want ≥ 1", r.Interval)
	case r.AmaxHistoryLen < 0:
		return fmt.Errorf("fp8: TE recipe: amax_history_len %d, want ≥ 1", r.AmaxHistoryLen)
	case r.AmaxHistoryLen > MaxAmaxHistoryLen:
		return fmt.Errorf("fp8: TE recipe: amax_history_len %d is above the maximum %d", r.AmaxHistoryLen, MaxAmaxHistoryLen)
	case r.Format > AllE5M2:
		return fmt.Errorf("fp8: TE recipe: fp8_format %d, want HYBRID, E4M3 or E5M2", r.Format)
	case r.AmaxComputeAlgo > MaxAlgo:
		return fmt.Errorf("fp8: TE recipe: amax_compute_algo %d, want max or most_recent", r.AmaxComputeAlgo)
	case r.MXFP8Rule > ExpOCPFloor:
		return fmt.Errorf("fp8: TE recipe: MXFP8 exponent rule %d, want round_up or ocp_floor", r.MXFP8Rule)
	}
	if r.UseMXFP8BlockScaling && (r.AmaxHistoryLen != 0 || r.AmaxComputeAlgo != MostRecent || r.amaxSet) {
		return fmt.Errorf("fp8: TE recipe: amax_history_len and amax_compute_algo do not apply to MXFP8 block scaling; unset them or set use_mxfp8_block_scaling=false")
	}
	if !r.UseMXFP8BlockScaling {
		for _, f := range []Format{r.Format.Forward(), r.Format.Backward()} {
			if m := f.MaxMargin(); r.Margin > m {
				return fmt.Errorf("fp8: TE recipe: margin %d divides every scale by 2^%d, which sends a tensor's largest value below %v's smallest subnormal (every cast would be zero); at most %d", r.Margin, r.Margin, f, m)
			}
		}
	}
	return nil
}

// MaxMargin is the largest delayed-scaling margin that keeps a tensor's
// amax representable: with margin m the amax casts to max/2^m, which must
// not fall below the smallest subnormal (17 for E4M3, 31 for E5M2).
func (f Format) MaxMargin() int {
	_, e := math.Frexp(float64(f.Max()) / float64(f.MinSubnormal()))
	return e - 1
}

// NewMeta returns the delayed-scaling state for one tensor of this
// recipe; backward selects the gradient format.
func (r TERecipe) NewMeta(backward bool) *Meta {
	f := r.Format.Forward()
	if backward {
		f = r.Format.Backward()
	}
	return NewMeta(f, r.HistoryLen(), r.Margin, r.AmaxComputeAlgo, r.EffectiveInterval())
}

// Granularity is how many scales a cast uses.
type Granularity uint8

const (
	// Tensorwise uses one scale for the whole tensor.
	Tensorwise Granularity = iota
	// Axiswise uses one scale per slice along the GEMM's contraction
	// dimension ("rowwise").
	Axiswise
)

// String returns "tensorwise" or "axiswise".
func (g Granularity) String() string {
	if g == Axiswise {
		return "axiswise"
	}
	return "tensorwise"
}

// CastConfig says how one GEMM operand is cast (torchao's CastConfig).
type CastConfig struct {
	// Disabled keeps the operand in high precision (ScalingType.DISABLED).
	Disabled bool
	// Granularity is tensorwise or axiswise.
	Granularity Granularity
	// Format is the target format.
	Format Format
}

// String formats the config as "E4M3/tensorwise" or "disabled".
func (c CastConfig) String() string {
	if c.Disabled {
		return "disabled"
	}
	return c.Format.String() + "/" + c.Granularity.String()
}

// AORecipe is torchao's Float8LinearConfig as Accelerate's AORecipeKwargs
// passes it: dynamic (current) scaling with one cast config per GEMM
// operand. Build one with NewAORecipe; the zero value is not valid.
type AORecipe struct {
	// Name is "tensorwise", "rowwise", "rowwise_with_gw_hp" or "custom".
	Name string
	// Input, Weight and GradOutput are the casts of the three tensors.
	Input, Weight, GradOutput CastConfig
	// InputForGradWeight, WeightForGradInput and GradOutputForGradWeight
	// override the cast of a tensor for one backward GEMM.
	InputForGradWeight, WeightForGradInput, GradOutputForGradWeight CastConfig
	// RoundScalesToPowerOf2 rounds every scale down to a power of two.
	RoundScalesToPowerOf2 bool
	// PadInnerDim zero-pads inner dimensions to a multiple of 16 so that
	// any shape runs in FP8 (Accelerate defaults it to true).
	PadInnerDim bool
	// EnableFSDPFloat8AllGather casts sharded weights to FP8 before the
	// all-gather (Accelerate defaults it to true; tensorwise weights only).
	EnableFSDPFloat8AllGather bool
	// ModuleFilter, if set, decides which layers convert: it gets the
	// layer (a *graph.Node in Octet's passes) and its fully qualified name.
	// When nil, the default keeps the first and last linear layers and any
	// layer whose dims are not divisible by 16 in high precision.
	ModuleFilter func(layer any, fqn string) bool
}

// AO recipe names.
const (
	AOTensorwise       = "tensorwise"
	AORowwise          = "rowwise"
	AORowwiseWithGWHP  = "rowwise_with_gw_hp"
	aoCustom           = "custom"
	aoRecipeNamesHuman = "tensorwise, rowwise or rowwise_with_gw_hp"
)

// NewAORecipe returns one of torchao's named recipes with Accelerate's
// defaults (pad_inner_dim and enable_fsdp_float8_all_gather on, the latter
// off for rowwise recipes whose weights are not tensorwise):
//
//   - tensorwise: input and weight E4M3, grad_output E5M2, one scale each.
//   - rowwise: every tensor E4M3 with axiswise scales, rounded down to
//     powers of two.
//   - rowwise_with_gw_hp: every tensor E4M3 with axiswise scales, but the
//     weight for grad_input is tensorwise and the grad_weight GEMM runs in
//     high precision; scales are not rounded (as in current torchao).
func NewAORecipe(name string) (AORecipe, error) {
	e4 := CastConfig{Format: E4M3}
	switch name {
	case AOTensorwise, "":
		r := AORecipe{Name: AOTensorwise, Input: e4, Weight: e4, GradOutput: CastConfig{Format: E5M2},
			PadInnerDim: true, EnableFSDPFloat8AllGather: true}
		r.fillDefaults()
		return r, nil
	case AORowwise:
		ax := CastConfig{Format: E4M3, Granularity: Axiswise}
		r := AORecipe{Name: AORowwise, Input: ax, Weight: ax, GradOutput: ax, RoundScalesToPowerOf2: true, PadInnerDim: true}
		r.fillDefaults()
		return r, nil
	case AORowwiseWithGWHP:
		ax := CastConfig{Format: E4M3, Granularity: Axiswise}
		r := AORecipe{Name: AORowwiseWithGWHP, Input: ax, Weight: ax, GradOutput: ax,
			WeightForGradInput:      e4,
			InputForGradWeight:      CastConfig{Disabled: true, Format: E4M3},
			GradOutputForGradWeight: CastConfig{Disabled: true, Format: E4M3},
			PadInnerDim:             true}
		return r, nil
	}
	return AORecipe{}, fmt.Errorf("fp8: unknown AO recipe %q (want %s)", name, aoRecipeNamesHuman)
}

// fillDefaults makes the per-GEMM overrides equal to the tensors' casts.
func (r *AORecipe) fillDefaults() {
	r.InputForGradWeight = r.Input
	r.WeightForGradInput = r.Weight
	r.GradOutputForGradWeight = r.GradOutput
}

// Validate reports combinations torchao refuses, saying what to change.
func (r AORecipe) Validate() error {
	gemms := []struct {
		name string
		a, b CastConfig
	}{
		{"output (fprop)", r.Input, r.Weight},
		{"grad_input (dgrad)", r.GradOutput, r.WeightForGradInput},
		{"grad_weight (wgrad)", r.GradOutputForGradWeight, r.InputForGradWeight},
	}
	for _, g := range gemms {
		if g.a.Disabled != g.b.Disabled {
			return fmt.Errorf("fp8: AO recipe %q: the %s GEMM has one operand in high precision and one in FP8 (%v, %v); disable both or neither", r.Name, g.name, g.a, g.b)
		}
		if !g.a.Disabled && g.a.Format == E5M2 && g.b.Format == E5M2 {
			return fmt.Errorf("fp8: AO recipe %q: the %s GEMM has both operands in E5M2; make at least one E4M3", r.Name, g.name)
		}
	}
	for _, c := range []CastConfig{r.Input, r.Weight, r.GradOutput, r.InputForGradWeight, r.WeightForGradInput, r.GradOutputForGradWeight} {
		if c.Format > E5M2 || c.Granularity > Axiswise {
			return fmt.Errorf("fp8: AO recipe %q: cast config %+v is not valid", r.Name, c)
		}
	}
	if r.EnableFSDPFloat8AllGather && (r.Weight.Disabled || r.Weight.Granularity != Tensorwise) {
		return fmt.Errorf("fp8: AO recipe %q: enable_fsdp_float8_all_gather needs tensorwise FP8 weights (weight cast is %v); turn it off or use the tensorwise recipe", r.Name, r.Weight)
	}
	return nil
}

// MSAMPRecipe is MS-AMP's optimization level as Accelerate's
// MSAMPRecipeKwargs sets it. The zero value is O2.
type MSAMPRecipe struct {
	// OptLevel is "O1" or "O2"; "" means O2.
	OptLevel string
}

// Level returns the effective level, "O1" or "O2".
func (r MSAMPRecipe) Level() string {
	if r.OptLevel == "" {
		return "O2"
	}
	return strings.ToUpper(r.OptLevel)
}

// GEMMRecipe returns the delayed-scaling recipe MS-AMP's FP8 linear
// layers follow: HYBRID formats, the most recent amax (a one-step window)
// and power-of-two scales (see NewMeta's Pow2).
func (r MSAMPRecipe) GEMMRecipe() TERecipe {
	return TERecipe{Format: Hybrid, AmaxHistoryLen: 1, AmaxComputeAlgo: MostRecent}
}

// Validate accepts O1 and O2 and explains why O3 is not offered.
func (r MSAMPRecipe) Validate() error {
	switch r.Level() {
	case "O1", "O2":
		return nil
	case "O3":
		return fmt.Errorf("fp8: MS-AMP opt_level O3 (ZeRO with FP8 weights) exists only through DeepSpeed and Accelerate does not offer it; use O2, or FSDP with float8 all-gather for sharded FP8 weights")
	}
	return fmt.Errorf("fp8: MS-AMP opt_level %q, want O1 or O2", r.OptLevel)
}

// EnvPrefix starts the names of the environment variables recipes read.
const EnvPrefix = "OCTET_FP8_"

// envFields lists, for each backend, the fields its *RecipeFromEnv reads
// from EnvPrefix+field, in the order it reads them (a test holds the
// readers to this list).
var envFields = map[Backend][]string{
	BackendTE: {"MARGIN", "INTERVAL", "FORMAT", "AMAX_HISTORY_LEN", "AMAX_COMPUTE_ALGO", "OVERRIDE_FPROP", "OVERRIDE_DGRAD",
		"OVERRIDE_WGRAD", "USE_AUTOCAST_DURING_EVAL", "USE_MXFP8_BLOCK_SCALING", "MXFP8_RULE"},
	BackendAO:    {"RECIPE_NAME", "PAD_INNER_DIM", "ENABLE_FSDP_FLOAT8_ALL_GATHER", "ROUND_SCALES_TO_POWER_OF_2"},
	BackendMSAMP: {"OPT_LEVEL"},
}

// EnvFields returns the fields a backend's recipe reads from the
// environment (OCTET_FP8_<FIELD>), so that a program can say where each
// setting came from.
func EnvFields(b Backend) []string { return append([]string(nil), envFields[b]...) }

// envReader reads OCTET_FP8_* variables through lookup, keeping the first
// error, which names the variable and its allowed values.
type envReader struct {
	lookup func(string) (string, bool)
	err    error
}

func (e *envReader) get(field string) (string, string, bool) {
	name := EnvPrefix + field
	v, ok := e.lookup(name)
	return name, strings.TrimSpace(v), ok && e.err == nil
}

func (e *envReader) fail(name, val, allowed string) {
	if e.err == nil {
		e.err = fmt.Errorf("fp8: environment variable %s=%q is not valid (want %s)", name, val, allowed)
	}
}

func (e *envReader) int(field string, dst *int, min int) bool {
	name, v, ok := e.get(field)
	if !ok {
		return false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		e.fail(name, v, fmt.Sprintf("an integer ≥ %d", min))
		return false
	}
	*dst = n
	return true
}

func (e *envReader) bool(field string, dst *bool) {
	name, v, ok := e.get(field)
	if !ok {
		return
	}
	b, ok := ParseSwitch(v)
	if !ok {
		e.fail(name, v, SwitchWords)
		return
	}
	*dst = b
}

// SwitchWords says which words ParseSwitch takes.
const SwitchWords = "true or false (1/0, yes/no, on/off, y/n, t/f)"

// ParseSwitch reads an on/off setting as every reader of Octet's
// settings (environment variables, flags, config files) does: 1, true,
// yes, on, y, t for true; 0, false, no, off, n, f and the empty string for
// false; any case, surrounding spaces ignored.
func ParseSwitch(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on", "y", "t":
		return true, true
	case "0", "false", "no", "off", "n", "f", "":
		return false, true
	}
	return false, false
}

// TERecipeFromEnv returns base with every field that has an environment
// variable (OCTET_FP8_MARGIN, _INTERVAL, _FORMAT, _AMAX_HISTORY_LEN,
// _AMAX_COMPUTE_ALGO, _OVERRIDE_FPROP, _OVERRIDE_DGRAD, _OVERRIDE_WGRAD,
// _USE_AUTOCAST_DURING_EVAL, _USE_MXFP8_BLOCK_SCALING, _MXFP8_RULE)
// replaced by its value, then validated.
func TERecipeFromEnv(base TERecipe) (TERecipe, error) {
	return teRecipeFrom(base, os.LookupEnv)
}

func teRecipeFrom(r TERecipe, lookup func(string) (string, bool)) (TERecipe, error) {
	e := &envReader{lookup: lookup}
	e.int("MARGIN", &r.Margin, 0)
	e.int("INTERVAL", &r.Interval, 1)
	if name, v, ok := e.get("FORMAT"); ok {
		f, err := ParseFormatRecipe(v)
		if err != nil {
			e.fail(name, v, "HYBRID, E4M3 or E5M2")
		}
		r.Format = f
	}
	if e.int("AMAX_HISTORY_LEN", &r.AmaxHistoryLen, 1) {
		r.amaxSet = true
		if r.AmaxHistoryLen > MaxAmaxHistoryLen {
			e.fail(EnvPrefix+"AMAX_HISTORY_LEN", strconv.Itoa(r.AmaxHistoryLen), fmt.Sprintf("an integer from 1 to %d", MaxAmaxHistoryLen))
		}
	}
	if name, v, ok := e.get("AMAX_COMPUTE_ALGO"); ok {
		a, err := ParseAmaxAlgo(v)
		if err != nil {
			e.fail(name, v, "max or most_recent")
		}
		r.AmaxComputeAlgo = a
		r.amaxSet = true
	}
	e.bool("OVERRIDE_FPROP", &r.OverrideLinearPrecision.Fprop)
	e.bool("OVERRIDE_DGRAD", &r.OverrideLinearPrecision.Dgrad)
	e.bool("OVERRIDE_WGRAD", &r.OverrideLinearPrecision.Wgrad)
	e.bool("USE_AUTOCAST_DURING_EVAL", &r.UseAutocastDuringEval)
	e.bool("USE_MXFP8_BLOCK_SCALING", &r.UseMXFP8BlockScaling)
	if name, v, ok := e.get("MXFP8_RULE"); ok {
		switch v {
		case "round_up":
			r.MXFP8Rule = ExpRoundUp
		case "ocp_floor":
			r.MXFP8Rule = ExpOCPFloor
		default:
			e.fail(name, v, "round_up or ocp_floor")
		}
	}
	if e.err != nil {
		return TERecipe{}, e.err
	}
	if err := r.Validate(); err != nil {
		return TERecipe{}, err
	}
	return r, nil
}

// AORecipeFromEnv returns base, or the named recipe given by
// OCTET_FP8_RECIPE_NAME, with OCTET_FP8_PAD_INNER_DIM,
// _ENABLE_FSDP_FLOAT8_ALL_GATHER and _ROUND_SCALES_TO_POWER_OF_2 applied,
// then validated.
func AORecipeFromEnv(base AORecipe) (AORecipe, error) { return aoRecipeFrom(base, os.LookupEnv) }

func aoRecipeFrom(r AORecipe, lookup func(string) (string, bool)) (AORecipe, error) {
	e := &envReader{lookup: lookup}
	if name, v, ok := e.get("RECIPE_NAME"); ok {
		named, err := NewAORecipe(strings.ToLower(v))
		if err != nil {
			e.fail(name, v, aoRecipeNamesHuman)
		} else {
			named.ModuleFilter = r.ModuleFilter
			r = named
		}
	}
	e.bool("PAD_INNER_DIM", &r.PadInnerDim)
	e.bool("ENABLE_FSDP_FLOAT8_ALL_GATHER", &r.EnableFSDPFloat8AllGather)
	e.bool("ROUND_SCALES_TO_POWER_OF_2", &r.RoundScalesToPowerOf2)
	if e.err != nil {
		return AORecipe{}, e.err
	}
	if err := r.Validate(); err != nil {
		return AORecipe{}, err
	}
	return r, nil
}

// MSAMPRecipeFromEnv returns base with OCTET_FP8_OPT_LEVEL applied, then
// validated.
func MSAMPRecipeFromEnv(base MSAMPRecipe) (MSAMPRecipe, error) {
	return msampRecipeFrom(base, os.LookupEnv)
}

func msampRecipeFrom(r MSAMPRecipe, lookup func(string) (string, bool)) (MSAMPRecipe, error) {
	e := &envReader{lookup: lookup}
	if name, v, ok := e.get("OPT_LEVEL"); ok {
		switch strings.ToUpper(v) {
		case "O1", "O2", "O3":
			r.OptLevel = strings.ToUpper(v)
		default:
			e.fail(name, v, "O1 or O2")
		}
	}
	if e.err != nil {
		return MSAMPRecipe{}, e.err
	}
	if err := r.Validate(); err != nil {
		return MSAMPRecipe{}, err
	}
	return r, nil
}

// Float8BlockRecipe is Transformer Engine 2.x's Float8BlockScaling
// recipe (DeepSeek-V3's scheme; torchao's blockwise_fp8_training): every
// GEMM operand cast with a float32 scale per 1×128 block along its
// contraction axis (1-D) or per 128×128 tile (2-D), computed from the
// block's own amax at each cast, so there is no scaling state. The zero
// value is Transformer Engine's default: E4M3 for every tensor, 1-D
// blocks for inputs and gradients, 2-D tiles for weights, power-of-two
// scales, amax epsilon 0.
type Float8BlockRecipe struct {
	// Hybrid casts gradients to E5M2 (fp8_format HYBRID); by default
	// every tensor is E4M3. E5M2 for every tensor is refused, as
	// Transformer Engine refuses it.
	Hybrid bool
	// XBlockDim, WBlockDim and GradBlockDim are 1 or 2 for the input,
	// weight and gradient (0: the defaults 1, 2, 1). No GEMM multiplies
	// two 2-D operands: fprop is input × weight, dgrad gradient × weight,
	// wgrad gradient × input.
	XBlockDim, WBlockDim, GradBlockDim int
	// FP32Scales keeps each block's scale as computed instead of
	// rounding it down to a power of two
	// (NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1).
	FP32Scales bool
	// AmaxEpsilon floors each block's amax.
	AmaxEpsilon float32
	// UseAutocastDuringEval runs FP8 in evaluation programs too.
	UseAutocastDuringEval bool
	// FSDPFloat8AllGather, under FSDP, gathers each weight as its block
	// cast (1 byte per element and its block scales) instead of float32
	// (enable_fsdp_float8_all_gather).
	FSDPFloat8AllGather bool
}

// Backend returns BackendTE.
func (Float8BlockRecipe) Backend() Backend { return BackendTE }

// Dims returns the effective block dimensions of the input, weight and
// gradient.
func (r Float8BlockRecipe) Dims() (x, w, grad int) {
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return def(r.XBlockDim, 1), def(r.WBlockDim, 2), def(r.GradBlockDim, 1)
}

// Cast returns the block cast of one of a layer's tensors.
func (r Float8BlockRecipe) Cast(t TensorRole) Float8BlockCast {
	x, w, g := r.Dims()
	c := Float8BlockCast{Dim: x, Format: E4M3, FP32Scales: r.FP32Scales, Eps: r.AmaxEpsilon}
	switch t {
	case RoleWeight:
		c.Dim = w
	case RoleGradOutput:
		c.Dim = g
		if r.Hybrid {
			c.Format = E5M2
		}
	}
	return c
}

// FormatName returns "E4M3" or "HYBRID".
func (r Float8BlockRecipe) FormatName() string {
	if r.Hybrid {
		return "HYBRID"
	}
	return "E4M3"
}

// Validate reports settings that cannot work, naming the field.
func (r Float8BlockRecipe) Validate() error {
	for _, d := range []struct {
		name string
		v    int
	}{{"x_block_scaling_dim", r.XBlockDim}, {"w_block_scaling_dim", r.WBlockDim}, {"grad_block_scaling_dim", r.GradBlockDim}} {
		if d.v < 0 || d.v > 2 {
			return fmt.Errorf("fp8: Float8BlockScaling recipe: %s %d, want 1 (1×128 blocks) or 2 (128×128 tiles)", d.name, d.v)
		}
	}
	x, w, g := r.Dims()
	for _, p := range []struct {
		gemm, a, b string
		da, db     int
	}{{"fprop", "x_block_scaling_dim", "w_block_scaling_dim", x, w}, {"dgrad", "grad_block_scaling_dim", "w_block_scaling_dim", g, w},
		{"wgrad", "grad_block_scaling_dim", "x_block_scaling_dim", g, x}} {
		if p.da == 2 && p.db == 2 {
			return fmt.Errorf("fp8: Float8BlockScaling recipe: %s and %s are both 2, so the %s GEMM would multiply two 128×128-tiled operands; make one of them 1", p.a, p.b, p.gemm)
		}
	}
	if !(r.AmaxEpsilon >= 0) || math.IsInf(float64(r.AmaxEpsilon), 0) {
		return fmt.Errorf("fp8: Float8BlockScaling recipe: amax_epsilon %v, want a finite number ≥ 0", r.AmaxEpsilon)
	}
	return nil
}

// ParseFloat8BlockFormat maps fp8_format for Float8BlockScaling: "E4M3"
// (or "") and "HYBRID" (any case); E5M2 is refused.
func ParseFloat8BlockFormat(s string) (hybrid bool, err error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "E4M3":
		return false, nil
	case "HYBRID":
		return true, nil
	case "E5M2":
		return false, fmt.Errorf("fp8: Float8BlockScaling recipe: fp8_format E5M2 is refused (Transformer Engine's block scaling takes E4M3 or HYBRID)")
	}
	return false, fmt.Errorf("fp8: Float8BlockScaling recipe: unknown fp8_format %q (want E4M3 or HYBRID)", s)
}

// NVFP4Recipe is Transformer Engine 2.x's NVFP4BlockScaling recipe: every
// GEMM operand cast to 4-bit E2M1 elements with an E4M3 scale per 16
// values along its contraction axis and a float32 scale per tensor,
// computed at each cast (no scaling state). The zero value is
// Transformer Engine's default: weights in 16×16 tiles, inputs and
// gradients in 1×16 blocks, the random Hadamard transform on the
// operands of the weight-gradient GEMM, gradients rounded
// stochastically.
type NVFP4Recipe struct {
	// DisableRHT, DisableStochasticRounding and Disable2DQuantization
	// switch off the transform, the stochastic rounding of gradients and
	// the weights' 16×16 tiles (NVTE_NVFP4_DISABLE_RHT,
	// NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING,
	// NVTE_NVFP4_DISABLE_2D_QUANTIZATION).
	DisableRHT, DisableStochasticRounding, Disable2DQuantization bool
	// KeepFirst and KeepLast keep the first and the last N linear
	// layers (in graph order) in high precision; the NVFP4 training
	// recipe keeps about the last 15% of them so.
	KeepFirst, KeepLast int
	// Seed seeds the stochastic rounding (with each cast's node and the
	// step, so that a resumed run draws the same).
	Seed uint64
	// UseAutocastDuringEval runs NVFP4 in evaluation programs too.
	UseAutocastDuringEval bool
}

// Backend returns BackendTE.
func (NVFP4Recipe) Backend() Backend { return BackendTE }

// Validate reports settings that cannot work, naming the field.
func (r NVFP4Recipe) Validate() error {
	if r.KeepFirst < 0 || r.KeepLast < 0 {
		return fmt.Errorf("fp8: NVFP4 recipe: keep_first %d and keep_last %d, want ≥ 0", r.KeepFirst, r.KeepLast)
	}
	return nil
}

// Cast returns how one of a layer's tensors is cast for one of its GEMMs
// (wgrad: the weight-gradient GEMM, where the transform applies).
func (r NVFP4Recipe) Cast(t TensorRole, wgrad bool) NVFP4Cast {
	c := NVFP4Cast{}
	switch t {
	case RoleWeight:
		c.TwoD = !r.Disable2DQuantization
	case RoleGradOutput:
		c.Stochastic = !r.DisableStochasticRounding
		c.RHT = wgrad && !r.DisableRHT
	default:
		c.RHT = wgrad && !r.DisableRHT
	}
	return c
}
