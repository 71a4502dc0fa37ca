// Command gpt trains a character-level GPT in float32 and in FP8 from one
// Go script and prints both side by side, then samples text.
//
//	go run ./examples/gpt                       # the "baby GPT": 4 layers, 4 heads, 128 wide, 2000 iterations, both precisions
//	go run ./examples/gpt -precision fp8 -sample 500
//	go run ./examples/gpt -data input.txt -iters 5000 -plot loss.png
//	go run ./examples/gpt -dump -iters 1        # print the compiled FP8 graph: LayerNorms write FP8 into the next GEMM
//
// The default corpus is the Go source of a fixed list of standard-library
// packages of the installed toolchain (see stdlibPackages); the last 10%
// is the validation split.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
	"golang.org/x/term"
)

type config struct {
	layers, heads, embd, block, batch, iters int
	lr                                       float64
	dropout                                  float64
	seed                                     uint64
	prec                                     train.Precision // -precision, -recipe, -format, -ao, -opt-level, -config
	sample                                   int
	plot, data                               string
	json, dump, progress                     bool
	evalEvery, evalBatches                   int
	saveDir, resumeDir                       string
	saveEvery, stopAfter                     int
	fp8Debug, fp8Log                         string          // -fp8-debug, -fp8-log
	report                                   string          // -report: an HTML run report
	profile                                  bool            // -profile: time every op of the step
	debug                                    *inspect.Config // the parsed -fp8-debug config
}

func main() {
	cfg := config{prec: train.Precision{MixedPrecision: "both"}}
	cfg.prec.RegisterFlags(flag.CommandLine)
	flag.IntVar(&cfg.layers, "layers", 4, "transformer blocks")
	flag.IntVar(&cfg.heads, "heads", 4, "attention heads")
	flag.IntVar(&cfg.embd, "embd", 128, "embedding size")
	flag.IntVar(&cfg.block, "block", 64, "context length")
	flag.IntVar(&cfg.batch, "batch", 12, "sequences per batch")
	flag.IntVar(&cfg.iters, "iters", 2000, "training iterations")
	flag.Float64Var(&cfg.lr, "lr", 1e-3, "peak learning rate (AdamW, warmup then cosine decay)")
	flag.Float64Var(&cfg.dropout, "dropout", 0, "dropout probability")
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed")
	flag.IntVar(&cfg.sample, "sample", 300, "characters to generate after training (0: none)")
	flag.StringVar(&cfg.plot, "plot", "", "write the loss curves to this PNG file")
	flag.StringVar(&cfg.data, "data", "", "train on this UTF-8 text file instead of the Go sources")
	flag.BoolVar(&cfg.json, "json", false, "print one JSON object as the last line")
	flag.BoolVar(&cfg.dump, "dump", false, "print the compiled FP8 training graph")
	flag.IntVar(&cfg.evalEvery, "eval-every", 250, "iterations between validation-loss estimates printed while training (0: none)")
	flag.IntVar(&cfg.evalBatches, "eval-batches", 20, "batches per loss estimate")
	flag.StringVar(&cfg.saveDir, "save", "", "write checkpoints (one file per precision) to this directory")
	flag.StringVar(&cfg.resumeDir, "resume", "", "resume from the checkpoints in this directory")
	flag.IntVar(&cfg.saveEvery, "save-every", 0, "with -save, also checkpoint every N iterations (0: at the end only)")
	flag.IntVar(&cfg.stopAfter, "stop-after", 0, "stop (and checkpoint, with -save) after this many iterations of the schedule, as if interrupted")
	flag.StringVar(&cfg.fp8Debug, "fp8-debug", "", "FP8 precision debugging: a config in Transformer Engine's debug YAML schema (statistics, DisableFP8GEMM, DisableFP8Layer)")
	flag.StringVar(&cfg.fp8Log, "fp8-log", "", "with -fp8-debug: write the statistics (JSON lines) under this directory, one subdirectory per precision")
	flag.StringVar(&cfg.report, "report", "", "write a self-contained HTML run report (loss curves, per-layer FP8 scale, amax, underflow% and overflow% over the steps, conversion, recipe, timings) to this file")
	flag.BoolVar(&cfg.profile, "profile", false, "time every op of the training step and print the table per op type and per layer")
	flag.Parse()
	cfg.progress = !cfg.json && term.IsTerminal(int(os.Stderr.Fd()))
	if err := run(cfg, os.Stdout); err != nil {
		output.Fatal("gpt", err)
	}
}

// validate refuses flag values that cannot train, before any work, and
// reads the -fp8-debug config.
func (c *config) validate() error {
	var ch train.Checks
	ch.Environment()
	if err := c.prec.Resolve(); err != nil {
		ch.Fail("%v", err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", c.layers}, {"heads", c.heads}, {"embd", c.embd}, {"block", c.block}, {"batch", c.batch}, {"iters", c.iters}, {"eval-batches", c.evalBatches}} {
		ch.AtLeast(f.name, f.v, 1)
	}
	ch.AtLeast("sample", c.sample, 0)
	ch.AtLeast("eval-every", c.evalEvery, 0)
	ch.AtLeast("save-every", c.saveEvery, 0)
	ch.AtLeast("stop-after", c.stopAfter, 0)
	ch.Positive("lr", c.lr)
	c.debug = ch.DebugConfig(c.fp8Debug, c.fp8Log)
	ch.OutputFile("report", c.report)
	ch.Fraction("dropout", c.dropout)
	// Paths, before the first step, so that no finished run is lost.
	ch.OutputFile("plot", c.plot)
	ch.OutputDir("save", c.saveDir)
	if c.resumeDir != "" {
		if ps, err := c.prec.Runs(); err == nil {
			for _, p := range ps {
				ch.InputFiles("resume", filepath.Join(c.resumeDir, "gpt-"+p.Name()+".safetensors"))
			}
		}
	}
	// Parameters with gradients and Adam moments, and the step's
	// activations: attention's T×T scores per head and a dozen width-
	// sized buffers per block and token.
	e, t := float64(c.embd), float64(c.block)
	params := float64(c.layers) * 12 * e * e
	acts := float64(c.layers) * float64(c.batch) * t * (float64(c.heads)*t*3 + 20*e)
	ch.CheckMemory(fmt.Sprintf("the model (%d layers, width %d, context %d)", c.layers, c.embd, c.block), 16*params+4*acts)
	return ch.Err()
}

func run(cfg config, w io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	precisions, err := cfg.prec.Runs()
	if err != nil {
		return err
	}
	text, source, err := loadCorpus(cfg.data)
	if err != nil {
		return err
	}
	voc := newVocab(text)
	tokens := voc.encode(text)
	split := len(tokens) * 9 / 10
	trainTok, val := tokens[:split], tokens[split:]
	if len(val) <= cfg.block+1 || len(trainTok) <= cfg.block+1 {
		return fmt.Errorf("corpus of %d characters is too short for a context of %d", len(tokens), cfg.block)
	}
	if !cfg.json {
		fmt.Fprintf(w, "corpus: %s: %d characters, vocabulary %d, %d train / %d validation\n", source, len(tokens), len(voc.runes), len(trainTok), len(val))
	}
	finishReport, err := report.Start(&cfg.debug, &cfg.fp8Log, cfg.report)
	if err != nil {
		return err
	}
	var results []*result
	for _, p := range precisions {
		r, err := trainOne(cfg, p, voc, trainTok, val, w)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		results = append(results, r)
	}
	fmt.Fprintf(w, "\n%-9s %-12s %10s %9s %9s %10s %9s  %s\n", "precision", "recipe", "train loss", "val loss", "ms/iter", "tokens/s", "params", "converted")
	for _, r := range results {
		fmt.Fprintf(w, "%-9s %-12s %10.4f %9.4f %9.1f %10.0f %9d  %d of %d linear layers\n", r.Precision, r.Recipe, r.TrainLoss, r.ValLoss, r.MsPerIter, r.TokensPerS, r.Params, len(r.Converted), r.Linears)
		if r.Ran != r.Iters || r.Iters != r.Planned {
			fmt.Fprintf(w, "          ran iterations %d–%d of %d\n", r.Iters-r.Ran+1, r.Iters, r.Planned)
		}
		if r.Settings != "" {
			fmt.Fprintf(w, "          recipe settings: %s\n", r.Settings)
		}
		if r.StatsFile != "" {
			fmt.Fprintf(w, "          FP8 debug statistics: %s\n", r.StatsFile)
		}
	}
	if len(results) > 1 && results[0].Precision == "fp32" {
		for _, r := range results[1:] {
			fmt.Fprintf(w, "%s validation loss vs float32: %+.2f%%\n", train.PrecisionName(r.Precision), 100*(r.ValLoss/results[0].ValLoss-1))
		}
	}
	for _, r := range results {
		if r.Sample != "" && !cfg.json {
			fmt.Fprintf(w, "\n--- %s sample (%d characters) ---\n%s\n", r.Precision, cfg.sample, r.Sample)
		}
	}
	runs := make([]map[string]any, len(results))
	for i, r := range results {
		runs[i] = r.fields()
	}
	rr := make([]report.Run, len(results))
	for i, r := range results {
		rr[i] = report.Run{Precision: r.Precision, Name: train.PrecisionName(r.Precision), Recipe: r.Recipe, Settings: r.Settings,
			Losses: r.Losses, FirstStep: r.Iters - r.Ran, MsPerStep: r.MsPerIter, Conversion: r.Conversion, Profile: r.Profile,
			Summary: []string{fmt.Sprintf("train loss %.4f, validation loss %.4f, %.0f tokens/s", r.TrainLoss, r.ValLoss, r.TokensPerS)}}
	}
	if !cfg.json {
		report.PrintProfiles(w, rr)
	}
	if err := finishReport(w, cfg.json, fmt.Sprintf("character-level GPT (%d layers, width %d, context %d)", cfg.layers, cfg.embd, cfg.block), rr); err != nil {
		return err
	}
	return output.Finish(w, cfg.json, cfg.plot, func(path string) error { return plotLosses(path, results) }, runs)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "⏎") }

// resumeFlag names -resume in the errors of resuming.
func resumeFlag(err error) error {
	if errors.Is(err, train.ErrResume) {
		return fmt.Errorf("-resume: %s", strings.TrimPrefix(err.Error(), "train: resume: "))
	}
	return err
}
