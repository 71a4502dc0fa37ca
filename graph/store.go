package graph

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Store holds parameter values by name, outside any graph, so that a
// training program and an evaluation program compiled from the same graph
// share them. Values are float32 *tensor.Dense.
type Store struct {
	vals  map[string]*entry
	order []string
	state map[string]any
}

type entry struct {
	shape Shape
	data  []float32
	t     *tensor.Dense
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{vals: map[string]*entry{}, state: map[string]any{}} }

// Names returns the parameter names in the order they were first set.
func (s *Store) Names() []string { return append([]string(nil), s.order...) }

// Get returns the value stored under name, a tensor that shares the
// store's memory (a scalar is returned with shape [1]).
func (s *Store) Get(name string) (*tensor.Dense, bool) {
	e, ok := s.vals[name]
	if !ok {
		return nil, false
	}
	return e.t, true
}

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
	e := &entry{shape: sh.Clone(), data: data}
	ts := e.shape
	if len(ts) == 0 {
		ts = Shape{1}
	}
	if len(data) > 0 {
		e.t = tensor.New(tensor.WithShape(ts...), tensor.WithBacking(data))
	}
	s.vals[name] = e
	s.order = append(s.order, name)
	return nil
}

// denseFloat32 returns t's values, whether t is a scalar or not.
func denseFloat32(t *tensor.Dense) ([]float32, bool) {
	switch d := t.Data().(type) {
	case []float32:
		return d, true
	case float32:
		return []float32{d}, true
	}
	return nil, false
}

// Set stores a float32 tensor under name. If a value of the same shape is
// already stored, t is copied into it, so that compiled programs (which
// hold the stored buffer) see the new value.
func (s *Store) Set(name string, t *tensor.Dense) error {
	if t == nil {
		return fmt.Errorf("graph: store %q: nil tensor", name)
	}
	data, ok := denseFloat32(t)
	if !ok {
		return fmt.Errorf("graph: store %q: tensor of %v, want float32", name, t.Dtype())
	}
	return s.SetFloat32(name, data, t.Shape()...)
}

// SetFloat32 stores data with the given shape under name (see Set).
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
	e := &entry{shape: sh.Clone(), data: append([]float32(nil), data...)}
	ts := e.shape
	if len(ts) == 0 {
		ts = Shape{1}
	}
	e.t = tensor.New(tensor.WithShape(ts...), tensor.WithBacking(e.data))
	s.vals[name] = e
	s.order = append(s.order, name)
	return nil
}

// State returns auxiliary per-layer state stored under key (for example
// an FP8 layer's scaling state), or nil.
func (s *Store) State(key string) any { return s.state[key] }

// SetState stores auxiliary state under key.
func (s *Store) SetState(key string, v any) { s.state[key] = v }

// StateKeys returns the keys of the auxiliary state.
func (s *Store) StateKeys() []string {
	keys := make([]string, 0, len(s.state))
	for k := range s.state {
		keys = append(keys, k)
	}
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
