package train

import (
	"fmt"

	"github.com/octetml/octet/fp8"
)

// StartWarnShare is the share of a tensor's values flushed to zero at
// delayed scaling's first FP8 step above which the run warns (the
// progress hook prints it; Result.Warnings keeps it).
const StartWarnShare = 0.10

// FP8Start says how delayed scaling's first FP8 step went: the tensor
// whose cast flushed the largest share of its values to zero (codes ±0
// from non-zero inputs; exact zeros do not count), counted cheaply by
// the casts themselves whether or not debug statistics are on.
type FP8Start struct {
	// Step is the step (from 0) of the first FP8 step: 0, or the number
	// of calibration steps.
	Step int
	// Layer and Tensor name the worst tensor ("lm_head", "grad_output");
	// Flushed is its share flushed (0 to 1).
	Layer, Tensor string
	Flushed       float64
	// Calibrated reports whether calibration steps set the scales the
	// step cast with (else it cast with scale 1).
	Calibrated bool
}

// String formats the start as the run summary prints it: "step 0:
// worst mlp.fc1 grad_output 93.10% flushed to zero (scale 1)".
func (s FP8Start) String() string {
	how := "scale 1"
	if s.Calibrated {
		how = "calibrated scales"
	}
	return fmt.Sprintf("step %d: worst %s %s %.2f%% flushed to zero (%s)", s.Step, s.Layer, s.Tensor, 100*s.Flushed, how)
}

// namedMeta is a delayed-scaling meta with its layer and tensor.
type namedMeta struct {
	layer, tensor string
	m             *fp8.Meta
}

// namedMetas lists the delayed-scaling metas of r's store, in the
// store's order (the same on every rank).
func (r *replica) namedMetas() []namedMeta {
	var out []namedMeta
	for _, k := range r.store.StateKeys() {
		ls, ok := r.store.State(k).(*fp8.LayerState)
		if !ok {
			continue
		}
		for _, role := range fp8.Roles {
			if m := ls.Meta(role); m != nil {
				out = append(out, namedMeta{ls.FQN, role.String(), m})
			}
		}
	}
	return out
}

// fp8Start returns the first FP8 step's report once a step has ended in
// which the delayed-scaling casts ran, else nil.
func (r *replica) fp8Start(step int) *FP8Start {
	var worst *namedMeta
	for i, nm := range r.startMetas {
		if nm.m.Start.Done && (worst == nil || nm.m.Start.Share() > worst.m.Start.Share()) {
			worst = &r.startMetas[i]
		}
	}
	if worst == nil {
		return nil
	}
	return &FP8Start{Step: step, Layer: worst.layer, Tensor: worst.tensor, Flushed: worst.m.Start.Share(), Calibrated: r.cal != nil}
}

// startWarning is the warning of a first FP8 step that flushed more
// than StartWarnShare of a tensor ("" otherwise).
func startWarning(s *FP8Start) string {
	if s == nil || s.Flushed <= StartWarnShare {
		return ""
	}
	if s.Calibrated {
		return fmt.Sprintf("first FP8 step %s: more calibration steps may help", s)
	}
	return fmt.Sprintf("first FP8 step %s: delayed scaling starts at scale 1; calibrate first (-calibrate N, OCTET_FP8_CALIBRATION_STEPS, Precision.CalibrationSteps)", s)
}
