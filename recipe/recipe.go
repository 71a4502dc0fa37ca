package recipe

import (
	"fmt"
	"math"
	"strings"

	"github.com/octetml/octet/fp8"
)

// Recipe is a mixed-precision recipe: TE (delayed scaling, MXFP8),
// Float8Block, NVFP4, Custom, AO, MSAMP or
// BF16. The compiler and the trainer ask it what they need through
// these methods, never by its type.
type Recipe interface {
	// Backend names the backend.
	Backend() fp8.Backend
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
	LowBitOptimizer() (MSAMP, bool)
	// Lowerer lowers each linear layer to quantizers of its GEMMs'
	// operands and gives its scaling state: passes.ConvertLinear asks
	// nothing else.
	Lowerer
}

// Backend returns BackendTE.
func (TE) Backend() fp8.Backend { return fp8.BackendTE }

// Backend returns BackendAO.
func (AO) Backend() fp8.Backend { return fp8.BackendAO }

// Backend returns BackendMSAMP.
func (MSAMP) Backend() fp8.Backend { return fp8.BackendMSAMP }

// BF16 is bf16 mixed precision, Accelerate's mixed_precision="bf16"
// for linear layers: each converted layer's three GEMMs (fprop, dgrad,
// wgrad) read their float32 operands rounded to bfloat16 (nearest even)
// and accumulate in float32; weights, gradients and optimizer states stay
// float32 (the master copy), and nothing else changes. Unlike the FP8
// recipes there is no scaling state and no shape condition: every linear
// layer converts unless a filter excludes it, and evaluation runs in bf16
// too, as under Accelerate's autocast. On CPUs with AVX512_BF16 the
// GEMMs run on the bf16 dot-product units at about twice the float32 rate.
type BF16 struct{}

// Backend returns BackendBF16.
func (BF16) Backend() fp8.Backend { return fp8.BackendBF16 }

// Validate accepts the recipe (it has no settings).
func (BF16) Validate() error { return nil }

// Formats chooses the FP8 format of each tensor of a linear layer.
type Formats uint8

const (
	// Hybrid uses E4M3 for forward tensors (input, weight, output) and
	// E5M2 for backward ones (grad_output, grad_input). The default.
	Hybrid Formats = iota
	// AllE4M3 uses E4M3 for every tensor.
	AllE4M3
	// AllE5M2 uses E5M2 for every tensor. Transformer Engine refuses it;
	// Octet allows it, but E5M2's 2-bit mantissa makes forward GEMMs
	// coarse and training may diverge.
	AllE5M2
)

// String returns "HYBRID", "E4M3" or "E5M2".
func (r Formats) String() string {
	switch r {
	case AllE4M3:
		return "E4M3"
	case AllE5M2:
		return "E5M2"
	}
	return "HYBRID"
}

// ParseFormatRecipe maps "HYBRID", "E4M3" or "E5M2" (any case) to a
// Formats.
func ParseFormats(s string) (Formats, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "HYBRID":
		return Hybrid, nil
	case "E4M3":
		return AllE4M3, nil
	case "E5M2":
		return AllE5M2, nil
	}
	return 0, refuse(on("fp8_format"), "recipe: unknown fp8_format %q (want HYBRID, E4M3 or E5M2)", s)
}

// Forward returns the format of forward tensors.
func (r Formats) Forward() fp8.Format {
	if r == AllE5M2 {
		return fp8.E5M2
	}
	return fp8.E4M3
}

// Backward returns the format of backward tensors (gradients).
func (r Formats) Backward() fp8.Format {
	if r == AllE4M3 {
		return fp8.E4M3
	}
	return fp8.E5M2
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

// TE is Transformer Engine delayed scaling as Accelerate's
// TERecipeKwargs configures it. The zero value is the documented default:
// margin 0, interval 1, HYBRID, a 1024-step history, most_recent, no
// precision override, no FP8 in evaluation, no MXFP8.
type TE struct {
	// Margin divides the scale by 2^Margin.
	Margin int
	// Interval is how many steps pass between scale updates; 0 means 1.
	Interval int
	// Format chooses E4M3/E5M2 per tensor.
	Format Formats
	// AmaxHistoryLen is the length of the amax window; 0 means 1024.
	AmaxHistoryLen int
	// AmaxComputeAlgo is most_recent (the zero value) or max.
	AmaxComputeAlgo fp8.AmaxAlgo
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
	MXFP8Rule fp8.ExpRule
	// DisableAmaxReduction keeps each data-parallel rank's amaxes its
	// own (TE's reduce_amax=False). By default, as in Transformer
	// Engine, the ranks all-reduce (MAX) every delayed-scaling amax at
	// the end of each step, so that every rank's scales come from the
	// global batch's amaxes, as one process's would.
	DisableAmaxReduction bool
}

// DefaultAmaxHistoryLen is the window length when none is given.
const DefaultAmaxHistoryLen = 1024

// MaxAmaxHistoryLen bounds the window (64 Ki entries, 256 KiB per
// tensor): far beyond what delayed scaling uses (TE's default is 1024),
// and a guard against a typo allocating gigabytes per layer.
const MaxAmaxHistoryLen = 1 << 16

// HistoryLen returns the effective amax window length.
func (r TE) HistoryLen() int {
	if r.AmaxHistoryLen == 0 {
		return DefaultAmaxHistoryLen
	}
	return r.AmaxHistoryLen
}

// EffectiveInterval returns the effective update interval.
func (r TE) EffectiveInterval() int { return max(r.Interval, 1) }

// Validate reports settings that cannot work, naming the field.
func (r TE) Validate() error {
	switch {
	case r.Margin < 0:
		return refuse(on("margin"), "recipe: TE recipe: margin %d, want ≥ 0", r.Margin)
	case r.Interval < 0:
		return refuse(on("interval"), "recipe: TE recipe: interval %d, want ≥ 1", r.Interval)
	case r.AmaxHistoryLen < 0:
		return refuse(on("amax_history_len"), "recipe: TE recipe: amax_history_len %d, want ≥ 1", r.AmaxHistoryLen)
	case r.AmaxHistoryLen > MaxAmaxHistoryLen:
		return refuse(on("amax_history_len"), "recipe: TE recipe: amax_history_len %d is above the maximum %d", r.AmaxHistoryLen, MaxAmaxHistoryLen)
	case r.Format > AllE5M2:
		return refuse(on("fp8_format"), "recipe: TE recipe: fp8_format %d, want HYBRID, E4M3 or E5M2", r.Format)
	case r.AmaxComputeAlgo > fp8.MaxAlgo:
		return refuse(on("amax_compute_algo"), "recipe: TE recipe: amax_compute_algo %d, want max or most_recent", r.AmaxComputeAlgo)
	case r.MXFP8Rule > fp8.ExpOCPFloor:
		return refuse(on("mxfp8_rule"), "recipe: TE recipe: MXFP8 exponent rule %d, want round_up or ocp_floor", r.MXFP8Rule)
	}
	if r.UseMXFP8BlockScaling && (r.AmaxHistoryLen != 0 || r.AmaxComputeAlgo != fp8.MostRecent) {
		return refuse(on("amax_history_len", "amax_compute_algo", "use_mxfp8_block_scaling"), "recipe: TE recipe: amax_history_len and amax_compute_algo do not apply to MXFP8 block scaling; unset them or set use_mxfp8_block_scaling=false")
	}
	if !r.UseMXFP8BlockScaling {
		for _, f := range []fp8.Format{r.Format.Forward(), r.Format.Backward()} {
			if m := f.MaxMargin(); r.Margin > m {
				return refuse(on("margin", "fp8_format"), "recipe: TE recipe: margin %d divides every scale by 2^%d, which sends a tensor's largest value below %v's smallest subnormal (every cast would be zero); at most %d", r.Margin, r.Margin, f, m)
			}
		}
	}
	return nil
}

// NewMeta returns the delayed-scaling state for one tensor of this
// recipe; backward selects the gradient format.
func (r TE) NewMeta(backward bool) *fp8.Meta {
	f := r.Format.Forward()
	if backward {
		f = r.Format.Backward()
	}
	return fp8.NewMeta(f, r.HistoryLen(), r.Margin, r.AmaxComputeAlgo, r.EffectiveInterval())
}

// AO is torchao's Float8LinearConfig as Accelerate's AORecipeKwargs
// passes it: dynamic (current) scaling with one cast per GEMM operand,
// each an fp8.Quantizer of kind CurrentScaling (Axiswise for torchao's
// rowwise granularity) or HighPrecision (torchao's ScalingType.DISABLED).
// Build one with NewAO; the zero value is not valid.
type AO struct {
	// Name is "tensorwise", "rowwise", "rowwise_with_gw_hp" or "custom".
	Name string
	// Input, Weight and GradOutput are the casts of the three tensors
	// (torchao's cast_config_input, _weight, _grad_output).
	Input, Weight, GradOutput fp8.Quantizer
	// InputForGradWeight, WeightForGradInput and GradOutputForGradWeight
	// override the cast of a tensor for one backward GEMM.
	InputForGradWeight, WeightForGradInput, GradOutputForGradWeight fp8.Quantizer
	// RoundScalesToPowerOf2 rounds every scale down to a power of two
	// (as does a cast's own Pow2).
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

// NewAO returns one of torchao's named recipes with Accelerate's
// defaults (pad_inner_dim and enable_fsdp_float8_all_gather on, the latter
// off for rowwise recipes whose weights are not tensorwise):
//
//   - tensorwise: input and weight E4M3, grad_output E5M2, one scale each.
//   - rowwise: every tensor E4M3 with axiswise scales, rounded down to
//     powers of two.
//   - rowwise_with_gw_hp: every tensor E4M3 with axiswise scales, but the
//     weight for grad_input is tensorwise and the grad_weight GEMM runs in
//     high precision; scales are not rounded (as in current torchao).
func NewAO(name string) (AO, error) {
	e4 := fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}
	ax := fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3, Axiswise: true}
	switch name {
	case AOTensorwise, "":
		r := AO{Name: AOTensorwise, Input: e4, Weight: e4, GradOutput: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E5M2},
			PadInnerDim: true, EnableFSDPFloat8AllGather: true}
		r.fillDefaults()
		return r, nil
	case AORowwise:
		r := AO{Name: AORowwise, Input: ax, Weight: ax, GradOutput: ax, RoundScalesToPowerOf2: true, PadInnerDim: true}
		r.fillDefaults()
		return r, nil
	case AORowwiseWithGWHP:
		r := AO{Name: AORowwiseWithGWHP, Input: ax, Weight: ax, GradOutput: ax,
			WeightForGradInput:      e4,
			InputForGradWeight:      fp8.Quantizer{},
			GradOutputForGradWeight: fp8.Quantizer{},
			PadInnerDim:             true}
		return r, nil
	}
	return AO{}, refuse(on("recipe_name"), "recipe: unknown AO recipe %q (want %s)", name, aoRecipeNamesHuman)
}

// fillDefaults makes the per-GEMM overrides equal to the tensors' casts.
func (r *AO) fillDefaults() {
	r.InputForGradWeight = r.Input
	r.WeightForGradInput = r.Weight
	r.GradOutputForGradWeight = r.GradOutput
}

// Validate reports combinations torchao refuses, saying what to change.
func (r AO) Validate() error {
	gemms := []struct {
		name string
		a, b fp8.Quantizer
	}{
		{"output (fprop)", r.Input, r.Weight},
		{"grad_input (dgrad)", r.GradOutput, r.WeightForGradInput},
		{"grad_weight (wgrad)", r.GradOutputForGradWeight, r.InputForGradWeight},
	}
	for _, g := range gemms {
		if off(g.a) != off(g.b) {
			return fmt.Errorf("recipe: AO recipe %q: the %s GEMM has one operand in high precision and one in FP8 (%v, %v); disable both or neither", r.Name, g.name, g.a, g.b)
		}
		if !off(g.a) && g.a.Format == fp8.E5M2 && g.b.Format == fp8.E5M2 {
			return fmt.Errorf("recipe: AO recipe %q: the %s GEMM has both operands in E5M2; make at least one E4M3", r.Name, g.name)
		}
	}
	for _, c := range []fp8.Quantizer{r.Input, r.Weight, r.GradOutput, r.InputForGradWeight, r.WeightForGradInput, r.GradOutputForGradWeight} {
		if c.Kind != fp8.HighPrecision && c.Kind != fp8.CurrentScaling {
			return fmt.Errorf("recipe: AO recipe %q: cast %v; torchao's casts are current scaling (tensorwise or axiswise) or high precision", r.Name, c)
		}
		if err := c.Check(); err != nil {
			return fmt.Errorf("recipe: AO recipe %q: %w", r.Name, err)
		}
	}
	if r.EnableFSDPFloat8AllGather && (off(r.Weight) || r.Weight.Axiswise) {
		return refuse(on("enable_fsdp_float8_all_gather", "recipe_name"), "recipe: AO recipe %q: enable_fsdp_float8_all_gather needs tensorwise FP8 weights (weight cast is %v); turn it off or use the tensorwise recipe", r.Name, r.Weight)
	}
	return nil
}

// off reports a cast torchao's config calls DISABLED.
func off(q fp8.Quantizer) bool { return q.Kind == fp8.HighPrecision }

// MSAMP is MS-AMP's optimization level as Accelerate's
// MSAMPRecipeKwargs sets it. The zero value is O2.
type MSAMP struct {
	// OptLevel is "O1" or "O2"; "" means O2.
	OptLevel string
}

// Level returns the effective level, "O1" or "O2".
func (r MSAMP) Level() string {
	if r.OptLevel == "" {
		return "O2"
	}
	return strings.ToUpper(r.OptLevel)
}

// GEMMRecipe returns the delayed-scaling recipe MS-AMP's FP8 linear
// layers follow: HYBRID formats, the most recent amax (a one-step window)
// and power-of-two scales (see NewMeta's Pow2).
func (r MSAMP) GEMMRecipe() TE {
	return TE{Format: Hybrid, AmaxHistoryLen: 1, AmaxComputeAlgo: fp8.MostRecent}
}

// Validate accepts O1 and O2 and explains why O3 is not offered.
func (r MSAMP) Validate() error {
	switch r.Level() {
	case "O1", "O2":
		return nil
	case "O3":
		return refuse(on("opt_level"), "recipe: MS-AMP opt_level O3 (ZeRO with FP8 weights) exists only through DeepSpeed and Accelerate does not offer it; use O2, or FSDP with float8 all-gather for sharded FP8 weights")
	}
	return refuse(on("opt_level"), "recipe: MS-AMP opt_level %q, want O1 or O2", r.OptLevel)
}

// Float8Block is Transformer Engine 2.x's Float8BlockScaling
// recipe (DeepSeek-V3's scheme; torchao's blockwise_fp8_training): every
// GEMM operand cast with a float32 scale per 1×128 block along its
// contraction axis (1-D) or per 128×128 tile (2-D), computed from the
// block's own amax at each cast, so there is no scaling state. The zero
// value is Transformer Engine's default: E4M3 for every tensor, 1-D
// blocks for inputs and gradients, 2-D tiles for weights, power-of-two
// scales, amax epsilon 0.
type Float8Block struct {
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
func (Float8Block) Backend() fp8.Backend { return fp8.BackendTE }

// Dims returns the effective block dimensions of the input, weight and
// gradient.
func (r Float8Block) Dims() (x, w, grad int) {
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return def(r.XBlockDim, 1), def(r.WBlockDim, 2), def(r.GradBlockDim, 1)
}

// Cast returns the block cast of one of a layer's tensors.
func (r Float8Block) Cast(t fp8.TensorRole) fp8.Quantizer {
	x, w, g := r.Dims()
	c := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: x, Format: fp8.E4M3, FP32Scales: r.FP32Scales, Eps: r.AmaxEpsilon}
	switch t {
	case fp8.RoleWeight:
		c.BlockDim = w
	case fp8.RoleGradOutput:
		c.BlockDim = g
		if r.Hybrid {
			c.Format = fp8.E5M2
		}
	}
	return c
}

// FormatName returns "E4M3" or "HYBRID".
func (r Float8Block) FormatName() string {
	if r.Hybrid {
		return "HYBRID"
	}
	return "E4M3"
}

// Validate reports settings that cannot work, naming the field.
func (r Float8Block) Validate() error {
	for _, d := range []struct {
		name string
		v    int
	}{{"x_block_scaling_dim", r.XBlockDim}, {"w_block_scaling_dim", r.WBlockDim}, {"grad_block_scaling_dim", r.GradBlockDim}} {
		if d.v < 0 || d.v > 2 {
			return refuse(on(d.name), "recipe: Float8BlockScaling recipe: %s %d, want 1 (1×128 blocks) or 2 (128×128 tiles)", d.name, d.v)
		}
	}
	x, w, g := r.Dims()
	for _, p := range []struct {
		gemm, a, b string
		da, db     int
	}{{"fprop", "x_block_scaling_dim", "w_block_scaling_dim", x, w}, {"dgrad", "grad_block_scaling_dim", "w_block_scaling_dim", g, w},
		{"wgrad", "grad_block_scaling_dim", "x_block_scaling_dim", g, x}} {
		if p.da == 2 && p.db == 2 {
			return refuse(on(p.a, p.b), "recipe: Float8BlockScaling recipe: %s and %s are both 2, so the %s GEMM would multiply two 128×128-tiled operands; make one of them 1", p.a, p.b, p.gemm)
		}
	}
	if !(r.AmaxEpsilon >= 0) || math.IsInf(float64(r.AmaxEpsilon), 0) {
		return refuse(on("amax_epsilon"), "recipe: Float8BlockScaling recipe: amax_epsilon %v, want a finite number ≥ 0", r.AmaxEpsilon)
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
		return false, refuse(on("fp8_format"), "recipe: Float8BlockScaling recipe: fp8_format E5M2 is refused (Transformer Engine's block scaling takes E4M3 or HYBRID)")
	}
	return false, refuse(on("fp8_format"), "recipe: Float8BlockScaling recipe: unknown fp8_format %q (want E4M3 or HYBRID)", s)
}

// NVFP4 is Transformer Engine 2.x's NVFP4BlockScaling recipe: every
// GEMM operand cast to 4-bit E2M1 elements with an E4M3 scale per 16
// values along its contraction axis and a float32 scale per tensor,
// computed at each cast (no scaling state). The zero value is
// Transformer Engine's default: weights in 16×16 tiles, inputs and
// gradients in 1×16 blocks, the random Hadamard transform on the
// operands of the weight-gradient GEMM, gradients rounded
// stochastically.
type NVFP4 struct {
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
func (NVFP4) Backend() fp8.Backend { return fp8.BackendTE }

// Validate reports settings that cannot work, naming the field.
func (r NVFP4) Validate() error {
	if r.KeepFirst < 0 || r.KeepLast < 0 {
		return refuse(on("keep_first", "keep_last"), "recipe: NVFP4 recipe: keep_first %d and keep_last %d, want ≥ 0", r.KeepFirst, r.KeepLast)
	}
	return nil
}

// Cast returns how one of a layer's tensors is cast for one of its GEMMs
// (wgrad: the weight-gradient GEMM, where the transform applies).
func (r NVFP4) Cast(t fp8.TensorRole, wgrad bool) fp8.Quantizer {
	c := fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 1}
	switch t {
	case fp8.RoleWeight:
		if !r.Disable2DQuantization {
			c.BlockDim = 2
		}
	case fp8.RoleGradOutput:
		c.Stochastic = !r.DisableStochasticRounding
		c.RHT = wgrad && !r.DisableRHT
	default:
		c.RHT = wgrad && !r.DisableRHT
	}
	return c
}
