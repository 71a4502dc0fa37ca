package graph

import "fmt"

// switchOp forwards one of its two inputs, chosen per program at compile
// time; the other branch is not scheduled.
type switchOp struct {
	label string
	pred  func(Options) bool
}

func (o switchOp) Type() string  { return KindSwitch.String() }
func (o switchOp) Kind() Kind    { return KindSwitch }
func (o switchOp) Attrs() string { return o.label }

func (o switchOp) Infer(in []*Node) (Shape, DType, error) {
	if len(in) != 2 {
		return nil, Invalid, fmt.Errorf("got %d inputs, want 2", len(in))
	}
	if !in[0].shape.Equal(in[1].shape) || in[0].dtype != in[1].dtype {
		return nil, Invalid, fmt.Errorf("branches differ: %q %v %v and %q %v %v",
			in[0].name, in[0].shape, in[0].dtype, in[1].name, in[1].shape, in[1].dtype)
	}
	return in[0].shape, in[0].dtype, nil
}

// AliasOf makes a Switch a view of the branch the program takes: no copy.
func (o switchOp) AliasOf(opts Options) int {
	if o.pred(opts) {
		return 0
	}
	return 1
}

// Bind is never called: a Switch is always a view of the branch it
// takes (see AliasOf), so it has no kernel of its own.
func (o switchOp) Bind(b *Binding) (Kernel, error) {
	return nil, fmt.Errorf("a Switch is a view of its taken branch and has no kernel")
}

// takes reports whether a program compiled with opts reads input i of n.
func takes(n *Node, i int, opts *Options) bool {
	s, ok := n.op.(switchOp)
	if !ok {
		return true
	}
	return s.pred(*opts) == (i == 0)
}

// Switch returns a node whose value, in a program compiled with options
// opts, is ifTrue's when pred(opts) holds and ifFalse's otherwise; the
// branch not taken is not run. label describes the choice in dumps.
// Compiler passes use it to give training and evaluation programs
// different paths through one graph.
func (g *Graph) Switch(name, label string, pred func(Options) bool, ifTrue, ifFalse *Node) *Node {
	return g.Apply(switchOp{label: label, pred: pred}, name, ifTrue, ifFalse)
}

// IsSwitch reports whether n is a Switch node.
func (n *Node) IsSwitch() bool { _, ok := n.op.(switchOp); return ok }
