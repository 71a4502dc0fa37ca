package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/octetml/octet/internal/errkind"
)

// Slice says which part of a larger tensor a store's buffer holds: the
// tensor's global shape, and the flat (row-major) offset at which the
// buffer's elements start. A sharded run (FSDP) saves one file per rank,
// each holding its slice of every parameter and of the optimizer state
// that goes with it; LoadShards re-cuts them for any other layout.
type Slice struct {
	Shape  []int `json:"shape"`
	Offset int   `json:"offset"`
}

// slicesKey is the metadata key of a file's slices (a JSON object from
// parameter name to Slice).
const slicesKey = "octet.slices"

// numel is the number of elements of shape.
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// checkSlices refuses slices that name no parameter of the store or do
// not fit their global shape.
func checkSlices(s *State) error {
	for _, name := range sortedKeys(s.Slices) {
		sl := s.Slices[name]
		buf := s.Store.Float32(name)
		if buf == nil {
			return fmt.Errorf("checkpoint: slice of %q: the store has no such parameter", name)
		}
		for _, d := range sl.Shape {
			if d < 0 {
				return fmt.Errorf("checkpoint: slice of %q: global shape %v", name, sl.Shape)
			}
		}
		if sl.Offset < 0 || sl.Offset+len(buf) > numel(sl.Shape) {
			return fmt.Errorf("checkpoint: slice of %q: %d elements at offset %d do not fit its global shape %v", name, len(buf), sl.Offset, sl.Shape)
		}
	}
	return nil
}

// ReadMeta returns the metadata of the safetensors file at path, reading
// its header only (not the tensors, and without checking them: Load and
// LoadShards do).
func ReadMeta(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, corruptErr(path, "too short for a header length at offset 0")
	}
	size := binary.LittleEndian.Uint64(n[:])
	if fi, err := f.Stat(); err == nil && size > uint64(fi.Size())-8 {
		return nil, corruptErr(path, "header length %d at offset 0 runs past the end of the file (%d bytes)", size, fi.Size())
	}
	hdr := make([]byte, size)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, corruptErr(path, "header: %v", err)
	}
	var h struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, corruptErr(path, "the header at offset 8 is not JSON: %v", err)
	}
	if h.Meta == nil {
		h.Meta = map[string]string{}
	}
	return h.Meta, nil
}

// piece is one file's part of a tensor: the file's loader, the tensor's
// data and where in the global tensor it starts.
type piece struct {
	l      *loader
	data   []byte
	offset int
}

// LoadShards reads a checkpoint saved as one file per rank (paths, in
// rank order) into s, whatever layout s has: each parameter of s.Store
// (the slice s.Slices gives, or the whole parameter) and each optimizer
// buffer that goes with it ("<kind>/<parameter>", as long as the
// parameter's buffer) is assembled from the files' slices; files without
// slices hold whole tensors (data-parallel replicas). Each FP8 layer's
// scaling state comes from the first file that has it (every rank holds
// the same when the ranks reduce their amaxes; an expert-parallel rank
// its experts'; a State with Slices may hold fewer layers than the
// files). The optimizer's other buffers, its encoded state and the
// generator states come from the first file. Every file is checked as Load
// checks one, and they must be of one step; a parameter some element of
// which is in no file (a shard missing) is refused naming it. Nothing is
// written into s unless all of it loads.
func LoadShards(paths []string, s *State) (err error) {
	if len(paths) == 0 {
		return fmt.Errorf("checkpoint: load: no files")
	}
	if s == nil || s.Store == nil {
		return fmt.Errorf("checkpoint: load %s: no state (or no store) to load into", paths[0])
	}
	if err := checkSlices(s); err != nil {
		return err
	}
	ls := make([]*loader, len(paths))
	slices := make([]map[string]Slice, len(paths))
	for i, path := range paths {
		path := path
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = corruptErr(path, "corrupt file: %v", r)
				}
			}()
			var buf []byte
			if buf, err = readFile(path); err == nil {
				ls[i], err = open(path, buf, s)
			}
		}()
		if err != nil {
			return err
		}
		if raw, ok := ls[i].meta[slicesKey]; ok {
			if err := json.Unmarshal([]byte(raw), &slices[i]); err != nil {
				return corruptErr(path, "metadata %s is not valid: %v", slicesKey, err)
			}
		}
		if ls[i].step != ls[0].step {
			return errkind.With(fmt.Errorf("checkpoint: %s is of step %d and %s of step %d: a save was interrupted, or the files are of different runs", paths[0], ls[0].step, path, ls[i].step), ErrMismatch)
		}
	}
	first := ls[0]
	var jobs []copyJob
	// assemble stages the part of tensor (a parameter or its optimizer
	// buffer, named name in the files) that dst holds: elements [off,
	// off+len(dst)) of a tensor of global shape shape.
	// Optimizer buffers (param false) are compared by their element count:
	// they are saved flat.
	assemble := func(name, param string, dst []float32, shape []int, off int, isParam bool) error {
		flat := func(sh []int) []int {
			if isParam {
				return sh
			}
			return []int{numel(sh)}
		}
		var pieces []piece
		for i, l := range ls {
			t, ok := l.st.Tensor(name)
			if !ok {
				return l.mismatchf("tensor %q is missing", name)
			}
			if t.DType().String() != "F32" {
				return l.mismatchf("tensor %q is %v, want F32", name, t.DType())
			}
			p := piece{l: l, data: t.Data()}
			gshape := shapeOf(t.Shape())
			if sl, ok := slices[i][param]; ok {
				p.offset, gshape = sl.Offset, sl.Shape
			}
			if !equalInts(flat(gshape), flat(shape)) {
				return l.mismatchf("tensor %q is part of a tensor of shape %v, the model wants %v", name, gshape, shape)
			}
			if p.offset < 0 || p.offset+len(p.data)/4 > numel(shape) {
				return l.corruptf("tensor %q: %d elements at offset %d overrun its shape %v", name, len(p.data)/4, p.offset, shape)
			}
			pieces = append(pieces, p)
		}
		// Sort by offset; each element of [off, off+len(dst)) is taken
		// from the first piece that holds it.
		sort.SliceStable(pieces, func(i, j int) bool { return pieces[i].offset < pieces[j].offset })
		pos, end := off, off+len(dst)
		for _, p := range pieces {
			lo, hi := max(pos, p.offset), min(end, p.offset+len(p.data)/4)
			if lo > pos || hi <= lo {
				continue
			}
			src := p.data[4*(lo-p.offset) : 4*(hi-p.offset)]
			if isParam {
				if i := firstNonFinite(src); i >= 0 {
					return p.l.corruptf("parameter %q holds a non-finite value at element %d", param, lo-p.offset+i)
				}
			}
			jobs = append(jobs, copyJob{dst[lo-off : hi-off], src})
			pos = hi
		}
		if pos < end {
			return errkind.With(fmt.Errorf("checkpoint: tensor %q: elements %d to %d of %d are in none of the %d files (%s, …): a shard is missing", name, pos, end, numel(shape), len(paths), paths[0]), ErrMismatch)
		}
		return nil
	}
	lengths := map[string]int{}
	for _, name := range s.Store.Names() {
		dst := s.Store.Float32(name)
		lengths[name] = len(dst)
		shape, _ := s.Store.Shape(name)
		off := 0
		if sl, ok := s.Slices[name]; ok {
			shape, off = sl.Shape, sl.Offset
		}
		if err := assemble("param/"+name, name, dst, shape, off, true); err != nil {
			return err
		}
	}
	if err := first.optimizerSteps(); err != nil {
		return err
	}
	if s.Optimizer != nil {
		bufs := s.Optimizer.StateBuffers()
		for _, name := range sortedKeys(bufs) {
			buf := bufs[name]
			_, param, _ := strings.Cut(name, "/")
			if n, ok := lengths[param]; !ok || n != len(buf) {
				// A buffer of its own shape (MS-AMP's scales): every file
				// holds it whole; the first file's is taken.
				data, err := first.f32("optim/"+name, []int{len(buf)})
				if err != nil {
					return err
				}
				jobs = append(jobs, copyJob{buf, data})
				continue
			}
			shape, off := []int{len(buf)}, 0
			if sl, ok := s.Slices[param]; ok {
				shape, off = sl.Shape, sl.Offset
			} else if sh, ok := s.Store.Shape(param); ok {
				shape = sh
			}
			if err := assemble("optim/"+name, param, buf, shape, off, false); err != nil {
				return err
			}
		}
	}
	// Each FP8 layer's state from the first file that has it (an
	// expert-parallel rank's file holds its experts' only).
	src := map[string]layerSource{}
	for _, l := range ls {
		layers, err := l.fp8Layers()
		if err != nil {
			return err
		}
		for fqn, lm := range layers {
			if _, ok := src[fqn]; !ok {
				src[fqn] = layerSource{l, lm}
			}
		}
	}
	if err := stageScaling(first, src, len(s.Slices) > 0); err != nil {
		return err
	}
	for _, stage := range []func() error{first.rawOptimizer, first.generators} {
		if err := stage(); err != nil {
			return err
		}
	}
	first.jobs = jobs
	first.commit()
	return nil
}

// readFile reads a checkpoint file whole (Load, LoadShards, Inspect),
// refusing one larger than maxFileSize.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("checkpoint: %s: %d bytes is more than this reader takes", path, fi.Size())
	}
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return buf, nil
}

func shapeOf(sh []uint64) []int {
	out := make([]int, len(sh))
	for i, d := range sh {
		out[i] = int(d)
	}
	return out
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
