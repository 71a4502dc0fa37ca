package passes

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// ExpertShard is the part of one expert weight [experts, out, in] an
// expert-parallel rank holds: experts [First, First+N) of Param, the
// weight of the grouped GEMM Layer (whose experts' FP8 states are named
// Layer.0, Layer.1, …).
type ExpertShard struct {
	Param    *graph.Node
	Layer    string
	First, N int
}

// ShardExperts rewrites every Mixture-of-Experts layer of the forward
// graph g (Dispatch → grouped expert GEMMs and the row-wise ops between
// them → Combine, as nn.MoE builds it) for expert parallelism over ep:
// this rank dispatches its tokens (EPDispatch, and EPSlice of the expert
// choices and weights) to the experts' ranks (EPToOwners), runs its own experts (GroupedLinearExperts on its slice
// of each expert weight, the receive buffer as large as one process's
// rows), sends the rows back (EPFromOwners), combines its tokens and
// gathers every rank's (EPGather). It returns each expert weight's
// slice this rank holds. Run it before autodiff (Config.ForwardPasses,
// via ExpertParallelPass): the backward follows the collectives.
func ShardExperts(g *graph.Graph, ep *ops.ExpertParallel) ([]ExpertShard, error) {
	var shards []ExpertShard
	seen := map[*graph.Node]bool{}
	for _, comb := range g.Nodes() {
		if !comb.Is(ops.KindCombine) {
			continue
		}
		s, err := shardLayer(g, comb, ep, seen)
		if err != nil {
			return nil, fmt.Errorf("passes: expert parallelism: MoE layer at %q: %w", comb.Name(), err)
		}
		shards = append(shards, s...)
	}
	return shards, g.Err()
}

// shardLayer rewrites the layer whose Combine node is comb.
func shardLayer(g *graph.Graph, comb *graph.Node, ep *ops.ExpertParallel, seen map[*graph.Node]bool) ([]ExpertShard, error) {
	ys, idx, w := comb.Input(0), comb.Input(1), comb.Input(2)
	// Walk back from the experts' output to the Dispatch: the nodes in
	// between, and the layer's dispatch and group sizes.
	var dispatch, counts *graph.Node
	var chain []*graph.Node
	onPath := map[*graph.Node]bool{}
	var walk func(n *graph.Node) error
	walk = func(n *graph.Node) error {
		if onPath[n] {
			return nil
		}
		switch {
		case n.Is(ops.KindDispatch):
			if dispatch != nil && dispatch != n {
				return fmt.Errorf("two dispatches (%q, %q)", dispatch.Name(), n.Name())
			}
			if n.Input(1) != idx {
				return fmt.Errorf("dispatch %q routes by %q, the combine by %q", n.Name(), n.Input(1).Name(), idx.Name())
			}
			dispatch = n
			return nil
		case n.Is(ops.KindGroupedLinear):
			c := n.Input(1)
			if !c.Is(ops.KindExpertCounts) || c.Input(0) != idx {
				return fmt.Errorf("grouped GEMM %q's group sizes %q are not the ExpertCounts of %q", n.Name(), c.Name(), idx.Name())
			}
			counts = c
			if !n.Input(2).IsParam() {
				return fmt.Errorf("grouped GEMM %q's weights %q are not a parameter", n.Name(), n.Input(2).Name())
			}
			if seen[n.Input(2)] {
				return fmt.Errorf("expert weights %q are shared by two layers", n.Input(2).Name())
			}
			if err := walk(n.Input(0)); err != nil {
				return err
			}
		default:
			// A row-wise op between the GEMMs (SwiGLU): every input
			// must come from the dispatch.
			if n.NumInputs() == 0 {
				return fmt.Errorf("%q (%s) between the dispatch and the combine does not come from the dispatch", n.Name(), n.Op().Type())
			}
			for i := 0; i < n.NumInputs(); i++ {
				if err := walk(n.Input(i)); err != nil {
					return err
				}
			}
		}
		onPath[n] = true
		chain = append(chain, n)
		return nil
	}
	if err := walk(ys); err != nil {
		return nil, err
	}
	if dispatch == nil || counts == nil {
		return nil, fmt.Errorf("no Dispatch and grouped expert GEMM before the combine")
	}
	experts := counts.Shape()[0]
	tokens, k := idx.Shape()[0], idx.Shape()[1]
	x2 := dispatch.Input(0)
	if ep.Comm.Size() > experts {
		return nil, fmt.Errorf("%d experts cannot be shared by %d expert-parallel ranks", experts, ep.Comm.Size())
	}
	if ep.Comm.Size() > tokens {
		return nil, fmt.Errorf("%d tokens leave some of the %d expert-parallel ranks none", tokens, ep.Comm.Size())
	}
	first, n := ep.LocalExperts(experts)
	_, nTok := ep.LocalTokens(tokens)
	// The dispatch reads the layer's rows and choices as Dispatch did, so
	// that the rows' gradient sums its parts in one process's order.
	xs := ops.EPDispatch(x2, idx, experts, ep)
	idxq, wq := ops.EPSlice(idx, ep), ops.EPSlice(w, ep)
	plan := ops.EPPlan(ops.ExpertCounts(idxq, experts), ep)
	local := ops.EPLocalCounts(plan, ep)
	recv := ops.EPToOwners(xs, plan, dispatch.Shape()[0], ep)
	// Rebuild the chain on this rank's experts and rows.
	var shards []ExpertShard
	built := map[*graph.Node]*graph.Node{dispatch: recv}
	for _, old := range chain {
		if old == dispatch {
			continue
		}
		if old.Is(ops.KindGroupedLinear) {
			wt := old.Input(2)
			seen[wt] = true
			name := old.Name()
			shards = append(shards, ExpertShard{Param: wt, Layer: name, First: first, N: n})
			if err := g.Rename(old, name+"/replaced by expert parallelism"); err != nil {
				return nil, err
			}
			// The replaced node stays in the graph, dead: no longer a
			// layer's forward GEMM, the FP8 passes leave it alone.
			old.SetRole(graph.RoleNone, nil)
			built[old] = ops.GroupedLinearExperts(name, built[old.Input(0)], local, ops.Slice(wt, 0, first, first+n), first)
			continue
		}
		ins := make([]*graph.Node, old.NumInputs())
		for i := range ins {
			ins[i] = built[old.Input(i)]
		}
		built[old] = g.Apply(old.Op(), old.Name()+"/ep", ins...)
	}
	ysq := ops.EPFromOwners(built[ys], plan, nTok*k, ep)
	y := ops.EPGather(ops.Combine(ysq, idxq, wq, experts), tokens, ep)
	if err := g.Err(); err != nil {
		return nil, err
	}
	return shards, g.ReplaceUses(comb, y)
}

// ExpertParallelPass is ShardExperts as a stage of Prepare's forward
// passes (Config.ForwardPasses); *out receives the expert weights'
// slices this rank holds.
func ExpertParallelPass(ep *ops.ExpertParallel, out *[]ExpertShard) Pass {
	return Pass{
		Name: "ShardExperts",
		Run: func(g *graph.Graph) (string, error) {
			s, err := ShardExperts(g, ep)
			*out = s
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d expert weights sharded over %d ranks", len(s), ep.Comm.Size()), nil
		},
	}
}
