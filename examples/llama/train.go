package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/nlpodyssey/safetensors"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/examples/internal/corpus"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/internal/atomicfile"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
)

// tokens is the tokenized corpus with its split and the encoding that
// decodes samples.
type tokens struct {
	train, val []int32
	bpe        *data.BPE
	source     string
	encoding   string
}

// loadTokens reads -data (an llm.c token file) or BPE-encodes -text or
// the Go sources and splits off the last 10% for validation. A token outside the vocabulary is an error
// naming the file and its position.
func loadTokens(cfg *config) (*tokens, error) {
	bpe, err := data.NewBPE(cfg.encoding)
	if err != nil {
		return nil, fmt.Errorf("-encoding: %w", err)
	}
	t := &tokens{bpe: bpe, encoding: bpe.Name()}
	var all []int32
	if cfg.data != "" {
		u16, err := data.ReadTokenFile(cfg.data)
		if err != nil {
			return nil, fmt.Errorf("-data: %w", err)
		}
		all = make([]int32, len(u16))
		for i, v := range u16 {
			all[i] = int32(v)
		}
		t.source, t.encoding = cfg.data, "llm.c token file, decoded as "+bpe.Name()
	} else {
		text, source, err := corpus.Load(cfg.text)
		if err != nil {
			return nil, err
		}
		if all, err = bpe.Encode(text); err != nil {
			return nil, err
		}
		t.source = source
	}
	for i, v := range all {
		if v < 0 || int(v) >= cfg.model.VocabSize {
			what := "the corpus"
			if cfg.data != "" {
				what = cfg.data
			}
			return nil, fmt.Errorf("%s: token %d at position %d is outside the model's vocabulary of %d (vocab_size)", what, v, i, cfg.model.VocabSize)
		}
	}
	split := len(all) * 9 / 10
	t.train, t.val = all[:split], all[split:]
	if len(t.val) <= cfg.block+1 || len(t.train) < cfg.Batch*cfg.block+1 {
		return nil, fmt.Errorf("%d tokens are too few for a context of %d and a batch of %d (and a tenth of them for validation)", len(all), cfg.block, cfg.Batch)
	}
	return t, nil
}

// initFunc returns the trainer's Init for -init (nil without): the
// Hugging Face weights, checked once here before any work.
func (c config) initFunc() (func(*graph.Store) error, error) {
	if c.initDir == "" {
		return nil, nil
	}
	m, err := nn.NewLlama(nn.NewBuilder(graph.New()), c.model)
	if err != nil {
		return nil, err
	}
	if err := hf.LoadLlama(c.initDir, m, graph.NewStore()); err != nil {
		return nil, fmt.Errorf("-init: %w", err)
	}
	return func(s *graph.Store) error { return hf.LoadLlama(c.initDir, m, s) }, nil
}

// result is one precision's run: what the trainer measured, with the loss
// estimates, the sample and the trained model.
type result struct {
	*train.Result
	TrainLoss, ValLoss          float64
	tokensPerS                  float64
	params, linears             int
	sample, statsFile, exported string
	exportedFP8                 string
	exportedValLoss             float64
	model                       *nn.Llama
	store                       *graph.Store
	load                        []layerLoad // an MoE's expert load on the validation sample
	balancing                   float64     // its load-balancing loss there (unweighted)
}

// layerLoad is one sparse layer's expert load: the smallest and largest
// share of the routed choices an expert got.
type layerLoad struct {
	Layer              int     `json:"layer"`
	MinShare, MaxShare float64 `json:"-"`
	Min                float64 `json:"min_share"`
	Max                float64 `json:"max_share"`
}

func (r *result) fields() map[string]any {
	conv := r.Report.Converted()
	if conv == nil {
		conv = []string{}
	}
	f := map[string]any{"precision": r.Precision, "recipe": r.Recipe, "train_loss": r.TrainLoss, "val_loss": r.ValLoss,
		"tokens_per_s": r.tokensPerS, "ms_per_iter": r.MsPerStep(), "params": r.params, "converted_layers": conv,
		"optimizer_state_bytes_per_param": r.Memory.StateBytes, "recipe_settings": r.Settings,
		"iters": r.End, "planned_iters": r.Total, "iters_run": r.Ran(), "sample": r.sample, "exported": r.exported,
		"exported_fp8": r.exportedFP8, "exported_fp8_val_loss": r.exportedValLoss}
	if r.load != nil { // a Mixture of Experts
		f["expert_load"], f["balancing_loss"] = r.jsonLoad(), r.balancing
	}
	if r.Ranks > 1 {
		f["ranks"], f["comm_bytes_per_iter"] = r.Ranks, r.CommBytesPerStep
	}
	if r.Resharded != "" {
		f["resharded"] = r.Resharded
	}
	return f
}

func (r *result) jsonLoad() []layerLoad {
	out := make([]layerLoad, len(r.load))
	for i, l := range r.load {
		l.Min, l.Max = l.MinShare, l.MaxShare
		out[i] = l
	}
	return out
}

// modelFunc builds the Llama for a batch of sequences (its loss serves
// training and evaluation alike).
func (c config) modelFunc() train.ModelFunc {
	return func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		m, err := nn.NewLlama(b, c.model)
		if err != nil {
			return nil, err
		}
		ids, labels := g.Input("ids", graph.Int32, rows, c.block), g.Input("labels", graph.Int32, rows, c.block)
		logits, router := m.ForwardRouter(ids)
		loss := ops.CrossEntropy(logits, labels)
		if aux := m.AuxLoss(router); aux != nil && training {
			loss = ops.Add(loss, aux) // transformers' training loss; evaluation reports the cross-entropy
		}
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": ids, "y": labels}, Loss: loss, Logits: logits}, g.Err()
	}
}

// windows is the dataset of windows of block+1 tokens of tok: every
// block tokens (llm.c's batches) or at every position.
func windows(tok []int32, block int, sequential bool) (*data.Windows[int32], error) {
	stride := 1
	if sequential {
		stride = block
	}
	return data.NewWindows(tok, block, stride, 0)
}

// sampleWindows draws cfg.evalBatches batches of random windows of tok
// from seed: the fixed sample a loss is estimated on.
func sampleWindows(cfg config, tok []int32, seed uint64) (data.Dataset, error) {
	w, err := windows(tok, cfg.block, false)
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

// expertLoad routes the sample's windows through the trained model and
// returns each sparse layer's expert load and the load-balancing loss
// (transformers' load_balancing_loss_func over all layers, averaged over
// the batches).
func expertLoad(cfg config, tr *train.Trainer, sample data.Dataset) ([]layerLoad, float64, error) {
	c := cfg.model
	if c.NumExperts == 0 {
		return nil, 0, nil
	}
	g := graph.New()
	m, err := nn.NewLlama(nn.NewBuilder(g), c)
	if err != nil {
		return nil, 0, err
	}
	ids := g.Input("ids", graph.Int32, cfg.Batch, cfg.block)
	_, router := m.ForwardRouter(ids)
	outs := []*graph.Node{nn.LoadBalancingLoss(router, c.NumExperts, c.NumExpertsPerTok)}
	j := 0
	for _, l := range m.Layers {
		if l.MoE != nil { // the router's own choice from its logits
			_, idx := l.MoE.Choose(router[j])
			outs = append(outs, ops.ExpertCounts(idx, c.NumExperts))
			j++
		}
	}
	if err := g.Err(); err != nil {
		return nil, 0, err
	}
	prep, err := passes.Prepare(g, tr.Store(), passes.Config{Recipe: tr.Recipe(), EvalOutputs: outs})
	if err != nil {
		return nil, 0, err
	}
	l, err := data.NewLoader(sample, data.Config{BatchSize: cfg.Batch, DropLast: true})
	if err != nil {
		return nil, 0, err
	}
	counts := make([][]float64, len(router))
	for i := range counts {
		counts[i] = make([]float64, c.NumExperts)
	}
	var balancing float64
	batches := l.BatchesPerEpoch()
	for range batches {
		b, err := l.Next()
		if err != nil {
			return nil, 0, err
		}
		if err := prep.Eval.FeedInt32(ids, b.Int32("x")); err != nil {
			return nil, 0, err
		}
		if err := prep.Eval.Run(); err != nil {
			return nil, 0, err
		}
		balancing += float64(prep.Eval.Float32(outs[0])[0])
		for i, n := range outs[1:] {
			v, err := prep.Eval.Value(n)
			if err != nil {
				return nil, 0, err
			}
			for e, k := range v.I32 {
				counts[i][e] += float64(k)
			}
		}
	}
	var load []layerLoad
	j = 0
	for i := range c.NumHiddenLayers {
		if !c.SparseLayer(i) {
			continue
		}
		var total float64
		for _, k := range counts[j] {
			total += k
		}
		ll := layerLoad{Layer: i, MinShare: 1}
		for _, k := range counts[j] {
			ll.MinShare, ll.MaxShare = min(ll.MinShare, k/total), max(ll.MaxShare, k/total)
		}
		load = append(load, ll)
		j++
	}
	return load, balancing / float64(max(batches, 1)), nil
}

// meta describes the model for checkpoints: a checkpoint of another
// model or vocabulary is refused on resume.
func (c config) meta(t *tokens) map[string]string {
	m := c.model
	desc := fmt.Sprintf("llama hidden=%d intermediate=%d layers=%d heads=%d kv=%d theta=%g tied=%v vocab=%d block=%d encoding=%s",
		m.HiddenSize, m.IntermediateSize, m.NumHiddenLayers, m.NumAttentionHeads, m.NumKeyValueHeads, m.RopeTheta, m.TieWordEmbeddings, m.VocabSize, c.block, t.encoding)
	if m.ModelType != "" && m.ModelType != "llama" || m.HeadDimension != 0 {
		desc += fmt.Sprintf(" type=%s head_dim=%d", m.ModelType, m.HeadDim())
	}
	if m.NumExperts > 0 {
		desc += fmt.Sprintf(" experts=%d top_k=%d moe_intermediate=%d shared=%d sparse_step=%d mlp_only=%v norm_topk=%v aux=%g/%v",
			m.NumExperts, m.NumExpertsPerTok, m.MoE().Intermediate, m.SharedExpertIntermediateSize, m.DecoderSparseStep, m.MLPOnlyLayers, m.NormTopKProb, m.RouterAuxLossCoef, m.OutputRouterLogits)
	}
	return map[string]string{"model": desc}
}

// trainOne trains one precision (AdamW, warmup-cosine, gradients clipped
// to norm 1), then estimates the losses and samples.
func trainOne(cfg config, p precision.Config, t *tokens, init func(*graph.Store) error, w io.Writer) (*result, error) {
	set, err := windows(t.train, cfg.block, cfg.sequential)
	if err != nil {
		return nil, err
	}
	valSample, err := sampleWindows(cfg, t.val, 99)
	if err != nil {
		return nil, err
	}
	tc := train.Config{Model: cfg.modelFunc(), Stream: 77, Replacement: !cfg.sequential, NoShuffle: cfg.sequential, WeightDecay: 0.1, ClipGradNorm: 1,
		Schedule: optim.WarmupCosine{Base: float32(cfg.LR), Min: float32(cfg.LR) / 10, Warmup: min(100, cfg.iters/10), Total: cfg.iters},
		Init:     init, Meta: cfg.meta(t)}
	run := train.Run{Steps: cfg.iters, Eval: valSample, Hint: fmt.Sprintf("learning rate %g too high?", cfg.LR)}
	cfg.Apply(p, "llama-"+p.Name(), &tc, &run)
	if tc.EPDispatch, err = ops.ParseWireFormat(cfg.epDispatch); err != nil {
		return nil, err
	}
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
	progress := train.ProgressOptions{Name: "llama: " + p.Name(), Unit: "iteration", Every: 5 * time.Second, Bar: &cfg.progress, NoEval: true,
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
	if !cfg.Rank0() {
		// Under mpirun the other ranks have trained; rank 0 measures,
		// samples and exports.
		return &result{Result: res}, nil
	}
	trainSample, err := sampleWindows(cfg, t.train, 98)
	if err != nil {
		return nil, err
	}
	te, err := tr.Evaluate(trainSample)
	if err != nil {
		return nil, err
	}
	r := &result{Result: res, TrainLoss: te.Loss, ValLoss: res.Eval.Loss, params: tr.Model().Builder.NumParams(), linears: len(res.Report.Layers), store: tr.Store()}
	r.tokensPerS = float64(cfg.Batch*cfg.block) / (r.MsPerStep() / 1000)
	if tr.Recipe() == nil {
		r.linears = 1 // the head, then each layer's fused linear layers (an MoE's grouped expert GEMMs are not linear layers)
		for i := range cfg.model.NumHiddenLayers {
			switch {
			case !cfg.model.SparseLayer(i):
				r.linears += 4
			case cfg.model.SharedExpertIntermediateSize > 0:
				r.linears += 4
			default:
				r.linears += 2
			}
		}
	}
	if cfg.FP8Debug != "" { // not the report's own temporary log
		r.statsFile = res.StatsFile
	}
	if r.model, err = nn.NewLlama(nn.NewBuilder(graph.New()), cfg.model); err != nil {
		return nil, err
	}
	if r.load, r.balancing, err = expertLoad(cfg, tr, valSample); err != nil {
		return nil, fmt.Errorf("expert load: %w", err)
	}
	if cfg.sample > 0 {
		if r.sample, err = sample(cfg, tr, t); err != nil {
			return nil, err
		}
	}
	if cfg.exportFP8 != "" && p.Name() == "fp8" {
		if err := exportFP8(cfg, tr, r, valSample); err != nil {
			return nil, fmt.Errorf("-export-fp8: %w", err)
		}
	}
	return r, nil
}

// exportFP8 writes the trained model in -export-format, its FP8-trained
// layers (those the conversion converted, experts included) quantized, and measures the
// validation loss of the checkpoint's dequantized weights on the
// validation sample the run measured; the trained weights are restored
// after.
func exportFP8(cfg config, tr *train.Trainer, r *result, valSample data.Dataset) error {
	store := tr.Store()
	layers := r.Report.Converted() // with a grouped layer's experts
	f, err := hf.ParseFormat(cfg.exportFormat)
	if err != nil {
		return err
	}
	if err := hf.ExportLlama(cfg.exportFP8, r.model, store, hf.Export{Format: f, Layers: layers, StackedExperts: cfg.stackedExperts}); err != nil {
		return err
	}
	r.exportedFP8 = cfg.exportFP8
	params := tr.Model().Builder.Params()
	saved := make([][]float32, len(params))
	for i, p := range params {
		saved[i] = append([]float32(nil), store.Float32(p.Name())...)
	}
	defer func() {
		for i, p := range params {
			copy(store.Float32(p.Name()), saved[i])
		}
	}()
	if err := hf.LoadLlama(cfg.exportFP8, r.model, store); err != nil {
		return err
	}
	e, err := tr.Evaluate(valSample)
	if err != nil {
		return err
	}
	r.exportedValLoss = e.Loss
	return nil
}

// sample generates cfg.sample tokens from the first window of the
// validation tokens at temperature 0.8 with a batch-1 program on the
// trained parameters, and decodes them (ids past the encoding's
// vocabulary, the padding, are left out).
func sample(cfg config, tr *train.Trainer, t *tokens) (string, error) {
	m, err := cfg.modelFunc()(1, false)
	if err != nil {
		return "", err
	}
	prep, err := passes.Prepare(m.Builder.Graph(), tr.Store(), passes.Config{Recipe: tr.Recipe(), EvalOutputs: []*graph.Node{m.Logits}})
	if err != nil {
		return "", err
	}
	ids, err := train.Generate(prep.Eval, m.Inputs["x"], m.Logits, t.val[:min(len(t.val), cfg.block)], cfg.sample, 0.8, rand.New(rand.NewPCG(cfg.Seed, 5)))
	if err != nil {
		return "", err
	}
	kept := ids[:0]
	for _, id := range ids {
		if int(id) < t.bpe.VocabSize() {
			kept = append(kept, id)
		}
	}
	return t.bpe.Decode(kept)
}

// writeGrads runs the first forward and backward of precision p on
// llm.c's first batch of the training tokens (row b: tokens[b·T :
// b·T+T], targets one further), before any update, and writes the loss
// (tensor "loss", [1]) and every parameter's gradient under its Hugging
// Face name to cfg.gradsOut.
func writeGrads(cfg config, p precision.Config, t *tokens, init func(*graph.Store) error, w io.Writer) error {
	recipe, err := p.Recipe()
	if err != nil {
		return err
	}
	m, err := cfg.modelFunc()(cfg.Batch, true)
	if err != nil {
		return err
	}
	store := graph.NewStore()
	if init != nil {
		if err := init(store); err != nil {
			return fmt.Errorf("-init: %w", err)
		}
	}
	if err := m.Builder.Init(store, cfg.Seed); err != nil {
		return err
	}
	params := m.Builder.Params()
	prep, err := passes.Prepare(m.Builder.Graph(), store, passes.Config{Recipe: recipe, Loss: m.Loss, Params: params})
	if err != nil {
		return err
	}
	bt := cfg.Batch * cfg.block
	x, y := t.train[:bt], t.train[1:bt+1]
	if err := prep.Train.FeedInt32(m.Inputs["x"], x); err != nil {
		return err
	}
	if err := prep.Train.FeedInt32(m.Inputs["y"], y); err != nil {
		return err
	}
	if err := prep.Train.Run(); err != nil {
		return err
	}
	views := map[string]safetensors.TensorView{}
	add := func(name string, shape graph.Shape, v []float32) error {
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		dims := make([]uint64, len(shape))
		for i, d := range shape {
			dims[i] = uint64(d)
		}
		tv, err := safetensors.NewTensorView(safetensors.F32, dims, raw)
		views[name] = tv
		return err
	}
	loss := prep.Train.Float32(prep.Loss)
	if err := add("loss", graph.Shape{1}, loss); err != nil {
		return err
	}
	grads := map[string][]float32{}
	for i, pn := range params {
		grads[pn.Name()] = prep.Train.Float32(prep.Grads[i])
	}
	model, err := nn.NewLlama(nn.NewBuilder(graph.New()), cfg.model)
	if err != nil {
		return err
	}
	layout, err := hf.LlamaTensors(model, cfg.stackedExperts)
	if err != nil {
		return err
	}
	for _, ht := range layout {
		if err := add(ht.Name, ht.Shape, ht.Slice(grads[ht.Param.Name()])); err != nil {
			return err
		}
	}
	buf, err := safetensors.Serialize(views, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(cfg.gradsOut, func(f io.Writer) error { _, err := f.Write(buf); return err }); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: loss %.6f and %d gradients after the first forward and backward (%s) → %s\n", p.Name(), loss[0], len(layout), precision.DisplayName(p.Name()), cfg.gradsOut)
	return nil
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
	return report.PlotLosses(path, "Llama-style decoder training loss", "cross-entropy, 50-step average", 50, curves)
}
