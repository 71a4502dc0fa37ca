package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/examples/internal/trainloop"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/train/report"
	"golang.org/x/term"
)

type result struct {
	// Iters is the iteration the run reached, Planned the schedule's
	// length, Ran the iterations this process ran.
	Iters, Planned, Ran int
	Precision, Recipe   string
	TrainLoss, ValLoss  float64
	MsPerIter           float64
	TokensPerS          float64
	Params              int
	Converted           []string
	Linears             int
	Losses              []float32
	Sample              string
	StateBytes          float64        // optimizer state per parameter value
	Settings            string         // where the recipe's settings came from
	StatsFile           string         // where -fp8-debug statistics went
	Conversion          string         // the conversion report ("" for float32)
	Profile             *graph.Profile // the training step's per-op profile (-profile)
}

func (r *result) fields() map[string]any {
	conv := r.Converted
	if conv == nil {
		conv = []string{}
	}
	return map[string]any{"precision": r.Precision, "recipe": r.Recipe, "train_loss": r.TrainLoss, "val_loss": r.ValLoss,
		"tokens_per_s": r.TokensPerS, "ms_per_iter": r.MsPerIter, "params": r.Params, "converted_layers": conv,
		"optimizer_state_bytes_per_param": r.StateBytes, "recipe_settings": r.Settings,
		"iters": r.Iters, "planned_iters": r.Planned, "iters_run": r.Ran}
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// model is a GPT built on its own graph for a batch size and length.
type model struct {
	g                *graph.Graph
	b                *nn.Builder
	gpt              *nn.GPT
	ids, pos, labels *graph.Node
	logits, loss     *graph.Node
	grads            []*graph.Node
	batch, seq       int
}

func buildModel(cfg config, vocab, batch, seq int, train bool) (*model, error) {
	m := &model{g: graph.New(), batch: batch, seq: seq}
	m.b = nn.NewBuilder(m.g)
	gpt, err := nn.NewGPT(m.b, "gpt", nn.GPTConfig{Layers: cfg.layers, Heads: cfg.heads, Embd: cfg.embd, Block: cfg.block,
		Vocab: vocab, Dropout: float32(cfg.dropout), Seed: cfg.seed})
	if err != nil {
		return nil, err
	}
	m.gpt = gpt
	m.ids = m.g.Input("ids", graph.Int32, batch, seq)
	m.pos = m.g.Input("pos", graph.Int32, seq)
	m.logits = gpt.Forward(m.ids, m.pos)
	if train {
		m.labels = m.g.Input("labels", graph.Int32, batch, seq)
		m.loss = ops.CrossEntropy(m.logits, m.labels)
		if m.grads, err = graph.Grad(m.loss, m.b.Params()...); err != nil {
			return nil, err
		}
	}
	return m, m.g.Err()
}

// batcher draws random windows of a token stream.
type batcher struct {
	data   []int32
	src    *rand.PCG
	rng    *rand.Rand
	x, y   []int32
	block  int
	nBatch int
}

func newBatcher(data []int32, batch, block int, seed uint64) *batcher {
	src := rand.NewPCG(seed, 77)
	return &batcher{data: data, src: src, rng: rand.New(src), x: make([]int32, batch*block), y: make([]int32, batch*block), block: block, nBatch: batch}
}

func (b *batcher) next() {
	for i := 0; i < b.nBatch; i++ {
		off := b.rng.IntN(len(b.data) - b.block - 1)
		copy(b.x[i*b.block:(i+1)*b.block], b.data[off:off+b.block])
		copy(b.y[i*b.block:(i+1)*b.block], b.data[off+1:off+b.block+1])
	}
}

// trainOne trains and evaluates one precision: compile and bind the
// optimizer (newRun), run the loop with checkpoints and evaluation lines,
// then estimate the losses and sample.
func trainOne(cfg config, precision string, recipe fp8.Recipe, voc *vocab, train, val []int32, w io.Writer) (*result, error) {
	r, err := newRun(cfg, precision, recipe, voc, w)
	if err != nil {
		return nil, err
	}
	res := r.res
	l, err := r.loop(cfg, train, val, w)
	if err != nil {
		return nil, err
	}
	if cfg.profile {
		l.Profile = r.trainProg
	}
	l.DebugLog = r.log
	if r.log != nil && cfg.fp8Debug != "" { // not the report's own temporary log
		res.StatsFile = r.log.Path()
	}
	st, err := l.Run()
	if err != nil {
		return nil, err
	}
	res.Losses, res.Profile = st.Losses, st.Profile
	res.Iters, res.Planned, res.Ran = st.End, l.Total, st.Ran()
	res.MsPerIter = st.MsPerStep()
	res.TokensPerS = float64(cfg.batch*cfg.block) / (res.MsPerIter / 1000)
	if res.TrainLoss, err = r.estimate(cfg, train, 98); err != nil {
		return nil, err
	}
	if res.ValLoss, err = r.estimate(cfg, val, 99); err != nil {
		return nil, err
	}
	if cfg.sample > 0 {
		if res.Sample, err = sample(cfg, voc, r.store, recipe, val, cfg.sample); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// precisionRun is one precision's compiled model: the training and evaluation
// programs on one store, the optimizer and the checkpoint.
type precisionRun struct {
	m                   *model
	store               *graph.Store
	trainProg, evalProg *graph.Program
	params              []optim.Param
	opt                 optim.Stateful
	ckpt                *trainloop.Checkpoint
	res                 *result
	precision           string
	log                 *inspect.Log // -fp8-debug statistics (nil without)
}

// newRun builds and initialises the model, prepares it for the recipe
// (printing the compiled graph with -dump), binds AdamW and sets up the
// checkpoint.
func newRun(cfg config, precision string, recipe fp8.Recipe, voc *vocab, w io.Writer) (*precisionRun, error) {
	m, err := buildModel(cfg, len(voc.runes), cfg.batch, cfg.block, true)
	if err != nil {
		return nil, err
	}
	r := &precisionRun{m: m, store: graph.NewStore(), precision: precision}
	if err := m.b.Init(r.store, cfg.seed); err != nil {
		return nil, err
	}
	r.res = &result{Precision: precision, Recipe: recipes.Label(recipe), Params: m.b.NumParams()}
	outs := append([]*graph.Node{m.loss}, m.grads...)
	pc := passes.Config{Recipe: recipe, TrainOutputs: outs, EvalOutputs: []*graph.Node{m.loss}, Debug: cfg.debug}
	if cfg.debug != nil {
		if r.log, err = recipes.DebugLog(cfg.fp8Log, precision, 0); err != nil {
			return nil, err
		}
		pc.DebugLog = r.log
	}
	prep, err := passes.Prepare(m.g, r.store, pc)
	if err != nil {
		return nil, err
	}
	r.trainProg, r.evalProg = prep.Train, prep.Eval
	r.res.Converted, r.res.Linears = prep.Report.Converted(), len(prep.Report.Layers)
	if recipe != nil {
		r.res.Conversion = prep.Report.String()
	}
	if recipe == nil {
		r.res.Linears = 4*cfg.layers + 1
	}
	if cfg.dump && recipe != nil {
		fmt.Fprintf(w, "== compiled %s training graph ==\n", recipes.PrecisionName(precision))
		if err := m.g.WriteText(w, outs...); err != nil {
			return nil, err
		}
		fmt.Fprint(w, prep.Report)
	}
	if r.params, err = optim.Bind(r.store, r.trainProg, m.b.Params(), m.grads); err != nil {
		return nil, err
	}
	var ms optim.MemoryStats
	if r.opt, ms, err = recipes.Optimizer(recipe, r.params, 0.1, nil); err != nil {
		return nil, err
	}
	r.res.StateBytes = ms.StateBytes
	if err := feedPositions(cfg, m, r.trainProg, r.evalProg); err != nil {
		return nil, err
	}
	// The model key names the vocabulary itself (its characters' CRC-32C),
	// so a checkpoint of another corpus with as many characters is refused.
	r.ckpt = &trainloop.Checkpoint{Name: "gpt-" + precision, Store: r.store, Opt: r.opt, Prog: r.trainProg, Notes: os.Stderr,
		Meta: map[string]string{"model": fmt.Sprintf("gpt layers=%d heads=%d embd=%d block=%d vocab=%d/%08x", cfg.layers, cfg.heads, cfg.embd, cfg.block, len(voc.runes), voc.checksum()), "recipe": r.res.Recipe}}
	return r, nil
}

// estimate is the evaluation program's mean loss over cfg.evalBatches
// random windows of data, drawn from seed.
func (r *precisionRun) estimate(cfg config, data []int32, seed uint64) (float64, error) {
	return estimateLoss(cfg, r.m, r.evalProg, data, seed)
}

// loop is the training loop of the run: random windows of train, AdamW
// on the warmup-cosine schedule with gradients clipped to norm 1,
// checkpoints with -save/-resume, and a validation estimate every
// -eval-every iterations when no progress bar is shown.
func (r *precisionRun) loop(cfg config, train, val []int32, w io.Writer) (*trainloop.Loop, error) {
	tb := newBatcher(train, cfg.batch, cfg.block, cfg.seed)
	r.ckpt.RNG = map[string]trainloop.RNG{"batches": tb.src}
	sched := optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 10, Warmup: min(100, cfg.iters/10), Total: cfg.iters}
	l := &trainloop.Loop{Name: "gpt: " + r.precision, Total: cfg.iters, End: cfg.iters, Unit: "iteration",
		Hint: fmt.Sprintf("learning rate %g too high?", cfg.lr)}
	if cfg.stopAfter > 0 {
		l.End = min(l.End, cfg.stopAfter)
	}
	if cfg.resumeDir != "" {
		var err error
		if l.First, err = r.ckpt.Resume(cfg.resumeDir); err != nil {
			return nil, err
		}
	}
	if cfg.saveDir != "" {
		l.Save, l.SaveEvery = func() error { return r.ckpt.Save(cfg.saveDir) }, cfg.saveEvery
	}
	m, prog := r.m, r.trainProg
	l.Batch = func(int) error { tb.next(); return nil }
	l.Step = func(it int) (float32, error) {
		if err := prog.FeedInt32(m.ids, tb.x); err != nil {
			return 0, err
		}
		if err := prog.FeedInt32(m.labels, tb.y); err != nil {
			return 0, err
		}
		if err := prog.Run(); err != nil {
			return 0, err
		}
		optim.ClipGradNorm(r.params, 1)
		r.opt.Step(sched.LR(it))
		return prog.Scalar(m.loss)
	}
	l.Diagnose = func() string { return trainloop.Diagnosis(r.params, r.store) }
	l.Describe = func(_ int, loss float32) string { return fmt.Sprintf("%s loss %.3f", r.precision, loss) }
	switch {
	case cfg.progress:
		l.Progress = os.Stderr
	case !cfg.json && cfg.evalEvery > 0:
		l.After = func(it int, loss float32) error {
			if (it+1)%cfg.evalEvery != 0 || it+1 >= cfg.iters {
				return nil
			}
			v, err := r.estimate(cfg, val, 99)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s iter %5d  train loss %.4f  val loss %.4f\n", r.precision, it+1, loss, v)
			return nil
		}
	case !cfg.json:
		l.Lines, l.LineEvery = os.Stderr, 5*time.Second
	}
	return l, nil
}

// feedPositions feeds the position ids 0…block-1 to programs of a model.
func feedPositions(cfg config, m *model, progs ...*graph.Program) error {
	pos := make([]int32, cfg.block)
	for i := range pos {
		pos[i] = int32(i)
	}
	for _, p := range progs {
		if err := p.FeedInt32(m.pos, pos); err != nil {
			return err
		}
	}
	return nil
}

// estimateLoss is the mean loss of the evaluation program over
// cfg.evalBatches random windows of data, drawn from seed.
func estimateLoss(cfg config, m *model, evalProg *graph.Program, data []int32, seed uint64) (float64, error) {
	eb := newBatcher(data, cfg.batch, cfg.block, seed)
	var sum float64
	for i := 0; i < cfg.evalBatches; i++ {
		eb.next()
		if err := evalProg.FeedInt32(m.ids, eb.x); err != nil {
			return 0, err
		}
		if err := evalProg.FeedInt32(m.labels, eb.y); err != nil {
			return 0, err
		}
		if err := evalProg.Run(); err != nil {
			return 0, err
		}
		l, _ := evalProg.Scalar(m.loss)
		sum += float64(l)
	}
	return sum / float64(cfg.evalBatches), nil
}

// sample generates n characters, starting from the first context-length
// window of the validation text, at temperature 0.8, with a batch-1
// program that shares the trained parameters.
func sample(cfg config, voc *vocab, store *graph.Store, recipe fp8.Recipe, prompt []int32, n int) (string, error) {
	m, err := buildModel(cfg, len(voc.runes), 1, cfg.block, false)
	if err != nil {
		return "", err
	}
	prep, err := passes.Prepare(m.g, store, passes.Config{Recipe: recipe, EvalOutputs: []*graph.Node{m.logits}})
	if err != nil {
		return "", err
	}
	p := prep.Eval
	if err := feedPositions(cfg, m, p); err != nil {
		return "", err
	}
	ctx := append([]int32(nil), prompt[:cfg.block]...)
	rng := rand.New(rand.NewPCG(cfg.seed, 5))
	out := make([]int32, 0, n)
	vocabN := len(voc.runes)
	probs := make([]float64, vocabN)
	for len(out) < n {
		if err := p.FeedInt32(m.ids, ctx); err != nil {
			return "", err
		}
		if err := p.Run(); err != nil {
			return "", err
		}
		logits := p.Float32(m.logits)[(cfg.block-1)*vocabN : cfg.block*vocabN]
		mx := float64(logits[0])
		for _, l := range logits {
			mx = math.Max(mx, float64(l))
		}
		var sum float64
		for i, l := range logits {
			probs[i] = math.Exp((float64(l) - mx) / 0.8)
			sum += probs[i]
		}
		u, next := rng.Float64()*sum, vocabN-1
		for i, pr := range probs {
			if u < pr {
				next = i
				break
			}
			u -= pr
		}
		out = append(out, int32(next))
		copy(ctx, ctx[1:])
		ctx[len(ctx)-1] = int32(next)
	}
	return voc.decode(out), nil
}

func plotLosses(path string, results []*result) error {
	var curves []report.Curve
	for _, r := range results {
		label := r.Precision
		if r.Recipe != "-" {
			label += " " + r.Recipe
		}
		curves = append(curves, report.Curve{Label: fmt.Sprintf("%s (val %.4f)", label, r.ValLoss), Losses: r.Losses})
	}
	return report.PlotLosses(path, "character-level GPT training loss", "cross-entropy, 50-step average", 50, curves)
}
