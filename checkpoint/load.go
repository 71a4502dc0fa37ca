package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nlpodyssey/safetensors"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/internal/errkind"
)

// maxFileSize bounds what Load reads into memory.
const maxFileSize = 1 << 34

// Load reads path into s. Everything is checked before anything is
// written: the file's format, every parameter of the store (name, dtype,
// shape), the optimizer's buffers and step count, each FP8 layer's state
// (the layers, backend, formats and history lengths must match the
// store's, which decides the recipe), and the "model" and "recipe"
// metadata when s.Meta sets them. Any mismatch, truncation or corruption
// is an error naming the tensor, field or byte offset, and s is left as
// it was.
func Load(path string, s *State) (err error) {
	defer func() {
		if r := recover(); r != nil { // a corrupt file must never panic the caller
			err = corruptErr(path, "corrupt file: %v", r)
		}
	}()
	if s == nil || s.Store == nil {
		return fmt.Errorf("checkpoint: load %s: no state (or no store) to load into", path)
	}
	buf, err := readFile(path)
	if err != nil {
		return err
	}
	return loadBytes(path, buf, s)
}

// loadBytes loads a checkpoint held in buf into s: it opens the file
// (header, checksums, metadata), stages every value the state wants,
// checking each, and only then commits them all.
func loadBytes(path string, buf []byte, s *State) error {
	l, err := open(path, buf, s)
	if err != nil {
		return err
	}
	for _, stage := range []func() error{l.params, l.optimizer, l.rawOptimizer, l.scalingStates, l.generators} {
		if err := stage(); err != nil {
			return err
		}
	}
	l.commit()
	return nil
}

// loader is one load in progress: the opened file and the values staged
// for the commit.
type loader struct {
	path     string
	st       safetensors.SafeTensors
	meta     map[string]string
	s        *State
	step     int64
	optSteps int
	jobs     []copyJob
	rawJobs  []rawJob
	metaJobs []metaJob
	rng      map[string][]byte
}

type copyJob struct {
	dst []float32
	src []byte
}

type rawJob struct {
	dst, src []byte
}

type metaJob struct {
	m                *fp8.Meta
	ms               *metaState
	scale, inv, hist []byte
}

// errorf formats an error about the file.
func (l *loader) errorf(format string, args ...any) error {
	return fmt.Errorf("checkpoint: %s: "+format, append([]any{l.path}, args...)...)
}

// mismatchf is errorf for a file that does not fit the run (ErrMismatch).
func (l *loader) mismatchf(format string, args ...any) error {
	return errkind.With(l.errorf(format, args...), ErrMismatch)
}

// corruptf is errorf for a damaged file (ErrCorrupt).
func (l *loader) corruptf(format string, args ...any) error {
	return corruptErr(l.path, format, args...)
}

// corruptErr is an ErrCorrupt error about the file at path.
func corruptErr(path, format string, args ...any) error {
	return errkind.With(fmt.Errorf("checkpoint: %s: "+format, append([]any{path}, args...)...), ErrCorrupt)
}

// open checks the file's framing, checksums and metadata against s.
func open(path string, buf []byte, s *State) (*loader, error) {
	l := &loader{path: path, s: s}
	if len(buf) < 8 {
		return nil, l.corruptf("%d bytes, too short for a header length at offset 0", len(buf))
	}
	if n := binary.LittleEndian.Uint64(buf); n > uint64(len(buf)-8) {
		return nil, l.corruptf("header length %d at offset 0 runs past the end of the file (%d bytes)", n, len(buf))
	}
	if err := checkExtent(path, buf); err != nil {
		return nil, err
	}
	st, err := safetensors.Deserialize(buf)
	if err != nil {
		return nil, l.corruptf("%w", err)
	}
	_, md, err := safetensors.ReadMetadata(buf)
	if err != nil {
		return nil, l.corruptf("%w", err)
	}
	l.st, l.meta = st, md.Metadata()
	if err := verifySums(path, st, l.meta); err != nil {
		return nil, err
	}
	if l.meta["octet.format"] != Format {
		return nil, l.corruptf("metadata octet.format is %q, want %q", l.meta["octet.format"], Format)
	}
	for _, key := range []string{"model", "recipe"} {
		if want, ok := s.Meta[key]; ok && l.meta[key] != want {
			return nil, l.mismatchf("saved with %s %q, this run uses %q", key, l.meta[key], want)
		}
	}
	if l.step, err = strconv.ParseInt(l.meta["octet.step"], 10, 64); err != nil || l.step < 0 {
		return nil, l.corruptf("metadata octet.step %q is not a step count", l.meta["octet.step"])
	}
	return l, nil
}

// f32 returns the data of float32 tensor name, which must have shape want.
func (l *loader) f32(name string, want []int) ([]byte, error) {
	t, ok := l.st.Tensor(name)
	if !ok {
		return nil, l.mismatchf("tensor %q is missing", name)
	}
	if t.DType() != safetensors.F32 {
		return nil, l.mismatchf("tensor %q is %v, want F32", name, t.DType())
	}
	sh := t.Shape()
	ok = len(sh) == len(want)
	for i := 0; ok && i < len(sh); i++ {
		ok = sh[i] == uint64(want[i])
	}
	if !ok {
		return nil, l.mismatchf("tensor %q has shape %v, the model wants %v", name, sh, want)
	}
	return t.Data(), nil
}

// params stages every parameter of the store, which must be finite.
func (l *loader) params() error {
	for _, name := range l.s.Store.Names() {
		sh, _ := l.s.Store.Shape(name)
		data, err := l.f32("param/"+name, sh)
		if err != nil {
			return err
		}
		if i := firstNonFinite(data); i >= 0 {
			return l.corruptf("parameter %q holds a non-finite value at element %d", name, i)
		}
		l.jobs = append(l.jobs, copyJob{l.s.Store.Float32(name), data})
	}
	return nil
}

// optimizer stages the optimizer's float32 buffers and step count.
func (l *loader) optimizer() error {
	if err := l.optimizerSteps(); err != nil || l.s.Optimizer == nil {
		return err
	}
	bufs := l.s.Optimizer.StateBuffers()
	for _, name := range sortedKeys(bufs) {
		data, err := l.f32("optim/"+name, []int{len(bufs[name])})
		if err != nil {
			return err
		}
		l.jobs = append(l.jobs, copyJob{bufs[name], data})
	}
	return nil
}

// optimizerSteps reads the optimizer's step count, refusing a file with
// optimizer state loaded without an optimizer (unless SkipOptimizer).
func (l *loader) optimizerSteps() error {
	if l.s.Optimizer == nil {
		if _, saved := l.meta["octet.optimizer.steps"]; saved && !l.s.SkipOptimizer {
			return l.errorf("%w (%s steps of it); pass the optimizer, or set SkipOptimizer to load without it", ErrOptimizerState, l.meta["octet.optimizer.steps"])
		}
		return nil
	}
	var err error
	if l.optSteps, err = strconv.Atoi(l.meta["octet.optimizer.steps"]); err != nil || l.optSteps < 0 {
		return l.mismatchf("metadata octet.optimizer.steps %q is not a step count (was it saved without an optimizer?)", l.meta["octet.optimizer.steps"])
	}
	return nil
}

// rawOptimizer stages the encoded buffers of an optimizer that has some
// (MS-AMP's low-bit states).
func (l *loader) rawOptimizer() error {
	raw, ok := l.s.Optimizer.(RawStateful)
	if !ok || l.s.Optimizer == nil {
		return nil
	}
	bufs := raw.RawStateBuffers()
	for _, name := range sortedKeys(bufs) {
		buf := bufs[name]
		t, ok := l.st.Tensor("optim_raw/" + name)
		if !ok {
			return l.mismatchf("optimizer state %q is missing (saved with another optimizer or MS-AMP level?)", "optim_raw/"+name)
		}
		if t.DType() != safetensors.U8 || len(t.Data()) != len(buf) {
			return l.mismatchf("tensor %q has %d bytes of %v, want %d of U8", "optim_raw/"+name, len(t.Data()), t.DType(), len(buf))
		}
		l.rawJobs = append(l.rawJobs, rawJob{buf, t.Data()})
	}
	return nil
}

// scalingStates stages every layer's scaling state: the same layers,
// backends, formats and delayed-scaling settings as the file's, with
// finite positive scales and amaxes that are not negative.
func (l *loader) scalingStates() error {
	layers, err := l.fp8Layers()
	if err != nil {
		return err
	}
	src := map[string]layerSource{}
	for fqn, lm := range layers {
		src[fqn] = layerSource{l, lm}
	}
	return stageScaling(l, src, false)
}

// fp8Layers reads the file's record of its FP8 layers.
func (l *loader) fp8Layers() (map[string]*layerMeta, error) {
	var layers map[string]*layerMeta
	if err := json.Unmarshal([]byte(l.meta["octet.fp8"]), &layers); err != nil {
		return nil, l.corruptf("metadata octet.fp8 is not valid: %w", err)
	}
	return layers, nil
}

// layerSource is the file a layer's scaling state is read from.
type layerSource struct {
	l  *loader
	lm *layerMeta
}

// stageScaling stages into to every FP8 layer state of to's store from
// the files src names for each; layers the files hold and the store
// does not are refused unless extra (a rank's part of a model).
func stageScaling(to *loader, src map[string]layerSource, extra bool) error {
	have := fp8Layers(to.s.Store)
	if len(have) == 0 && len(src) > 0 && !extra {
		first := sortedKeys(src)[0]
		return src[first].l.errorf("layer %q was converted with the %s backend (%d FP8 layer(s) in the file) and this store has no FP8 layer state: %w", first, src[first].lm.Backend, len(src), ErrNotPrepared)
	}
	// Layers in name order, so that the first problem reported does not
	// depend on map order.
	for _, fqn := range sortedKeys(src) {
		if _, ok := have[fqn]; !ok && !extra {
			return src[fqn].l.mismatchf("layer %q was converted with the %s backend but this model does not convert it; use the recipe it was saved with", fqn, src[fqn].lm.Backend)
		}
	}
	for _, fqn := range sortedKeys(have) {
		ls := have[fqn]
		ss, ok := src[fqn]
		if !ok {
			return to.mismatchf("this model converts layer %q (%s backend) but the checkpoint has no state for it (saved in float32 or with another filter?)", fqn, ls.Backend)
		}
		l, lm := ss.l, ss.lm
		if lm.Backend != ls.Backend {
			return l.mismatchf("layer %q was saved with the %s backend, this run uses %s", fqn, lm.Backend, ls.Backend)
		}
		metas := metasOf(ls)
		if len(metas) != len(lm.Metas) {
			return l.mismatchf("layer %q has %d scaling states, the checkpoint %d", fqn, len(metas), len(lm.Metas))
		}
		for _, tensor := range sortedKeys(metas) {
			j, err := l.scalingState(fqn, tensor, metas[tensor], lm.Metas[tensor])
			if err != nil {
				return err
			}
			to.metaJobs = append(to.metaJobs, j)
		}
	}
	return nil
}

// scalingState reads and checks one tensor's delayed-scaling state, to
// be committed.
func (l *loader) scalingState(fqn, tensor string, m *fp8.Meta, ms *metaState) (metaJob, error) {
	if ms == nil {
		return metaJob{}, l.mismatchf("layer %q: no %s scaling state", fqn, tensor)
	}
	if ms.Format != m.Format.String() {
		return metaJob{}, l.mismatchf("layer %q %s was cast to %s, this run casts to %v (fp8_format differs)", fqn, tensor, ms.Format, m.Format)
	}
	if ms.Steps < 0 || ms.NonFinite < 0 || ms.Overflows < 0 {
		return metaJob{}, l.corruptf("layer %q %s: negative counters", fqn, tensor)
	}
	// The recipe's scaling settings must be the ones it was saved with: a
	// changed margin, interval, algorithm or power-of-two rule would
	// silently change the run.
	for _, d := range []struct {
		field      string
		saved, now any
	}{{"margin", ms.Margin, m.Margin}, {"interval", ms.Interval, m.Interval}, {"amax_compute_algo", ms.Algo, m.Algo.String()}, {"power-of-two scales", ms.Pow2, m.Pow2}} {
		if d.saved != d.now {
			return metaJob{}, l.mismatchf("layer %q %s was saved with %s %v, this run uses %v; resume with the recipe it was saved with", fqn, tensor, d.field, d.saved, d.now)
		}
	}
	p := "fp8/" + fqn + "/" + tensor + "/"
	j := metaJob{m: m, ms: ms}
	var err error
	if j.scale, err = l.f32(p+"scale", []int{1}); err != nil {
		return metaJob{}, err
	}
	if j.inv, err = l.f32(p+"scale_inv", []int{1}); err != nil {
		return metaJob{}, err
	}
	if j.hist, err = l.f32(p+"amax_history", []int{len(m.History)}); err != nil {
		return metaJob{}, err
	}
	// Scales are finite and positive, the inverse the reciprocal;
	// histories hold amaxes (≥ 0, or the inf and NaN the spec keeps
	// counting).
	var sc, inv [1]float32
	decode(sc[:], j.scale)
	decode(inv[:], j.inv)
	if !(sc[0] > 0) || math.IsInf(float64(sc[0]), 0) || !(inv[0] > 0) || math.IsInf(float64(inv[0]), 0) || inv[0] != 1/sc[0] {
		return metaJob{}, l.corruptf("layer %q %s: scale %v and scale_inv %v are not a finite positive pair", fqn, tensor, sc[0], inv[0])
	}
	hist := make([]float32, len(m.History))
	decode(hist, j.hist)
	for i, a := range hist {
		if a < 0 {
			return metaJob{}, l.corruptf("layer %q %s: amax_history[%d] is %v, an amax is never negative", fqn, tensor, i, a)
		}
	}
	return j, nil
}

// generators stages the named generator states the caller asks for.
func (l *loader) generators() error {
	l.rng = map[string][]byte{}
	for _, name := range sortedKeys(l.s.RNG) {
		if _, ok := l.st.Tensor("rng/" + name); !ok {
			return l.mismatchf("generator state %q is missing", name)
		}
	}
	for _, tn := range l.st.Names() {
		name, ok := strings.CutPrefix(tn, "rng/")
		if !ok {
			continue
		}
		t, _ := l.st.Tensor(tn)
		if t.DType() != safetensors.U8 {
			return l.corruptf("tensor %q is %v, want U8", tn, t.DType())
		}
		l.rng[name] = append([]byte(nil), t.Data()...)
	}
	return nil
}

// commit writes every staged value into the state.
func (l *loader) commit() {
	s := l.s
	for _, j := range l.jobs {
		decode(j.dst, j.src)
	}
	for _, j := range l.metaJobs {
		var v [1]float32
		decode(v[:], j.scale)
		j.m.Scale = v[0]
		decode(v[:], j.inv)
		j.m.ScaleInv = v[0]
		decode(j.m.History, j.hist)
		j.m.Steps, j.m.NonFinite, j.m.Overflows = j.ms.Steps, j.ms.NonFinite, j.ms.Overflows
	}
	for _, j := range l.rawJobs {
		copy(j.dst, j.src)
	}
	if s.Optimizer != nil {
		s.Optimizer.SetSteps(l.optSteps)
		if o, ok := s.Optimizer.(StateLoader); ok {
			o.StateLoaded()
		}
	}
	s.Saved = l.meta
	if s.RNG == nil && len(l.rng) > 0 {
		s.RNG = make(map[string][]byte, len(l.rng))
	}
	for name, b := range l.rng {
		s.RNG[name] = b
	}
	s.Step = l.step
	s.Unverified = l.meta[crcKey] == ""
}

func decode(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// verifySums checks every tensor against the CRC-32C the file records for
// it. A file saved before checksums existed has none and loads
// unverified (State.Unverified).
func verifySums(path string, st safetensors.SafeTensors, meta map[string]string) error {
	raw, ok := meta[crcKey]
	if !ok {
		return nil
	}
	var sums map[string]uint32
	if err := json.Unmarshal([]byte(raw), &sums); err != nil {
		return corruptErr(path, "metadata %s is not valid: %w", crcKey, err)
	}
	names := st.Names()
	if len(names) != len(sums) {
		return corruptErr(path, "%d tensors but %d checksums", len(names), len(sums))
	}
	sort.Strings(names)
	for _, name := range names {
		t, _ := st.Tensor(name)
		want, ok := sums[name]
		if !ok {
			return corruptErr(path, "tensor %q has no checksum", name)
		}
		if got := crc32.Checksum(t.Data(), castagnoli); got != want {
			return corruptErr(path, "tensor %q fails its CRC-32C check (%08x, saved %08x): the file is corrupt", name, got, want)
		}
	}
	return nil
}

// firstNonFinite returns the index of the first non-finite float32 of little-endian data, or
// -1.
func firstNonFinite(data []byte) int {
	for i := 0; i+4 <= len(data); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return i / 4
		}
	}
	return -1
}

// checkExtent compares the file's size with the end of its last tensor,
// as its header records them, so that a short file is called truncated
// and a long one has trailing data, each with the offset.
func checkExtent(path string, buf []byte) error {
	n := binary.LittleEndian.Uint64(buf)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(buf[8:8+n], &header); err != nil {
		return corruptErr(path, "the header at offset 8 is not JSON: %w", err)
	}
	var end uint64
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var t struct {
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || len(t.Offsets) != 2 {
			return corruptErr(path, "header entry %q has no data offsets", name)
		}
		end = max(end, t.Offsets[1])
	}
	data := uint64(len(buf)) - 8 - n
	switch {
	case data < end:
		return corruptErr(path, "truncated: the tensors end at offset %d, the file at %d", 8+n+end, len(buf))
	case data > end:
		return corruptErr(path, "trailing data: %d byte(s) after the last tensor (offset %d)", data-end, 8+n+end)
	}
	return nil
}
