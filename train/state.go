package train

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
	if _, _, err := t.savedFiles(path); errors.Is(err, errNoFiles) {
		return "", noCk(fmt.Errorf("train: resume %s: no checkpoint-<step> directory in it, nor %s", path, filepath.Base(t.stateFile(path, 0))))
	} else if err != nil {
		return "", noCk(err)
	}
	return path, nil
}

// lossesKey names the losses of the steps so far among a checkpoint's
// generator states (float32, little-endian).
const lossesKey = "train.losses"

// errNoFiles: a directory holds no state file of the run's name.
var errNoFiles = errkind.With(errors.New("no state files"), ErrNoCheckpoint)

// layoutKey is the metadata key of the layout a checkpoint was saved
// with ("FSDP 3").
const layoutKey = "train.layout"

// savedFiles finds the files of the checkpoint in dir, one per rank of
// the run that saved it, in rank order, and that run's world size: this
// run's own files when they are there, else the one set of another world
// size. It refuses a set with a rank's file missing (naming it; an error
// wrapping ErrNoCheckpoint) and a directory with sets of several other
// world sizes; with none it returns errNoFiles.
func (t *Trainer) savedFiles(dir string) ([]string, int, error) {
	name := t.cfg.Name
	if name == "" {
		name = "state"
	}
	return savedFiles(dir, name, t.world)
}

// savedFiles is Trainer.savedFiles for files called name and a run of
// world ranks.
func savedFiles(dir, name string, world int) ([]string, int, error) {
	worlds := map[int]bool{}
	if _, err := os.Stat(filepath.Join(dir, name+".safetensors")); err == nil {
		worlds[1] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("train: resume: %w", err)
	}
	for _, e := range ents {
		var r, n int
		rest, ok := strings.CutPrefix(e.Name(), name+"-rank")
		if !ok {
			continue
		}
		if _, err := fmt.Sscanf(rest, "%d-of-%d.safetensors", &r, &n); err == nil && n > 1 && r >= 0 && r < n && e.Name() == fmt.Sprintf("%s-rank%d-of-%d.safetensors", name, r, n) {
			worlds[n] = true
		}
	}
	own := world
	if !worlds[world] {
		switch len(worlds) {
		case 0:
			return nil, 0, errkind.With(fmt.Errorf("train: resume %s: no %s.safetensors (nor the files of a parallel run, %s-rank0-of-N.safetensors …)", dir, name, name), errNoFiles)
		case 1:
			for w := range worlds {
				world = w
			}
		default:
			var ws []int
			for w := range worlds {
				ws = append(ws, w)
			}
			sort.Ints(ws)
			return nil, 0, fmt.Errorf("train: resume %s: it holds checkpoints of %v ranks and none of this run's %d; keep one set in the directory", dir, ws, own)
		}
	}
	paths := make([]string, world)
	for r := range paths {
		paths[r] = filepath.Join(dir, name+".safetensors")
		if world > 1 {
			paths[r] = filepath.Join(dir, fmt.Sprintf("%s-rank%d-of-%d.safetensors", name, r, world))
		}
		if _, err := os.Stat(paths[r]); err != nil {
			return nil, 0, errkind.With(fmt.Errorf("train: resume %s: rank %d's file of the %d that saved it is missing: %w", dir, r, world, err), ErrNoCheckpoint)
		}
	}
	return paths, world, nil
}

// slices returns what a checkpoint of this rank records of its FSDP
// shards or expert slices (nil without either).
func (r *replica) slices() map[string]checkpoint.Slice {
	if r.sh == nil && r.experts == nil {
		return nil
	}
	out := map[string]checkpoint.Slice{}
	if r.sh != nil {
		for _, p := range r.sh.Parts() {
			out[p.Name] = checkpoint.Slice{Shape: p.Shape, Offset: p.Offset}
		}
	}
	r.expertSlices(out)
	return out
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
	m[layoutKey] = t.layout()
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
	st := &checkpoint.State{Store: r.ckptStore, Optimizer: r.opt, Step: r.prog.Step(), RNG: map[string][]byte{"loader": lb}, Meta: t.meta(), Slices: r.slices()}
	st.Meta["train.step"] = strconv.Itoa(step)
	// The losses so far, so that a resumed run's mean of the last steps
	// (Result.MeanLoss) covers the steps before it.
	if losses := append(append([]float32(nil), rr.res.Earlier...), rr.res.Losses...); !rr.noRecord && len(losses) == step {
		b := make([]byte, 4*len(losses))
		for i, x := range losses {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		st.RNG[lossesKey] = b
	}
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
	st := &checkpoint.State{Store: r.ckptStore, Optimizer: r.opt, Meta: t.meta(), Slices: r.slices()}
	paths, world, err := t.savedFiles(dir)
	var step int
	var from string
	if err == nil {
		step, from, err = rr.loadState(paths, world, st)
	} else {
		err = resumeErr(err)
	}
	// Every rank must have read the same step (a flat layout's files are
	// replaced one by one).
	if err := rr.agree(err); err != nil {
		return 0, err
	}
	if from != t.layout() {
		rr.res.Resharded = from + " to " + t.layout()
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

// loadState reads this rank's state from the files of a checkpoint saved
// over world ranks (paths, in rank order) and positions the loader: its
// own file when the checkpoint has this run's layout, else every file,
// re-cut for this rank (checkpoint.LoadShards). It returns the step and
// the layout the checkpoint was saved with.
func (rr *rankRun) loadState(paths []string, world int, st *checkpoint.State) (int, string, error) {
	t := rr.t
	path := paths[0]
	from := t.layout()
	if world == t.world {
		path = paths[rr.r.rank]
	}
	meta, err := checkpoint.ReadMeta(path)
	if err != nil {
		return 0, "", resumeErr(fmt.Errorf("train: resume: %w", err))
	}
	if l, ok := meta[layoutKey]; ok {
		from = l
	} else if world != t.world { // saved before checkpoints named their layout
		from = fmt.Sprintf("%d ranks", world)
	}
	if from == t.layout() {
		err = checkpoint.Load(path, st)
	} else {
		err = checkpoint.LoadShards(paths, st)
	}
	if err != nil {
		return 0, "", resumeErr(fmt.Errorf("train: resume: %w", err))
	}
	step, err := strconv.Atoi(st.Saved["train.step"])
	if err != nil || step < 0 {
		return 0, "", resumeErr(fmt.Errorf("train: resume: %s: no train.step in its metadata (not saved by train?)", path))
	}
	// The loader refuses another batch size or rank count; accumulation
	// changes the effective batch too, so the run would not continue
	// the same optimisation.
	if a, ok := st.Saved["train.accumulation"]; ok && a != strconv.Itoa(rr.t.accum) {
		return 0, "", resumeErr(configErrorf("resume: %s was saved with gradient accumulation over %s micro-batches, and this run accumulates %d: the effective batch would change; resume with GradientAccumulationSteps %s", path, a, rr.t.accum, a))
	}
	if b, ok := st.RNG[lossesKey]; ok && len(b) == 4*step {
		rr.res.Earlier = make([]float32, step)
		for i := range rr.res.Earlier {
			rr.res.Earlier[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	lb, ok := st.RNG["loader"]
	if !ok {
		return 0, "", resumeErr(fmt.Errorf("train: resume: %s: no loader state", path))
	}
	if err := rr.loader.UnmarshalBinary(lb); err != nil {
		return 0, "", resumeErr(fmt.Errorf("train: resume: %s: %w", path, err))
	}
	return step, from, nil
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
