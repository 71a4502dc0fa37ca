// Package ops holds Octet's operators. Each op has a shape rule (Infer),
// a kernel (Bind) and, where it is differentiable, a gradient rule that
// builds the backward nodes (Grad). One op family per file, its test
// beside it.
//
// The functions here build nodes; like graph.Graph.Apply they never panic
// on bad input: a shape or dtype error is recorded in the graph (see
// graph.Graph.Err) with the node's name and the shapes involved.
package ops

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/graph"
)

// apply adds op applied to inputs to the graph of the first non-nil
// input. Unless name is given, the node is named after the scope of its
// first input ("mlp.fc1/relu").
func apply(op graph.Op, name string, inputs ...*graph.Node) *graph.Node {
	var g *graph.Graph
	for _, in := range inputs {
		if in != nil {
			g = in.Graph()
			break
		}
	}
	if g == nil {
		return nil
	}
	if name == "" {
		name = scopeOf(inputs[0]) + strings.ToLower(op.Type())
	}
	return g.Apply(op, name, inputs...)
}

// scopedName returns n's name followed by "/" and suffix ("" for nil n,
// which apply refuses).
func scopedName(n *graph.Node, suffix string) string {
	if n == nil {
		return ""
	}
	return n.Name() + "/" + suffix
}

// scopeOf returns the prefix under which ops on n are named: n's name up
// to its last '/', or n's name, followed by '/'.
func scopeOf(n *graph.Node) string {
	if n == nil {
		return ""
	}
	name := n.Name()
	if i := strings.IndexByte(name, '#'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i+1]
	}
	return name + "/"
}

func wantDType(in []*graph.Node, dts ...graph.DType) error {
	for i, want := range dts {
		if in[i].DType() != want {
			return fmt.Errorf("input %d %q is %v, want %v", i, in[i].Name(), in[i].DType(), want)
		}
	}
	return nil
}

func wantInputs(in []*graph.Node, n int) error {
	if len(in) != n {
		return fmt.Errorf("got %d inputs, want %d", len(in), n)
	}
	return nil
}

// float32In checks that there are n float32 inputs.
func float32In(in []*graph.Node, n int) error {
	if err := wantInputs(in, n); err != nil {
		return err
	}
	for i := range in {
		if err := wantDType(in[i:i+1], graph.Float32); err != nil {
			return fmt.Errorf("input %d %q is %v, want float32", i, in[i].Name(), in[i].DType())
		}
	}
	return nil
}

// normAxis maps a possibly negative axis to [0, rank).
func normAxis(axis, rank int) (int, error) {
	if axis < 0 {
		axis += rank
	}
	if axis < 0 || axis >= rank {
		return 0, fmt.Errorf("axis %d out of range for rank %d", axis, rank)
	}
	return axis, nil
}
