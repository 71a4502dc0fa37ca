package graph

import "fmt"

// Role tags the GEMMs of a linear layer so that compiler passes can find
// the three products of one layer: the forward product (Fprop), the
// product that yields the input gradient (Dgrad) and the one that yields
// the weight gradient (Wgrad).
type Role uint8

// The roles a node can carry.
const (
	RoleNone Role = iota
	Fprop
	Dgrad
	Wgrad
)

// String returns "fprop", "dgrad", "wgrad" or "" for RoleNone.
func (r Role) String() string {
	switch r {
	case Fprop:
		return "fprop"
	case Dgrad:
		return "dgrad"
	case Wgrad:
		return "wgrad"
	}
	return ""
}

// Node is one value in a graph: the output of an op applied to its input
// nodes. A node is immutable once built except through the rewrite
// methods used by compiler passes.
type Node struct {
	g      *Graph
	id     int
	op     Op
	inputs []*Node
	shape  Shape
	dtype  DType
	name   string
	role   Role
	fwd    *Node
}

// ID returns the node's index in creation order, unique within its graph.
func (n *Node) ID() int { return n.id }

// Graph returns the graph the node belongs to.
func (n *Node) Graph() *Graph { return n.g }

// Op returns the operation that computes the node.
func (n *Node) Op() Op { return n.op }

// NumInputs returns the number of input nodes.
func (n *Node) NumInputs() int { return len(n.inputs) }

// Input returns the i-th input node.
func (n *Node) Input(i int) *Node { return n.inputs[i] }

// Inputs returns a copy of the node's inputs.
func (n *Node) Inputs() []*Node { return append([]*Node(nil), n.inputs...) }

// Shape returns the shape of the node's value. Callers must not modify it.
func (n *Node) Shape() Shape { return n.shape }

// DType returns the element type of the node's value.
func (n *Node) DType() DType { return n.dtype }

// Name returns the node's unique, fully qualified name (for example
// "mlp.fc1" or "mlp.fc1.dgrad").
func (n *Node) Name() string { return n.name }

// Role returns the GEMM role of the node, RoleNone for most nodes.
func (n *Node) Role() Role { return n.role }

// Forward returns the forward (Fprop) node a Dgrad or Wgrad node belongs
// to, or nil.
func (n *Node) Forward() *Node { return n.fwd }

// SetRole tags the node with a GEMM role and, for backward GEMMs, links
// it to the forward node of the same layer.
func (n *Node) SetRole(r Role, fwd *Node) {
	n.role = r
	n.fwd = fwd
}

// IsInput reports whether the node is a graph input fed at run time.
func (n *Node) IsInput() bool { _, ok := n.op.(inputOp); return ok }

// IsParam reports whether the node is a parameter held in a Store.
func (n *Node) IsParam() bool { _, ok := n.op.(paramOp); return ok }

// String returns a short description such as `%3 "mlp.fc1" Linear [128 512] float32`.
func (n *Node) String() string {
	if n == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%%%d %q %s %v %v", n.id, n.name, n.op.Type(), n.shape, n.dtype)
}

// valid reports whether the node was built without error.
func (n *Node) valid() bool { return n != nil && n.dtype != Invalid }
