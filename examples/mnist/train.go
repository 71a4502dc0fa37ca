package main

import (
	"fmt"
	"os"
	"time"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/examples/internal/trainloop"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"golang.org/x/term"
)

// progressEvery is how often a run whose stderr is not a terminal prints
// a progress line.
const progressEvery = 5 * time.Second

// evalBatch divides the 10 000 test images evenly.
const evalBatch = 1000

// result is one training run.
type result struct {
	Precision string
	Recipe    string
	// Settings says where the recipe's settings came from.
	Settings     string
	TestAccuracy float64
	FinalLoss    float64
	// LossFrom and LossTo are the steps FinalLoss averages: [from, to).
	LossFrom, LossTo int
	MsPerStep        float64
	// Steps is the step the run reached (the schedule's end unless it
	// stopped early), Planned the schedule's length, Ran the steps this
	// process ran (fewer than Steps after a resume).
	Steps, Planned, Ran int
	Converted           []string
	Kept                []string  // "layer: why" for the layers the recipe kept float32
	Losses              []float32 // per step run
	// With -fsdp: bytes all-gathered per step by each rank, and the part
	// of them that is FP8 weights; Ranks is the number of ranks.
	AllGatherBytes, Float8AllGatherBytes int64
	Ranks                                int
	// Memory is the optimizer's storage per parameter value.
	Memory *optim.MemoryStats
	// With -dp and -recipe msamp: casts of MS-AMP's FP8 gradient
	// all-reduce that saturated or flushed a non-zero value to zero.
	FP8AllReduceOverflows, FP8AllReduceUnderflows int
	dp                                            bool
	// StatsFile is where -fp8-debug statistics went ("" without).
	StatsFile string
	// Conversion is the conversion report ("" for float32).
	Conversion string
	// Profile is the training step's per-op profile (with -profile).
	Profile *graph.Profile
}

// conversionText is the conversion report of a run ("" for float32).
func conversionText(recipe fp8.Recipe, rep passes.Report) string {
	if recipe == nil {
		return ""
	}
	return rep.String()
}

func (r *result) fields() map[string]any {
	conv := r.Converted
	if conv == nil {
		conv = []string{}
	}
	f := map[string]any{
		"precision": r.Precision, "recipe": r.Recipe, "test_accuracy": r.TestAccuracy,
		"final_loss": r.FinalLoss, "final_loss_steps": []int{r.LossFrom, r.LossTo}, "ms_per_step": r.MsPerStep,
		"steps": r.Steps, "planned_steps": r.Planned, "steps_run": r.Ran, "converted_layers": conv,
	}
	if r.Settings != "" {
		f["recipe_settings"] = r.Settings
	}
	if r.Memory != nil {
		f["optimizer_state_bytes_per_param"] = r.Memory.StateBytes
		f["weight_bytes_per_param"] = r.Memory.WeightBytes
	}
	if r.dp {
		f["fp8_allreduce_overflows"] = r.FP8AllReduceOverflows
		f["fp8_allreduce_underflows"] = r.FP8AllReduceUnderflows
	}
	if r.AllGatherBytes > 0 {
		f["allgather_bytes_per_step"] = r.AllGatherBytes
		f["fp8_allgather_bytes_per_step"] = r.Float8AllGatherBytes
	}
	return f
}

// record fills the step counts, timing and final loss from a loop.
func (r *result) record(l *trainloop.Loop, st trainloop.Stats) {
	r.Losses, r.Profile = st.Losses, st.Profile
	r.Steps, r.Planned, r.Ran = st.End, l.Total, st.Ran()
	r.MsPerStep = st.MsPerStep()
	r.FinalLoss = recipes.MeanTail(st.Losses, 100)
	r.LossTo = st.End
	r.LossFrom = st.End - min(100, len(st.Losses))
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// model builds the MLP on a new graph for a batch size.
type model struct {
	g       *graph.Graph
	b       *nn.Builder
	x, y    *graph.Node
	logits  *graph.Node
	loss    *graph.Node
	params  []*graph.Node
	grads   []*graph.Node
	trainOf []*graph.Node
}

func buildModel(cfg config, batch int, withLoss bool) (*model, error) {
	m := &model{g: graph.New()}
	m.b = nn.NewBuilder(m.g)
	m.x = m.g.Input("x", graph.Float32, batch, mnist.Pixels)
	mlp, err := nn.NewMLP(m.b, "mlp", cfg.sizes(), nn.ReLU, nn.Dropout{})
	if err != nil {
		return nil, err
	}
	m.logits = mlp.Forward(m.x)
	m.params = m.b.Params()
	if withLoss {
		m.y = m.g.Input("labels", graph.Int32, batch)
		m.loss = ops.CrossEntropy(m.logits, m.y)
		if m.grads, err = graph.Grad(m.loss, m.params...); err != nil {
			return nil, err
		}
		m.trainOf = append([]*graph.Node{m.loss}, m.grads...)
	}
	return m, m.g.Err()
}

// sizes lists the layer widths, input to output.
func (c config) sizes() []int { return append(append([]int{mnist.Pixels}, c.hidden...), 10) }

// trainOne trains and evaluates one precision.
func trainOne(cfg config, precision string, train, test *mnist.Set) (*result, error) {
	recipe, err := cfg.recipeFor(precision)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.fsdp > 0 || cfg.mpiComm != nil:
		return trainFSDP(cfg, precision, recipe, train, test)
	case cfg.dp > 0:
		return trainDP(cfg, precision, recipe, train, test)
	}
	rep, err := newReplica(cfg, precision, nil, recipe, cfg.batch, nil)
	if err != nil {
		return nil, err
	}
	res := rep.result(precision, recipe)
	opt, ms, err := recipes.Optimizer(recipe, rep.params, float32(cfg.weightDecay), nil)
	if err != nil {
		return nil, err
	}
	res.Memory = &ms
	ckpt := &trainloop.Checkpoint{Name: "mnist-" + precision, Store: rep.store, Opt: opt, Prog: rep.prog, Meta: cfg.checkpointMeta(res.Recipe, ""), Notes: os.Stderr}
	err = rep.train(cfg, train, res, shard{0, cfg.batch, cfg.batch}, nil, ckpt, func() error {
		if err := rep.prog.Run(); err != nil {
			return err
		}
		opt.Step(rep.lr)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, rep.evaluate(cfg, recipe, res, test)
}

// checkpointMeta is what a checkpoint records of the run, so that a
// resume into another model or recipe is refused.
func (c config) checkpointMeta(recipe, extra string) map[string]string {
	return map[string]string{"model": fmt.Sprintf("mlp %v%s", c.sizes(), extra), "recipe": recipe}
}

// shard is the rows [lo, hi) of each global batch of size of that one
// rank trains on.
type shard struct{ lo, hi, of int }

// shardOf splits a global batch over n ranks: the first batch%n ranks take
// one row more than the others.
func shardOf(batch, n, rank int) shard {
	q, r := batch/n, batch%n
	lo := rank*q + min(rank, r)
	hi := lo + q
	if rank < r {
		hi++
	}
	return shard{lo, hi, batch}
}

// even reports whether every rank of n has the same rows.
func (s shard) even(n int) bool { return s.of%n == 0 }

// weight is the rank's share of a gradient or loss average over n ranks
// whose terms are averaged with equal weights: rows·n/batch (1 when the
// split is even).
func (s shard) weight(n int) float32 { return float32(s.hi-s.lo) * float32(n) / float32(s.of) }

// replica is one process's (or one rank's) model, store, compiled
// training program and optimizer parameters.
type replica struct {
	m      *model
	store  *graph.Store
	prog   *graph.Program
	report passes.Report
	params []optim.Param
	lr     float32 // the learning rate of the step being run
	// resumed, if set, runs after a checkpoint has been loaded.
	resumed func() error
	// log receives the -fp8-debug statistics (nil without).
	log *inspect.Log
}

// newReplica builds the model for a batch of rows, initialises its
// parameters (the same values on every rank) and compiles the training
// program through Prepare, with extra passes (FSDP sharding) after the
// recipe's.
func newReplica(cfg config, precision string, comm dist.Communicator, recipe fp8.Recipe, rows int, extra func(m *model, store *graph.Store) []passes.Pass) (*replica, error) {
	if rows < 1 {
		return nil, fmt.Errorf("a rank with no rows of the batch of %d", cfg.batch)
	}
	m, err := buildModel(cfg, rows, true)
	if err != nil {
		return nil, err
	}
	r := &replica{m: m, store: graph.NewStore()}
	if err := m.b.Init(r.store, cfg.seed); err != nil {
		return nil, err
	}
	// Statistics merge across the ranks of a parallel run; rank 0 writes
	// them.
	pc := passes.Config{Recipe: recipe, TrainOutputs: m.trainOf, Debug: cfg.debug, DebugComm: comm}
	if cfg.debug != nil && (comm == nil || comm.Rank() == 0) {
		if r.log, err = recipes.DebugLog(cfg.fp8Log, precision, 0); err != nil {
			return nil, err
		}
		pc.DebugLog = r.log
	}
	if extra != nil {
		pc.Passes = extra(m, r.store)
	}
	prep, err := passes.Prepare(m.g, r.store, pc)
	if err != nil {
		return nil, err
	}
	r.prog, r.report = prep.Train, prep.Report
	if extra != nil {
		return r, nil // sharded: the caller's driver owns the parameters
	}
	if r.params, err = optim.Bind(r.store, r.prog, m.params, m.grads); err != nil {
		return nil, err
	}
	return r, nil
}

// result starts a run's result with what the conversion did.
func (r *replica) result(precision string, recipe fp8.Recipe) *result {
	return &result{Precision: precision, Recipe: recipes.Label(recipe), Converted: r.report.Converted(), Kept: keptLayers(r.report), Ranks: 1,
		Conversion: conversionText(recipe, r.report)}
}

// train runs the schedule on this replica: each step feeds the replica's
// rows of the global batch, runs update (program and optimizer), and with comm
// averages the loss over the ranks. It fills res.
func (r *replica) train(cfg config, train *mnist.Set, res *result, rows shard, comm dist.Communicator, ckpt *trainloop.Checkpoint, update func() error) error {
	loader, err := mnist.NewLoader(train, cfg.batch, true, cfg.seed) // every rank draws the same global batches
	if err != nil {
		return err
	}
	total := cfg.epochs * loader.BatchesPerEpoch()
	sched := optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 50, Warmup: min(200, total/10), Total: total}
	l := &trainloop.Loop{Name: "mnist: " + res.Precision, Total: total, End: total, Unit: "step",
		Hint: fmt.Sprintf("learning rate %g too high?", cfg.lr)}
	if cfg.stopAfter > 0 {
		l.End = min(total, cfg.stopAfter)
	}
	if ckpt != nil {
		ckpt.RNG = map[string]trainloop.RNG{"loader": loader}
		if cfg.resumeDir != "" {
			if l.First, err = ckpt.Resume(cfg.resumeDir); err != nil {
				return err
			}
			if r.resumed != nil {
				if err := r.resumed(); err != nil {
					return err
				}
			}
		}
		if cfg.saveDir != "" {
			l.Save, l.SaveEvery = func() error { return ckpt.Save(cfg.saveDir) }, cfg.saveEvery
		}
	}
	if err := l.Check(); err != nil {
		return err
	}
	xb, yb := make([]float32, cfg.batch*mnist.Pixels), make([]int32, cfg.batch)
	xs, ys := xb[rows.lo*mnist.Pixels:rows.hi*mnist.Pixels], yb[rows.lo:rows.hi]
	lossBuf := make([]float32, 1)
	n := 1
	if comm != nil {
		n = comm.Size()
	}
	wLoss := rows.weight(n)
	l.Batch = func(int) error { loader.Next(xb, yb); return nil }
	l.Step = func(step int) (float32, error) {
		if err := r.prog.FeedFloat32(r.m.x, xs); err != nil {
			return 0, err
		}
		if err := r.prog.FeedInt32(r.m.y, ys); err != nil {
			return 0, err
		}
		r.lr = sched.LR(step)
		if err := update(); err != nil {
			return 0, err
		}
		loss, err := r.prog.Scalar(r.m.loss)
		if err != nil || comm == nil {
			return loss, err
		}
		// The global batch's mean loss: an even split sums and divides,
		// an uneven one weights each rank by its rows.
		lossBuf[0] = loss
		if !rows.even(n) {
			lossBuf[0] *= wLoss
		}
		if err := comm.AllReduceF32(lossBuf, dist.Sum); err != nil {
			return 0, err
		}
		return lossBuf[0] / float32(n), nil
	}
	l.Diagnose = func() string { return trainloop.Diagnosis(r.params, r.store) }
	if cfg.progress && (comm == nil || comm.Rank() == 0) {
		l.Progress = os.Stderr
	} else if !cfg.json && (comm == nil || comm.Rank() == 0) {
		l.Lines, l.LineEvery = os.Stderr, progressEvery
	}
	l.Describe = func(step int, loss float32) string {
		return fmt.Sprintf("epoch %d/%d loss %.4f", loader.Epoch()+1, cfg.epochs, loss)
	}
	if cfg.profile && (comm == nil || comm.Rank() == 0) {
		l.Profile = r.prog
	}
	l.DebugLog = r.log
	if r.log != nil && cfg.fp8Debug != "" { // not the report's own temporary log
		res.StatsFile = r.log.Path()
	}
	st, err := l.Run()
	if err != nil {
		return err
	}
	res.record(l, st)
	return nil
}

// evaluate compiles the evaluation program on the replica's store (the
// trained parameters) and fills res.TestAccuracy.
func (r *replica) evaluate(cfg config, recipe fp8.Recipe, res *result, test *mnist.Set) error {
	em, err := buildModel(cfg, evalBatch, false)
	if err != nil {
		return err
	}
	prep, err := passes.Prepare(em.g, r.store, passes.Config{Recipe: recipe, EvalOutputs: []*graph.Node{em.logits}})
	if err != nil {
		return err
	}
	res.TestAccuracy, err = accuracy(prep.Eval, em, test)
	return err
}

// accuracy returns the accuracy on the test set.
func accuracy(p *graph.Program, m *model, test *mnist.Set) (float64, error) {
	correct, total := 0, 0
	for start := 0; start+evalBatch <= test.Len(); start += evalBatch {
		if err := p.FeedFloat32(m.x, test.Images[start*mnist.Pixels:(start+evalBatch)*mnist.Pixels]); err != nil {
			return 0, err
		}
		if err := p.Run(); err != nil {
			return 0, err
		}
		out := p.Float32(m.logits)
		for i := 0; i < evalBatch; i++ {
			row := out[i*10 : i*10+10]
			best := 0
			for c := range row {
				if row[c] > row[best] {
					best = c
				}
			}
			if int32(best) == test.Labels[start+i] {
				correct++
			}
			total++
		}
	}
	if total == 0 {
		return 0, fmt.Errorf("the test set has fewer than %d images", evalBatch)
	}
	return float64(correct) / float64(total), nil
}

// keptLayers says, for each layer a conversion left in float32, why.
func keptLayers(r passes.Report) []string {
	var out []string
	for _, l := range r.Layers {
		if !l.Converted {
			out = append(out, l.FQN+": "+l.Reason)
		}
	}
	return out
}
