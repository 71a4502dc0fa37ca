package fp8

import (
	"fmt"
	"strings"
)

// GEMM names one of a linear layer's three products.
type GEMM uint8

// The GEMMs of a linear layer.
const (
	// Fprop is the forward product y = x·Wᵀ (operands: input, weight).
	Fprop GEMM = iota
	// Dgrad is dx = dy·W (operands: grad_output, weight).
	Dgrad
	// Wgrad is dW = dyᵀ·x (operands: grad_output, input).
	Wgrad
)

// String returns "fprop", "dgrad" or "wgrad".
func (g GEMM) String() string {
	switch g {
	case Fprop:
		return "fprop"
	case Dgrad:
		return "dgrad"
	case Wgrad:
		return "wgrad"
	}
	return fmt.Sprintf("GEMM(%d)", uint8(g))
}

// Operands returns the tensor roles of the GEMM's two operands, in
// order.
func (g GEMM) Operands() [2]TensorRole {
	switch g {
	case Dgrad:
		return [2]TensorRole{RoleGradOutput, RoleWeight}
	case Wgrad:
		return [2]TensorRole{RoleGradOutput, RoleInput}
	}
	return [2]TensorRole{RoleInput, RoleWeight}
}

// QuantizerKind is the family of a quantizer.
type QuantizerKind uint8

// The quantizer families. The zero QuantizerKind keeps the tensor in
// high precision (TE's identity quantizer).
const (
	// HighPrecision leaves the operand unquantized; the GEMM then runs
	// in float32 (its other operand must be high precision too).
	HighPrecision QuantizerKind = iota
	// CurrentScaling is a tensorwise cast with a scale from this
	// tensor's own amax (TE's Float8CurrentScaling).
	CurrentScaling
	// MXFP8Blocks is MXFP8: an E8M0 scale per 32 values along the
	// contraction axis.
	MXFP8Blocks
	// Float8Blocks is Float8BlockScaling: a float32 scale per 1×128
	// block (BlockDim 1) or 128×128 tile (BlockDim 2).
	Float8Blocks
	// NVFP4Blocks is NVFP4: E2M1 elements with an E4M3 scale per 1×16
	// block (BlockDim 1) or 16×16 tile (BlockDim 2) and a float32 scale
	// per tensor.
	NVFP4Blocks
	// DelayedScaling is Transformer Engine's delayed scaling: a
	// tensorwise cast with the scale of the layer's scaling state for
	// that tensor (its amax history). Only recipes whose NewLayerState
	// keeps such state (TERecipe, MSAMPRecipe) lower to it.
	DelayedScaling
	// BF16Rounding rounds both operands to bfloat16 (nearest even) and
	// multiplies them exactly into float32 (bf16 mixed precision).
	BF16Rounding
)

var quantizerNames = [...]string{"high precision", "current scaling", "MXFP8", "Float8BlockScaling", "NVFP4", "delayed scaling", "bf16"}

// String names the family.
func (k QuantizerKind) String() string {
	if int(k) < len(quantizerNames) {
		return quantizerNames[k]
	}
	return fmt.Sprintf("QuantizerKind(%d)", uint8(k))
}

// Quantizer says how one tensor — one operand of one GEMM — is cast: the
// one description of a cast that recipes lower layers to (package
// recipe), the compiler's Quantize nodes carry, and the slice casts of
// this package take (QuantizeFloat8Block, QuantizeNVFP4, …). The zero
// value is HighPrecision.
type Quantizer struct {
	Kind QuantizerKind
	// Format is the FP8 format of CurrentScaling, MXFP8Blocks,
	// Float8Blocks and DelayedScaling (E4M3 by default).
	Format Format
	// Pow2 rounds a current scale down to a power of two.
	Pow2 bool
	// Axiswise gives CurrentScaling a scale per slice along the GEMM's
	// contraction axis (torchao's rowwise) instead of one per tensor.
	Axiswise bool
	// Rule is MXFP8Blocks' rule for the shared exponent.
	Rule ExpRule
	// BlockDim is 1 or 2 for Float8Blocks and NVFP4Blocks (0 means 1).
	BlockDim int
	// FP32Scales and Eps are Float8Blocks' float32 scales and amax
	// epsilon.
	FP32Scales bool
	Eps        float32
	// RHT and Stochastic are NVFP4's transform along the contraction
	// axis and stochastic rounding. Seed keys the rounding: the same
	// seed draws the same codes (a recipe's lowering gives the run's
	// seed; the compiler mixes in each cast's node and step).
	RHT, Stochastic bool
	Seed            uint64
}

// Dim returns the effective block dimension.
func (q Quantizer) Dim() int { return max(q.BlockDim, 1) }

// String describes the quantizer: "high precision", "MXFP8 E4M3",
// "Float8BlockScaling E4M3 128×128", "NVFP4 1×16 rht stochastic", …
func (q Quantizer) String() string {
	var b strings.Builder
	b.WriteString(q.Kind.String())
	switch q.Kind {
	case CurrentScaling, MXFP8Blocks, DelayedScaling:
		b.WriteString(" " + q.Format.String())
		if q.Axiswise {
			b.WriteString(" axiswise")
		}
	case Float8Blocks:
		b.WriteString(" " + q.Format.String())
		if q.Dim() == 2 {
			b.WriteString(" 128×128")
		} else {
			b.WriteString(" 1×128")
		}
	case NVFP4Blocks:
		if q.Dim() == 2 {
			b.WriteString(" 16×16")
		} else {
			b.WriteString(" 1×16")
		}
		if q.RHT {
			b.WriteString(" rht")
		}
		if q.Stochastic {
			b.WriteString(" stochastic")
		}
	}
	return b.String()
}

// Check reports a quantizer that cannot work.
func (q Quantizer) Check() error {
	switch {
	case q.Kind > BF16Rounding:
		return fmt.Errorf("unknown quantizer kind %d", q.Kind)
	case q.Format > E5M2:
		return fmt.Errorf("%v: format %d, want E4M3 or E5M2", q.Kind, q.Format)
	case (q.Kind == Float8Blocks || q.Kind == NVFP4Blocks) && (q.BlockDim < 0 || q.BlockDim > 2):
		return fmt.Errorf("%v: block dimension %d, want 1 or 2", q.Kind, q.BlockDim)
	case q.Kind == Float8Blocks && (!(q.Eps >= 0) || q.Eps > 3.4e38):
		return fmt.Errorf("%v: amax epsilon %v, want a finite number ≥ 0", q.Kind, q.Eps)
	}
	return nil
}

// Multiplies reports whether a GEMM can multiply operands quantized by
// a and b, and why not: both high precision or both quantized by one
// family, never two 2-D-tiled operands, never two E5M2 operands.
func Multiplies(a, b Quantizer) error {
	switch {
	case (a.Kind == HighPrecision) != (b.Kind == HighPrecision):
		return fmt.Errorf("one operand is high precision (%v) and the other quantized (%v); quantize both or neither", a, b)
	case a.Kind != b.Kind:
		return fmt.Errorf("the operands are quantized by different families (%v and %v), which no GEMM multiplies", a, b)
	case (a.Kind == Float8Blocks || a.Kind == NVFP4Blocks) && a.Dim() == 2 && b.Dim() == 2:
		return fmt.Errorf("both operands are 2-D tiles (%v, %v); a 2-D operand multiplies only a 1-D one", a, b)
	case a.Kind != HighPrecision && a.Kind != NVFP4Blocks && a.Format == E5M2 && b.Format == E5M2:
		return fmt.Errorf("both operands are E5M2 (%v, %v); make at least one E4M3", a, b)
	}
	return nil
}

// Scaling names the quantizer's scaling as dumps show it: "delayed",
// "current" (tensorwise), "axiswise", "mxfp8", "float8block", "nvfp4",
// "bf16" or "none" (high precision).
func (q Quantizer) Scaling() string {
	switch q.Kind {
	case DelayedScaling:
		return "delayed"
	case CurrentScaling:
		if q.Axiswise {
			return "axiswise"
		}
		return "current"
	case MXFP8Blocks:
		return "mxfp8"
	case Float8Blocks:
		return "float8block"
	case NVFP4Blocks:
		return "nvfp4"
	case BF16Rounding:
		return "bf16"
	}
	return "none"
}

// Casts reports whether the quantizer casts to codes (a Cast serves
// it): delayed or current scaling, MXFP8, Float8BlockScaling, NVFP4.
func (q Quantizer) Casts() bool {
	return q.Kind != HighPrecision && q.Kind != BF16Rounding && q.Kind <= BF16Rounding
}

// Tensorwise reports one scale for the whole tensor: delayed or
// tensorwise current scaling.
func (q Quantizer) Tensorwise() bool {
	return q.Kind == DelayedScaling || q.Kind == CurrentScaling && !q.Axiswise
}

// AlongAxis reports whether the cast's scales run along one axis of
// the operand — axiswise current scaling, MXFP8, 1-D Float8BlockScaling
// and NVFP4 blocks — so that it must be cast along its GEMM's
// contraction axis; tensorwise scales and 2-D tiles serve either axis.
func (q Quantizer) AlongAxis() bool {
	switch q.Kind {
	case CurrentScaling:
		return q.Axiswise
	case MXFP8Blocks:
		return true
	case Float8Blocks, NVFP4Blocks:
		return q.Dim() == 1
	}
	return false
}

// CastAxis is the axis an operand contracting along axis is cast
// along: axis for casts whose scales run along one (AlongAxis), 0 for
// the others, whose one cast serves both axes.
func (q Quantizer) CastAxis(axis int) int {
	if q.AlongAxis() {
		return axis
	}
	return 0
}

// Canonical returns q with the fields its kind does not read cleared
// (and NVFP4's format, which E2M1 fixes), so that two quantizers that
// cast alike compare equal.
func (q Quantizer) Canonical() Quantizer {
	c := Quantizer{Kind: q.Kind, Format: q.Format}
	switch q.Kind {
	case CurrentScaling:
		c.Pow2, c.Axiswise = q.Pow2, q.Axiswise
	case MXFP8Blocks:
		c.Rule = q.Rule
	case Float8Blocks:
		c.BlockDim, c.FP32Scales, c.Eps = q.Dim(), q.FP32Scales, q.Eps
	case NVFP4Blocks:
		c.Format, c.BlockDim, c.RHT, c.Stochastic, c.Seed = 0, q.Dim(), q.RHT, q.Stochastic, q.Seed
	case HighPrecision, BF16Rounding:
		c.Format = 0
	}
	return c
}
