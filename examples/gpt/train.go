package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
)

// result is one precision's run: what the trainer measured, with the loss
// estimates and the sample.
type result struct {
	*train.Result
	TrainLoss, ValLoss float64
	tokensPerS         float64
	params, linears    int
	sample, statsFile  string
}

func (r *result) fields() map[string]any {
	conv := r.Report.Converted()
	if conv == nil {
		conv = []string{}
	}
	return map[string]any{"precision": r.Precision, "recipe": r.Recipe, "train_loss": r.TrainLoss, "val_loss": r.ValLoss,
		"tokens_per_s": r.tokensPerS, "ms_per_iter": r.MsPerStep(), "params": r.params, "converted_layers": conv,
		"optimizer_state_bytes_per_param": r.Memory.StateBytes, "recipe_settings": r.Settings,
		"iters": r.End, "planned_iters": r.Total, "iters_run": r.Ran(), "sample": r.sample}
}

// model builds the GPT for a batch of sequences (its loss serves training
// and evaluation alike); the position ids are fixed.
func (c config) model(vocab int) train.ModelFunc {
	return func(rows int, _ bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		gpt, err := nn.NewGPT(b, "gpt", nn.GPTConfig{Layers: c.layers, Heads: c.heads, Embd: c.embd, Block: c.block,
			Vocab: vocab, Dropout: float32(c.dropout), Seed: c.Seed})
		if err != nil {
			return nil, err
		}
		ids, pos := g.Input("ids", graph.Int32, rows, c.block), g.Input("pos", graph.Int32, c.block)
		logits := gpt.Forward(ids, pos)
		labels := g.Input("labels", graph.Int32, rows, c.block)
		ps := make([]int32, c.block)
		for i := range ps {
			ps[i] = int32(i)
		}
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": ids, "y": labels}, Loss: ops.CrossEntropy(logits, labels),
			Logits: logits, Fixed: func(p *graph.Program) error { return p.FeedInt32(pos, ps) }}, g.Err()
	}
}

// windows is the dataset of every window of block+1 tokens of tok that
// starts before its last block+1 tokens.
func windows(tok []int32, block int) (*data.Windows[int32], error) {
	return data.NewWindows(tok[:len(tok)-1], block, 1, 0)
}

// sampleWindows draws cfg.evalBatches batches of random windows of tok
// from seed: the fixed sample a loss is estimated on.
func sampleWindows(cfg config, tok []int32, seed uint64) (data.Dataset, error) {
	w, err := windows(tok, cfg.block)
	if err != nil {
		return nil, err
	}
	l, err := data.NewLoader(w, data.Config{BatchSize: cfg.Batch, Replacement: true, Seed: seed, Stream: 77})
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
func trainOne(cfg config, p precision.Config, voc *data.Chars, trainTok, val []int32, w io.Writer) (*result, error) {
	set, err := windows(trainTok, cfg.block)
	if err != nil {
		return nil, err
	}
	valSample, err := sampleWindows(cfg, val, 99)
	if err != nil {
		return nil, err
	}
	tc := train.Config{Model: cfg.model(voc.Len()), Stream: 77, Replacement: true, WeightDecay: 0.1, ClipGradNorm: 1,
		Schedule: optim.WarmupCosine{Base: float32(cfg.LR), Min: float32(cfg.LR) / 10, Warmup: min(100, cfg.iters/10), Total: cfg.iters},
		// The model key names the vocabulary itself (its characters'
		// CRC-32C): a checkpoint of another corpus with as many
		// characters is refused.
		Meta: map[string]string{"model": fmt.Sprintf("gpt layers=%d heads=%d embd=%d block=%d vocab=%d/%08x", cfg.layers, cfg.heads, cfg.embd, cfg.block, voc.Len(), voc.Checksum())}}
	run := train.Run{Steps: cfg.iters, Eval: valSample, Hint: fmt.Sprintf("learning rate %g too high?", cfg.LR)}
	cfg.Apply(p, "gpt-"+p.Name(), &tc, &run)
	tr, err := train.New(tc)
	if err != nil {
		return nil, err
	}
	if cfg.dump && p.Name() != "fp32" {
		run.Hooks = append(run.Hooks, train.Hook{Name: "dump", OnStart: func(*train.Status) error {
			fmt.Fprintf(w, "== compiled %s training graph ==\n", precision.DisplayName(p.Name()))
			if err := tr.WriteGraph(w); err != nil {
				return err
			}
			_, err := fmt.Fprint(w, tr.Report())
			return err
		}})
	}
	progress := train.ProgressOptions{Name: "gpt: " + p.Name(), Unit: "iteration", Every: 5 * time.Second, Bar: &cfg.progress, NoEval: true,
		Describe: func(s *train.Status) string { return fmt.Sprintf("%s loss %.3f", p.Name(), s.Loss) }}
	switch {
	case !cfg.progress && !cfg.JSON && cfg.evalEvery > 0:
		run.EvalEvery = cfg.evalEvery
		run.Hooks = append(run.Hooks, train.Hook{Name: "eval lines", OnEval: func(s *train.Status) error {
			if s.Step%cfg.evalEvery == 0 && s.Step < cfg.iters {
				fmt.Fprintf(w, "%s iter %5d  train loss %.4f  val loss %.4f\n", p.Name(), s.Step, s.Loss, s.Eval.Loss)
			}
			return nil
		}})
	case !cfg.JSON:
		run.Hooks = append(run.Hooks, train.Progress(os.Stderr, progress))
	}
	res, err := tr.Fit(set, run)
	if errors.Is(err, train.ErrResume) {
		return nil, fmt.Errorf("-resume: %s", strings.TrimPrefix(err.Error(), "train: resume: "))
	} else if err != nil {
		return nil, err
	}
	trainSample, err := sampleWindows(cfg, trainTok, 98)
	if err != nil {
		return nil, err
	}
	te, err := tr.Evaluate(trainSample)
	if err != nil {
		return nil, err
	}
	r := &result{Result: res, TrainLoss: te.Loss, ValLoss: res.Eval.Loss, params: tr.Model().Builder.NumParams(), linears: len(res.Report.Layers)}
	r.tokensPerS = float64(cfg.Batch*cfg.block) / (r.MsPerStep() / 1000)
	if tr.Recipe() == nil {
		r.linears = 4*cfg.layers + 1
	}
	if cfg.FP8Debug != "" { // not the report's own temporary log
		r.statsFile = res.StatsFile
	}
	if cfg.sample > 0 {
		// From the first window of the validation text, at temperature
		// 0.8, with a batch-1 program on the trained parameters.
		m, err := cfg.model(voc.Len())(1, false)
		if err != nil {
			return nil, err
		}
		prep, err := passes.Prepare(m.Builder.Graph(), tr.Store(), passes.Config{Recipe: tr.Recipe(), EvalOutputs: []*graph.Node{m.Logits}})
		if err == nil {
			err = m.Fixed(prep.Eval)
		}
		if err != nil {
			return nil, err
		}
		ids, err := train.Generate(prep.Eval, m.Inputs["x"], m.Logits, val[:min(len(val), cfg.block)], cfg.sample, 0.8, rand.New(rand.NewPCG(cfg.Seed, 5)))
		if err != nil {
			return nil, err
		}
		if r.sample, err = voc.Decode(ids); err != nil {
			return nil, err
		}
	}
	return r, nil
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
