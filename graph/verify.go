package graph

import (
	"errors"
	"fmt"
)

// Verify checks that g is a legal graph: every input of a node belongs to
// g and was built before it is used, names are unique, and every node's
// recorded shape and dtype are what its op infers from its inputs now (a
// pass that rewires inputs must keep them consistent). Compiler passes
// run it between stages.
func Verify(g *Graph) error {
	var errs []error
	names := make(map[string]*Node, len(g.nodes))
	for _, n := range g.nodes {
		if o := names[n.name]; o != nil {
			errs = append(errs, fmt.Errorf("verify: nodes %d and %d share the name %q", o.id, n.id, n.name))
		}
		names[n.name] = n
		for i, in := range n.inputs {
			switch {
			case in == nil || in.g != g:
				errs = append(errs, fmt.Errorf("verify: node %q: input %d is nil or from another graph", n.name, i))
			case !in.valid():
				errs = append(errs, fmt.Errorf("verify: node %q: input %d %q is invalid", n.name, i, in.name))
			}
		}
		shape, dt, err := n.op.Infer(n.inputs)
		if err != nil {
			errs = append(errs, fmt.Errorf("verify: node %q (%s): %w", n.name, n.op.Type(), err))
			continue
		}
		if !shape.Equal(n.shape) || dt != n.dtype {
			errs = append(errs, fmt.Errorf("verify: node %q (%s): recorded %v %v, inputs give %v %v",
				n.name, n.op.Type(), n.shape, n.dtype, shape, dt))
		}
		if (n.role == Dgrad || n.role == Wgrad) && n.fwd == nil {
			errs = append(errs, fmt.Errorf("verify: node %q has role %v but no forward node", n.name, n.role))
		}
	}
	if len(errs) == 0 {
		if err := checkAcyclic(g); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkAcyclic(g *Graph) error {
	state := make(map[*Node]uint8, len(g.nodes))
	var visit func(n *Node) error
	visit = func(n *Node) error {
		switch state[n] {
		case 1:
			return fmt.Errorf("verify: cycle through node %q", n.name)
		case 2:
			return nil
		}
		state[n] = 1
		for _, in := range n.inputs {
			if err := visit(in); err != nil {
				return err
			}
		}
		state[n] = 2
		return nil
	}
	for _, n := range g.nodes {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}
