package optim

import (
	"math"

	"github.com/octetml/octet/internal/kernels"
)

// Schedule gives the learning rate for a step (counted from 0).
type Schedule interface {
	LR(step int) float32
}

// Constant is a fixed learning rate.
type Constant float32

// LR returns the rate.
func (c Constant) LR(int) float32 { return float32(c) }

// WarmupCosine rises linearly from 0 to Base over Warmup steps, then
// follows a half cosine down to Min at step Total, and stays at Min
// after.
type WarmupCosine struct {
	Base, Min     float32
	Warmup, Total int
}

// LR returns the rate at step.
func (s WarmupCosine) LR(step int) float32 {
	if step < s.Warmup {
		return s.Base * float32(step+1) / float32(s.Warmup)
	}
	if step >= s.Total || s.Total <= s.Warmup {
		return s.Min
	}
	p := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	// kernels.Cos64: the same bits on every machine (math.Cos's differ
	// between amd64 and arm64 in the last bit).
	return s.Min + float32(float32(0.5*(1+kernels.Cos64(float64(math.Pi*p))))*(s.Base-s.Min))
}

// StepDecay multiplies Base by Gamma every Every steps.
type StepDecay struct {
	Base, Gamma float32
	Every       int
}

// LR returns the rate at step.
func (s StepDecay) LR(step int) float32 {
	if s.Every <= 0 {
		return s.Base
	}
	return s.Base * float32(math.Pow(float64(s.Gamma), float64(step/s.Every)))
}
