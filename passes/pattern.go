// Package passes is Octet's FP8 graph compiler: rewrites of a joint
// forward+backward graph that turn eligible linear layers into FP8
// operations carrying their scaling state (ConvertLinear), fuse a
// LayerNorm into the FP8 cast that follows it (ConvertLN), give training
// and evaluation programs their FP8 behaviour (Autowrap), convert a model
// either way (ConvertModel, HasFP8Layers), and do all of it in one call
// the way Accelerate's prepare does (Prepare).
//
// A rewrite is a small table of rules, each a pattern over nodes and a
// function that builds the replacement (Rewrite); passes run in a named
// pipeline that verifies the graph between stages and can dump it before
// and after each one (Pipeline).
package passes

import (
	"slices"

	"github.com/octetml/octet/graph"
)

// Pattern matches a node and, optionally, its inputs.
type Pattern struct {
	// Kind is the op kind to match (ops.KindLinear); the zero Kind
	// matches any op.
	Kind graph.Kind
	// Roles lists the roles that match; empty matches any role.
	Roles []graph.Role
	// Bind names the matched node in the Match.
	Bind string
	// Inputs, if not nil, must match the node's inputs one for one.
	Inputs []*Pattern
	// Commutative lets two Inputs match the node's two inputs in either
	// order (an Add or a Mul), so one pattern stands for both.
	Commutative bool
	// Where is an extra condition.
	Where func(*graph.Node) bool
}

// Match maps the Bind names of a pattern to the nodes they matched.
type Match map[string]*graph.Node

// Match reports whether n matches p, and what the pattern bound.
func (p *Pattern) Match(n *graph.Node) (Match, bool) {
	m := Match{}
	if !p.match(n, m) {
		return nil, false
	}
	return m, true
}

// match reports whether n matches p, filling m (which it leaves as it was
// when n does not match).
func (p *Pattern) match(n *graph.Node, m Match) bool {
	if n == nil {
		return false
	}
	if !p.Kind.IsZero() && !n.Is(p.Kind) {
		return false
	}
	if len(p.Roles) > 0 && !slices.Contains(p.Roles, n.Role()) {
		return false
	}
	if p.Inputs != nil {
		if len(p.Inputs) != n.NumInputs() {
			return false
		}
		if !p.matchInputs(n, m, false) && !(p.Commutative && len(p.Inputs) == 2 && p.matchInputs(n, m, true)) {
			return false
		}
	}
	if p.Where != nil && !p.Where(n) {
		return false
	}
	if p.Bind != "" {
		m[p.Bind] = n
	}
	return true
}

// matchInputs matches the input patterns against n's inputs, swapped when
// swap is set, keeping m unchanged on failure.
func (p *Pattern) matchInputs(n *graph.Node, m Match, swap bool) bool {
	try := Match{}
	for k, v := range m {
		try[k] = v
	}
	for i, ip := range p.Inputs {
		j := i
		if swap {
			j = 1 - i
		}
		if ip != nil && !ip.match(n.Input(j), try) {
			return false
		}
	}
	for k, v := range try {
		m[k] = v
	}
	return true
}

// Rule is one rewrite: nodes matching Pattern are handed to Apply with
// the nodes the pattern bound, and Apply returns the node that replaces
// the match's root in every consumer, or nil to leave it (for example
// when the layer is not eligible).
type Rule struct {
	Name    string
	Pattern *Pattern
	Apply   func(root *graph.Node, m Match) (*graph.Node, error)
	// Keep, if set, names consumers that go on reading the root, and the
	// root is rewired rather than replaced: handles to it are not
	// forwarded (graph.Graph.Rewire). Sharding uses it: a parameter stays
	// itself for the gathers that read it.
	Keep func(consumer *graph.Node) bool
}

// Rewrite applies rules in order, each to every node of nodes that
// matches it, and returns how many replacements each rule made. Replaced
// nodes stay in the graph (unused), so a rewrite can be undone by
// pointing consumers back at them.
func Rewrite(g *graph.Graph, nodes []*graph.Node, rules ...Rule) (map[string]int, error) {
	counts := map[string]int{}
	for _, r := range rules {
		for _, n := range nodes {
			m := Match{}
			if !r.Pattern.match(n, m) {
				continue
			}
			repl, err := r.Apply(n, m)
			if err != nil {
				return counts, err
			}
			if repl == nil || repl == n {
				continue
			}
			if r.Keep != nil {
				err = g.Rewire(n, repl, r.Keep)
			} else {
				err = g.ReplaceUses(n, repl)
			}
			if err != nil {
				return counts, err
			}
			counts[r.Name]++
		}
	}
	return counts, g.Err()
}
