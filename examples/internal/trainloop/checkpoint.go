package trainloop

import (
	"encoding"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
)

// RNG is a random source or data position a checkpoint keeps (a
// *rand.PCG, a data loader).
type RNG interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Checkpoint saves and restores one run: parameters and FP8 state in
// Store, the optimizer, the program's step, the RNG states by name, and
// Meta (which a resume must match).
type Checkpoint struct {
	// Name is the file name without its extension ("mnist-fp8").
	Name  string
	Store *graph.Store
	Opt   optim.Stateful
	Prog  *graph.Program
	RNG   map[string]RNG
	Meta  map[string]string
	// Notes receives notices (a file saved without checksums).
	Notes io.Writer
}

// Path returns the checkpoint's file in dir.
func (c *Checkpoint) Path(dir string) string { return filepath.Join(dir, c.Name+".safetensors") }

// Save writes the checkpoint into dir (made if missing), atomically.
func (c *Checkpoint) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-save: %w", err)
	}
	rng := make(map[string][]byte, len(c.RNG))
	for k, r := range c.RNG {
		b, err := r.MarshalBinary()
		if err != nil {
			return fmt.Errorf("-save: %s: %w", k, err)
		}
		rng[k] = b
	}
	return checkpoint.Save(c.Path(dir), &checkpoint.State{Store: c.Store, Optimizer: c.Opt, Step: c.Prog.Step(), RNG: rng, Meta: c.Meta})
}

// Resume loads the checkpoint in dir and returns the step to continue
// from.
func (c *Checkpoint) Resume(dir string) (int, error) {
	rng := make(map[string][]byte, len(c.RNG))
	for k := range c.RNG {
		rng[k] = nil
	}
	st := &checkpoint.State{Store: c.Store, Optimizer: c.Opt, RNG: rng, Meta: c.Meta}
	if err := checkpoint.Load(c.Path(dir), st); err != nil {
		return 0, fmt.Errorf("-resume: %w", err)
	}
	if st.Unverified && c.Notes != nil {
		fmt.Fprintf(c.Notes, "note: %s was saved without checksums; its data could not be verified\n", c.Path(dir))
	}
	for k, r := range c.RNG {
		if err := r.UnmarshalBinary(st.RNG[k]); err != nil {
			return 0, fmt.Errorf("-resume: %s: %s: %w", c.Path(dir), k, err)
		}
	}
	c.Prog.SetStep(st.Step)
	return int(st.Step), nil
}
