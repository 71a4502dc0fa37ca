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
	// RMSE is the root of the mean squared error of Model.Predictions
	// against Model.Targets over every value of the examples, and R2 the
	// coefficient of determination, 1 − SS_res/SS_tot per target column
	// averaged over the columns (scikit-learn's r2_score); NaN without
	// Predictions (R2 also when a column's targets are constant).
	RMSE, R2 float64
	// Examples is the number of examples evaluated.
	Examples int
}

// String summarises the evaluation, as "step 100: 512 examples, loss
// 0.3100, accuracy 91.20%" (accuracy, RMSE and R² when reported).
func (e *Eval) String() string {
	s := fmt.Sprintf("step %d: %d examples", e.Step, e.Examples)
	if !math.IsNaN(e.Loss) {
		s += fmt.Sprintf(", loss %.4f", e.Loss)
	}
	if !math.IsNaN(e.Accuracy) {
		s += fmt.Sprintf(", accuracy %.2f%%", 100*e.Accuracy)
	}
	// A regression's metrics (both zero only in an Eval made by hand).
	if !math.IsNaN(e.RMSE) && (e.RMSE != 0 || e.R2 != 0) {
		s += fmt.Sprintf(", RMSE %.4g", e.RMSE)
		if !math.IsNaN(e.R2) {
			s += fmt.Sprintf(", R² %.4f", e.R2)
		}
	}
	return s
}

// evaluator is rank 0's evaluation program.
type evaluator struct {
	m        *Model
	prog     *graph.Program
	rows     int
	lossRows lossRows
	store    *graph.Store // the parameters it reads
}

// evaluator builds (once) the evaluation model on rank 0's store and
// prepares it for the recipe.
func (t *Trainer) evaluator() (*evaluator, error) {
	store := t.evalStore()
	if t.ev != nil && t.ev.store == store {
		return t.ev, nil
	}
	if store == nil {
		// Before Fit: the parameters Fit would start from (Config.Init's,
		// then the initialisers' with the run's seed).
		store = graph.NewStore()
		if t.cfg.Init != nil {
			if err := t.cfg.Init(store); err != nil {
				return nil, fmt.Errorf("train: Init: %w", err)
			}
		}
	}
	rows := t.cfg.EvalBatchSize
	if rows == 0 {
		rows = t.cfg.BatchSize
	}
	m, err := t.build(rows, false)
	if err != nil {
		return nil, err
	}
	if err := m.Builder.Init(store, t.cfg.Seed); err != nil { // only what the store lacks
		return nil, fmt.Errorf("train: %w", err)
	}
	lr := inspectLoss(m)
	var outs []*graph.Node
	for _, n := range []*graph.Node{m.Loss, m.Logits, m.Predictions} {
		if n != nil {
			outs = append(outs, n)
		}
	}
	if len(outs) == 0 {
		return nil, configErrorf("the evaluation model has no Loss, Logits or Predictions")
	}
	prep, err := passes.Prepare(m.Builder.Graph(), store, passes.Config{Recipe: t.rec, Seed: t.cfg.Seed, EvalOutputs: outs, Filter: t.cfg.Filter})
	if err != nil {
		return nil, err
	}
	if m.Fixed != nil {
		if err := m.Fixed(prep.Eval); err != nil {
			return nil, fmt.Errorf("train: Fixed: %w", err)
		}
	}
	t.ev = &evaluator{m: m, prog: prep.Eval, rows: rows, lossRows: lr, store: store}
	return t.ev, nil
}

// evalStore is the store evaluation reads: rank 0's once Fit (or Start)
// has built it, else the store of an evaluation before training (nil
// until one is made).
func (t *Trainer) evalStore() *graph.Store {
	if t.rep != nil {
		return t.rep.store
	}
	if t.ev != nil {
		return t.ev.store
	}
	return nil
}

// Evaluate runs the evaluation model (Config.EvalBatchSize rows a batch,
// in order, the last batch padded) over ds with rank 0's parameters: the
// mean loss over the examples and, with Logits, the accuracy over the
// labelled positions of ds's first label field. Call it before Fit (the
// parameters training starts from: Config.Init's, then the initialisers'
// with Config.Seed — a baseline, or a loaded model's score), after Fit,
// or from a hook during Fit (with FSDP, from OnEval or after Fit, when
// the parameters are gathered).
func (t *Trainer) Evaluate(ds data.Dataset) (*Eval, error) {
	e, err := t.evaluator()
	if err != nil {
		return nil, err
	}
	step := 0
	if t.rep != nil {
		step = int(t.rep.opt.Steps())
	}
	return e.run(ds, step)
}

// run evaluates the whole dataset once.
func (e *evaluator) run(ds data.Dataset, step int) (*Eval, error) {
	feeds, err := bindFeeds(e.m, ds.Fields(), e.rows)
	if err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	if err := checkPadding(e.m, e.lossRows, ds, e.rows, padded(ds.Len(), e.rows), "evaluation"); err != nil {
		return nil, err
	}
	target := -1
	if e.m.Targets != nil {
		for name, n := range e.m.Inputs {
			if n == e.m.Targets {
				target = fieldIndex(ds.Fields(), name)
			}
		}
	}
	var reg regression
	label := -1
	for i, f := range ds.Fields() {
		if f.Label && label < 0 {
			label = i
		}
	}
	loader, err := data.NewLoader(ds, data.Config{BatchSize: e.rows})
	if err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	defer loader.Close()
	ev := &Eval{Step: step, Loss: math.NaN(), Accuracy: math.NaN()}
	var lossSum, meanSum float64
	var correct, counted, batches int
	full := true
	for range loader.BatchesPerEpoch() {
		b, err := loader.Next()
		if err != nil {
			return nil, err
		}
		if err := feedBatch(e.prog, feeds, b); err != nil {
			return nil, err
		}
		if err := e.prog.Run(); err != nil {
			return nil, err
		}
		ev.Examples += b.Rows
		batches++
		full = full && b.Rows == b.Size()
		if e.m.Loss != nil {
			l, err := e.prog.Scalar(e.m.Loss)
			if err != nil {
				return nil, err
			}
			lossSum += float64(float64(l) * float64(b.Rows))
			meanSum += float64(l)
		}
		if target >= 0 {
			reg.add(e.prog.Float32(e.m.Predictions), b.Float32At(target), b.Rows, b.Size())
		}
		if e.m.Logits != nil && label >= 0 {
			c, n, err := accuracy(e.prog.Float32(e.m.Logits), b.Int32At(label))
			if err != nil {
				return nil, err
			}
			correct, counted = correct+c, counted+n
		}
	}
	if e.m.Loss != nil && ev.Examples > 0 {
		// The mean over the examples: of the batches' means when every
		// batch is full, else weighted by their rows.
		ev.Loss = lossSum / float64(ev.Examples)
		if full {
			ev.Loss = meanSum / float64(batches)
		}
	}
	if counted > 0 {
		ev.Accuracy = float64(correct) / float64(counted)
	}
	ev.RMSE, ev.R2 = math.NaN(), math.NaN()
	if target >= 0 {
		ev.RMSE, ev.R2 = reg.metrics()
	}
	return ev, nil
}

func fieldIndex(fields []data.Field, name string) int {
	for i, f := range fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// regression accumulates the squared errors and the targets' moments of
// each target column over the real rows of the batches, in float64.
type regression struct {
	sse       float64   // Σ (p − y)² over every value
	n         int       // values
	rows      int       // rows
	shift     []float64 // each column's first target: moments of y − shift
	sum, sq   []float64 // Σ (y − shift), Σ (y − shift)² per column
	sseColumn []float64 // Σ (p − y)² per column
}

// add counts the first rows rows of a batch of size rows a batch:
// predictions and targets of the same length.
func (r *regression) add(pred, y []float32, rows, size int) {
	cols := len(y) / size
	if r.shift == nil {
		r.shift, r.sum, r.sq, r.sseColumn = make([]float64, cols), make([]float64, cols), make([]float64, cols), make([]float64, cols)
		for j := range cols {
			r.shift[j] = float64(y[j])
		}
	}
	for i := range rows * cols {
		j := i % cols
		d := float64(pred[i]) - float64(y[i])
		r.sse += float64(d * d)
		r.sseColumn[j] += float64(d * d)
		v := float64(y[i]) - r.shift[j]
		r.sum[j] += v
		r.sq[j] += float64(v * v)
	}
	r.n += rows * cols
	r.rows += rows
}

// metrics returns the RMSE and the mean over the columns of R².
func (r *regression) metrics() (rmse, r2 float64) {
	if r.n == 0 {
		return math.NaN(), math.NaN()
	}
	rmse = math.Sqrt(r.sse / float64(r.n))
	for j := range r.sum {
		n := float64(r.rows)
		tot := r.sq[j] - r.sum[j]*r.sum[j]/n
		if !(tot > 0) {
			return rmse, math.NaN()
		}
		r2 += 1 - r.sseColumn[j]/tot
	}
	return rmse, r2 / float64(len(r.sum))
}

// checkPredictions checks a regression's Predictions and Targets.
func checkPredictions(m *Model) error {
	p, y := m.Predictions, m.Targets
	switch {
	case p == nil && y == nil:
		return nil
	case p == nil || y == nil:
		return fmt.Errorf("train: model: set both Predictions and Targets (a regression's outputs and the input of their targets), or neither")
	case !p.Shape().Equal(y.Shape()) || p.DType() != graph.Float32 || y.DType() != graph.Float32:
		return fmt.Errorf("train: model: Predictions %q %v %v and Targets %q %v %v: want float32 of one shape", p.Name(), p.DType(), p.Shape(), y.Name(), y.DType(), y.Shape())
	}
	for _, n := range m.Inputs {
		if n == y {
			return nil
		}
	}
	return fmt.Errorf("train: model: Targets %q is not one of Inputs (the trainer feeds it from a dataset field)", y.Name())
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
	if r.experts != nil {
		if err := r.gatherExperts(); err != nil {
			return err
		}
	}
	var err error
	ev := &Eval{Step: rr.status.Step}
	if r.rank == 0 {
		ev, err = rr.t.ev.run(rr.evalSet, rr.status.Step)
	}
	if err := rr.agree(err); err != nil {
		return err
	}
	if r.comm != nil {
		// Every rank's Result has the evaluation rank 0 made.
		v := []float32{float32(ev.Loss), float32(ev.Accuracy), float32(ev.Examples), float32(ev.RMSE), float32(ev.R2)}
		if err := r.comm.BroadcastF32(v, 0); err != nil {
			return err
		}
		if r.rank != 0 {
			ev.Loss, ev.Accuracy, ev.Examples, ev.RMSE, ev.R2 = float64(v[0]), float64(v[1]), int(v[2]), float64(v[3]), float64(v[4])
		}
	}
	rr.res.Eval, rr.status.Eval = ev, ev
	return rr.hooks(func(h *Hook) func(*Status) error { return h.OnEval })
}
