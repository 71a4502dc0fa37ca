package train

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressOptions shape the progress hook's output. The zero value
// works.
type ProgressOptions struct {
	// Name begins each line ("mnist: fp8"; the precision when empty);
	// Unit names a step ("step" when empty).
	Name, Unit string
	// Every is the time between lines when the writer is not a terminal
	// (5 s when 0).
	Every time.Duration
	// Describe says how a step went ("epoch 1 loss 0.2312" when nil).
	Describe func(*Status) string
	// Bar forces the progress bar (true) or the lines (false) whatever
	// the writer is; nil decides by whether it is a terminal.
	Bar *bool
	// NoEval leaves evaluations out of the lines.
	NoEval bool
}

// Progress returns the hook named "progress": a progress bar on w when w
// is a terminal, else a line every few seconds — "fp8 step 120/936 epoch
// 1 loss 0.2312" — and a line per evaluation. It also says, a line each,
// the precision's warnings (Precision.Warnings), for bf16 and FP8 on a
// CPU without a bf16 dot-product unit that they will not run faster than
// float32 there (KernelInfo.Note), where a resumed run
// resumed from ("fp8 resumed from ckpt/checkpoint-40 after step 40 of
// 120"), and where a run stopped before the end of its schedule stopped
// ("fp8 stopped after step 60 of 120; checkpoint ckpt/checkpoint-60").
func Progress(w io.Writer, o ProgressOptions) Hook {
	every := o.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	unit := o.Unit
	if unit == "" {
		unit = "step"
	}
	var bar *progressbar.ProgressBar
	var last time.Time
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	if o.Bar != nil {
		tty = *o.Bar
	}
	describe := o.Describe
	if describe == nil {
		describe = func(s *Status) string { return fmt.Sprintf("epoch %d loss %.4f", s.Epoch+1, s.Loss) }
	}
	name := func(s *Status) string {
		if o.Name != "" {
			return o.Name
		}
		return s.Precision
	}
	line := func(s *Status) string {
		return fmt.Sprintf("%s %s %d/%d %s", name(s), unit, s.Step, s.Total, describe(s))
	}
	return Hook{
		Name: "progress",
		OnStart: func(s *Status) error {
			last = time.Now()
			if s.Trainer != nil {
				for _, warn := range s.Trainer.cfg.Precision.Warnings() {
					if _, err := fmt.Fprintf(w, "%s warning: %s\n", name(s), warn); err != nil {
						return err
					}
				}
			}
			if note := Kernels().Note(s.Precision); note != "" {
				if _, err := fmt.Fprintf(w, "%s note: %s\n", name(s), note); err != nil {
					return err
				}
			}
			if s.Resumed != "" {
				resharded := ""
				if s.Resharded != "" {
					resharded = "; resharded from " + s.Resharded
				}
				if _, err := fmt.Fprintf(w, "%s resumed from %s after %s %d of %d%s\n", name(s), s.Resumed, unit, s.First, s.Total, resharded); err != nil {
					return err
				}
			}
			if tty {
				bar = progressbar.NewOptions(s.Total, progressbar.OptionSetWriter(w), progressbar.OptionShowIts(),
					progressbar.OptionSetItsString(unit+"s"), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
				_ = bar.Set(s.First)
			}
			return nil
		},
		OnStep: func(s *Status) error {
			if s.Warning != "" {
				if _, err := fmt.Fprintf(w, "%s warning: %s\n", name(s), s.Warning); err != nil {
					return err
				}
			}
			if bar != nil {
				if (s.Step-1)%10 == 0 {
					bar.Describe(describe(s))
				}
				return bar.Add(1)
			}
			if time.Since(last) >= every {
				last = time.Now()
				_, err := fmt.Fprintln(w, line(s))
				return err
			}
			return nil
		},
		OnEval: func(s *Status) error {
			if bar != nil || o.NoEval {
				return nil
			}
			_, err := fmt.Fprintf(w, "%s eval %s\n", name(s), s.Eval)
			return err
		},
		OnEnd: func(s *Status) error {
			if bar != nil {
				if err := bar.Finish(); err != nil {
					return err
				}
			}
			if s.Step < s.Total {
				ck := "no checkpoint (nothing to save it to)"
				if s.Checkpoint != "" {
					ck = "checkpoint " + s.Checkpoint
				}
				_, err := fmt.Fprintf(w, "%s stopped after %s %d of %d; %s\n", name(s), unit, s.Step, s.Total, ck)
				return err
			}
			return nil
		},
	}
}

// JSONLines returns the hook named "jsonl", a metric tracker: one JSON
// object per line on w for every step ({"step", "loss", "lr", "epoch",
// "ms"}), evaluation ({"step", "eval_loss", "eval_accuracy"}) and
// checkpoint ({"step", "checkpoint"}), as Accelerate's trackers log; a
// regression's evaluation adds "eval_rmse" and "eval_r2".
func JSONLines(w io.Writer) Hook {
	enc := json.NewEncoder(w)
	num := func(v float64) any {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	return Hook{
		Name: "jsonl",
		OnStep: func(s *Status) error {
			return enc.Encode(map[string]any{"precision": s.Precision, "step": s.Step, "loss": num(float64(s.Loss)), "lr": s.LR, "epoch": s.Epoch,
				"ms": float64(s.StepTime.Microseconds()) / 1000})
		},
		OnEval: func(s *Status) error {
			m := map[string]any{"precision": s.Precision, "step": s.Step, "eval_loss": num(s.Eval.Loss), "eval_accuracy": num(s.Eval.Accuracy), "eval_examples": s.Eval.Examples}
			if !math.IsNaN(s.Eval.RMSE) {
				m["eval_rmse"], m["eval_r2"] = num(s.Eval.RMSE), num(s.Eval.R2)
			}
			return enc.Encode(m)
		},
		OnSave: func(s *Status) error {
			return enc.Encode(map[string]any{"precision": s.Precision, "step": s.Step, "checkpoint": s.Checkpoint})
		},
	}
}
