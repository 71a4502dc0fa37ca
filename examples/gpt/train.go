package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
)

type result struct {
	// Iters is the iteration the run reached, Planned the schedule's
	// length, Ran the iterations this process ran.
	Iters, Planned, Ran int
	Precision, Recipe   string
	TrainLoss, ValLoss  float64
	MsPerIter           float64
	TokensPerS          float64
	Params, Linears     int
	Converted           []string
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

// model builds the GPT for a batch of sequences (the loss is the training
// and the evaluation loss alike); the position ids are fixed.
func (c config) model(vocab int) train.ModelFunc {
	return func(rows int, _ bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		gpt, err := nn.NewGPT(b, "gpt", nn.GPTConfig{Layers: c.layers, Heads: c.heads, Embd: c.embd, Block: c.block,
			Vocab: vocab, Dropout: float32(c.dropout), Seed: c.seed})
		if err != nil {
			return nil, err
		}
		ids, pos := g.Input("ids", graph.Int32, rows, c.block), g.Input("pos", graph.Int32, c.block)
		logits := gpt.Forward(ids, pos)
		labels := g.Input("labels", graph.Int32, rows, c.block)
		fixed := func(p *graph.Program) error { return p.FeedInt32(pos, positions(c.block)) }
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": ids, "y": labels}, Loss: ops.CrossEntropy(logits, labels),
			Logits: logits, Fixed: fixed}, g.Err()
	}
}

func positions(n int) []int32 {
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	return pos
}

// windows is the dataset of every window of block+1 tokens of tok that
// starts before its last block+1 tokens.
func windows(tok []int32, block int) (*data.Windows[int32], error) {
	return data.NewWindows(tok[:len(tok)-1], block, 1, 0)
}

// sampleWindows draws cfg.evalBatches batches of random windows of data
// from seed, the fixed sample a loss is estimated on.
func sampleWindows(cfg config, d []int32, seed uint64) (data.Dataset, error) {
	w, err := windows(d, cfg.block)
	if err != nil {
		return nil, err
	}
	l, err := data.NewLoader(w, data.Config{BatchSize: cfg.batch, Replacement: true, Seed: seed, Stream: 77})
	if err != nil {
		return nil, err
	}
	var x, y []int32
	for range cfg.evalBatches {
		b, err := l.Next()
		if err != nil {
			return nil, err
		}
		x, y = append(x, b.Int32("x")...), append(y, b.Int32("y")...)
	}
	return data.NewTensors(data.Int32Column("x", x, cfg.block), data.Column{Field: w.Fields()[1], I32: y})
}

// trainOne trains one precision on random windows of the training text
// (AdamW, warmup-cosine, gradients clipped to norm 1), then estimates the
// losses and samples.
func trainOne(cfg config, p train.Precision, voc *vocab, trainTok, val []int32, w io.Writer) (*result, error) {
	set, err := windows(trainTok, cfg.block)
	if err != nil {
		return nil, err
	}
	valSample, err := sampleWindows(cfg, val, 99)
	if err != nil {
		return nil, err
	}
	tc := train.Config{Model: cfg.model(len(voc.runes)), Precision: p, BatchSize: cfg.batch, Seed: cfg.seed, Stream: 77, Replacement: true,
		Schedule:    optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 10, Warmup: min(100, cfg.iters/10), Total: cfg.iters},
		WeightDecay: 0.1, ClipGradNorm: 1, Debug: cfg.debug, DebugLogDir: cfg.fp8Log, Profile: cfg.profile, Name: "gpt-" + p.Name(),
		// The model key names the vocabulary itself (its characters'
		// CRC-32C), so a checkpoint of another corpus with as many
		// characters is refused.
		Meta: map[string]string{"model": fmt.Sprintf("gpt layers=%d heads=%d embd=%d block=%d vocab=%d/%08x", cfg.layers, cfg.heads, cfg.embd, cfg.block, len(voc.runes), voc.checksum())}}
	tr, err := train.New(tc)
	if err != nil {
		return nil, err
	}
	run := train.Run{Steps: cfg.iters, StopAfter: cfg.stopAfter, Eval: valSample, SaveDir: cfg.saveDir, SaveEvery: cfg.saveEvery, Flat: true,
		Resume: cfg.resumeDir, Hint: fmt.Sprintf("learning rate %g too high?", cfg.lr)}
	if cfg.dump && p.Name() != "fp32" {
		run.Hooks = append(run.Hooks, train.Hook{Name: "dump", OnStart: func(s *train.Status) error {
			fmt.Fprintf(w, "== compiled %s training graph ==\n", train.PrecisionName(p.Name()))
			if err := tr.WriteGraph(w); err != nil {
				return err
			}
			_, err := fmt.Fprint(w, tr.Report())
			return err
		}})
	}
	switch {
	case cfg.progress:
		run.Hooks = append(run.Hooks, train.Progress(os.Stderr, train.ProgressOptions{Name: "gpt: " + p.Name(), Unit: "iteration", Bar: &cfg.progress,
			Describe: func(s *train.Status) string { return fmt.Sprintf("%s loss %.3f", p.Name(), s.Loss) }}))
	case !cfg.json && cfg.evalEvery > 0:
		run.EvalEvery = cfg.evalEvery
		run.Hooks = append(run.Hooks, train.Hook{Name: "eval lines", OnEval: func(s *train.Status) error {
			if s.Step%cfg.evalEvery == 0 && s.Step < cfg.iters {
				fmt.Fprintf(w, "%s iter %5d  train loss %.4f  val loss %.4f\n", p.Name(), s.Step, s.Loss, s.Eval.Loss)
			}
			return nil
		}})
	case !cfg.json:
		no := false
		run.Hooks = append(run.Hooks, train.Progress(os.Stderr, train.ProgressOptions{Name: "gpt: " + p.Name(), Unit: "iteration", Every: 5 * time.Second, Bar: &no,
			NoEval: true, Describe: func(s *train.Status) string { return fmt.Sprintf("%s loss %.3f", p.Name(), s.Loss) }}))
	}
	res, err := tr.Fit(set, run)
	if err != nil {
		return nil, resumeFlag(err)
	}
	trainSample, err := sampleWindows(cfg, trainTok, 98)
	if err != nil {
		return nil, err
	}
	te, err := tr.Evaluate(trainSample)
	if err != nil {
		return nil, err
	}
	r := &result{Precision: p.Name(), Recipe: res.Recipe, Settings: res.Settings, Iters: res.End, Planned: res.Total, Ran: res.Ran(),
		Losses: res.Losses, Profile: res.Profile, MsPerIter: res.MsPerStep(), TrainLoss: te.Loss, ValLoss: res.Eval.Loss,
		Params: tr.Model().Builder.NumParams(), Converted: res.Report.Converted(), Linears: len(res.Report.Layers),
		Conversion: res.Report.String(), StateBytes: res.Memory.StateBytes}
	r.TokensPerS = float64(cfg.batch*cfg.block) / (r.MsPerIter / 1000)
	if tr.Recipe() == nil {
		r.Linears = 4*cfg.layers + 1
	}
	if cfg.fp8Debug != "" { // not the report's own temporary log
		r.StatsFile = res.StatsFile
	}
	if cfg.sample > 0 {
		if r.Sample, err = sample(cfg, voc, tr.Store(), tr.Recipe(), val, cfg.sample); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// sample generates n characters, starting from the first context-length
// window of the validation text, at temperature 0.8, with a batch-1
// program that shares the trained parameters.
func sample(cfg config, voc *vocab, store *graph.Store, recipe fp8.Recipe, prompt []int32, n int) (string, error) {
	m, err := cfg.model(len(voc.runes))(1, false)
	if err != nil {
		return "", err
	}
	prep, err := passes.Prepare(m.Builder.Graph(), store, passes.Config{Recipe: recipe, EvalOutputs: []*graph.Node{m.Logits}})
	if err != nil {
		return "", err
	}
	p := prep.Eval
	if err := m.Fixed(p); err != nil {
		return "", err
	}
	ctx := append([]int32(nil), prompt[:cfg.block]...)
	rng := rand.New(rand.NewPCG(cfg.seed, 5))
	out := make([]int32, 0, n)
	vocabN := len(voc.runes)
	probs := make([]float64, vocabN)
	for len(out) < n {
		if err := p.FeedInt32(m.Inputs["x"], ctx); err != nil {
			return "", err
		}
		if err := p.Run(); err != nil {
			return "", err
		}
		logits := p.Float32(m.Logits)[(cfg.block-1)*vocabN : cfg.block*vocabN]
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
