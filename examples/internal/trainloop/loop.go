// Package trainloop is the training loop the example programs share:
// steps from a first (resumed) step to an end, the timing of the steps,
// the loss check with a diagnosis of the first non-finite value,
// progress on a terminal or as periodic lines, and checkpoints on a
// schedule (see Checkpoint).
package trainloop

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/schollz/progressbar/v3"
)

// Loop describes one training run's steps. Batch, Step and the hooks are
// called for each step in [First, End).
type Loop struct {
	// Name begins each progress line ("mnist: fp8").
	Name string
	// Total is the number of steps of the schedule, First the step to
	// start from (a resumed run's), End the step to stop before (Total,
	// or fewer when the run is to stop early).
	Total, First, End int
	// Unit names a step in messages ("step", "iteration").
	Unit string
	// Batch draws a step's batch; it is not timed.
	Batch func(step int) error
	// Step runs one training step (feed, program, optimizer) and returns
	// its loss, the same on every rank of a parallel run; it is timed.
	Step func(step int) (float32, error)
	// Diagnose, when a loss is not finite, says what else is known (see
	// Diagnosis); Hint follows it in the error ("learning rate 1 too
	// high?").
	Diagnose func() string
	Hint     string
	// Save writes a checkpoint: every SaveEvery steps when SaveEvery > 0
	// (not at End), and at the end of the run.
	Save      func() error
	SaveEvery int
	// After runs after each step, untimed (evaluation lines).
	After func(step int, loss float32) error
	// Progress, when not nil, receives a progress bar (a terminal); else
	// Lines, when not nil, receives a line every LineEvery.
	Progress  io.Writer
	Lines     io.Writer
	LineEvery time.Duration
	// Describe is the progress text at a step.
	Describe func(step int, loss float32) string
	// Profile, when set, is the program whose every op Run times (see
	// Stats.Profile).
	Profile *graph.Program
	// DebugLog, when set, is the -fp8-debug statistics log, which Run
	// closes when the loop ends (an error closing it is the loop's).
	DebugLog *inspect.Log
}

// Stats is what a Loop measured.
type Stats struct {
	// Losses holds the loss of each step run, from First to End.
	Losses []float32
	// First and End are the steps run: [First, End).
	First, End int
	// Busy is the time spent in Step.
	Busy time.Duration
	// Profile is Loop.Profile's per-op profile over the steps run (nil
	// without).
	Profile *graph.Profile
}

// Ran returns the number of steps run.
func (s Stats) Ran() int { return s.End - s.First }

// MsPerStep returns the mean time of a step in milliseconds.
func (s Stats) MsPerStep() float64 {
	return float64(s.Busy.Microseconds()) / 1000 / float64(max(1, s.Ran()))
}

// Check refuses a loop with nothing to do, before any work: no steps in
// the schedule, or a first step at or past the end.
func (l *Loop) Check() error {
	unit := l.unit()
	switch {
	case l.Total <= 0 || l.End <= 0:
		return fmt.Errorf("no training %ss", unit)
	case l.First > l.Total:
		return fmt.Errorf("-resume: the checkpoint is at %s %d, past the %d %ss of this run", unit, l.First, l.Total, unit)
	case l.First >= l.End:
		return fmt.Errorf("-resume: the checkpoint is at %s %d, nothing left to train before %s %d", unit, l.First, unit, l.End)
	}
	return nil
}

func (l *Loop) unit() string {
	if l.Unit == "" {
		return "step"
	}
	return l.Unit
}

// Run runs the steps. It stops at the first error, or at a loss that is
// not finite, naming the step and what Diagnose knows.
func (l *Loop) Run() (st Stats, err error) {
	if l.Profile != nil {
		l.Profile.SetProfiling(true)
		defer func() {
			pr := l.Profile.Profile()
			st.Profile = &pr
			l.Profile.SetProfiling(false)
		}()
	}
	if l.DebugLog != nil {
		defer func() {
			if cerr := l.DebugLog.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("-fp8-log: %w", cerr)
			}
		}()
	}
	return l.run()
}

func (l *Loop) run() (Stats, error) {
	st := Stats{First: l.First, End: l.First}
	if err := l.Check(); err != nil {
		return st, err
	}
	var bar *progressbar.ProgressBar
	if l.Progress != nil {
		bar = progressbar.NewOptions(l.Total, progressbar.OptionSetWriter(l.Progress),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString(l.unit()+"s"),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
		_ = bar.Set(l.First)
	}
	every := l.LineEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	st.Losses = make([]float32, 0, l.End-l.First)
	lastLine := time.Now()
	for step := l.First; step < l.End; step++ {
		if l.Batch != nil {
			if err := l.Batch(step); err != nil {
				return st, err
			}
		}
		start := time.Now()
		loss, err := l.Step(step)
		st.Busy += time.Since(start)
		if err != nil {
			return st, err
		}
		if f := float64(loss); math.IsNaN(f) || math.IsInf(f, 0) {
			return st, l.nonFinite(step, loss)
		}
		st.Losses = append(st.Losses, loss)
		st.End = step + 1
		if l.Save != nil && l.SaveEvery > 0 && (step+1)%l.SaveEvery == 0 && step+1 < l.End {
			if err := l.Save(); err != nil {
				return st, err
			}
		}
		if bar != nil {
			if l.Describe != nil && step%10 == 0 {
				bar.Describe(l.Describe(step, loss))
			}
			_ = bar.Add(1)
		} else if l.Lines != nil && time.Since(lastLine) >= every {
			desc := fmt.Sprintf("loss %.4f", loss)
			if l.Describe != nil {
				desc = l.Describe(step, loss)
			}
			fmt.Fprintf(l.Lines, "%s %s %d/%d %s\n", l.Name, l.unit(), step+1, l.Total, desc)
			lastLine = time.Now()
		}
		if l.After != nil {
			if err := l.After(step, loss); err != nil {
				return st, err
			}
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if l.Save != nil {
		if err := l.Save(); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (l *Loop) nonFinite(step int, loss float32) error {
	msg := fmt.Sprintf("%s %d: the loss is %v", l.unit(), step, loss)
	if l.Diagnose != nil {
		if d := l.Diagnose(); d != "" {
			msg += "; " + d
		}
	}
	if l.Hint != "" {
		msg += " (" + l.Hint + ")"
	}
	return fmt.Errorf("%s", msg)
}
