package fp8

import (
	"bytes"
	"fmt"
	"math"
)

// AmaxAlgo chooses the amax a delayed-scaling update uses.
type AmaxAlgo uint8

const (
	// MostRecent uses the amax of the step just finished (Accelerate's
	// documented default).
	MostRecent AmaxAlgo = iota
	// MaxAlgo uses the largest amax in the history window, the current
	// step included (Transformer Engine's own default).
	MaxAlgo
)

// String returns "most_recent" or "max".
func (a AmaxAlgo) String() string {
	if a == MaxAlgo {
		return "max"
	}
	return "most_recent"
}

// ParseAmaxAlgo maps "max" or "most_recent" to an AmaxAlgo.
func ParseAmaxAlgo(s string) (AmaxAlgo, error) {
	switch s {
	case "most_recent":
		return MostRecent, nil
	case "max":
		return MaxAlgo, nil
	}
	return 0, fmt.Errorf("fp8: unknown amax_compute_algo %q (want max or most_recent)", s)
}

// Meta is one tensor's delayed-scaling state, as Transformer Engine keeps
// it: the scale the next casts use, its inverse, and a window of past
// amaxes. Casts during a step Record the amax of their (unscaled) input
// into the current slot; Update at the end of the step turns the window
// into the next scale and rolls it.
//
// The zero Meta is not usable; make one with NewMeta.
type Meta struct {
	// Format is the FP8 format of the tensor's casts.
	Format Format
	// Scale multiplies values before the cast; it starts at 1.
	Scale float32
	// ScaleInv is 1/Scale, used to dequantize.
	ScaleInv float32
	// History holds the window of amaxes, History[0] being the current
	// step's slot and History[len-1] the newest finished step.
	History []float32
	// Margin, Algo and Interval are the recipe's settings.
	Margin   int
	Algo     AmaxAlgo
	Interval int
	// Pow2 rounds every new scale down to a power of two (MS-AMP).
	Pow2 bool

	// Steps counts updates that saw a recorded amax.
	Steps int
	// NonFinite counts steps whose amax was NaN or ±inf.
	NonFinite int
	// Overflows counts scale computations that overflowed float32 and
	// were clamped to the largest float32.
	Overflows int

	// Start counts how the meta's first FP8 step went (see StartCount);
	// it is not kept in checkpoints.
	Start StartCount

	recorded bool
}

// StartCount counts, over the first step in which a delayed-scaling
// cast ran with a meta, the codes that came out zero though their inputs
// were not: delayed scaling's first step casts with scale 1 (or with the
// scales a calibration left), and small gradients flush to zero there.
type StartCount struct {
	// Flushed of Values codes were ±0 from a non-zero input.
	Flushed, Values int64
	// Done is set by the Update that ends that step.
	Done bool
}

// Share returns Flushed / Values (0 when nothing was counted).
func (s StartCount) Share() float64 {
	if s.Values == 0 {
		return 0
	}
	return float64(s.Flushed) / float64(s.Values)
}

// CountStart adds a cast of the meta's first FP8 step to Start: codes
// are its FP8 codes, zerosIn how many of its inputs were ±0. After that
// step (Start.Done) it does nothing, so a cast op may call it every step.
func (m *Meta) CountStart(codes []uint8, zerosIn int) {
	if m.Start.Done {
		return
	}
	zeros := bytes.Count(codes, []byte{0x00}) + bytes.Count(codes, []byte{0x80}) // ±0 in E4M3 and E5M2
	m.Start.Flushed += int64(max(zeros-zerosIn, 0))
	m.Start.Values += int64(len(codes))
}

// CountZeros returns how many values of x are ±0.
func CountZeros(x []float32) int {
	n := 0
	for _, v := range x {
		if v == 0 {
			n++
		}
	}
	return n
}

// NewMeta returns the initial state for a tensor: scale 1 and a zeroed
// history of historyLen slots (at least 1).
func NewMeta(f Format, historyLen, margin int, algo AmaxAlgo, interval int) *Meta {
	return &Meta{
		Format: f, Scale: 1, ScaleInv: 1,
		History: make([]float32, max(historyLen, 1)),
		Margin:  margin, Algo: algo, Interval: max(interval, 1),
	}
}

// Record folds the amax of one cast into the current step's slot (max
// over repeated casts in a step; a NaN stays NaN for the step).
func (m *Meta) Record(amax float32) {
	if !m.recorded {
		m.History[0] = amax
		m.recorded = true
		return
	}
	if cur := m.History[0]; cur == cur && (amax != amax || amax > cur) {
		m.History[0] = amax
	}
}

// Amax returns the amax the next update would use: the current slot
// (most_recent) or the window maximum skipping NaN entries, as CUDA's
// fmaxf does (max).
func (m *Meta) Amax() float32 {
	if m.Algo == MostRecent {
		return m.History[0]
	}
	best := float32(math.NaN())
	for _, v := range m.History {
		if v != v {
			continue
		}
		if best != best || v > best {
			best = v
		}
	}
	return best
}

// Update ends a step. A meta whose layer did not run in the step — no
// cast recorded into it, or only an amax of exactly 0 — is left as it is
// (the package doc: "a meta whose layer did not run (amax 0) is not
// rolled"). Otherwise, if the step count is a multiple of
// Interval, the scale becomes (fmt_max / amax) / 2^margin when amax is
// finite and positive, and is kept otherwise (a scale that overflows
// float32 is clamped to its largest value); then the window rolls: the
// current amax becomes the newest entry and the current slot is cleared.
func (m *Meta) Update() {
	if m.Start.Values > 0 {
		m.Start.Done = true
	}
	if !m.recorded || m.History[0] == 0 {
		m.recorded = false
		return
	}
	m.recorded = false
	m.Steps++
	cur := m.History[0]
	if math.IsNaN(float64(cur)) || math.IsInf(float64(cur), 0) {
		m.NonFinite++
	}
	if m.Steps%max(m.Interval, 1) == 0 { // an Interval set to 0 or less means every step
		amax := m.Amax()
		if amax > 0 && !math.IsInf(float64(amax), 0) { // false for NaN too
			s := (formats[m.Format].max / amax) / float32(math.Ldexp(1, m.Margin))
			if math.IsInf(float64(s), 1) {
				s = math.MaxFloat32
				m.Overflows++
			}
			if m.Pow2 {
				s = RoundDownPow2(s)
			}
			m.Scale = s
			m.ScaleInv = 1 / s
		}
	}
	// Roll by one towards the front, the current slot going to the end.
	copy(m.History, m.History[1:])
	m.History[len(m.History)-1] = cur
	m.History[0] = 0
}

// String summarises the state.
func (m *Meta) String() string {
	return fmt.Sprintf("%v scale=%g amax=%g history=%d steps=%d nonfinite=%d", m.Format, m.Scale, m.History[0], len(m.History), m.Steps, m.NonFinite)
}

// Clone returns an independent copy of the state.
func (m *Meta) Clone() *Meta {
	c := *m
	c.History = append([]float32(nil), m.History...)
	return &c
}
