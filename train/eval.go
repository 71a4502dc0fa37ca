package train

import (
	"fmt"
	"math"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/passes"
)

// Eval is one evaluation over the evaluation dataset.
type Eval struct {
	// Step is the optimizer step it followed.
	Step int
	// Loss is the mean loss over the examples (NaN when the model has no
	// loss in evaluation); Accuracy the fraction of labelled positions
	// whose largest logit is the label's (NaN without Logits).
	Loss, Accuracy float64
	// Examples is the number of examples evaluated.
	Examples int
}

func (e *Eval) String() string {
	s := fmt.Sprintf("step %d: %d examples", e.Step, e.Examples)
	if !math.IsNaN(e.Loss) {
		s += fmt.Sprintf(", loss %.4f", e.Loss)
	}
	if !math.IsNaN(e.Accuracy) {
		s += fmt.Sprintf(", accuracy %.2f%%", 100*e.Accuracy)
	}
	return s
}

// evaluator is rank 0's evaluation program over the evaluation set.
type evaluator struct {
	m      *Model
	prog   *graph.Program
	loader *data.Loader
	feeds  []feed
	label  int // the dataset's label field (-1: none)
}

func (t *Trainer) newEvaluator(rep *replica, ds data.Dataset) (*evaluator, error) {
	if rep.rank != 0 {
		return &evaluator{}, nil // rank 0 evaluates; the others join its gathers
	}
	rows := t.cfg.EvalBatchSize
	if rows == 0 {
		rows = t.cfg.BatchSize
	}
	m, err := t.build(rows, false)
	if err != nil {
		return nil, err
	}
	var outs []*graph.Node
	for _, n := range []*graph.Node{m.Loss, m.Logits} {
		if n != nil {
			outs = append(outs, n)
		}
	}
	if len(outs) == 0 {
		return nil, configErrorf("the evaluation model has neither Loss nor Logits")
	}
	e := &evaluator{m: m, label: -1}
	for i, f := range ds.Fields() {
		if f.Label && e.label < 0 {
			e.label = i
		}
	}
	if e.feeds, err = bindFeeds(m, ds.Fields(), rows); err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	prep, err := passes.Prepare(m.Builder.Graph(), rep.store, passes.Config{Recipe: t.recipe, EvalOutputs: outs, Filter: t.cfg.Filter})
	if err != nil {
		return nil, err
	}
	e.prog = prep.Eval
	if m.Fixed != nil {
		if err := m.Fixed(e.prog); err != nil {
			return nil, fmt.Errorf("train: Fixed: %w", err)
		}
	}
	if e.loader, err = data.NewLoader(ds, data.Config{BatchSize: rows}); err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	return e, nil
}

// run evaluates the whole dataset once.
func (e *evaluator) run(step int) (*Eval, error) {
	if err := e.loader.Restore(data.State{}); err != nil {
		return nil, err
	}
	ev := &Eval{Step: step, Loss: math.NaN(), Accuracy: math.NaN()}
	var lossSum float64
	var correct, counted int
	for range e.loader.BatchesPerEpoch() {
		b, err := e.loader.Next()
		if err != nil {
			return nil, err
		}
		if err := feedBatch(e.prog, e.feeds, b); err != nil {
			return nil, err
		}
		if err := e.prog.Run(); err != nil {
			return nil, err
		}
		ev.Examples += b.Rows
		if e.m.Loss != nil {
			l, err := e.prog.Scalar(e.m.Loss)
			if err != nil {
				return nil, err
			}
			lossSum += float64(l) * float64(b.Rows)
		}
		if e.m.Logits != nil && e.label >= 0 {
			c, n, err := accuracy(e.prog.Float32(e.m.Logits), b.Int32At(e.label))
			if err != nil {
				return nil, err
			}
			correct, counted = correct+c, counted+n
		}
	}
	if e.m.Loss != nil && ev.Examples > 0 {
		ev.Loss = lossSum / float64(ev.Examples)
	}
	if counted > 0 {
		ev.Accuracy = float64(correct) / float64(counted)
	}
	return ev, nil
}

// accuracy counts the labelled positions (not IgnoreLabel) whose largest
// logit is their label's.
func accuracy(logits []float32, labels []int32) (correct, counted int, err error) {
	if len(labels) == 0 || len(logits)%len(labels) != 0 {
		return 0, 0, fmt.Errorf("train: evaluation: %d logits for %d labels", len(logits), len(labels))
	}
	c := len(logits) / len(labels)
	for p, lab := range labels {
		if lab == data.IgnoreLabel {
			continue
		}
		row := logits[p*c : p*c+c]
		best := 0
		for j := range row {
			if row[j] > row[best] {
				best = j
			}
		}
		if int32(best) == lab {
			correct++
		}
		counted++
	}
	return correct, counted, nil
}

// evaluate gathers the parameters (FSDP), evaluates on rank 0 and runs
// the OnEval hooks.
func (rr *rankRun) evaluate() error {
	r := rr.r
	if r.sh != nil {
		if err := r.sh.Gather(r.store); err != nil {
			return err
		}
	}
	var err error
	if r.rank == 0 {
		var ev *Eval
		if ev, err = rr.eval.run(rr.status.Step); err == nil {
			rr.res.Eval, rr.status.Eval = ev, ev
		}
	}
	if err := rr.agree(err); err != nil {
		return err
	}
	return rr.hooks(func(h *Hook) func(*Status) error { return h.OnEval })
}
