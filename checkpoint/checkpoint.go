// Package checkpoint saves and restores a training run exactly:
// parameters, optimizer state, every FP8 scaling state (scales, amax
// histories and their counters), the step counter and named generator
// states, with a JSON metadata header (model config, recipe, versions).
//
// Files use the safetensors layout (an 8-byte header length, a JSON
// header, then little-endian tensor data), so other tools can read the
// weights: parameters are stored as "param/<name>". Writes go to a
// temporary file that is synced and renamed over the target, so a crash
// mid-write leaves the previous checkpoint intact. Loading checks every
// name, shape, dtype and the recipe before touching the model, and
// refuses truncated or corrupted files with an error naming the tensor or
// byte offset: a model is loaded whole or not at all. Every tensor
// carries a CRC-32C (Castagnoli) in the metadata, so flipped bytes in the
// data are refused; parameters must be finite and FP8 scales finite,
// positive and each other's inverse. Files saved before the checksums
// load with State.Unverified set.
package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"sort"
	"strconv"

	"github.com/nlpodyssey/safetensors"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/atomicfile"
	"github.com/octetml/octet/optim"
)

// Errors that Load returns (wrapped, with the file and the tensor or
// layer), for errors.Is.
var (
	// ErrOptimizerState: the file holds optimizer state and the State
	// has no Optimizer to restore it into (set SkipOptimizer to drop it).
	ErrOptimizerState = errors.New("the checkpoint holds optimizer state and no optimizer was given to restore it")
	// ErrNotPrepared: the file holds FP8 scaling state and the store has
	// none: Load was called before passes.Prepare created it, or the
	// store belongs to a float32 run.
	ErrNotPrepared = errors.New("call Load after passes.Prepare, with the recipe the checkpoint was saved with")
	// ErrMismatch: the file was saved from another model, recipe or
	// optimizer than the one loading it.
	ErrMismatch = errors.New("the checkpoint does not fit this run")
	// ErrCorrupt: the file is truncated, corrupted or not a checkpoint.
	ErrCorrupt = errors.New("the checkpoint file is corrupt")
)

// Format identifies the checkpoint layout in the metadata.
const Format = "octet-checkpoint/1"

// State is what a checkpoint holds, and, for Load, what it must fit.
type State struct {
	// Store holds the parameters and the FP8 layer states.
	Store *graph.Store
	// Optimizer, if set, has its buffers and step count saved.
	Optimizer optim.Stateful
	// Step is the training step (the number of completed steps).
	Step int64
	// RNG holds named generator states (for example a data loader's).
	// Load fills in every generator state the file holds (making the map
	// when it is nil); a name the caller lists that the file lacks is an
	// error.
	RNG map[string][]byte
	// SkipOptimizer lets Load read a file that holds optimizer state into
	// a State without an Optimizer (for evaluation or fine-tuning from a
	// training checkpoint). Without it such a load fails with
	// ErrOptimizerState, since the run would continue with fresh moments.
	SkipOptimizer bool
	// Meta is free-form metadata (model config, recipe, …). On Load, the
	// keys "model" and "recipe", when set, must equal the file's.
	Meta map[string]string
	// Slices, when set, says that parameters of Store are slices of
	// larger tensors (one rank's shards): their global shape and offset.
	// Save records them, so that LoadShards can re-cut a checkpoint of
	// one file per rank for another layout. The optimizer buffers of a
	// sliced parameter hold the same slice.
	Slices map[string]Slice
	// Saved is set by Load to the file's metadata: Meta as saved, and
	// Octet's own keys ("octet.step", "octet.format", ...).
	Saved map[string]string
	// Unverified is set by Load for a file saved before checkpoints
	// carried per-tensor checksums (its data could not be checked).
	Unverified bool
}

// RawStateful is implemented by optimizers with encoded (non-float32)
// state, such as MS-AMP's low-bit Adam: the buffers are saved as bytes
// ("optim_raw/<name>") and loaded in place.
type RawStateful interface {
	RawStateBuffers() map[string][]byte
}

// StateLoader is implemented by optimizers that must act after a load has
// written into their buffers (for example to take scales back).
type StateLoader interface {
	StateLoaded()
}

// metaState is the integer part of one fp8.Meta, kept in the header.
type metaState struct {
	Format    string `json:"format"`
	Steps     int    `json:"steps"`
	NonFinite int    `json:"nonfinite"`
	Overflows int    `json:"overflows"`
	Margin    int    `json:"margin"`
	Algo      string `json:"algo"`
	Interval  int    `json:"interval"`
	Pow2      bool   `json:"pow2"`
}

// layerMeta is the header record of one FP8 layer.
type layerMeta struct {
	Backend fp8.Backend           `json:"backend"`
	Metas   map[string]*metaState `json:"metas"`
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// fp8Layers returns the layer states in the store (fp8.LayerState, under
// fp8.LayerStateKey of their layer) by layer name.
func fp8Layers(store *graph.Store) map[string]*fp8.LayerState {
	out := map[string]*fp8.LayerState{}
	for _, k := range store.StateKeys() {
		if st, ok := store.State(k).(*fp8.LayerState); ok && k == fp8.LayerStateKey(st.FQN) {
			out[st.FQN] = st
		}
	}
	return out
}

// metasOf returns a layer's delayed-scaling states by tensor role name.
func metasOf(st *fp8.LayerState) map[string]*fp8.Meta {
	out := map[string]*fp8.Meta{}
	for _, r := range fp8.Roles {
		if m := st.Meta(r); m != nil {
			out[r.String()] = m
		}
	}
	return out
}

// build returns the tensors and metadata of s.
func build(s *State) (map[string]safetensors.TensorView, map[string]string, error) {
	if s == nil || s.Store == nil {
		return nil, nil, fmt.Errorf("checkpoint: save: no state (or no store) to save")
	}
	views := map[string]safetensors.TensorView{}
	sums := map[string]uint32{}
	add := func(name string, dt safetensors.DType, shape []int, data []byte) error {
		sums[name] = crc32.Checksum(data, castagnoli)
		sh := make([]uint64, len(shape))
		for i, d := range shape {
			sh[i] = uint64(d)
		}
		v, err := safetensors.NewTensorView(dt, sh, data)
		if err != nil {
			return fmt.Errorf("checkpoint: tensor %q: %w", name, err)
		}
		views[name] = v
		return nil
	}
	for _, name := range s.Store.Names() {
		sh, _ := s.Store.Shape(name)
		if err := add("param/"+name, safetensors.F32, sh, f32Bytes(s.Store.Float32(name))); err != nil {
			return nil, nil, err
		}
	}
	meta := map[string]string{}
	for k, v := range s.Meta {
		meta[k] = v
	}
	if len(s.Slices) > 0 {
		if err := checkSlices(s); err != nil {
			return nil, nil, err
		}
		j, err := json.Marshal(s.Slices)
		if err != nil {
			return nil, nil, err
		}
		meta[slicesKey] = string(j)
	}
	meta["octet.format"] = Format
	meta["octet.go"] = runtime.Version()
	meta["octet.step"] = strconv.FormatInt(s.Step, 10)
	if s.Optimizer != nil {
		meta["octet.optimizer.steps"] = strconv.Itoa(s.Optimizer.Steps())
		for name, buf := range s.Optimizer.StateBuffers() {
			if err := add("optim/"+name, safetensors.F32, []int{len(buf)}, f32Bytes(buf)); err != nil {
				return nil, nil, err
			}
		}
		if raw, ok := s.Optimizer.(RawStateful); ok {
			for name, buf := range raw.RawStateBuffers() {
				if err := add("optim_raw/"+name, safetensors.U8, []int{len(buf)}, append([]byte(nil), buf...)); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	layers := map[string]*layerMeta{}
	for fqn, st := range fp8Layers(s.Store) {
		lm := &layerMeta{Backend: st.Backend, Metas: map[string]*metaState{}}
		for tensor, m := range metasOf(st) {
			p := "fp8/" + fqn + "/" + tensor + "/"
			if err := add(p+"scale", safetensors.F32, []int{1}, f32Bytes([]float32{m.Scale})); err != nil {
				return nil, nil, err
			}
			if err := add(p+"scale_inv", safetensors.F32, []int{1}, f32Bytes([]float32{m.ScaleInv})); err != nil {
				return nil, nil, err
			}
			if err := add(p+"amax_history", safetensors.F32, []int{len(m.History)}, f32Bytes(m.History)); err != nil {
				return nil, nil, err
			}
			lm.Metas[tensor] = &metaState{Format: m.Format.String(), Steps: m.Steps, NonFinite: m.NonFinite, Overflows: m.Overflows,
				Margin: m.Margin, Algo: m.Algo.String(), Interval: m.Interval, Pow2: m.Pow2}
		}
		layers[fqn] = lm
	}
	j, err := json.Marshal(layers)
	if err != nil {
		return nil, nil, err
	}
	meta["octet.fp8"] = string(j)
	names := make([]string, 0, len(s.RNG))
	for name := range s.RNG {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := add("rng/"+name, safetensors.U8, []int{len(s.RNG[name])}, s.RNG[name]); err != nil {
			return nil, nil, err
		}
	}
	// One CRC-32C per tensor, so that flipped bytes in tensor data are
	// found on load.
	sj, err := json.Marshal(sums)
	if err != nil {
		return nil, nil, err
	}
	meta[crcKey] = string(sj)
	return views, meta, nil
}

// castagnoli is the CRC-32C table the per-tensor checksums use.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcKey is the metadata key of the per-tensor checksums (a JSON object
// from tensor name to CRC-32C).
const crcKey = "octet.crc32c"

// Save writes s to path atomically: to a temporary file in the same
// directory, synced, then renamed over path.
func Save(path string, s *State) error { return save(path, s, nil) }

// save is Save with a hook that may wrap the file's writer (tests use it
// to simulate a crash mid-write).
func save(path string, s *State, wrap func(io.Writer) io.Writer) (err error) {
	views, meta, err := build(s)
	if err != nil {
		return err
	}
	err = atomicfile.Write(path, func(w io.Writer) error {
		if wrap != nil {
			w = wrap(w)
		}
		if err := safetensors.SerializeToWriter(views, meta, w); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
