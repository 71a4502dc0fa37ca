// Package dense adapts Octet's compiled programs and parameter stores to
// gorgonia's *tensor.Dense, for code that already speaks gorgonia
// tensors. The graph package itself works on plain slices
// (Program.FeedFloat32, Program.Float32, Store.Float32) and imports no
// tensor library; the tensors made here are views of the program's or
// the store's buffers, made once per call (keep them off the hot path).
package dense

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"gorgonia.org/tensor"
)

// Feed copies t into the buffer of the program's input node n. The shape
// must match n's (a one-element tensor feeds a scalar input) and the
// dtype n's: float32, int32, or uint8 for FP8 codes.
func Feed(p *graph.Program, n *graph.Node, t *tensor.Dense) error {
	if t == nil {
		return fmt.Errorf("dense: feed %v: nil tensor", n)
	}
	if n == nil {
		return fmt.Errorf("dense: feed: nil node")
	}
	want := n.Shape()
	got := graph.Shape(t.Shape())
	if !got.Equal(want) && !(len(want) == 0 && t.Shape().TotalSize() == 1) {
		return fmt.Errorf("dense: feed %q: shape %v, want %v", n.Name(), got, want)
	}
	switch d := t.Data().(type) {
	case float32:
		return p.FeedFloat32(n, []float32{d})
	case []float32:
		return p.FeedFloat32(n, d)
	case int32:
		return p.FeedInt32(n, []int32{d})
	case []int32:
		return p.FeedInt32(n, d)
	case []uint8:
		return p.FeedUint8(n, d)
	}
	return fmt.Errorf("dense: feed %q: tensor of %v, want %v", n.Name(), t.Dtype(), n.DType())
}

// Output returns the value of an output (or input) node of p as a tensor
// viewing the program's buffer: it changes with every Run. A scalar comes
// back with shape [1].
func Output(p *graph.Program, n *graph.Node) (*tensor.Dense, error) {
	v, err := p.Value(n)
	if err != nil {
		return nil, fmt.Errorf("dense: %w", err)
	}
	shape := v.Shape.Clone()
	if len(shape) == 0 {
		shape = graph.Shape{1}
	}
	switch {
	case v.F32 != nil:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v.F32)), nil
	case v.I32 != nil:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v.I32)), nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(v.U8)), nil
}

// Param returns the parameter stored under name as a tensor sharing the
// store's memory (a scalar with shape [1]).
func Param(s *graph.Store, name string) (*tensor.Dense, bool) {
	shape, ok := s.Shape(name)
	if !ok {
		return nil, false
	}
	if len(shape) == 0 {
		shape = graph.Shape{1}
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(s.Float32(name))), true
}

// SetParam stores a float32 tensor under name (see graph.Store.SetFloat32:
// a value of the same shape already stored is overwritten in place).
func SetParam(s *graph.Store, name string, t *tensor.Dense) error {
	if t == nil {
		return fmt.Errorf("dense: store %q: nil tensor", name)
	}
	switch d := t.Data().(type) {
	case []float32:
		return s.SetFloat32(name, d, t.Shape()...)
	case float32:
		return s.SetFloat32(name, []float32{d}, t.Shape()...)
	}
	return fmt.Errorf("dense: store %q: tensor of %v, want float32", name, t.Dtype())
}
