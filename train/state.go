package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/errkind"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/precision"
)

// checkpointPrefix starts the name of each checkpoint directory.
const checkpointPrefix = "checkpoint-"

// ErrNoCheckpoint: Run.Resume names no checkpoint.
var ErrNoCheckpoint = errors.New("no checkpoint to resume from")

// ErrResume is wrapped by every error of resuming a run (a missing,
// corrupt or mismatched checkpoint).
var ErrResume = errors.New("resume")

func resumeErr(err error) error { return errkind.With(err, ErrResume) }

// checkWritable checks, before any work, that dir is (or can be made) a
// directory this process can write into.
func checkWritable(dir string) error {
	if err := writableDir(dir); err != nil {
		return configErrorf("save directory %s: %v", dir, err)
	}
	return nil
}

// writableDir makes dir if missing and checks that a file can be made in
// it (Checks.OutputDir and Run.SaveDir).
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %v", errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// checkpointStep parses "checkpoint-<step>".
func checkpointStep(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, checkpointPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// checkpoints lists the complete checkpoint directories in dir, oldest
// first.
func checkpoints(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type ck struct {
		step int
		name string
	}
	var cks []ck
	for _, e := range ents {
		if n, ok := checkpointStep(e.Name()); ok && e.IsDir() {
			cks = append(cks, ck{n, e.Name()})
		}
	}
	sort.Slice(cks, func(i, j int) bool { return cks[i].step < cks[j].step })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = filepath.Join(dir, c.name)
	}
	return out, nil
}

// latestCheckpoint resolves Run.Resume: one checkpoint directory, a save
// directory's newest complete checkpoint, or a flat save directory.
func (t *Trainer) latestCheckpoint(path string) (string, error) {
	noCk := func(err error) error { return resumeErr(errkind.With(err, ErrNoCheckpoint)) }
	fi, err := os.Stat(path)
	if err != nil {
		return "", noCk(fmt.Errorf("train: resume: %w", err))
	}
	if !fi.IsDir() {
		return "", noCk(fmt.Errorf("train: resume %s: want a save directory or a checkpoint-<step> directory", path))
	}
	if _, ok := checkpointStep(filepath.Base(path)); ok {
		return path, nil
	}
	cks, err := checkpoints(path)
	if err != nil {
		return "", noCk(fmt.Errorf("train: resume: %w", err))
	}
	if len(cks) > 0 {
		return cks[len(cks)-1], nil
	}
	for r := 0; r < t.world; r++ {
		if _, err := os.Stat(t.stateFile(path, r)); err != nil {
			if r == 0 {
				return "", noCk(fmt.Errorf("train: resume %s: no checkpoint-<step> directory in it, nor %s", path, filepath.Base(t.stateFile(path, 0))))
			}
			return "", noCk(fmt.Errorf("train: resume: %w", err))
		}
	}
	return path, nil
}

// stateFile is the file a rank saves in a checkpoint directory: one per
// rank when there are several (FSDP ranks hold their shards; DP replicas
// share their weights but each keeps its own FP8 scaling state, from its
// own rows).
func (t *Trainer) stateFile(dir string, rank int) string {
	name := t.cfg.Name
	if name == "" {
		name = "state"
	}
	if t.world > 1 {
		name = fmt.Sprintf("%s-rank%d-of-%d", name, rank, t.world)
	}
	return filepath.Join(dir, name+".safetensors")
}

// meta is what a checkpoint records of the run, which a resume must match.
func (t *Trainer) meta() map[string]string {
	m := map[string]string{}
	for k, v := range t.cfg.Meta {
		m[k] = v
	}
	m["recipe"] = precision.Label(t.rec) // with "/backward=…": a resume must run the same backward
	m["train.accumulation"] = strconv.Itoa(t.accum)
	return m
}

// saveHook lets a test stop the process in the middle of a save.
var saveHook func(stage string)

// save writes checkpoint-<step> under the save directory: every saving
// rank writes its file into a temporary directory, which rank 0 renames
// into place once all are written (a crash leaves the previous
// checkpoints as they were); then the oldest beyond Keep are removed.
func (rr *rankRun) save(step int) error {
	if rr.run.Flat {
		return rr.saveFlat(step)
	}
	t, r := rr.t, rr.r
	dir := rr.run.SaveDir
	final := filepath.Join(dir, checkpointPrefix+strconv.Itoa(step))
	tmp := filepath.Join(dir, ".tmp-"+checkpointPrefix+strconv.Itoa(step))
	var err error
	if r.rank == 0 {
		if stale, _ := filepath.Glob(filepath.Join(dir, ".tmp-"+checkpointPrefix+"*")); len(stale) > 0 {
			for _, s := range stale {
				os.RemoveAll(s)
			}
		}
		err = os.MkdirAll(tmp, 0o755)
	}
	if err := rr.agree(err); err != nil {
		return fmt.Errorf("train: save: %w", err)
	}
	err = rr.writeState(t.stateFile(tmp, r.rank), step)
	if saveHook != nil {
		saveHook("file written")
	}
	if err := rr.agree(err); err != nil {
		return fmt.Errorf("train: save: %w", err)
	}
	if r.rank == 0 {
		if err = os.RemoveAll(final); err == nil {
			err = os.Rename(tmp, final)
		}
		if err == nil {
			if d, derr := os.Open(dir); derr == nil { // make the rename durable
				d.Sync()
				d.Close()
			}
			err = rotate(dir, rr.run.Keep)
		}
	}
	if err := rr.agree(err); err != nil {
		return fmt.Errorf("train: save: %w", err)
	}
	rr.res.Checkpoint = final
	rr.status.Checkpoint = final
	return rr.hooks(func(h *Hook) func(*Status) error { return h.OnSave })
}

// saveFlat writes each rank's file straight into the save directory,
// atomically.
func (rr *rankRun) saveFlat(step int) error {
	path := rr.t.stateFile(rr.run.SaveDir, rr.r.rank)
	if err := rr.agree(rr.writeState(path, step)); err != nil {
		return fmt.Errorf("train: save: %w", err)
	}
	rr.res.Checkpoint, rr.status.Checkpoint = rr.run.SaveDir, rr.run.SaveDir
	return rr.hooks(func(h *Hook) func(*Status) error { return h.OnSave })
}

// writeState writes this rank's state at step to path.
func (rr *rankRun) writeState(path string, step int) error {
	t, r := rr.t, rr.r
	lb, err := rr.loader.MarshalBinary()
	if err != nil {
		return err
	}
	st := &checkpoint.State{Store: r.ckptStore, Optimizer: r.opt, Step: r.prog.Step(), RNG: map[string][]byte{"loader": lb}, Meta: t.meta()}
	st.Meta["train.step"] = strconv.Itoa(step)
	return checkpoint.Save(path, st)
}

// rotate removes all but the newest keep checkpoints of dir (keep 0:
// none removed).
func rotate(dir string, keep int) error {
	if keep <= 0 {
		return nil
	}
	cks, err := checkpoints(dir)
	if err != nil {
		return err
	}
	for _, c := range cks[:max(0, len(cks)-keep)] {
		if err := os.RemoveAll(c); err != nil {
			return err
		}
	}
	return nil
}

// restore loads this rank's state from the checkpoint directory dir and
// returns the step to continue from.
func (rr *rankRun) restore(dir string) (int, error) {
	t, r := rr.t, rr.r
	path := t.stateFile(dir, r.rank)
	st := &checkpoint.State{Store: r.ckptStore, Optimizer: r.opt, Meta: t.meta()}
	step, err := rr.loadState(path, st)
	// Every rank must have read the same step (a flat layout's files are
	// replaced one by one).
	if err := rr.agree(err); err != nil {
		return 0, err
	}
	if r.comm != nil {
		lohi := []float32{float32(step), -float32(step)}
		if err := r.comm.AllReduceF32(lohi, dist.Max); err != nil {
			return 0, err
		}
		if lohi[0] != -lohi[1] {
			return 0, resumeErr(fmt.Errorf("train: resume %s: the ranks' files are of different steps (%v to %v): a save was interrupted", dir, -lohi[1], lohi[0]))
		}
	}
	r.prog.SetStep(st.Step)
	if r.cal != nil {
		r.cal.prog.SetStep(st.Step)
	}
	if r.sh != nil && r.sh.Precomputed() {
		if err := r.drv.AfterUpdate(); err != nil { // the FP8 weights' scales from the loaded shards
			return 0, err
		}
	}
	return step, nil
}

// loadState reads one rank's file and positions the loader.
func (rr *rankRun) loadState(path string, st *checkpoint.State) (int, error) {
	if err := checkpoint.Load(path, st); err != nil {
		return 0, resumeErr(fmt.Errorf("train: resume: %w", err))
	}
	step, err := strconv.Atoi(st.Saved["train.step"])
	if err != nil || step < 0 {
		return 0, resumeErr(fmt.Errorf("train: resume: %s: no train.step in its metadata (not saved by train?)", path))
	}
	// The loader refuses another batch size or rank count; accumulation
	// changes the effective batch too, so the run would not continue
	// the same optimisation.
	if a, ok := st.Saved["train.accumulation"]; ok && a != strconv.Itoa(rr.t.accum) {
		return 0, resumeErr(configErrorf("resume: %s was saved with gradient accumulation over %s micro-batches, and this run accumulates %d: the effective batch would change; resume with GradientAccumulationSteps %s", path, a, rr.t.accum, a))
	}
	lb, ok := st.RNG["loader"]
	if !ok {
		return 0, resumeErr(fmt.Errorf("train: resume: %s: no loader state", path))
	}
	if err := rr.loader.UnmarshalBinary(lb); err != nil {
		return 0, resumeErr(fmt.Errorf("train: resume: %s: %w", path, err))
	}
	return step, nil
}

// SaveState writes the state of a model outside Fit: store, optimizer,
// program step and named generator states, atomically (the counterpart of
// Accelerate's save_state for a loop of one's own).
func SaveState(path string, store *graph.Store, opt optim.Stateful, prog *graph.Program, rng map[string][]byte, meta map[string]string) error {
	st := &checkpoint.State{Store: store, Optimizer: opt, RNG: rng, Meta: meta}
	if prog != nil {
		st.Step = prog.Step()
	}
	return checkpoint.Save(path, st)
}

// LoadState reads what SaveState wrote into the same kind of model
// (prepared first), setting the program's step; it returns the generator
// states the file holds.
func LoadState(path string, store *graph.Store, opt optim.Stateful, prog *graph.Program, meta map[string]string) (map[string][]byte, error) {
	st := &checkpoint.State{Store: store, Optimizer: opt, Meta: meta}
	if err := checkpoint.Load(path, st); err != nil {
		return nil, err
	}
	if prog != nil {
		prog.SetStep(st.Step)
	}
	return st.RNG, nil
}
