package graph

import (
	"fmt"
	"slices"
)

// Store holds parameter values by name, outside any graph, so that a
// training program and an evaluation program compiled from the same graph
// share them. Values are float32 slices with a shape (the package dense
// adapts them to gorgonia tensors).
type Store struct {
	vals  map[string]*entry
	order []string
	state map[string]any
}

type entry struct {
	shape Shape
	data  []float32
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{vals: map[string]*entry{}, state: map[string]any{}} }

// Names returns the parameter names in the order they were first set.
func (s *Store) Names() []string { return append([]string(nil), s.order...) }

// Shape returns the shape of the value stored under name.
func (s *Store) Shape(name string) (Shape, bool) {
	e, ok := s.vals[name]
	if !ok {
		return nil, false
	}
	return e.shape, true
}

// Float32 returns the backing slice of the value stored under name, or nil.
func (s *Store) Float32(name string) []float32 {
	if e, ok := s.vals[name]; ok {
		return e.data
	}
	return nil
}

// Bind stores data under name without copying it: the store, the programs
// compiled against it and checkpoints read and write data itself (for
// example a rank's shard of a parameter). A name already stored is an
// error.
func (s *Store) Bind(name string, data []float32, shape ...int) error {
	sh := Shape(shape)
	if sh.Numel() != len(data) {
		return fmt.Errorf("graph: store %q: %d values do not fill shape %v", name, len(data), sh)
	}
	if _, ok := s.vals[name]; ok {
		return fmt.Errorf("graph: store %q: already stored", name)
	}
	s.vals[name] = &entry{shape: sh.Clone(), data: data}
	s.order = append(s.order, name)
	return nil
}

// SetFloat32 stores data with the given shape under name. If a value of
// the same shape is already stored, data is copied into it, so that
// compiled programs (which hold the stored buffer) see the new value.
func (s *Store) SetFloat32(name string, data []float32, shape ...int) error {
	sh := Shape(shape)
	if sh.Numel() != len(data) {
		return fmt.Errorf("graph: store %q: %d values do not fill shape %v", name, len(data), sh)
	}
	if old, ok := s.vals[name]; ok {
		if old.shape.Numel() != sh.Numel() || (len(sh) > 0 && len(old.shape) > 0 && !old.shape.Equal(sh)) {
			return fmt.Errorf("graph: store %q: shape %v differs from stored %v", name, sh, old.shape)
		}
		copy(old.data, data)
		return nil
	}
	s.vals[name] = &entry{shape: sh.Clone(), data: append([]float32(nil), data...)}
	s.order = append(s.order, name)
	return nil
}

// State returns auxiliary per-layer state stored under key (for example
// an FP8 layer's scaling state), or nil.
func (s *Store) State(key string) any { return s.state[key] }

// SetState stores auxiliary state under key.
func (s *Store) SetState(key string, v any) { s.state[key] = v }

// StateKeys returns the keys of the auxiliary state, sorted (the same
// order in every store that holds the same keys: data-parallel ranks
// walk their states in step).
func (s *Store) StateKeys() []string {
	keys := make([]string, 0, len(s.state))
	for k := range s.state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Init gives every parameter of g that has no value yet one computed by
// fill, which receives the parameter node and a zeroed slice to fill.
func (s *Store) Init(g *Graph, fill func(n *Node, data []float32)) error {
	for _, n := range g.nodes {
		if !n.IsParam() {
			continue
		}
		if _, ok := s.vals[n.name]; ok {
			continue
		}
		data := make([]float32, n.shape.Numel())
		if fill != nil {
			fill(n, data)
		}
		if err := s.SetFloat32(n.name, data, n.shape...); err != nil {
			return err
		}
	}
	return nil
}
