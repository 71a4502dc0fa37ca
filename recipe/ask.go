package recipe

import "fmt"

// What the compiler and the trainer ask of each recipe (see Recipe).

// Label returns "te/" and the format, with "/mxfp8" for MXFP8 blocks.
func (r TE) Label() string {
	if r.UseMXFP8BlockScaling {
		return "te/" + r.Format.String() + "/mxfp8"
	}
	return "te/" + r.Format.String()
}

// ReduceAmax reports whether data-parallel ranks all-reduce the
// delayed-scaling amaxes: unless DisableAmaxReduction.
func (r TE) ReduceAmax() bool { return !r.DisableAmaxReduction }

// AmaxReducer is implemented by a recipe that says whether the
// data-parallel ranks of a run all-reduce (MAX) the amaxes of its
// delayed-scaling casts at the end of each step (Transformer Engine's
// reduce_amax). A recipe that does not implement it has them reduced,
// TE's default; a recipe without delayed scaling has nothing to reduce.
type AmaxReducer interface {
	ReduceAmax() bool
}

// ReducesAmax reports whether r's data-parallel ranks all-reduce their
// delayed-scaling amaxes: r's ReduceAmax if it implements AmaxReducer,
// else true.
func ReducesAmax(r Recipe) bool {
	if a, ok := r.(AmaxReducer); ok {
		return a.ReduceAmax()
	}
	return true
}

// EvalQuantized returns UseAutocastDuringEval.
func (r TE) EvalQuantized() bool { return r.UseAutocastDuringEval }

// Float8AllGather returns false.
func (TE) Float8AllGather() bool { return false }

// LowBitOptimizer returns false.
func (TE) LowBitOptimizer() (MSAMP, bool) { return MSAMP{}, false }

// Label returns "ao/" and the recipe's name.
func (r AO) Label() string { return "ao/" + r.Name }

// EvalQuantized returns true: torchao's converted modules run FP8 in
// evaluation too.
func (AO) EvalQuantized() bool { return true }

// Float8AllGather returns EnableFSDPFloat8AllGather.
func (r AO) Float8AllGather() bool { return r.EnableFSDPFloat8AllGather }

// LowBitOptimizer returns false.
func (AO) LowBitOptimizer() (MSAMP, bool) { return MSAMP{}, false }

// Label returns "msamp/" and the level.
func (r MSAMP) Label() string { return "msamp/" + r.Level() }

// EvalQuantized returns true.
func (MSAMP) EvalQuantized() bool { return true }

// Float8AllGather returns false: MS-AMP shards nothing.
func (MSAMP) Float8AllGather() bool { return false }

// LowBitOptimizer returns r: its weights train with MS-AMP's AdamW.
func (r MSAMP) LowBitOptimizer() (MSAMP, bool) { return r, true }

// Label returns "bf16".
func (BF16) Label() string { return "bf16" }

// EvalQuantized returns true: evaluation runs in bf16 too, as under
// Accelerate's autocast.
func (BF16) EvalQuantized() bool { return true }

// Float8AllGather returns false.
func (BF16) Float8AllGather() bool { return false }

// LowBitOptimizer returns false.
func (BF16) LowBitOptimizer() (MSAMP, bool) { return MSAMP{}, false }

// Label returns "block/", the format and the block dimensions, with
// "/fp32-scales" and "/eps=…" when set.
func (r Float8Block) Label() string {
	x, w, g := r.Dims()
	l := fmt.Sprintf("block/%s/x%dw%dg%d", r.FormatName(), x, w, g)
	if r.FP32Scales {
		l += "/fp32-scales"
	}
	if r.AmaxEpsilon != 0 {
		l += fmt.Sprintf("/eps=%g", r.AmaxEpsilon)
	}
	return l
}

// EvalQuantized returns UseAutocastDuringEval.
func (r Float8Block) EvalQuantized() bool { return r.UseAutocastDuringEval }

// Float8AllGather returns the recipe's FSDPFloat8AllGather field.
func (r Float8Block) Float8AllGather() bool { return r.FSDPFloat8AllGather }

// LowBitOptimizer returns false.
func (Float8Block) LowBitOptimizer() (MSAMP, bool) { return MSAMP{}, false }

// Label returns "nvfp4" with "/no-rht", "/no-sr", "/no-2d",
// "/keep-first=N" and "/keep-last=N" when set.
func (r NVFP4) Label() string {
	l := "nvfp4"
	for _, f := range []struct {
		on   bool
		name string
	}{{r.DisableRHT, "/no-rht"}, {r.DisableStochasticRounding, "/no-sr"}, {r.Disable2DQuantization, "/no-2d"}} {
		if f.on {
			l += f.name
		}
	}
	if r.KeepFirst > 0 {
		l += fmt.Sprintf("/keep-first=%d", r.KeepFirst)
	}
	if r.KeepLast > 0 {
		l += fmt.Sprintf("/keep-last=%d", r.KeepLast)
	}
	return l
}

// EvalQuantized returns UseAutocastDuringEval.
func (r NVFP4) EvalQuantized() bool { return r.UseAutocastDuringEval }

// Float8AllGather returns false.
func (NVFP4) Float8AllGather() bool { return false }

// LowBitOptimizer returns false.
func (NVFP4) LowBitOptimizer() (MSAMP, bool) { return MSAMP{}, false }

// Label returns "custom".
func (Custom) Label() string { return "custom" }

// EvalQuantized returns UseAutocastDuringEval.
func (r Custom) EvalQuantized() bool { return r.UseAutocastDuringEval }

// Float8AllGather returns false.
func (Custom) Float8AllGather() bool { return false }

// LowBitOptimizer returns false.
func (Custom) LowBitOptimizer() (MSAMP, bool) { return MSAMP{}, false }
