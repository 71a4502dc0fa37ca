package passes

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// FuseReport counts what Fuse did.
type FuseReport struct {
	// Epilogues counts chains applied by the GEMM they start from;
	// Chains the chains fused into one FusedElementwise node; Nodes the
	// elementwise nodes they replaced.
	Epilogues, Chains, Nodes int
}

// String says how many elementwise nodes were fused, and into what.
func (r FuseReport) String() string {
	return fmt.Sprintf("%d elementwise node(s) fused: %d into GEMM epilogues, %d chain(s) into single loops", r.Nodes, r.Epilogues, r.Chains)
}

// Fuse is the fusion pass: it finds chains of elementwise ops (bias and
// residual adds, scales, activations and their gradients, dropout masks,
// gradient sums; see ops.Chainable) in which each value is read by
// nothing but the next op, and replaces each chain by one node — the
// GEMM the chain starts from (a float32 Linear or MatMul, a ScaledMatMul,
// a BF16MatMul; see ops.FusedGEMM), applying the chain to each block of
// C as it is finished, or one FusedElementwise
// node that runs the chain over a block of rows at a time. outputs are
// every program output to be compiled from g (training and evaluation):
// a value one of them needs stays materialised. The fused programs give
// the same results as the unfused ones, bit for bit (graph.Options.Unfused
// runs the fused nodes step by step for comparison).
//
// Fuse runs last in Prepare (after FP8 conversion and any further
// passes); the rules are (the first applied before the chains are
// found):
//
//	switch-sink:        Switch(GEMM, GEMM′) → op  ⇒  Switch(GEMM → op, GEMM′ → op)
//	gemm-epilogue:      Linear|MatMul|ScaledMatMul|BF16MatMul → chain  ⇒  Linear+chain, …
//	elementwise-chain:  x → op → op [→ op …]    ⇒  FusedElementwise(x, operands…)
func Fuse(g *graph.Graph, outputs ...*graph.Node) (FuseReport, error) {
	var rep FuseReport
	done, err := sinkSwitches(g, outputs)
	if err != nil {
		return rep, err
	}
	chains := findChains(outputs)
	isTail := func(epilogue bool) func(*graph.Node) bool {
		return func(n *graph.Node) bool {
			c, ok := chains[n]
			return ok && ops.FusedGEMM(c.Head) == epilogue
		}
	}
	build := func(root *graph.Node, _ Match) (*graph.Node, error) {
		c := chains[root]
		rep.Nodes += len(c.Nodes)
		n, err := ops.Fuse(c, true)
		if err == nil {
			done = append(done, fusion{tail: root, fused: n})
		}
		return n, err
	}
	var nodes []*graph.Node
	for n := range chains {
		nodes = append(nodes, n)
	}
	nodes = graph.Live(graph.Options{Training: true}, nodes...) // graph order
	counts, err := Rewrite(g, nodes,
		Rule{Name: "gemm-epilogue", Pattern: &Pattern{Where: isTail(true)}, Apply: build},
		Rule{Name: "elementwise-chain", Pattern: &Pattern{Where: isTail(false)}, Apply: build},
	)
	rep.Epilogues, rep.Chains = counts["gemm-epilogue"], counts["elementwise-chain"]
	prev, _ := graph.Annotation(g, fusedKey)
	graph.Annotate(g, fusedKey, append(prev, done...))
	return rep, err
}

// fusedKey is the graph annotation under which Fuse records what it
// replaced, for Unfuse.
var fusedKey = graph.NewKey[[]fusion]("passes.fused")

// fusion is one replacement Fuse made: the chain's last node and the
// fused node that took its place.
type fusion struct{ tail, fused *graph.Node }

// Unfuse undoes Fuse: every consumer of a fused node reads the chain's
// last node again (the chain's nodes stayed in the graph), and returns
// how many fusions it undid. Prepare and ConvertModel call it first, so
// that the conversions see the layers' own nodes; Prepare fuses again
// at its end.
func Unfuse(g *graph.Graph) (int, error) {
	done, _ := graph.Annotation(g, fusedKey)
	for i := len(done) - 1; i >= 0; i-- {
		if err := g.ReplaceUses(done[i].fused, done[i].tail); err != nil {
			return len(done) - 1 - i, err
		}
	}
	graph.Annotate(g, fusedKey, nil)
	return len(done), nil
}

// sinkSwitches moves elementwise ops out of the way of GEMM epilogues:
// where a Switch chooses between two branches (the training and the
// evaluation path autocast gives a layer, a BF16MatMul or ScaledMatMul
// and its float32 Linear) and its one reader is an op a chain can take,
// that op is applied to each branch and a Switch of the two results takes
// its place, so that each GEMM finds the op as its own single reader. It
// repeats along the readers while they can be chained, and returns what
// it replaced (each op and the Switch now standing for it) for Unfuse.
// Values are unchanged: each program runs the same op on the branch it
// takes.
func sinkSwitches(g *graph.Graph, outputs []*graph.Node) ([]fusion, error) {
	if len(outputs) == 0 {
		return nil, nil
	}
	live, readers, isOutput := liveReaders(outputs)
	var done []fusion
	feeds := func(x *graph.Node) bool {
		return (ops.FusedGEMM(x) || x.IsSwitch()) && len(readers[x]) == 1
	}
	for _, s := range live {
		if !s.IsSwitch() || !feeds(s.Input(0)) && !feeds(s.Input(1)) {
			continue
		}
		for !isOutput[s] && len(readers[s]) == 1 {
			a, b := s.Input(0), s.Input(1)
			c := readers[s][0]
			vi := -1
			for i := 0; i < c.NumInputs(); i++ {
				if c.Input(i) == s {
					vi = i
					break
				}
			}
			if _, ok := ops.Chainable(c, vi); vi < 0 || !ok {
				break
			}
			branch := func(x *graph.Node) *graph.Node {
				in := make([]*graph.Node, c.NumInputs())
				for i := range in {
					in[i] = c.Input(i)
				}
				in[vi] = x
				return g.Apply(c.Op(), c.Name(), in...)
			}
			ca, cb := branch(a), branch(b)
			s2 := g.Apply(s.Op(), s.Name(), ca, cb)
			if err := g.Err(); err != nil {
				return done, err
			}
			if err := g.ReplaceUses(c, s2); err != nil {
				return done, err
			}
			done = append(done, fusion{tail: c, fused: s2})
			readers[a], readers[b], readers[s2] = []*graph.Node{ca}, []*graph.Node{cb}, readers[c]
			isOutput[s2] = isOutput[c]
			s = s2
		}
	}
	return done, nil
}

// liveReaders returns the nodes either program of outputs runs (training
// and evaluation), in graph order, who reads each, and which are outputs.
func liveReaders(outputs []*graph.Node) ([]*graph.Node, map[*graph.Node][]*graph.Node, map[*graph.Node]bool) {
	seen := map[*graph.Node]bool{}
	var live []*graph.Node
	for _, opts := range []graph.Options{{Training: true}, {}} {
		for _, n := range graph.Live(opts, outputs...) {
			if !seen[n] {
				seen[n] = true
				live = append(live, n)
			}
		}
	}
	g := outputs[0].Graph()
	isOutput := map[*graph.Node]bool{}
	for _, o := range outputs {
		isOutput[g.Resolve(o)] = true
	}
	return live, g.Consumers(live...), isOutput
}

// findChains returns the fusable chains of the graph of outputs, keyed by
// their last node.
func findChains(outputs []*graph.Node) map[*graph.Node]ops.Chain {
	chains := map[*graph.Node]ops.Chain{}
	if len(outputs) == 0 {
		return chains
	}
	live, readers, isOutput := liveReaders(outputs)
	// reads returns which input of c reads n (−1: none).
	reads := func(c, n *graph.Node) int {
		for i := 0; i < c.NumInputs(); i++ {
			if c.Input(i) == n {
				return i
			}
		}
		return -1
	}
	// next returns the single reader of n that can extend a chain through
	// it, and the input it reads n as.
	next := func(n *graph.Node) (*graph.Node, int, bool) {
		if isOutput[n] || len(readers[n]) != 1 {
			return nil, 0, false
		}
		c := readers[n][0]
		vi := reads(c, n)
		if _, ok := ops.Chainable(c, vi); vi < 0 || !ok {
			return nil, 0, false
		}
		return c, vi, true
	}
	// steps counts the chain's steps (reshapes take none).
	steps := func(c ops.Chain) int {
		s := 0
		for i, n := range c.Nodes {
			k, _ := ops.Chainable(n, c.Value[i])
			s += k
		}
		return s
	}
	// extend follows single readers from the chain's last node.
	member := map[*graph.Node]bool{}
	extend := func(c ops.Chain) ops.Chain {
		cur := c.Head
		if len(c.Nodes) > 0 {
			cur = c.Nodes[len(c.Nodes)-1]
		}
		for {
			n, vi, ok := next(cur)
			if !ok || member[n] {
				return c
			}
			c.Nodes, c.Value = append(c.Nodes, n), append(c.Value, vi)
			cur = n
		}
	}
	keep := func(c ops.Chain) {
		for _, n := range c.Nodes {
			member[n] = true
		}
		chains[c.Nodes[len(c.Nodes)-1]] = c
	}
	// GEMM epilogues first: a GEMM read by one chainable op takes even a
	// one-step chain, and keeps it from starting a chain of its own.
	for _, head := range live {
		if ops.FusedGEMM(head) {
			if c := extend(ops.Chain{Head: head}); steps(c) > 0 {
				keep(c)
			}
		}
	}
	// Then chains of two or more steps from any float32 value (read by
	// others too, if need be: it is materialised anyway), one per reader
	// that starts one.
	for _, head := range live {
		if head.DType() != graph.Float32 || member[head] && chains[head].Head == nil {
			continue
		}
		for _, r := range readers[head] {
			if member[r] {
				continue
			}
			vi := reads(r, head)
			if _, ok := ops.Chainable(r, vi); !ok {
				continue
			}
			if c := extend(ops.Chain{Head: head, Nodes: []*graph.Node{r}, Value: []int{vi}}); steps(c) >= 2 {
				keep(c)
			}
		}
	}
	return chains
}
