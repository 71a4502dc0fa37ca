package train

import (
	"flag"
	"fmt"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/inspect"
)

// CommandFlags are the flags a training command shares with every other:
// the precision (see Precision.RegisterFlags), the batch, learning rate
// and seed, checkpoints, FP8 debugging, the run report, the profile, the
// plot and JSON output. Set the defaults in the struct, then Register,
// parse, Check and Apply.
type CommandFlags struct {
	Precision Precision
	Batch     int
	LR        float64
	Seed      uint64
	// Save and Resume are checkpoint directories (-save, -resume);
	// SaveEvery and StopAfter count steps (-save-every, -stop-after).
	Save, Resume         string
	SaveEvery, StopAfter int
	// FP8Debug is a debug config (Transformer Engine's YAML schema) and
	// FP8Log the directory of its statistics (-fp8-debug, -fp8-log);
	// Debug is the config Check read.
	FP8Debug, FP8Log string
	Debug            *inspect.Config
	// Report is an HTML run report to write (-report), Plot a PNG of the
	// loss curves (-plot); Profile times every op of the step
	// (-profile); JSON prints one JSON object as the last line (-json).
	Report, Plot string
	Profile      bool
	JSON         bool
	// Unit names a step in the flags' help ("step" when empty).
	Unit string
	// Parallel registers -dp and -fsdp (DP, FSDP: a number of in-process
	// ranks or "mpi"); Connect joins the MPI job they may ask for and
	// sets Comm.
	Parallel bool
	DP, FSDP Ranks
	Comm     dist.Communicator
	// ExpertParallel registers -ep (EP: a number of in-process ranks or
	// "mpi"), expert parallelism for models with Mixture-of-Experts
	// layers (Config.EP).
	ExpertParallel bool
	EP             Ranks
}

// Register adds the flags to fs, with the struct's values as defaults.
func (f *CommandFlags) Register(fs *flag.FlagSet) {
	unit := f.Unit
	if unit == "" {
		unit = "step"
	}
	f.Precision.RegisterFlags(fs)
	fs.IntVar(&f.Batch, "batch", f.Batch, "batch size (the global batch over all ranks)")
	fs.Float64Var(&f.LR, "lr", f.LR, "peak learning rate (AdamW, warmup then cosine decay)")
	fs.Uint64Var(&f.Seed, "seed", f.Seed, "random seed (initialisation, data order, dropout)")
	fs.StringVar(&f.Save, "save", f.Save, "write checkpoints (one file per precision) to this directory")
	fs.StringVar(&f.Resume, "resume", f.Resume, "resume from the checkpoints in this directory")
	fs.IntVar(&f.SaveEvery, "save-every", f.SaveEvery, fmt.Sprintf("with -save, also checkpoint every N %ss (0: at the end only)", unit))
	fs.IntVar(&f.StopAfter, "stop-after", f.StopAfter, fmt.Sprintf("stop (and checkpoint, with -save) after this many %ss of the schedule, as if interrupted", unit))
	fs.StringVar(&f.FP8Debug, "fp8-debug", f.FP8Debug, "FP8 precision debugging: a config in Transformer Engine's debug YAML schema (statistics, DisableFP8GEMM, DisableFP8Layer)")
	fs.StringVar(&f.FP8Log, "fp8-log", f.FP8Log, "with -fp8-debug: write the statistics (JSON lines) under this directory, one subdirectory per precision")
	fs.StringVar(&f.Report, "report", f.Report, "write a self-contained HTML run report (loss curves, per-layer FP8 scale, amax, underflow% and overflow% over the steps, conversion, recipe, timings) to this file")
	fs.BoolVar(&f.Profile, "profile", f.Profile, "time every op of the training step and print the table per op type and per layer")
	fs.StringVar(&f.Plot, "plot", f.Plot, "write the loss curves to this PNG file")
	fs.BoolVar(&f.JSON, "json", f.JSON, "print one JSON object as the last line")
	if f.Parallel || f.ExpertParallel {
		f.registerParallel(func(v *Ranks, name, usage string) { fs.Var(v, name, usage) })
	}
}

// Check records the flags' problems in ch, before any work: the
// precision (flags, environment, config file), the kernels' environment,
// numbers out of range, the debug config (read into Debug), and paths
// that cannot be written.
func (f *CommandFlags) Check(ch *Checks) {
	ch.Environment()
	if err := f.Precision.Resolve(); err != nil {
		ch.Fail("%v", err)
	}
	ch.AtLeast("batch", f.Batch, 1)
	ch.Positive("lr", f.LR)
	ch.AtLeast("save-every", f.SaveEvery, 0)
	ch.AtLeast("stop-after", f.StopAfter, 0)
	f.Debug = ch.DebugConfig(f.FP8Debug, f.FP8Log)
	ch.OutputFile("report", f.Report)
	ch.OutputFile("plot", f.Plot)
	ch.OutputDir("save", f.Save)
	f.checkParallel(ch)
}

// Apply sets what the flags say in a trainer's configuration and a run
// (checkpoints in the flat layout: one file per precision and rank in the
// -save directory), for the run of precision p (one of Precision.Runs)
// whose checkpoint files are called name; with Parallel, the ranks.
func (f *CommandFlags) Apply(p Precision, name string, cfg *Config, run *Run) {
	cfg.Precision, cfg.BatchSize, cfg.LR, cfg.Seed, cfg.Name = p, f.Batch, f.LR, f.Seed, name
	cfg.Debug, cfg.DebugLogDir, cfg.Profile = f.Debug, f.FP8Log, f.Profile
	run.SaveDir, run.Resume, run.SaveEvery, run.StopAfter, run.Flat = f.Save, f.Resume, f.SaveEvery, f.StopAfter, true
	f.applyParallel(cfg)
}
