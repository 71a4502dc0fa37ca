package train

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/errkind"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/precision"
)

// Run says what Fit does: how long to train, when to evaluate and save,
// where to resume from, and the hooks.
type Run struct {
	// Epochs (passes over the training set) or, when above 0, Steps
	// (optimizer steps) is the schedule's length; the learning-rate
	// schedule runs over it.
	Epochs, Steps int
	// StopAfter, when above 0, stops after that step of the schedule (and
	// saves, with SaveDir), as if interrupted.
	StopAfter int
	// Eval, when set, is evaluated every EvalEvery steps (0: at the end
	// only) and at the end.
	Eval      data.Dataset
	EvalEvery int
	// SaveDir, when set, receives checkpoints: every SaveEvery steps
	// (0: at the end only) and at the end, each in a directory
	// checkpoint-<step>, written whole or not at all; Keep, when above 0,
	// keeps only the newest Keep of them (Accelerate's total_limit).
	// Flat writes the rank files straight into SaveDir instead, each
	// replacing its previous version atomically (one checkpoint kept).
	SaveDir   string
	SaveEvery int
	Keep      int
	Flat      bool
	// Resume, when set, is a SaveDir (its newest complete checkpoint, or
	// with a flat layout its files) or one checkpoint-<step> directory to
	// continue from, exactly.
	Resume string
	// Hooks run on rank 0, in order, at the start, after each step,
	// evaluation and save, and at the end.
	Hooks []Hook
	// Hint follows the diagnosis of a loss that is not finite ("learning
	// rate 1 too high?").
	Hint string
}

// Status is what a hook is told.
type Status struct {
	// Step is the number of optimizer steps done, Total the schedule's
	// length, First the step this process started from (a resumed run's).
	Step, Total, First int
	// Epoch is the epoch (from 0) of the last step's batch (at the
	// start, of the first batch).
	Epoch int
	// Loss is the last step's loss (the global batch's mean), LR its
	// learning rate, StepTime how long it took.
	Loss     float32
	LR       float32
	StepTime time.Duration
	// Eval is the evaluation just made (OnEval, and at OnEnd the last).
	Eval *Eval
	// Checkpoint is the directory just written (OnSave), and at OnEnd the
	// last one written ("" for none).
	Checkpoint string
	// Resumed is the checkpoint directory the run resumed from ("" for a
	// fresh run); it resumed after step First. Resharded says from which
	// layout to which the checkpoint was re-cut ("FSDP 3 to DP 2"; ""
	// when the layout did not change).
	Resumed, Resharded string
	// Precision names the run ("fp32", "bf16", "fp8"); Trainer is the
	// trainer.
	Precision string
	Trainer   *Trainer
	// Warning is what the step just done found worth a warning (a first
	// FP8 step that flushed most of a tensor, see FP8Start); "" for none.
	Warning string
}

// Hook is a named set of callbacks. Every callback may be nil; an error
// stops the run (on every rank) and is Fit's error.
type Hook struct {
	Name string
	// Every, when above 1, calls OnStep every Every steps only.
	Every   int
	OnStart func(*Status) error
	OnStep  func(*Status) error
	OnEval  func(*Status) error
	OnSave  func(*Status) error
	OnEnd   func(*Status) error
}

// Without returns hooks without the one named name (to drop a default).
func Without(hooks []Hook, name string) []Hook {
	var out []Hook
	for _, h := range hooks {
		if h.Name != name {
			out = append(out, h)
		}
	}
	return out
}

// Result is what Fit measured and produced.
type Result struct {
	// Precision is "fp32", "bf16" or "fp8"; Recipe the recipe's label
	// ("te/HYBRID"); Settings where its settings came from.
	Precision, Recipe, Settings string
	// Losses holds each step's loss, from First to End; Total is the
	// schedule's length. Earlier holds the losses of steps 0 to First
	// that the checkpoint resumed from recorded (nil for a fresh run).
	Losses, Earlier   []float32
	First, End, Total int
	// Busy is the time spent in steps (data loading excluded).
	Busy time.Duration
	// Eval is the last evaluation (nil without Run.Eval).
	Eval *Eval
	// Report is the conversion report; Memory the optimizer's storage
	// per parameter; Ranks the ranks trained on.
	Report passes.Report
	Memory optim.MemoryStats
	Ranks  int
	// With FSDP: bytes all-gathered per step and rank, and the part of
	// them that is FP8 weights.
	AllGatherBytes, Float8AllGatherBytes int64
	// FP8Start says how delayed scaling's first FP8 step went (nil
	// without delayed scaling, or before that step).
	FP8Start *FP8Start
	// AmaxAllReduceBytes is what each rank sends per step in the
	// all-reduce of the delayed-scaling amaxes (4 bytes an amax; 0 with
	// one process, without delayed scaling or with ReduceAmax false).
	AmaxAllReduceBytes int64
	// CommBytesPerStep is the payload of every collective this rank ran
	// in the last step (dist.Stats.Bytes: gradients, gathers, amaxes,
	// the loss, the expert dispatch; 0 for one process).
	CommBytesPerStep int64
	// With DP and the MS-AMP recipe: casts of the FP8 gradient
	// all-reduce that saturated or flushed a value to zero.
	FP8AllReduceOverflows, FP8AllReduceUnderflows int
	// Profile is rank 0's per-op profile of the steps (Config.Profile).
	Profile *graph.Profile
	// StatsFile is the FP8 debug statistics file ("" without).
	StatsFile string
	// Warnings are the precision's (Precision.Warnings) and Prepare's
	// about Config.Passes (see passes.Prepared).
	Warnings []string
	// Checkpoint is the last checkpoint written ("" for none); Resumed
	// the one the run resumed from ("" for a fresh run).
	Checkpoint, Resumed string
	// Resharded says, when the run resumed from a checkpoint saved with
	// another layout, from which to which ("FSDP 3 to DP 2"); "" when
	// the layout did not change.
	Resharded string
}

// Ran returns the number of steps this process ran.
func (r *Result) Ran() int { return r.End - r.First }

// MsPerStep returns the mean time of a step in milliseconds.
func (r *Result) MsPerStep() float64 {
	return float64(r.Busy.Microseconds()) / 1000 / float64(max(1, r.Ran()))
}

// MeanLoss returns the mean of the last n steps' losses (all if fewer),
// those before a resume included when the checkpoint recorded them, so
// that an interrupted run reports what the uninterrupted one would.
func (r *Result) MeanLoss(n int) float64 {
	tail := r.Losses[max(0, len(r.Losses)-n):]
	if k := n - len(tail); k > 0 && len(r.Earlier) > 0 {
		tail = append(append([]float32(nil), r.Earlier[max(0, len(r.Earlier)-k):]...), tail...)
	}
	if len(tail) == 0 {
		return 0
	}
	var s float64
	for _, x := range tail {
		s += float64(x)
	}
	return s / float64(len(tail))
}

// errStopped is what ranks other than the one that failed return.
var errStopped = errors.New("train: stopped by another rank")

// Fit trains on ds as run says and returns what it measured. Every
// configuration problem (the model's inputs against the dataset's fields,
// a missing resume checkpoint, a schedule with nothing to do) is found
// before the first step.
func (t *Trainer) Fit(ds data.Dataset, run Run) (*Result, error) {
	if ds == nil {
		return nil, configErrorf("no training dataset")
	}
	if run.Epochs < 0 || run.Steps < 0 || run.StopAfter < 0 || run.EvalEvery < 0 || run.SaveEvery < 0 || run.Keep < 0 {
		return nil, configErrorf("negative Epochs, Steps, StopAfter, EvalEvery, SaveEvery or Keep")
	}
	if run.Epochs == 0 && run.Steps == 0 {
		return nil, configErrorf("no training steps (set Epochs or Steps)")
	}
	var resume string
	if run.Resume != "" {
		var err error
		if resume, err = t.latestCheckpoint(run.Resume); err != nil {
			return nil, err
		}
	}
	if run.SaveDir != "" {
		if err := checkWritable(run.SaveDir); err != nil {
			return nil, err
		}
	}
	res := &Result{Precision: t.cfg.Precision.Name(), Recipe: precision.Label(t.rec), Settings: t.cfg.Precision.Describe(), Ranks: t.world, Resumed: resume}
	t.ev = nil // the evaluation program of an earlier Fit reads another store
	switch {
	case t.cfg.Comm != nil:
		if err := t.fitRank(t.cfg.Comm, ds, run, resume, res); err != nil {
			if t.cfg.Comm.Rank() == 0 || !errors.Is(err, errStopped) {
				return nil, fmt.Errorf("rank %d of %s: %w", t.cfg.Comm.Rank(), t.worldName(), err)
			}
			return nil, err
		}
	case t.world > 1:
		err := dist.RunLocal(t.world, func(c dist.Communicator) error {
			r := res
			if c.Rank() != 0 {
				r = &Result{}
			}
			return t.fitRank(c, ds, run, resume, r)
		})
		if err != nil {
			return nil, err
		}
	default:
		if err := t.fitRank(nil, ds, run, resume, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// rankRun is one rank's state during Fit.
type rankRun struct {
	t       *Trainer
	r       *replica
	run     Run
	loader  *data.Loader
	total   int
	res     *Result
	status  Status
	evalSet data.Dataset
	// noRecord keeps no per-step losses (a Stepper's open-ended loop).
	noRecord bool
	// startDone: the first FP8 step has been reported (Result.FP8Start).
	startDone bool
}

// agree makes every rank return an error when one of them has one: the
// rank's own error, or errStopped on the others.
func (rr *rankRun) agree(err error) error { return agree(rr.r.comm, err) }

// agree is rankRun.agree over comm (nil: one process).
func agree(comm dist.Communicator, err error) error {
	if comm == nil {
		return err
	}
	flag := []float32{0}
	if err != nil {
		flag[0] = 1
	}
	if cerr := comm.AllReduceF32(flag, dist.Max); cerr != nil {
		return errors.Join(err, cerr)
	}
	if err != nil {
		return err
	}
	if flag[0] != 0 {
		return errStopped
	}
	return nil
}

// hooks runs one kind of callback of every hook on rank 0, then lets the
// ranks agree.
func (rr *rankRun) hooks(pick func(h *Hook) func(*Status) error) error {
	var err error
	if rr.r.rank == 0 {
		for i := range rr.run.Hooks {
			h := &rr.run.Hooks[i]
			if f := pick(h); f != nil {
				if err = f(&rr.status); err != nil {
					err = fmt.Errorf("hook %q: %w", h.Name, err)
					break
				}
			}
		}
	}
	return rr.agree(err)
}

// setup builds rank's replica (the debug log opened on rank 0 first) and
// its loader of ds.
func (t *Trainer) setup(comm dist.Communicator, ds data.Dataset) (*replica, *data.Loader, error) {
	rank := 0
	if comm != nil {
		rank = comm.Rank()
	}
	dataRank := rank
	if t.ep {
		dataRank = rank / t.epSize // an expert-parallel group runs its data rank's batch
	}
	lo, hi := data.Shard(t.cfg.BatchSize, t.dataRanks(), dataRank)
	// Rank 0 alone opens the debug log; a failure there must stop every
	// rank before the collectives of the set-up.
	var log *inspect.Log
	var err error
	if t.cfg.Debug != nil && rank == 0 {
		log, err = inspect.OpenLog(filepath.Join(t.cfg.DebugLogDir, t.cfg.Precision.Name()), 0)
		if err != nil {
			err = fmt.Errorf("train: FP8 debug log: %w", err)
		}
	}
	if err := agree(comm, err); err != nil {
		return nil, nil, err
	}
	rep, err := t.newReplica(comm, hi-lo, log)
	if err != nil {
		return nil, nil, err
	}
	if rep.feeds, err = bindFeeds(rep.m, ds.Fields(), hi-lo); err != nil {
		return nil, nil, err
	}
	if rep.cal != nil {
		if rep.cal.feeds, err = bindFeeds(rep.cal.m, ds.Fields(), hi-lo); err != nil {
			return nil, nil, err
		}
	}
	if pad := padded(ds.Len(), t.cfg.BatchSize); !t.cfg.DropLast && !t.cfg.Replacement {
		if err := checkPadding(rep.m, rep.lossRows, ds, t.cfg.BatchSize, pad, "training"); err != nil {
			return nil, nil, err
		}
	}
	loader, err := data.NewLoader(ds, data.Config{BatchSize: t.cfg.BatchSize, Shuffle: !t.cfg.NoShuffle, Seed: t.cfg.Seed,
		DropLast: t.cfg.DropLast, Rank: dataRank, World: t.dataRanks(), Prefetch: t.cfg.Prefetch, Replacement: t.cfg.Replacement, Stream: t.cfg.Stream})
	if err != nil {
		return nil, nil, err
	}
	if rank == 0 {
		t.rep = rep
	}
	return rep, loader, nil
}

func (t *Trainer) fitRank(comm dist.Communicator, ds data.Dataset, run Run, resume string, res *Result) (err error) {
	rank := 0
	if comm != nil {
		rank = comm.Rank()
	}
	rep, loader, err := t.setup(comm, ds)
	if err != nil {
		return err
	}
	defer loader.Close()
	total := run.Steps
	if total == 0 {
		total = (run.Epochs*loader.BatchesPerEpoch() + t.accum - 1) / t.accum
	}
	rr := &rankRun{t: t, r: rep, run: run, loader: loader, total: total, res: res, evalSet: run.Eval}
	res.Report, res.Memory, res.Total = rep.report, rep.memory, total
	res.Warnings = append(t.cfg.Precision.Warnings(), rep.warnings...)
	if rank == 0 {
		if rep.log != nil {
			res.StatsFile = rep.log.Path()
			defer func() {
				if cerr := rep.log.Close(); err == nil && cerr != nil {
					err = fmt.Errorf("train: FP8 debug log: %w", cerr)
				}
			}()
		}
	}
	if run.Eval != nil && rank == 0 {
		if _, err = t.evaluator(); err == nil {
			if _, err = bindFeeds(t.ev.m, run.Eval.Fields(), t.ev.rows); err != nil {
				err = fmt.Errorf("evaluation: %w", err)
			}
		}
	}
	if err := rr.agree(err); err != nil {
		return err
	}
	first := 0
	if resume != "" {
		if first, err = rr.restore(resume); err != nil {
			return err
		}
	}
	end := total
	if run.StopAfter > 0 {
		end = min(end, run.StopAfter)
	}
	switch {
	case first > total:
		return resumeErr(configErrorf("resume: the checkpoint is at step %d, past the %d steps of this run", first, total))
	case first >= end:
		return resumeErr(configErrorf("resume: the checkpoint is at step %d, nothing left to train before step %d", first, end))
	}
	res.First, res.End = first, first
	res.Losses = make([]float32, 0, end-first)
	rr.status = Status{Step: first, Total: total, First: first, Epoch: loader.Epoch(), Precision: res.Precision, Trainer: t, Resumed: resume, Resharded: res.Resharded}
	if t.cfg.Profile && rank == 0 {
		rep.prog.SetProfiling(true)
		defer func() {
			pr := rep.prog.Profile()
			res.Profile = &pr
			rep.prog.SetProfiling(false)
		}()
	}
	if err := rr.hooks(func(h *Hook) func(*Status) error { return h.OnStart }); err != nil {
		return err
	}
	for step := first; step < end; step++ {
		if err := rr.step(step); err != nil {
			return err
		}
		if run.SaveDir != "" && run.SaveEvery > 0 && (step+1)%run.SaveEvery == 0 && step+1 < end {
			if err := rr.save(step + 1); err != nil {
				return err
			}
		}
		if rr.evalSet != nil && run.EvalEvery > 0 && (step+1)%run.EvalEvery == 0 && step+1 < end {
			if err := rr.evaluate(); err != nil {
				return err
			}
		}
	}
	if run.SaveDir != "" {
		if err := rr.save(end); err != nil {
			return err
		}
	}
	if rep.sh != nil {
		if err := rep.sh.Gather(rep.store); err != nil {
			return err
		}
	}
	if rep.experts != nil {
		if err := rep.gatherExperts(); err != nil {
			return err
		}
	}
	if rr.evalSet != nil {
		if err := rr.evaluate(); err != nil {
			return err
		}
	}
	res.Float8AllGatherBytes = int64(rep.srep.Float8Bytes)
	if rep.amax != nil {
		res.AmaxAllReduceBytes = int64(4 * len(rep.amax.buf))
	}
	if rep.lowBit != nil {
		res.FP8AllReduceOverflows, res.FP8AllReduceUnderflows = rep.lowBit.Overflows, rep.lowBit.Underflows
	}
	return rr.hooks(func(h *Hook) func(*Status) error { return h.OnEnd })
}

// step runs optimizer step number step (from 0): its micro-batches, the
// gradient average, clipping and the update, then the StepEnd hooks.
func (rr *rankRun) step(step int) error {
	r, t := rr.r, rr.t
	var busy time.Duration
	var lossSum float64
	var rowsSum int
	r.resetStats()
	r.calibrating = r.cal != nil && step < r.cal.steps
	epoch := 0
	for micro := 0; micro < t.accum; micro++ {
		b, err := rr.loader.Next()
		if err := rr.agree(err); err != nil {
			return err
		}
		epoch = b.Epoch
		start := time.Now()
		loss, err := r.microStep(b)
		if err == nil {
			loss, err = r.globalLoss(loss, b.Rows, b.GlobalRows)
		}
		if err != nil {
			return err
		}
		if t.accum == 1 {
			lossSum, rowsSum = float64(loss), 1
		} else {
			r.accum.add(float32(b.GlobalRows), micro == 0)
			lossSum += float64(float64(b.GlobalRows) * float64(loss))
			rowsSum += b.GlobalRows
		}
		busy += time.Since(start)
	}
	start := time.Now()
	if t.accum > 1 {
		optim.ScaleGrads(r.params, 1/float32(rowsSum)) // the accumulators
	}
	loss := float32(lossSum / float64(rowsSum))
	if f := float64(loss); math.IsNaN(f) || math.IsInf(f, 0) {
		return rr.nonFinite(step, loss)
	}
	if err := r.clip(); err != nil {
		return err
	}
	lr := float32(t.cfg.LR)
	if t.cfg.Schedule != nil {
		lr = t.cfg.Schedule.LR(step)
	}
	r.opt.Step(lr)
	if r.lowBit != nil && r.lowBit.Err() != nil {
		return r.lowBit.Err()
	}
	if r.drv != nil {
		if err := r.drv.AfterUpdate(); err != nil {
			return err
		}
	}
	busy += time.Since(start)
	rr.res.Busy += busy
	if !rr.noRecord {
		rr.res.Losses = append(rr.res.Losses, loss)
	}
	rr.res.End = step + 1
	st := &rr.status
	st.Step, st.Loss, st.LR, st.StepTime, st.Epoch = step+1, loss, lr, busy, epoch
	st.Warning = ""
	if !rr.startDone && !r.calibrating {
		if s := r.fp8Start(step); s != nil || len(r.startMetas) == 0 {
			rr.startDone, rr.res.FP8Start = true, s
			if w := startWarning(s); w != "" {
				rr.res.Warnings = append(rr.res.Warnings, w)
				st.Warning = w
			}
		}
	}
	if r.drv != nil && r.rank == 0 {
		rr.res.AllGatherBytes = r.comm.Stats().AllGatherBytes
	}
	rr.res.CommBytesPerStep = r.commBytes()
	return rr.hooks(func(h *Hook) func(*Status) error {
		if h.Every > 1 && (step+1)%h.Every != 0 && step+1 != rr.total {
			return nil
		}
		return h.OnStep
	})
}

// nonFinite is the error of a step whose loss is not finite: the step and
// what the diagnosis finds.
func (rr *rankRun) nonFinite(step int, loss float32) error {
	msg := fmt.Sprintf("step %d: the loss is %v; %s", step, loss, Diagnose(rr.r.params, rr.r.store))
	if rr.run.Hint != "" {
		msg += " (" + rr.run.Hint + ")"
	}
	return errkind.With(errors.New(msg), ErrNonFinite)
}

// ErrNonFinite is wrapped by Fit's error when a loss is NaN or infinite.
var ErrNonFinite = errors.New("the loss is not finite")

// Stepper runs training steps one at a time in one process, for a loop
// of one's own: Accelerate's prepare followed by the user's loop. Each
// Step draws the next batch, runs forward and backward, clips, and
// updates, as a step of Fit does; after the first, a Step allocates
// nothing.
type Stepper struct {
	rr   *rankRun
	step int
}

// Start builds and prepares the model and the loader of ds for stepping
// by hand. It runs one process (DP and FSDP ranks train through Fit).
func (t *Trainer) Start(ds data.Dataset) (*Stepper, error) {
	if ds == nil {
		return nil, configErrorf("no training dataset")
	}
	if t.world > 1 {
		return nil, configErrorf("Start steps one process; %s trains through Fit", t.worldName())
	}
	t.ev = nil
	rep, loader, err := t.setup(nil, ds)
	if err != nil {
		return nil, err
	}
	rr := &rankRun{t: t, r: rep, loader: loader, res: &Result{Precision: t.cfg.Precision.Name(), Recipe: precision.Label(t.rec)}, noRecord: true}
	rr.status = Status{Epoch: loader.Epoch(), Precision: rr.res.Precision, Trainer: t}
	return &Stepper{rr: rr}, nil
}

// Step runs the next step and returns its loss (a loss that is not
// finite is an error wrapping ErrNonFinite, with the diagnosis).
func (s *Stepper) Step() (float32, error) {
	err := s.rr.step(s.step)
	s.step++
	return s.rr.status.Loss, err
}

// Steps returns the number of steps run.
func (s *Stepper) Steps() int { return s.step }

// Program returns the compiled training program.
func (s *Stepper) Program() *graph.Program { return s.rr.r.prog }

// Close stops the loader's prefetching.
func (s *Stepper) Close() error { return s.rr.loader.Close() }
