package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/train"
)

// progressEvery is how often a run whose stderr is not a terminal prints
// a progress line.
const progressEvery = 5 * time.Second

// evalBatch divides the 10 000 test images evenly.
const evalBatch = 1000

// result is one training run.
type result struct {
	Precision, Recipe string
	// Settings says where the recipe's settings came from.
	Settings     string
	TestAccuracy float64
	FinalLoss    float64
	// LossFrom and LossTo are the steps FinalLoss averages: [from, to).
	LossFrom, LossTo int
	MsPerStep        float64
	// Steps is the step the run reached, Planned the schedule's length,
	// Ran the steps this process ran (fewer than Steps after a resume).
	Steps, Planned, Ran int
	Converted           []string
	Kept                []string  // "layer: why" for the layers the recipe kept float32
	Losses              []float32 // per step run
	Ranks               int
	// With -fsdp: bytes all-gathered per step by each rank, and the FP8
	// weights' part.
	AllGatherBytes, Float8AllGatherBytes int64
	Memory                               *optim.MemoryStats
	// With -dp and -recipe msamp: the FP8 gradient all-reduce's
	// saturated and flushed casts.
	FP8AllReduceOverflows, FP8AllReduceUnderflows int
	dp                                            bool
	StatsFile                                     string // -fp8-debug statistics ("" without)
	Conversion                                    string // the conversion report ("" for float32)
	Profile                                       *graph.Profile
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
		"optimizer_state_bytes_per_param": r.Memory.StateBytes, "weight_bytes_per_param": r.Memory.WeightBytes,
	}
	if r.Settings != "" {
		f["recipe_settings"] = r.Settings
	}
	if r.dp {
		f["fp8_allreduce_overflows"], f["fp8_allreduce_underflows"] = r.FP8AllReduceOverflows, r.FP8AllReduceUnderflows
	}
	if r.AllGatherBytes > 0 {
		f["allgather_bytes_per_step"], f["fp8_allgather_bytes_per_step"] = r.AllGatherBytes, r.Float8AllGatherBytes
	}
	return f
}

// sizes lists the layer widths, input to output.
func (c config) sizes() []int { return append(append([]int{mnist.Pixels}, c.hidden...), 10) }

// model builds the MLP for a batch of rows (with its loss for training).
func (c config) model(rows int, training bool) (*train.Model, error) {
	g := graph.New()
	b := nn.NewBuilder(g)
	x := g.Input("x", graph.Float32, rows, mnist.Pixels)
	mlp, err := nn.NewMLP(b, "mlp", c.sizes(), nn.ReLU, nn.Dropout{})
	if err != nil {
		return nil, err
	}
	m := &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x}, Logits: mlp.Forward(x)}
	if training {
		y := g.Input("labels", graph.Int32, rows)
		m.Inputs["label"], m.Loss = y, ops.CrossEntropy(m.Logits, y)
	}
	return m, g.Err()
}

// trainOne trains one precision (in one process, -dp or -fsdp ranks, or
// this process's rank of an MPI job) and evaluates it on the test set.
func trainOne(cfg config, p train.Precision, set, test *mnist.Set) (*result, error) {
	perEpoch := set.Len() / cfg.batch
	total := cfg.epochs * perEpoch
	name, extra := "mnist-"+p.Name(), ""
	tc := train.Config{Model: cfg.model, Precision: p, BatchSize: cfg.batch, DropLast: true, Seed: cfg.seed, LR: cfg.lr,
		Schedule:    optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 50, Warmup: min(200, total/10), Total: total},
		WeightDecay: cfg.weightDecay, DP: cfg.dp, FSDP: cfg.fsdp, EvalBatchSize: evalBatch, Debug: cfg.debug, DebugLogDir: cfg.fp8Log,
		Profile: cfg.profile, Name: name}
	if cfg.mpiComm != nil {
		tc.Comm, tc.FSDP = cfg.mpiComm, -1
	}
	if n := max(cfg.fsdp, cfg.dp); cfg.fsdp > 0 || cfg.mpiComm != nil {
		if cfg.mpiComm != nil {
			n = cfg.mpiComm.Size()
		}
		extra = fmt.Sprintf(" fsdp %d", n)
		if cfg.batch < n {
			return nil, fmt.Errorf("%s: the batch of %d leaves ranks without rows", cfg.world(n), cfg.batch)
		}
	}
	tc.Meta = map[string]string{"model": fmt.Sprintf("mlp %v%s", cfg.sizes(), extra)}
	tr, err := train.New(tc)
	if err != nil {
		return nil, err
	}
	run := train.Run{Steps: total, StopAfter: cfg.stopAfter, Eval: test, SaveDir: cfg.saveDir, SaveEvery: cfg.saveEvery, Flat: true,
		Resume: cfg.resumeDir, Hint: fmt.Sprintf("learning rate %g too high?", cfg.lr)}
	if !cfg.json {
		run.Hooks = append(run.Hooks, train.Progress(os.Stderr, train.ProgressOptions{Name: "mnist: " + p.Name(), Every: progressEvery, Bar: &cfg.progress, NoEval: true,
			Describe: func(s *train.Status) string {
				return fmt.Sprintf("epoch %d/%d loss %.4f", s.Epoch+1, cfg.epochs, s.Loss)
			}}))
	}
	res, err := tr.Fit(set, run)
	if errors.Is(err, train.ErrResume) {
		return nil, fmt.Errorf("-resume: %s", strings.TrimPrefix(err.Error(), "train: resume: "))
	}
	if err != nil {
		return nil, err
	}
	r := &result{Precision: p.Name(), Recipe: res.Recipe, Settings: res.Settings, TestAccuracy: res.Eval.Accuracy,
		FinalLoss: res.MeanLoss(100), LossTo: res.End, LossFrom: res.End - min(100, len(res.Losses)), MsPerStep: res.MsPerStep(),
		Steps: res.End, Planned: res.Total, Ran: res.Ran(), Converted: res.Report.Converted(), Losses: res.Losses, Ranks: res.Ranks,
		AllGatherBytes: res.AllGatherBytes, Float8AllGatherBytes: res.Float8AllGatherBytes, Memory: &res.Memory,
		FP8AllReduceOverflows: res.FP8AllReduceOverflows, FP8AllReduceUnderflows: res.FP8AllReduceUnderflows,
		Conversion: res.Report.String(), Profile: res.Profile}
	_, msamp := tr.Recipe().(fp8.MSAMPRecipe)
	r.dp = msamp && cfg.dp > 0
	if cfg.fp8Debug != "" { // not the report's own temporary log
		r.StatsFile = res.StatsFile
	}
	for _, l := range res.Report.Layers {
		if !l.Converted {
			r.Kept = append(r.Kept, l.FQN+": "+l.Reason)
		}
	}
	return r, nil
}

// world names the ranks of a sharded run in messages: "-fsdp 3", or "the
// MPI world of 3 ranks" under mpirun.
func (c config) world(n int) string {
	if c.mpiComm != nil {
		return fmt.Sprintf("the MPI world of %d ranks", n)
	}
	return fmt.Sprintf("-fsdp %d", n)
}
