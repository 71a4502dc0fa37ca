package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressEvery is how often a run whose stderr is not a terminal prints
// a progress line.
const progressEvery = 5 * time.Second

// evalBatch divides the 10 000 test images evenly.
const evalBatch = 1000

// result is one training run.
type result struct {
	Precision    string
	Recipe       string
	TestAccuracy float64
	FinalLoss    float64
	MsPerStep    float64
	Steps        int
	Converted    []string
	Kept         []string  // "layer: why" for the layers the recipe kept float32
	Losses       []float32 // per step
	// With -fsdp: bytes all-gathered per step by each rank, and the part
	// of them that is FP8 weights.
	AllGatherBytes, Float8AllGatherBytes int64
	// Memory is the optimizer's storage per parameter value.
	Memory *optim.MemoryStats
	// With -dp and -recipe msamp: casts of MS-AMP's FP8 gradient
	// all-reduce that saturated or flushed a non-zero value to zero.
	FP8AllReduceOverflows, FP8AllReduceUnderflows int
	dp                                            bool
}

func (r *result) fields() map[string]any {
	conv := r.Converted
	if conv == nil {
		conv = []string{}
	}
	f := map[string]any{
		"precision": r.Precision, "recipe": r.Recipe, "test_accuracy": r.TestAccuracy,
		"final_loss": r.FinalLoss, "ms_per_step": r.MsPerStep, "steps": r.Steps, "converted_layers": conv,
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
	sizes := append(append([]int{mnist.Pixels}, cfg.hidden...), 10)
	mlp, err := nn.NewMLP(m.b, "mlp", sizes, nn.ReLU, nn.Dropout{})
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

// trainOne trains and evaluates one precision.
func trainOne(cfg config, precision string, train, test *mnist.Set) (*result, error) {
	if cfg.fsdp > 0 || cfg.mpiComm != nil {
		return trainFSDP(cfg, precision, train, test, cfg.mpiComm)
	}
	if cfg.dp > 0 {
		r, err := trainDP(cfg, precision, train, test)
		if r != nil {
			rec, _ := cfg.recipeFor(precision)
			_, r.dp = rec.(fp8.MSAMPRecipe)
		}
		return r, err
	}
	tm, err := buildModel(cfg, cfg.batch, true)
	if err != nil {
		return nil, err
	}
	em, err := buildModel(cfg, evalBatch, false)
	if err != nil {
		return nil, err
	}
	store := graph.NewStore()
	if err := tm.b.Init(store, cfg.seed); err != nil {
		return nil, err
	}
	recipe, err := cfg.recipeFor(precision)
	if err != nil {
		return nil, err
	}
	res := &result{Precision: precision, Recipe: recipes.Label(recipe)}
	var trainProg, evalProg *graph.Program
	if recipe != nil {
		prep, err := passes.Prepare(tm.g, store, passes.Config{Recipe: recipe, TrainOutputs: tm.trainOf})
		if err != nil {
			return nil, err
		}
		trainProg, res.Converted, res.Kept = prep.Train, prep.Report.Converted(), keptLayers(prep.Report)
		eprep, err := passes.Prepare(em.g, store, passes.Config{Recipe: recipe, EvalOutputs: []*graph.Node{em.logits}})
		if err != nil {
			return nil, err
		}
		evalProg = eprep.Eval
	} else {
		if trainProg, err = graph.Compile(tm.g, store, graph.Options{Training: true}, tm.trainOf...); err != nil {
			return nil, err
		}
		if evalProg, err = graph.Compile(em.g, store, graph.Options{}, em.logits); err != nil {
			return nil, err
		}
	}
	params, err := optim.Bind(store, trainProg, tm.params, tm.grads)
	if err != nil {
		return nil, err
	}
	opt, ms, err := recipes.Optimizer(recipe, params, float32(cfg.weightDecay), nil)
	if err != nil {
		return nil, err
	}
	res.Memory = &ms
	loader, err := mnist.NewLoader(train, cfg.batch, true, cfg.seed)
	if err != nil {
		return nil, err
	}
	steps := cfg.epochs * loader.BatchesPerEpoch()
	if steps == 0 {
		return nil, fmt.Errorf("no training steps (epochs %d, batch %d, %d examples)", cfg.epochs, cfg.batch, train.Len())
	}
	ckpt := &checkpointer{store: store, opt: opt, loader: loader, prog: trainProg, name: "mnist-" + precision,
		meta: map[string]string{"model": fmt.Sprintf("mlp %v", append(append([]int{mnist.Pixels}, cfg.hidden...), 10)), "recipe": res.Recipe}}
	first := 0
	if cfg.resumeDir != "" {
		if first, err = ckpt.resume(cfg.resumeDir); err != nil {
			return nil, err
		}
		if first > steps {
			return nil, fmt.Errorf("-resume: the checkpoint is at step %d, past the %d steps of this run", first, steps)
		}
	}
	sched := optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 50, Warmup: min(200, steps/10), Total: steps}
	var bar *progressbar.ProgressBar
	if cfg.progress {
		bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("steps"),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	xb, yb := make([]float32, cfg.batch*mnist.Pixels), make([]int32, cfg.batch)
	res.Losses = make([]float32, 0, steps)
	var busy time.Duration
	end := steps
	if cfg.stopAfter > 0 {
		end = min(end, cfg.stopAfter)
	}
	lastLine := time.Now()
	for step := first; step < end; step++ {
		loader.Next(xb, yb)
		start := time.Now()
		if err := trainProg.FeedFloat32(tm.x, xb); err != nil {
			return nil, err
		}
		if err := trainProg.FeedInt32(tm.y, yb); err != nil {
			return nil, err
		}
		if err := trainProg.Run(); err != nil {
			return nil, err
		}
		opt.Step(sched.LR(step))
		busy += time.Since(start)
		l, _ := trainProg.Scalar(tm.loss)
		if err := checkLoss(step, l, cfg.lr); err != nil {
			return nil, err
		}
		res.Losses = append(res.Losses, l)
		if cfg.saveDir != "" && cfg.saveEvery > 0 && (step+1)%cfg.saveEvery == 0 && step+1 < end {
			if err := ckpt.save(cfg.saveDir); err != nil {
				return nil, err
			}
		}
		if bar != nil {
			if step%20 == 0 {
				bar.Describe(fmt.Sprintf("%s epoch %d/%d loss %.4f", precision, loader.Epoch()+1, cfg.epochs, l))
			}
			_ = bar.Add(1)
		} else if !cfg.json && time.Since(lastLine) >= progressEvery {
			// Not a terminal: a plain line every few seconds instead of
			// silence.
			fmt.Fprintf(os.Stderr, "mnist: %s epoch %d/%d step %d/%d loss %.4f\n", precision, loader.Epoch()+1, cfg.epochs, step+1, steps, l)
			lastLine = time.Now()
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if cfg.saveDir != "" {
		if err := ckpt.save(cfg.saveDir); err != nil {
			return nil, err
		}
	}
	res.Steps = steps
	res.MsPerStep = float64(busy.Microseconds()) / 1000 / float64(max(1, end-first))
	if len(res.Losses) == 0 {
		return nil, fmt.Errorf("-resume: the checkpoint is at step %d, nothing left to train", first)
	}
	res.FinalLoss = recipes.MeanTail(res.Losses, 100)
	res.TestAccuracy, err = evaluate(evalProg, em, test)
	return res, err
}

// checkpointer saves and restores one run: parameters, FP8 state,
// optimizer, step and the loader's position.
type checkpointer struct {
	store  *graph.Store
	opt    optim.Stateful
	loader *mnist.Loader
	prog   *graph.Program
	name   string
	meta   map[string]string
}

func (c *checkpointer) path(dir string) string { return filepath.Join(dir, c.name+".safetensors") }

func (c *checkpointer) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-save: %w", err)
	}
	lb, err := c.loader.MarshalBinary()
	if err != nil {
		return err
	}
	return checkpoint.Save(c.path(dir), &checkpoint.State{Store: c.store, Optimizer: c.opt, Step: c.prog.Step(),
		RNG: map[string][]byte{"loader": lb}, Meta: c.meta})
}

// resume loads the checkpoint and returns the step to continue from.
func (c *checkpointer) resume(dir string) (int, error) {
	st := &checkpoint.State{Store: c.store, Optimizer: c.opt, RNG: map[string][]byte{"loader": nil}, Meta: c.meta}
	if err := checkpoint.Load(c.path(dir), st); err != nil {
		return 0, fmt.Errorf("-resume: %w", err)
	}
	if st.Unverified {
		fmt.Fprintf(os.Stderr, "mnist: note: %s was saved without checksums; its data could not be verified\n", c.path(dir))
	}
	if err := c.loader.UnmarshalBinary(st.RNG["loader"]); err != nil {
		return 0, fmt.Errorf("-resume: %w", err)
	}
	c.prog.SetStep(st.Step)
	return int(st.Step), nil
}

// evaluate returns the accuracy on the test set.
func evaluate(p *graph.Program, m *model, test *mnist.Set) (float64, error) {
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

// checkLoss stops training at a loss that is not finite (every rank of a
// parallel run sees the same reduced loss, so all stop together).
func checkLoss(step int, l float32, lr float64) error {
	if l != l || math.IsInf(float64(l), 0) {
		return fmt.Errorf("step %d: the loss is %v (learning rate %g too high?)", step, l, lr)
	}
	return nil
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
