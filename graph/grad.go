package graph

import "fmt"

// Grad appends to the loss's graph the nodes that compute the gradient of
// loss with respect to each of wrt, and returns them in order. The loss
// must be a float32 scalar (one element). Gradients of a node used several
// times are summed. Ops report the GEMMs of a linear layer's backward pass
// as nodes with roles Dgrad and Wgrad linked to the forward node.
func Grad(loss *Node, wrt ...*Node) ([]*Node, error) {
	if loss == nil {
		return nil, fmt.Errorf("graph: grad: loss is nil")
	}
	g := loss.g
	if err := g.Err(); err != nil {
		return nil, fmt.Errorf("graph: grad: graph has errors: %w", err)
	}
	if loss.shape.Numel() != 1 || loss.dtype != Float32 {
		return nil, fmt.Errorf("graph: grad: loss %q must be a float32 scalar, got %v %v", loss.name, loss.shape, loss.dtype)
	}
	target := map[*Node]bool{}
	for i, w := range wrt {
		if w == nil || w.g != g {
			return nil, fmt.Errorf("graph: grad: wrt[%d] is nil or from another graph", i)
		}
		if w.dtype != Float32 {
			return nil, fmt.Errorf("graph: grad: wrt %q is %v; only float32 nodes have gradients", w.name, w.dtype)
		}
		target[w] = true
	}
	order := ancestors([]*Node{loss})
	need := make(map[*Node]bool, len(order))
	for _, n := range order {
		if target[n] {
			need[n] = true
			continue
		}
		if n.dtype != Float32 {
			continue
		}
		for _, in := range n.inputs {
			if need[in] {
				need[n] = true
				break
			}
		}
	}
	for _, w := range wrt {
		if !need[w] {
			return nil, fmt.Errorf("graph: grad: loss %q does not depend on %q", loss.name, w.name)
		}
	}

	parts := map[*Node][]*Node{loss: {g.Apply(fillOp{v: 1, shape: loss.shape.Clone()}, "grad/"+loss.name)}}
	total := map[*Node]*Node{}
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if !need[n] || len(parts[n]) == 0 {
			continue
		}
		dy := AddN("grad/"+n.name+".sum", parts[n]...)
		total[n] = dy
		needIn := make([]bool, len(n.inputs))
		any := false
		for j, in := range n.inputs {
			needIn[j] = need[in]
			any = any || needIn[j]
		}
		if !any {
			continue
		}
		d, ok := n.op.(Differentiable)
		if !ok {
			return nil, fmt.Errorf("graph: grad: node %q (%s) has no gradient rule", n.name, n.op.Type())
		}
		gs := d.Grad(n, dy, needIn)
		if err := g.Err(); err != nil {
			return nil, fmt.Errorf("graph: grad of node %q (%s): %w", n.name, n.op.Type(), err)
		}
		for j, gj := range gs {
			if !needIn[j] || gj == nil {
				continue
			}
			in := n.inputs[j]
			if !gj.shape.Equal(in.shape) {
				return nil, fmt.Errorf("graph: grad of node %q (%s): gradient for input %q has shape %v, want %v",
					n.name, n.op.Type(), in.name, gj.shape, in.shape)
			}
			parts[in] = append(parts[in], gj)
		}
	}
	out := make([]*Node, len(wrt))
	for i, w := range wrt {
		out[i] = total[w]
	}
	return out, nil
}
