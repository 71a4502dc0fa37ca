package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
)

// progressEvery is how often a run whose stderr is not a terminal prints
// a progress line.
const progressEvery = 5 * time.Second

// evalBatch divides the 10 000 test images evenly.
const evalBatch = 1000

// result is one precision's run: what the trainer measured, with the test
// accuracy and the final loss (the mean of steps [lossFrom, End)).
type result struct {
	*train.Result
	TestAccuracy, FinalLoss float64
	lossFrom                int
	dp                      bool   // -dp with MS-AMP's FP8 all-reduce
	statsFile               string // -fp8-debug statistics ("" without)
}

func (r *result) fields() map[string]any {
	conv := r.Report.Converted()
	if conv == nil {
		conv = []string{}
	}
	f := map[string]any{
		"precision": r.Precision, "recipe": r.Recipe, "test_accuracy": r.TestAccuracy,
		"final_loss": r.FinalLoss, "final_loss_steps": []int{r.lossFrom, r.End}, "ms_per_step": r.MsPerStep(),
		"steps": r.End, "planned_steps": r.Total, "steps_run": r.Ran(), "converted_layers": conv,
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
	if r.Resharded != "" {
		f["resharded"] = r.Resharded
	}
	if r.AmaxAllReduceBytes > 0 {
		f["amax_allreduce_bytes_per_step"] = r.AmaxAllReduceBytes
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
func trainOne(cfg config, p precision.Config, set, test *mnist.Set) (*result, error) {
	total := cfg.epochs * (set.Len() / cfg.Batch)
	if set.Len() < cfg.Batch {
		return nil, fmt.Errorf("-batch %d is larger than the %d training examples (-limit)", cfg.Batch, set.Len())
	}
	tc := train.Config{Model: cfg.model, DropLast: true, WeightDecay: cfg.weightDecay, EvalBatchSize: evalBatch,
		Schedule: optim.WarmupCosine{Base: float32(cfg.LR), Min: float32(cfg.LR) / 50, Warmup: min(200, total/10), Total: total}}
	run := train.Run{Steps: total, Eval: test, Hint: fmt.Sprintf("learning rate %g too high?", cfg.LR)}
	cfg.Apply(p, "mnist-"+p.Name(), &tc, &run)
	if n := cfg.World(); cfg.Batch < n {
		return nil, fmt.Errorf("%s: the batch of %d leaves ranks without rows", cfg.world(), cfg.Batch)
	}
	tc.Meta = map[string]string{"model": fmt.Sprintf("mlp %v", cfg.sizes())}
	tr, err := train.New(tc)
	if err != nil {
		return nil, err
	}
	if !cfg.JSON {
		run.Hooks = append(run.Hooks, train.Progress(os.Stderr, train.ProgressOptions{Name: "mnist: " + p.Name(), Every: progressEvery, Bar: &cfg.progress, NoEval: true,
			Describe: func(s *train.Status) string {
				return fmt.Sprintf("epoch %d/%d loss %.4f", s.Epoch+1, cfg.epochs, s.Loss)
			}}))
	}
	res, err := tr.Fit(set, run)
	if errors.Is(err, train.ErrResume) {
		return nil, fmt.Errorf("-resume: %s", strings.TrimPrefix(err.Error(), "train: resume: "))
	} else if err != nil {
		return nil, err
	}
	r := &result{Result: res, TestAccuracy: res.Eval.Accuracy, FinalLoss: res.MeanLoss(100), lossFrom: res.End - min(100, len(res.Earlier)+len(res.Losses))}
	msamp := false
	if rec := tr.Recipe(); rec != nil {
		_, msamp = rec.LowBitOptimizer()
	}
	r.dp = msamp && cfg.DP.IsSet()
	if cfg.FP8Debug != "" { // not the report's own temporary log
		r.statsFile = res.StatsFile
	}
	return r, nil
}

// world names the ranks in messages: "-fsdp 3", "-dp 2", or "the MPI
// world of 3 ranks" under mpirun.
func (c config) world() string {
	switch {
	case c.Comm != nil:
		return fmt.Sprintf("the MPI world of %d ranks", c.Comm.Size())
	case c.DP.IsSet():
		return "-dp " + c.DP.String()
	}
	return "-fsdp " + c.FSDP.String()
}
