package graph

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

func dumpNodes(g *Graph, outputs []*Node) []*Node {
	if len(outputs) == 0 {
		return g.nodes
	}
	return ancestors(g.resolveAll(outputs))
}

func describe(n *Node) (op string, args string) {
	op = n.op.Type()
	if a, ok := n.op.(Attributer); ok {
		if s := a.Attrs(); s != "" {
			op += "{" + s + "}"
		}
	}
	ids := make([]string, len(n.inputs))
	for i, in := range n.inputs {
		ids[i] = fmt.Sprintf("%%%d", in.id)
	}
	return op, strings.Join(ids, ", ")
}

// WriteText writes one line per node: id, op with attributes, inputs,
// shape, dtype, role and name. With outputs, only the nodes they depend
// on are written, in schedule order.
func (g *Graph) WriteText(w io.Writer, outputs ...*Node) error {
	bw := bufio.NewWriter(w)
	for _, n := range dumpNodes(g, outputs) {
		op, args := describe(n)
		role := ""
		if n.role != RoleNone {
			role = " role=" + n.role.String()
			if n.fwd != nil {
				role += fmt.Sprintf("(of %%%d)", n.fwd.id)
			}
		}
		fmt.Fprintf(bw, "%%%-4d = %s(%s) %v %v%s  %q\n", n.id, op, args, n.shape, n.dtype, role, n.name)
	}
	return bw.Flush()
}

// String returns the text dump of the whole graph.
func (g *Graph) String() string {
	var b strings.Builder
	_ = g.WriteText(&b)
	return b.String()
}

// WriteDOT writes the graph (or the part outputs depend on) in Graphviz
// DOT. FP8 values are drawn orange, role-tagged GEMMs with a bold border.
func (g *Graph) WriteDOT(w io.Writer, outputs ...*Node) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph octet {")
	fmt.Fprintln(bw, "  rankdir=TB;")
	fmt.Fprintln(bw, `  node [shape=box, fontname="Helvetica", fontsize=10];`)
	for _, n := range dumpNodes(g, outputs) {
		op, _ := describe(n)
		label := fmt.Sprintf("%s\\n%s\\n%v %v", dotEscape(n.name), dotEscape(op), n.shape, n.dtype)
		attrs := ""
		switch {
		case n.IsInput() || n.IsParam():
			attrs = ", shape=ellipse"
		case n.dtype.IsQuantized():
			attrs = ", style=filled, fillcolor=orange"
		}
		if n.role != RoleNone {
			label += "\\nrole=" + n.role.String()
			attrs += ", penwidth=2"
		}
		fmt.Fprintf(bw, "  n%d [label=\"%s\"%s];\n", n.id, label, attrs)
		for _, in := range n.inputs {
			fmt.Fprintf(bw, "  n%d -> n%d;\n", in.id, n.id)
		}
		if n.fwd != nil {
			fmt.Fprintf(bw, "  n%d -> n%d [style=dotted, arrowhead=none];\n", n.fwd.id, n.id)
		}
	}
	fmt.Fprintln(bw, "}")
	return bw.Flush()
}

func dotEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}
