// Package graph is Octet's intermediate representation: a computation
// graph of nodes, reverse-mode autodiff that appends the backward graph
// (Grad), and a compiler (Compile) that schedules the nodes, plans their
// buffers and binds kernels into a Program that runs a step without
// allocating.
//
// Building a graph never panics on bad input. An op applied to inputs of
// the wrong shape or dtype records an error in the graph that names the
// node and the shapes involved, and returns a node marked invalid; later
// ops on invalid nodes add nothing. Graph.Err reports what went wrong, and
// Grad and Compile refuse a graph with errors.
package graph

import (
	"errors"
	"fmt"
	"strconv"
)

// Graph holds the nodes of a model: its inputs, parameters and the ops
// between them, forward and backward.
type Graph struct {
	nodes   []*Node
	names   map[string]*Node
	errs    []error
	attrs   map[any]any     // annotations by typed key (Annotate)
	forward map[*Node]*Node // replaced node → its replacement
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{names: map[string]*Node{}, attrs: map[any]any{}, forward: map[*Node]*Node{}}
}

// Resolve returns the node that stands for n now: n itself, or, if a
// rewrite replaced n (ReplaceUses), its replacement, followed to the end.
// Compile, Live and the dumps resolve the output handles they are given,
// so a user's handle on, say, a gradient keeps working after a compiler
// pass swapped the GEMM that computes it.
func (g *Graph) Resolve(n *Node) *Node {
	for i := 0; n != nil && i <= len(g.nodes); i++ {
		next, ok := g.forward[n]
		if !ok {
			return n
		}
		n = next
	}
	return n
}

func (g *Graph) resolveAll(ns []*Node) []*Node {
	out := make([]*Node, len(ns))
	for i, n := range ns {
		out[i] = g.Resolve(n)
	}
	return out
}

// Nodes returns the graph's nodes in creation order.
func (g *Graph) Nodes() []*Node { return append([]*Node(nil), g.nodes...) }

// Len returns the number of nodes.
func (g *Graph) Len() int { return len(g.nodes) }

// Lookup returns the node with the given name, or nil.
func (g *Graph) Lookup(name string) *Node { return g.names[name] }

// Err returns the errors recorded while building the graph, joined, or nil.
func (g *Graph) Err() error { return errors.Join(g.errs...) }

// Fail records err in the graph. Ops use it for errors found while
// building gradients or rewriting.
func (g *Graph) Fail(err error) {
	if err != nil {
		g.errs = append(g.errs, err)
	}
}

// Failed records err like Fail and returns a node that stands for the
// result that could not be built: it belongs to g but is not in it, and
// ops applied to it build nothing and record no error of their own, so
// err is the only one a caller sees. A builder (an nn layer's Forward)
// returns it when its input is wrong.
func (g *Graph) Failed(err error) *Node {
	g.Fail(err)
	return &Node{g: g, op: failedOp{}, name: "failed"}
}

// failedOp is the op of the node Failed returns.
type failedOp struct{}

func (failedOp) Type() string { return "Failed" }
func (failedOp) Infer([]*Node) (Shape, DType, error) {
	return nil, Invalid, errors.New("a failed node has no value")
}
func (failedOp) Bind(*Binding) (Kernel, error) { return nil, errors.New("a failed node has no value") }

// Input adds a node whose value is fed to the program at run time.
func (g *Graph) Input(name string, dt DType, shape ...int) *Node {
	return g.leaf(inputOp{dt: dt, shape: Shape(shape).Clone()}, name)
}

// Param adds a float32 parameter whose value lives in a Store under the
// node's name.
func (g *Graph) Param(name string, shape ...int) *Node {
	return g.leaf(paramOp{shape: Shape(shape).Clone()}, name)
}

// Const adds a float32 node of the given shape filled with v.
func (g *Graph) Const(name string, v float32, shape ...int) *Node {
	return g.leaf(fillOp{v: v, shape: Shape(shape).Clone()}, name)
}

func (g *Graph) leaf(op Op, name string) *Node {
	if name == "" {
		g.Fail(fmt.Errorf("graph: %s needs a name", op.Type()))
		return &Node{g: g, op: op, name: "?"}
	}
	if g.names[name] != nil {
		g.Fail(fmt.Errorf("graph: %s %q: name already used by %v", op.Type(), name, g.names[name]))
		return &Node{g: g, op: op, name: name}
	}
	return g.Apply(op, name)
}

// Apply adds a node computing op on inputs. If name is empty one is made
// from the op type; a name already in use gets a "#k" suffix. If the
// inputs do not suit the op, the error is recorded (see Err) and an invalid
// node is returned.
func (g *Graph) Apply(op Op, name string, inputs ...*Node) *Node {
	if name == "" {
		name = op.Type()
	}
	n := &Node{g: g, op: op, inputs: inputs, name: name}
	for i, in := range inputs {
		if in == nil {
			g.Fail(fmt.Errorf("graph: node %q (%s): input %d is nil", name, op.Type(), i))
			return n
		}
		if in.g != g {
			g.Fail(fmt.Errorf("graph: node %q (%s): input %d %q belongs to another graph", name, op.Type(), i, in.name))
			return n
		}
		if !in.valid() {
			return n // the error was recorded when the input was built
		}
	}
	shape, dt, err := op.Infer(inputs)
	if err == nil && !dt.Valid() {
		err = fmt.Errorf("unknown dtype %v", dt)
	}
	if err == nil {
		err = shape.Validate()
	}
	if err != nil {
		g.Fail(fmt.Errorf("graph: node %q (%s): %w", name, op.Type(), err))
		return n
	}
	if g.names[name] != nil {
		base := name
		for k := 1; g.names[name] != nil; k++ {
			name = base + "#" + strconv.Itoa(k)
		}
	}
	n.name, n.shape, n.dtype, n.id = name, shape, dt, len(g.nodes)
	g.nodes = append(g.nodes, n)
	g.names[name] = n
	return n
}

// Rename gives n the name name, which no other node of the graph may
// have; passes use it to hand a replaced node's name to its replacement.
func (g *Graph) Rename(n *Node, name string) error {
	if n == nil || n.g != g {
		return fmt.Errorf("graph: rename: the node is not in this graph")
	}
	if other := g.names[name]; other != nil && other != n {
		return fmt.Errorf("graph: rename %q to %q: another node has that name", n.name, name)
	}
	delete(g.names, n.name)
	n.name = name
	g.names[name] = n
	return nil
}

// ReplaceUses makes every consumer of old read new instead (compiler
// passes use it). The shapes and dtypes must match.
func (g *Graph) ReplaceUses(old, new *Node) error {
	if !old.shape.Equal(new.shape) || old.dtype != new.dtype {
		return fmt.Errorf("graph: replace %q %v %v with %q %v %v: shape or dtype differs",
			old.name, old.shape, old.dtype, new.name, new.shape, new.dtype)
	}
	for _, n := range g.nodes {
		if n == new {
			continue
		}
		for i, in := range n.inputs {
			if in == old {
				n.inputs[i] = new
			}
		}
	}
	delete(g.forward, new)
	if old != new {
		g.forward[old] = new
	}
	return nil
}

// Rewire points every consumer of old except new (and those keep
// accepts, if keep is not nil) at new. Unlike ReplaceUses it forwards no
// handle: old stays what it is for its other readers (a parameter read
// through a gather, say).
func (g *Graph) Rewire(old, new *Node, keep func(consumer *Node) bool) error {
	if !old.shape.Equal(new.shape) || old.dtype != new.dtype {
		return fmt.Errorf("graph: rewire %q %v %v to %q %v %v: shape or dtype differs",
			old.name, old.shape, old.dtype, new.name, new.shape, new.dtype)
	}
	for _, n := range g.nodes {
		if n == new || (keep != nil && keep(n)) {
			continue
		}
		for i, in := range n.inputs {
			if in == old {
				n.inputs[i] = new
			}
		}
	}
	return nil
}

// Consumers indexes, for the nodes given (all of g's with none), the
// nodes that read each one, in node order.
func (g *Graph) Consumers(nodes ...*Node) map[*Node][]*Node {
	if len(nodes) == 0 {
		nodes = g.nodes
	}
	out := make(map[*Node][]*Node, len(nodes))
	for _, n := range nodes {
		for _, in := range n.inputs {
			if l := out[in]; len(l) == 0 || l[len(l)-1] != n {
				out[in] = append(l, n)
			}
		}
	}
	return out
}

// Live returns the nodes a program compiled with opts for outputs would
// run, inputs before consumers: the outputs' ancestors, following only
// the taken branch of each Switch.
func Live(opts Options, outputs ...*Node) []*Node {
	if len(outputs) == 0 {
		return nil
	}
	return live(outputs[0].g.resolveAll(outputs), &opts)
}

// ancestors returns the nodes that outputs depend on, inputs before
// consumers (a topological order), each once, following every branch.
func ancestors(outputs []*Node) []*Node { return live(outputs, nil) }

// live is ancestors that, given options, follows only the taken branch
// of each Switch.
func live(outputs []*Node, opts *Options) []*Node {
	const (
		unseen = iota
		open
		done
	)
	state := map[*Node]uint8{}
	var order []*Node
	type frame struct {
		n *Node
		i int
	}
	for _, o := range outputs {
		if state[o] != unseen {
			continue
		}
		stack := []frame{{o, 0}}
		state[o] = open
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.i < len(f.n.inputs) {
				in := f.n.inputs[f.i]
				f.i++
				if opts != nil && !takes(f.n, f.i-1, opts) {
					continue
				}
				if state[in] == unseen {
					state[in] = open
					stack = append(stack, frame{in, 0})
				}
				continue
			}
			state[f.n] = done
			order = append(order, f.n)
			stack = stack[:len(stack)-1]
		}
	}
	return order
}
