// Command llama trains a Llama-style decoder (RMSNorm, SwiGLU MLP,
// rotary embeddings, grouped-query attention) — or any model type of
// its family: Qwen2, Qwen3, and the Mixtures of Experts Mixtral,
// Qwen2-MoE and Qwen3-MoE — on BPE tokens, in float32 and FP8 (or bf16)
// from one Go script, prints the runs side by side and samples text.
//
//	go run ./examples/llama -experts 8 -top-k 2 -intermediate 512  # a Mixtral-style MoE (expert load in the summary)
//	go run ./examples/llama -model-type qwen2_moe -experts 8 -top-k 2 -moe-intermediate 256 -shared-expert 512
//	go run ./examples/llama                                # width 288, 6 layers, 6 heads, 2 key/value heads, context 256
//	go run ./examples/llama -precision all -iters 500
//	go run ./examples/llama -init hf-dir -export out-dir   # start from a Hugging Face checkpoint, write the trained one
//	go run ./examples/llama -precision fp8 -export-fp8 fp8-dir   # write the FP8-trained model in Hugging Face's FP8 layout
//	go run ./examples/llama -init fp8-dir -precision fp8           # fine-tune from it
//	go run ./examples/llama -data tokens.bin -sequential   # llm.c's token file and batches
//	go run ./examples/llama -init hf-dir -data tokens.bin -sequential -precision fp32 -grads-out grads.safetensors
//
// The default corpus is the Go source of a fixed list of standard-library
// packages of the installed toolchain, as BPE tokens (r50k_base, GPT-2's
// encoding; the vocabulary is padded to a multiple of 64); the last 10%
// of the tokens is the validation split.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/term"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
)

// config holds the flags every training command has
// (train.CommandFlags) and this one's.
type config struct {
	train.CommandFlags
	model                          nn.LlamaConfig
	block, iters                   int
	encoding, text, data           string
	initDir, exportDir, gradsOut   string
	exportFP8, exportFormat        string
	modelType                      string
	auxLossCoef                    float64
	stackedExperts                 bool
	sequential, dump, progress     bool
	epDispatch                     string
	sample, evalEvery, evalBatches int
	set                            map[string]bool // flags given on the command line
}

func main() {
	cfg, err := parse(flag.CommandLine, os.Args[1:])
	if err != nil {
		os.Exit(2) // the flag package printed the problem
	}
	cfg.progress = !cfg.JSON && term.IsTerminal(int(os.Stderr.Fd()))
	if err := run(cfg, os.Stdout); err != nil {
		output.Fatal("llama", err)
	}
}

// parse reads the command line into a config with the defaults.
func parse(fs *flag.FlagSet, args []string) (config, error) {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "both"}, Batch: 4, LR: 5e-4, Seed: 1, Unit: "iteration", Parallel: true, ExpertParallel: true}}
	cfg.register(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.set[f.Name] = true })
	return cfg, nil
}

// register adds the flags to fs.
func (c *config) register(fs *flag.FlagSet) {
	c.Register(fs)
	m := &c.model
	fs.IntVar(&m.HiddenSize, "hidden", 288, "model width (hidden_size)")
	fs.IntVar(&m.IntermediateSize, "intermediate", 768, "SwiGLU MLP width (intermediate_size)")
	fs.IntVar(&m.NumHiddenLayers, "layers", 6, "decoder layers (num_hidden_layers)")
	fs.IntVar(&m.NumAttentionHeads, "heads", 6, "attention heads (num_attention_heads)")
	fs.IntVar(&m.NumKeyValueHeads, "kv-heads", 2, "key/value heads, a divisor of -heads (num_key_value_heads)")
	fs.Float64Var(&m.RopeTheta, "rope-theta", 10000, "rotary embeddings' base θ (rope_theta)")
	fs.BoolVar(&m.TieWordEmbeddings, "tied", false, "share the token embeddings with the LM head (tie_word_embeddings)")
	fs.StringVar(&c.modelType, "model-type", "", "Hugging Face model type of a fresh model: llama, qwen2 (q/k/v biases), qwen3 (q/k norms), mixtral, qwen2_moe (shared expert) or qwen3_moe; default llama, or mixtral with -experts")
	fs.IntVar(&m.NumExperts, "experts", 0, "experts per MoE layer, 0 for a dense model (num_local_experts / num_experts)")
	fs.IntVar(&m.NumExpertsPerTok, "top-k", 2, "experts each token goes through (num_experts_per_tok)")
	fs.IntVar(&m.MoEIntermediateSize, "moe-intermediate", 0, "each expert's SwiGLU width (moe_intermediate_size); 0: -intermediate")
	fs.IntVar(&m.SharedExpertIntermediateSize, "shared-expert", 0, "width of Qwen2-MoE's shared expert, 0 for none (shared_expert_intermediate_size; -model-type qwen2_moe)")
	fs.Float64Var(&c.auxLossCoef, "aux-loss-coef", 0.01, "weight of the load-balancing loss added to an MoE's training loss (router_aux_loss_coef; 0: none); with -init, the config's router_aux_loss_coef and output_router_logits unless given")
	fs.BoolVar(&c.stackedExperts, "stacked-experts", false, "write an MoE's experts as transformers 5 stacks them (mlp.experts.gate_up_proj, down_proj) in -export, -export-fp8 and -grads-out, instead of one tensor per expert")
	fs.StringVar(&c.epDispatch, "ep-dispatch", "fp32", "with -ep: how tokens travel to the experts' ranks: fp32 (exact: one process's bits), bf16, or fp8 (E4M3 with a float32 scale per 1×128 tile, DeepSeek-V3's dispatch; the rest of the exchange in bf16)")
	fs.IntVar(&c.block, "block", 256, "context length")
	fs.IntVar(&c.iters, "iters", 2000, "training iterations")
	fs.StringVar(&c.encoding, "encoding", "r50k_base", "BPE encoding of the text: r50k_base or cl100k_base")
	fs.StringVar(&c.text, "text", "", "train on this UTF-8 text file (BPE-encoded) instead of the Go sources")
	fs.StringVar(&c.data, "data", "", "train on this llm.c token file (go run ./cmd/octet tokenize IN.txt OUT.bin writes one)")
	fs.BoolVar(&c.sequential, "sequential", false, "llm.c's batches: batch k is the B·T+1 tokens from offset k·B·T (row b: inputs tokens[b·T:b·T+T], targets one further); otherwise random windows")
	fs.StringVar(&c.initDir, "init", "", "start from this Hugging Face directory (config.json + model.safetensors): its config sets the model's sizes")
	fs.StringVar(&c.exportDir, "export", "", "write the trained model to this directory in the Hugging Face layout (a subdirectory per precision when several run)")
	fs.StringVar(&c.exportFP8, "export-fp8", "", "write the FP8 run's model to this directory in the FP8 layout -export-format names (its FP8-trained layers quantized with the recipe's codes; head, embeddings and norms in float32), and report its validation loss")
	fs.StringVar(&c.exportFormat, "export-format", string(hf.FP8Block), "-export-fp8's layout: fp8-block (Hugging Face fine-grained FP8), fp8-tensor, fp8-channel (compressed-tensors), mxfp8 or nvfp4 (ModelOpt)")
	fs.StringVar(&c.gradsOut, "grads-out", "", "after the first forward and backward (no update), write the loss (tensor \"loss\") and every parameter's gradient under its Hugging Face name to this safetensors file, and stop")
	fs.IntVar(&c.sample, "sample", 200, "tokens to generate after training (0: none)")
	fs.BoolVar(&c.dump, "dump", false, "print the compiled FP8 training graph")
	fs.IntVar(&c.evalEvery, "eval-every", 250, "iterations between validation-loss estimates printed while training (0: none)")
	fs.IntVar(&c.evalBatches, "eval-batches", 10, "batches per loss estimate")
}

// sizeFlags are the flags -init's config.json replaces.
var sizeFlags = []string{"hidden", "intermediate", "layers", "heads", "kv-heads", "rope-theta", "tied", "model-type", "experts", "top-k", "moe-intermediate", "shared-expert"}

// validate refuses flag values that cannot train, before any work; with
// -init it reads the model's config from the directory.
func (c *config) validate() error {
	var ch train.Checks
	c.Check(&ch)
	for _, f := range []struct {
		name string
		v    int
	}{{"block", c.block}, {"iters", c.iters}, {"eval-batches", c.evalBatches}} {
		ch.AtLeast(f.name, f.v, 1)
	}
	ch.AtLeast("sample", c.sample, 0)
	ch.AtLeast("eval-every", c.evalEvery, 0)
	if c.text != "" && c.data != "" {
		ch.Fail("-text and -data both name the training data; give one")
	}
	if c.sequential && c.data == "" {
		ch.Fail("-sequential reads llm.c's batches from -data FILE.bin; give -data")
	}
	if c.data != "" {
		ch.InputFiles("data", c.data)
	}
	if c.text != "" {
		ch.InputFiles("text", c.text)
	}
	if c.gradsOut != "" {
		ch.OutputFile("grads-out", c.gradsOut)
		if ps, err := c.Precision.Runs(); err == nil && len(ps) != 1 {
			ch.Fail("-grads-out writes one precision's gradients; give -precision fp32, bf16 or fp8")
		}
		if c.DP.IsSet() || c.FSDP.IsSet() || c.EP.IsSet() {
			ch.Fail("-grads-out writes the gradients of one process's batch; leave out -dp, -fsdp and -ep")
		}
	}
	if c.exportDir != "" {
		ch.OutputDir("export", c.exportDir)
	}
	if c.exportFP8 != "" {
		ch.OutputDir("export-fp8", c.exportFP8)
		if ps, err := c.Precision.Runs(); err == nil && !slices.ContainsFunc(ps, func(p precision.Config) bool { return p.Name() == "fp8" }) {
			ch.Fail("-export-fp8 writes the FP8 run's model: give -precision fp8, both or all")
		}
	}
	if c.set["export-format"] && c.exportFP8 == "" {
		ch.Fail("-export-format is the layout of -export-fp8: give -export-fp8 DIR")
	}
	if f, err := hf.ParseFormat(c.exportFormat); err != nil || f == hf.Float32 || f == hf.BFloat16 {
		ch.Fail("-export-format %q: want fp8-block, fp8-tensor, fp8-channel, mxfp8 or nvfp4 (-export writes float32)", c.exportFormat)
	}
	if c.initDir != "" {
		for _, f := range sizeFlags {
			if c.set[f] {
				ch.Fail("-%s conflicts with -init: the model's sizes come from %s", f, filepath.Join(c.initDir, hf.ConfigFile))
			}
		}
		m, err := hf.ReadLlamaConfig(c.initDir)
		if err != nil {
			ch.Fail("-init: %v", err)
		} else {
			c.model = m
			if c.set["aux-loss-coef"] {
				c.model.RouterAuxLossCoef, c.model.OutputRouterLogits = c.auxLossCoef, c.auxLossCoef > 0
			}
		}
	} else {
		typ := c.modelType
		if typ == "" {
			typ = "llama"
			if c.model.NumExperts > 0 {
				typ = "mixtral"
			}
		}
		if c.model.NumExperts > 0 {
			c.model.RouterAuxLossCoef, c.model.OutputRouterLogits = c.auxLossCoef, c.auxLossCoef > 0
		} else {
			for _, f := range []string{"moe-intermediate", "shared-expert", "top-k", "aux-loss-coef"} {
				if c.set[f] {
					ch.Fail("-%s configures experts: give -experts N too", f)
				}
			}
			c.model.NumExpertsPerTok = 0
		}
		if m, err := hf.WithDecoderType(c.model, typ); err != nil {
			ch.Fail("-model-type: %v", err)
		} else {
			c.model = m
		}
		c.model.MaxPositionEmbeddings = c.block
		// The encoding's vocabulary padded to a multiple of 64 (GPT-2's
		// 50,257 → 50,304), so the LM head's GEMM converts to FP8.
		if bpe, err := data.NewBPE(c.encoding); err != nil {
			ch.Fail("-encoding: %v", err)
		} else {
			c.model.VocabSize = (bpe.VocabSize() + 63) / 64 * 64
		}
		if err := c.model.Validate(); err != nil {
			ch.Fail("%v (flags -hidden, -intermediate, -layers, -heads, -kv-heads, -rope-theta, -experts, -top-k, -moe-intermediate, -shared-expert)", err)
		}
	}
	if _, err := ops.ParseWireFormat(c.epDispatch); err != nil {
		ch.Fail("-ep-dispatch: %v", err)
	} else if c.set["ep-dispatch"] && !c.EP.IsSet() {
		ch.Fail("-ep-dispatch is the wire format of expert parallelism: give -ep N")
	}
	if !(c.auxLossCoef >= 0) || c.auxLossCoef > 1e6 {
		ch.Fail("-aux-loss-coef %v: want a number from 0 to 1e6", c.auxLossCoef)
	}
	if c.model.MaxPositionEmbeddings > 0 && c.block > c.model.MaxPositionEmbeddings {
		ch.Fail("-block %d is longer than the model's max_position_embeddings %d", c.block, c.model.MaxPositionEmbeddings)
	}
	if ps, err := c.Precision.Runs(); err == nil && c.Resume != "" {
		for _, p := range ps {
			ch.InputCheckpoint("resume", c.Resume, "llama-"+p.Name())
		}
	}
	// Parameters with gradients and Adam moments (the vocabulary may not
	// be known yet: count GPT-2's), and the step's activations.
	m := c.model
	e, f, t := float64(m.HiddenSize), float64(m.IntermediateSize), float64(c.block)
	vocab := float64(max(m.VocabSize, 50304))
	params, acts := 2*vocab*e, float64(c.Batch)*t*2*vocab // fused: an estimate
	for i := range m.NumHiddenLayers {
		mlp, mlpActs := 3*e*f, 4*f // fused: an estimate
		if m.SparseLayer(i) {
			moe := m.MoE()
			x, k := float64(moe.Intermediate), float64(moe.TopK)
			mlp = float64(moe.Experts)*(3*e*x+e) + 3*e*float64(moe.SharedIntermediate) // fused: an estimate
			mlpActs = k*(2*e+4*x) + 4*float64(moe.SharedIntermediate)                  // fused: an estimate
		}
		params += 4*e*e + mlp                           // fused: an estimate
		acts += float64(c.Batch) * t * (12*e + mlpActs) // fused: an estimate
	}
	ch.CheckMemory(fmt.Sprintf("the model (%d layers, width %d, context %d)", m.NumHiddenLayers, m.HiddenSize, c.block), 16*params+4*acts) // fused: an estimate
	return ch.Err()
}

func run(cfg config, w io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	finish, err := cfg.Connect()
	if err != nil {
		return err
	}
	defer finish()
	if !cfg.Rank0() { // under mpirun rank 0 reports and writes the files
		w, cfg.Plot, cfg.Report, cfg.exportDir, cfg.exportFP8, cfg.sample = io.Discard, "", "", "", "", 0
	}
	precisions, err := cfg.Precision.Runs()
	if err != nil {
		return err
	}
	init, err := cfg.initFunc()
	if err != nil {
		return err
	}
	ds, err := loadTokens(&cfg)
	if err != nil {
		return err
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "corpus: %s: %d tokens (%s), vocabulary %d, %d train / %d validation\n", ds.source, len(ds.train)+len(ds.val), ds.encoding, cfg.model.VocabSize, len(ds.train), len(ds.val))
	}
	if cfg.gradsOut != "" {
		return writeGrads(cfg, precisions[0], ds, init, w)
	}
	finishReport, err := report.Start(&cfg.Debug, &cfg.FP8Log, cfg.Report)
	if err != nil {
		return err
	}
	var results []*result
	var runs []report.Run
	var fields []map[string]any
	for _, p := range precisions {
		r, err := trainOne(cfg, p, ds, init, w)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		if cfg.exportDir != "" {
			dir := cfg.exportDir
			if len(precisions) > 1 {
				dir = filepath.Join(dir, p.Name())
			}
			if err := hf.ExportLlama(dir, r.model, r.store, hf.Export{StackedExperts: cfg.stackedExperts}); err != nil {
				return fmt.Errorf("-export: %w", err)
			}
			r.exported = dir
		}
		results, fields = append(results, r), append(fields, r.fields())
		runs = append(runs, report.RunOf(r.Result, fmt.Sprintf("train loss %.4f, validation loss %.4f, %.0f tokens/s", r.TrainLoss, r.ValLoss, r.tokensPerS)))
	}
	for _, r := range results {
		if len(r.load) > 0 && !cfg.JSON {
			fmt.Fprintf(w, "%s expert load on the validation sample (share of the routed choices per layer; even %.1f%%), balancing loss %.4f:", r.Precision, 100/float64(cfg.model.NumExperts), r.balancing)
			for _, l := range r.load {
				fmt.Fprintf(w, "  layer %d %.1f–%.1f%%", l.Layer, 100*l.MinShare, 100*l.MaxShare)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\n%-9s %-12s %10s %9s %9s %10s %10s  %s\n", "precision", "recipe", "train loss", "val loss", "ms/iter", "tokens/s", "params", "converted")
	for _, r := range results {
		fmt.Fprintf(w, "%-9s %-12s %10.4f %9.4f %9.1f %10.0f %10d  %d of %d linear layers\n", r.Precision, r.Recipe, r.TrainLoss, r.ValLoss, r.MsPerStep(), r.tokensPerS, r.params, len(r.Report.Converted()), r.linears)
		if r.Ran() != r.End || r.End != r.Total {
			fmt.Fprintf(w, "          ran iterations %d–%d of %d\n", r.First+1, r.End, r.Total)
		}
		for _, line := range []struct{ what, v string }{{"recipe settings", r.Settings}, {"FP8 debug statistics", r.statsFile}, {"exported to", r.exported}, {"exported in FP8 to", r.exportedFP8}} {
			if line.v != "" {
				fmt.Fprintf(w, "          %s: %s\n", line.what, line.v)
			}
		}
	}
	for _, r := range results {
		if r.exportedFP8 != "" {
			fmt.Fprintf(w, "%s checkpoint's validation loss %.4f vs the trained model's %.4f: %+.3f%% (the quantization error of the weights)\n",
				cfg.exportFormat, r.exportedValLoss, r.ValLoss, 100*(r.exportedValLoss/r.ValLoss-1))
		}
	}
	if len(results) > 1 && results[0].Precision == "fp32" {
		for _, r := range results[1:] {
			fmt.Fprintf(w, "%s validation loss vs float32: %+.2f%%\n", precision.DisplayName(r.Precision), 100*(r.ValLoss/results[0].ValLoss-1))
		}
	}
	for _, r := range results {
		if r.sample != "" && !cfg.JSON {
			fmt.Fprintf(w, "\n--- %s sample (%d tokens) ---\n%s\n", r.Precision, cfg.sample, r.sample)
		}
	}
	if !cfg.JSON {
		report.PrintProfiles(w, runs)
	}
	m := cfg.model
	title := fmt.Sprintf("Llama-style decoder (%d layers, width %d, %d/%d heads, context %d)", m.NumHiddenLayers, m.HiddenSize, m.NumAttentionHeads, m.NumKeyValueHeads, cfg.block)
	if m.NumExperts > 0 {
		title = fmt.Sprintf("%s Mixture of Experts (%d layers, width %d, %d experts top-%d, %d/%d heads, context %d)", m.ModelType, m.NumHiddenLayers, m.HiddenSize, m.NumExperts, m.NumExpertsPerTok, m.NumAttentionHeads, m.NumKeyValueHeads, cfg.block)
	}
	if err := finishReport(w, cfg.JSON, title, runs); err != nil {
		return err
	}
	return output.Finish(w, cfg.JSON, cfg.Plot, func(path string) error { return plotLosses(path, results) }, fields)
}
