package recipe

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/fp8"
)

// Custom is Transformer Engine 2.x's Custom: Quantizer
// chooses, for each linear layer (by its fully qualified name), each of
// its GEMMs and each operand's tensor role, how that operand is cast —
// any family above, or high precision — so that, say, the forward runs
// MXFP8 and the backward NVFP4, or one layer stays in high precision.
// passes.Prepare checks every GEMM's pair of choices and refuses one it
// cannot multiply, naming the layer. There is no scaling state.
type Custom struct {
	// Quantizer is called once per operand of each GEMM of each linear
	// layer; it must not be nil.
	Quantizer func(fqn string, gemm fp8.GEMM, tensor fp8.TensorRole) fp8.Quantizer
	// Seed seeds NVFP4's stochastic rounding (train sets the run's seed
	// when it is 0).
	Seed uint64
	// UseAutocastDuringEval runs the recipe in evaluation programs too.
	UseAutocastDuringEval bool
}

// Backend returns BackendTE.
func (Custom) Backend() fp8.Backend { return fp8.BackendTE }

// Validate refuses a recipe without a Quantizer function.
func (r Custom) Validate() error {
	if r.Quantizer == nil {
		return fmt.Errorf("recipe: custom recipe: no Quantizer function")
	}
	return nil
}

// BackwardOverride runs a recipe's backward GEMMs unquantized
// (Transformer Engine's NVTE_BACKWARD_OVERRIDE). The zero value
// quantizes them as the recipe says.
type BackwardOverride uint8

const (
	// BackwardQuantized: the recipe's casts (the default).
	BackwardQuantized BackwardOverride = iota
	// BackwardHighPrecision runs dgrad and wgrad in float32 on the
	// float32 operands ("high_precision").
	BackwardHighPrecision
	// BackwardDequantized runs dgrad and wgrad in float32 with the
	// forward's quantized weight and input, dequantized, as operands
	// ("dequantized").
	BackwardDequantized
)

// String returns "", "high_precision" or "dequantized".
func (o BackwardOverride) String() string {
	switch o {
	case BackwardHighPrecision:
		return "high_precision"
	case BackwardDequantized:
		return "dequantized"
	}
	return ""
}

// ParseBackwardOverride maps "" (or "none"), "high_precision" and
// "dequantized" (any case) to a BackwardOverride.
func ParseBackwardOverride(s string) (BackwardOverride, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return BackwardQuantized, nil
	case "high_precision":
		return BackwardHighPrecision, nil
	case "dequantized":
		return BackwardDequantized, nil
	}
	return 0, refuse(on("backward_override"), "recipe: backward override %q, want high_precision or dequantized", s)
}

// WithBackward returns r with its backward GEMMs run as o says for every
// layer it converts (Transformer Engine's NVTE_BACKWARD_OVERRIDE as a
// part of the recipe): each plan r lowers to carries o, and the label
// gains "/backward=high_precision" or "/backward=dequantized", so a
// checkpoint records it and a resume must match it. A zero o returns r
// itself; r nil (float32) stays nil.
func WithBackward(r Recipe, o BackwardOverride) Recipe {
	if o == BackwardQuantized || r == nil {
		return r
	}
	return withBackward{r, o}
}

// withBackward is a recipe with a backward override.
type withBackward struct {
	Recipe
	o BackwardOverride
}

// Lower is the recipe's plan with the override.
func (w withBackward) Lower(l Layer) (LayerPlan, error) {
	p, err := w.Recipe.Lower(l)
	if p.Skip == "" {
		p.Backward = w.o
	}
	return p, err
}

// Label is the recipe's with "/backward=" and the override.
func (w withBackward) Label() string { return w.Recipe.Label() + "/backward=" + w.o.String() }

// ReduceAmax is the wrapped recipe's.
func (w withBackward) ReduceAmax() bool { return ReducesAmax(w.Recipe) }

// Validate refuses an override that is none of the three.
func (w withBackward) Validate() error {
	if w.o > BackwardDequantized {
		return fmt.Errorf("recipe: backward override %d, want high_precision or dequantized", w.o)
	}
	return w.Recipe.Validate()
}
