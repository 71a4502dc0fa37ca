// Command gpt trains a character-level GPT in float32 and in FP8 from one
// Go script and prints both side by side, then samples text.
//
//	go run ./examples/gpt                       # the "baby GPT": 4 layers, 4 heads, 128 wide, 2000 iterations, both precisions
//	go run ./examples/gpt -precision fp8 -sample 500
//	go run ./examples/gpt -data input.txt -iters 5000 -plot loss.png
//	go run ./examples/gpt -dump -iters 1        # print the compiled FP8 graph: LayerNorms write FP8 into the next GEMM
//
// The default corpus is the Go source of a fixed list of standard-library
// packages of the installed toolchain (see corpus.StdlibPackages); the last 10%
// is the validation split.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/examples/internal/corpus"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
	"golang.org/x/term"
)

// config holds the flags every training command has
// (train.CommandFlags) and this one's.
type config struct {
	train.CommandFlags
	layers, heads, embd, block, iters int
	dropout                           float64
	sample                            int
	data                              string
	dump, progress                    bool
	evalEvery, evalBatches            int
}

func main() {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "both"}, Batch: 12, LR: 1e-3, Seed: 1, Unit: "iteration"}}
	cfg.Register(flag.CommandLine)
	flag.IntVar(&cfg.layers, "layers", 4, "transformer blocks")
	flag.IntVar(&cfg.heads, "heads", 4, "attention heads")
	flag.IntVar(&cfg.embd, "embd", 128, "embedding size")
	flag.IntVar(&cfg.block, "block", 64, "context length")
	flag.IntVar(&cfg.iters, "iters", 2000, "training iterations")
	flag.Float64Var(&cfg.dropout, "dropout", 0, "dropout probability")
	flag.IntVar(&cfg.sample, "sample", 300, "characters to generate after training (0: none)")
	flag.StringVar(&cfg.data, "data", "", "train on this UTF-8 text file instead of the Go sources")
	flag.BoolVar(&cfg.dump, "dump", false, "print the compiled FP8 training graph")
	flag.IntVar(&cfg.evalEvery, "eval-every", 250, "iterations between validation-loss estimates printed while training (0: none)")
	flag.IntVar(&cfg.evalBatches, "eval-batches", 20, "batches per loss estimate")
	flag.Parse()
	cfg.progress = !cfg.JSON && term.IsTerminal(int(os.Stderr.Fd()))
	if err := run(cfg, os.Stdout); err != nil {
		output.Fatal("gpt", err)
	}
}

// validate refuses flag values that cannot train, before any work.
func (c *config) validate() error {
	var ch train.Checks
	c.Check(&ch)
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", c.layers}, {"heads", c.heads}, {"embd", c.embd}, {"block", c.block}, {"iters", c.iters}, {"eval-batches", c.evalBatches}} {
		ch.AtLeast(f.name, f.v, 1)
	}
	ch.AtLeast("sample", c.sample, 0)
	ch.AtLeast("eval-every", c.evalEvery, 0)
	ch.Fraction("dropout", c.dropout)
	if ps, err := c.Precision.Runs(); err == nil && c.Resume != "" {
		for _, p := range ps {
			ch.InputFiles("resume", filepath.Join(c.Resume, "gpt-"+p.Name()+".safetensors"))
		}
	}
	// Parameters with gradients and Adam moments, and the step's
	// activations: attention's T×T scores per head and a dozen width-
	// sized buffers per block and token.
	e, t := float64(c.embd), float64(c.block)
	params := float64(c.layers) * 12 * e * e
	acts := float64(c.layers) * float64(c.Batch) * t * (float64(c.heads)*t*3 + 20*e)                                        // fused: an estimate
	ch.CheckMemory(fmt.Sprintf("the model (%d layers, width %d, context %d)", c.layers, c.embd, c.block), 16*params+4*acts) // fused: an estimate
	return ch.Err()
}

func run(cfg config, w io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	precisions, err := cfg.Precision.Runs()
	if err != nil {
		return err
	}
	text, source, err := corpus.Load(cfg.data)
	if err != nil {
		return err
	}
	voc := data.NewChars(text)
	tokens, err := voc.Encode(text)
	if err != nil {
		return err
	}
	split := len(tokens) * 9 / 10
	trainTok, val := tokens[:split], tokens[split:]
	if len(val) <= cfg.block+1 || len(trainTok) <= cfg.block+1 {
		return fmt.Errorf("corpus of %d characters is too short for a context of %d", len(tokens), cfg.block)
	}
	if !cfg.JSON {
		fmt.Fprintf(w, "corpus: %s: %d characters, vocabulary %d, %d train / %d validation\n", source, len(tokens), voc.Len(), len(trainTok), len(val))
	}
	finishReport, err := report.Start(&cfg.Debug, &cfg.FP8Log, cfg.Report)
	if err != nil {
		return err
	}
	var results []*result
	var runs []report.Run
	var fields []map[string]any
	for _, p := range precisions {
		r, err := trainOne(cfg, p, voc, trainTok, val, w)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		results, fields = append(results, r), append(fields, r.fields())
		runs = append(runs, report.RunOf(r.Result, fmt.Sprintf("train loss %.4f, validation loss %.4f, %.0f tokens/s", r.TrainLoss, r.ValLoss, r.tokensPerS)))
	}
	fmt.Fprintf(w, "\n%-9s %-12s %10s %9s %9s %10s %9s  %s\n", "precision", "recipe", "train loss", "val loss", "ms/iter", "tokens/s", "params", "converted")
	for _, r := range results {
		fmt.Fprintf(w, "%-9s %-12s %10.4f %9.4f %9.1f %10.0f %9d  %d of %d linear layers\n", r.Precision, r.Recipe, r.TrainLoss, r.ValLoss, r.MsPerStep(), r.tokensPerS, r.params, len(r.Report.Converted()), r.linears)
		if r.Ran() != r.End || r.End != r.Total {
			fmt.Fprintf(w, "          ran iterations %d–%d of %d\n", r.First+1, r.End, r.Total)
		}
		for _, line := range []struct{ what, v string }{{"recipe settings", r.Settings}, {"FP8 debug statistics", r.statsFile}} {
			if line.v != "" {
				fmt.Fprintf(w, "          %s: %s\n", line.what, line.v)
			}
		}
	}
	if len(results) > 1 && results[0].Precision == "fp32" {
		for _, r := range results[1:] {
			fmt.Fprintf(w, "%s validation loss vs float32: %+.2f%%\n", precision.DisplayName(r.Precision), 100*(r.ValLoss/results[0].ValLoss-1))
		}
	}
	for _, r := range results {
		if r.sample != "" && !cfg.JSON {
			fmt.Fprintf(w, "\n--- %s sample (%d characters) ---\n%s\n", r.Precision, cfg.sample, r.sample)
		}
	}
	if !cfg.JSON {
		report.PrintProfiles(w, runs)
	}
	if err := finishReport(w, cfg.JSON, fmt.Sprintf("character-level GPT (%d layers, width %d, context %d)", cfg.layers, cfg.embd, cfg.block), runs); err != nil {
		return err
	}
	return output.Finish(w, cfg.JSON, cfg.Plot, func(path string) error { return plotLosses(path, results) }, fields)
}
