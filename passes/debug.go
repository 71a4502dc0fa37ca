package passes

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/ops"
)

// DebugConfig configures Debug: the parsed debug config and the log its
// statistics go to.
type DebugConfig struct {
	Config *inspect.Config
	Log    *inspect.Log
	// Comm, in a data-parallel or sharded run, merges every statistic
	// across the ranks (a weight's excepted: every rank holds it whole);
	// rank 0 writes them, and the others need no Log.
	Comm dist.Communicator
}

// Debug inserts the statistics a debug config asks for — Transformer
// Engine's LogTensorStats and LogFp8TensorStats — for every linear layer
// a section selects: TensorStats nodes on the layer's float32 tensors
// (activation, weight, gradient, output, wgrad, dgrad) and FP8TensorStats
// nodes on its FP8 casts (activation, weight, gradient), reading the very
// casts its GEMMs read. It returns the statistics nodes, which the
// training program must list among its outputs (Prepare does); on steps
// their schedules do not select they cost a step-counter check. Run it
// after ConvertLinear (and ConvertLN, Autowrap), on the training graph;
// the precision switches of the same config (DisableFP8GEMM,
// DisableFP8Layer) are ConvertLinear's (LinearConfig.Debug).
//
// A tensor the layer does not have (the first layer's dgrad, the FP8
// cast of a GEMM kept in high precision) is skipped, and the report says
// so. Reading a float32 tensor that a fusion would otherwise drop (a
// LayerNorm's output fused into its cast) keeps it computed.
func Debug(g *graph.Graph, cfg DebugConfig, outputs ...*graph.Node) (Report, []*graph.Node, error) {
	rep := Report{Backend: "debug"}
	if cfg.Config == nil {
		return rep, nil, nil
	}
	nodes := g.Nodes()
	if len(outputs) > 0 {
		nodes = graph.Live(graph.Options{Training: true}, outputs...)
	}
	reg := registryOf(g)
	// The backward GEMMs of each layer, by its forward node.
	backward := map[*graph.Node][2]*graph.Node{}
	for _, n := range g.Nodes() {
		if f := n.Forward(); f != nil && (n.Role() == graph.Dgrad || n.Role() == graph.Wgrad) {
			b := backward[f]
			if n.Role() == graph.Dgrad {
				b[0] = n
			} else {
				b[1] = n
			}
			backward[f] = b
		}
	}
	isLive := make(map[*graph.Node]bool, len(nodes))
	for _, n := range nodes {
		isLive[n] = true
	}
	var stats []*graph.Node
	selected := map[string]int{} // section name → layers it selects
	var layers []string
	for _, n := range g.Nodes() {
		// A layer's original forward node: live while the layer is
		// float32, in the registry once converted.
		if !isLinear(n) || (!isLive[n] && reg.layers[n.Name()] == nil) {
			continue
		}
		fqn := n.Name()
		sec, ok := cfg.Config.SectionFor(fqn)
		layers = append(layers, fqn)
		if ok {
			selected[sec.Name]++
		}
		if !ok || (len(sec.TensorStats) == 0 && len(sec.FP8Stats) == 0) {
			continue
		}
		if cfg.Log == nil && (cfg.Comm == nil || cfg.Comm.Rank() == 0) {
			return rep, nil, fmt.Errorf("passes: debug: section %q asks for statistics of %s, and there is no log for them", sec.Name, fqn)
		}
		bw := backward[n]
		l := reg.layers[fqn]
		var missing []string
		hp := map[inspect.Tensor]*graph.Node{
			inspect.Activation: n.Input(0),
			inspect.Weight:     n.Input(1),
			inspect.Output:     g.Resolve(n),
		}
		if bw[0] != nil {
			hp[inspect.Gradient] = bw[0].Input(0)
			hp[inspect.Dgrad] = g.Resolve(bw[0])
		}
		if bw[1] != nil {
			hp[inspect.Gradient] = bw[1].Input(0)
			hp[inspect.Wgrad] = g.Resolve(bw[1])
		}
		// The FP8 casts the layer's GEMMs read: ScaledMatMul's inputs.
		casts := map[inspect.Tensor]*graph.Node{}
		if l != nil && l.fp8 {
			if q := castOf(l.fpFprop, 0); q != nil {
				casts[inspect.Activation] = q
			}
			if q := castOf(l.fpFprop, 1); q != nil {
				casts[inspect.Weight] = q
			}
			for _, b := range []*graph.Node{l.fpDgrad, l.fpWgrad} {
				if q := castOf(b, 0); q != nil {
					casts[inspect.Gradient] = q
				}
			}
		}
		for _, group := range groupByTensor(sec.TensorStats) {
			x := hp[group[0].Tensor]
			if x == nil {
				missing = append(missing, string(group[0].Tensor))
				continue
			}
			s := ops.TensorStats(fqn+"/stats."+string(group[0].Tensor), x,
				ops.StatsConfig{Layer: fqn, Tensor: group[0].Tensor, Requests: group, Log: cfg.Log, Comm: cfg.Comm, Replicated: group[0].Tensor == inspect.Weight})
			stats = append(stats, s)
		}
		for _, group := range groupByTensor(sec.FP8Stats) {
			t := group[0].Tensor
			q := casts[t]
			if q == nil || hp[t] == nil {
				missing = append(missing, "FP8 "+string(t))
				continue
			}
			s := ops.FP8TensorStats(fqn+"/fp8_stats."+string(t), hp[t], q,
				ops.StatsConfig{Layer: fqn, Tensor: t, Requests: group, Log: cfg.Log, Comm: cfg.Comm, Replicated: t == inspect.Weight})
			stats = append(stats, s)
		}
		note := fmt.Sprintf("%s: statistics by debug section %q", fqn, sec.Name)
		if len(missing) > 0 {
			note += " (not in this layer: " + strings.Join(missing, ", ") + ")"
		}
		rep.Notes = append(rep.Notes, note)
	}
	// A section that selects no layer would log nothing and say nothing:
	// a pattern that does not match this model is an error.
	for _, sec := range cfg.Config.Sections {
		if selected[sec.Name] == 0 {
			shown := layers
			if len(shown) > 8 {
				shown = append(append([]string(nil), shown[:8]...), fmt.Sprintf("… (%d in all)", len(layers)))
			}
			return rep, nil, fmt.Errorf("passes: debug: section %q (%s) selects no linear layer of this model (an earlier section may take them first); its linear layers: %s", sec.Name, sec.Layers, strings.Join(shown, ", "))
		}
	}
	if err := g.Err(); err != nil {
		return rep, nil, fmt.Errorf("passes: debug: %w", err)
	}
	return rep, stats, nil
}

// castOf returns the FP8 cast feeding input i of a ScaledMatMul (nil if
// the node is not one, or the input is not an FP8 value).
func castOf(mm *graph.Node, i int) *graph.Node {
	if mm == nil || !mm.Is(ops.KindScaledMatMul) || i >= mm.NumInputs() {
		return nil
	}
	if q := mm.Input(i); q.DType().IsQuantized() {
		return q
	}
	return nil
}

// groupByTensor groups requests by tensor, keeping the first request
// order.
func groupByTensor(reqs []inspect.StatRequest) [][]inspect.StatRequest {
	var order []inspect.Tensor
	by := map[inspect.Tensor][]inspect.StatRequest{}
	for _, r := range reqs {
		if _, ok := by[r.Tensor]; !ok {
			order = append(order, r.Tensor)
		}
		by[r.Tensor] = append(by[r.Tensor], r)
	}
	out := make([][]inspect.StatRequest, len(order))
	for i, t := range order {
		out[i] = by[t]
	}
	return out
}
