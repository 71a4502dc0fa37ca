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

// Progress returns the hook named "progress": a progress bar on w when w
// is a terminal, else a line every `every` (5 s when 0) — "fp8 step
// 120/936 epoch 1 loss 0.2312" — and a line per evaluation.
func Progress(w io.Writer, every time.Duration) Hook {
	if every <= 0 {
		every = 5 * time.Second
	}
	var bar *progressbar.ProgressBar
	var last time.Time
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	line := func(s *Status) string {
		return fmt.Sprintf("%s step %d/%d epoch %d loss %.4f", s.Precision, s.Step, s.Total, s.Epoch+1, s.Loss)
	}
	return Hook{
		Name: "progress",
		OnStart: func(s *Status) error {
			last = time.Now()
			if tty {
				bar = progressbar.NewOptions(s.Total, progressbar.OptionSetWriter(w), progressbar.OptionShowIts(),
					progressbar.OptionSetItsString("steps"), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
				_ = bar.Set(s.First)
			}
			return nil
		},
		OnStep: func(s *Status) error {
			if bar != nil {
				if s.Step%10 == 0 {
					bar.Describe(fmt.Sprintf("%s loss %.4f", s.Precision, s.Loss))
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
			if bar != nil {
				return nil
			}
			_, err := fmt.Fprintf(w, "%s eval %s\n", s.Precision, s.Eval)
			return err
		},
		OnEnd: func(s *Status) error {
			if bar != nil {
				return bar.Finish()
			}
			return nil
		},
	}
}

// JSONLines returns the hook named "jsonl", a metric tracker: one JSON
// object per line on w for every step ({"step", "loss", "lr", "epoch",
// "ms"}), evaluation ({"step", "eval_loss", "eval_accuracy"}) and
// checkpoint ({"step", "checkpoint"}), as Accelerate's trackers log.
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
			return enc.Encode(map[string]any{"precision": s.Precision, "step": s.Step, "eval_loss": num(s.Eval.Loss), "eval_accuracy": num(s.Eval.Accuracy), "eval_examples": s.Eval.Examples})
		},
		OnSave: func(s *Status) error {
			return enc.Encode(map[string]any{"precision": s.Precision, "step": s.Step, "checkpoint": s.Checkpoint})
		},
	}
}
