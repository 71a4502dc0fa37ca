package passes

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// ConvertLN fuses each LayerNorm whose output is cast to FP8 into that
// cast: a LayerNormQuantize node computes the LayerNorm in float32 and
// writes FP8 straight to the ScaledMatMul nodes that read the cast, with
// no float32 tensor in between (Transformer Engine's LayerNormLinear).
// When the LayerNorm has other consumers in the training graph (a second
// cast with other scales, or float32 ops), it stays for them and keeps
// its float32 output. outputs are the training program's outputs, which
// decide what is live; with none, every node counts.
func ConvertLN(g *graph.Graph, outputs ...*graph.Node) (Report, error) {
	rep := Report{Backend: "ln"}
	if err := g.Err(); err != nil {
		return rep, fmt.Errorf("passes: convert LN: graph has errors: %w", err)
	}
	reg := registryOf(g)
	nodes := g.Nodes()
	if len(outputs) > 0 {
		nodes = graph.Live(graph.Options{Training: true}, outputs...)
	}
	consumers := map[*graph.Node][]*graph.Node{}
	for _, n := range nodes {
		for i := 0; i < n.NumInputs(); i++ {
			consumers[n.Input(i)] = append(consumers[n.Input(i)], n)
		}
	}
	_, err := Rewrite(g, nodes, Rule{
		Name:    "layernorm-quantize",
		Pattern: &Pattern{Op: "LayerNorm"},
		Apply: func(ln *graph.Node, _ Match) (*graph.Node, error) {
			var casts []*graph.Node
			others := 0
			for _, c := range consumers[ln] {
				if c.Op().Type() == "Quantize" {
					casts = append(casts, c)
				} else {
					others++
				}
			}
			if len(casts) == 0 {
				return nil, nil
			}
			q := casts[0]
			qcfg, _ := ops.QuantizeConfigOf(q)
			lncfg, _ := ops.LayerNormParts(ln)
			fused := ops.LayerNormQuantize(ln.Name()+"/fp8", ln.Input(0), ln.Input(1), ln.Input(2), lncfg, qcfg)
			if err := g.Err(); err != nil {
				return nil, err
			}
			if err := g.ReplaceUses(q, fused); err != nil {
				return nil, err
			}
			reg.ln = append(reg.ln, &lnFusion{ln: ln, quantize: q, fused: fused, active: true})
			note := fmt.Sprintf("%s: LayerNorm fused into its %s cast (%s)", ln.Name(), qcfg.Tensor, q.Name())
			if rest := others + len(casts) - 1; rest > 0 {
				note += fmt.Sprintf("; float32 output kept for %d other consumer(s)", rest)
			}
			rep.Notes = append(rep.Notes, note)
			return nil, nil // the LayerNorm itself stays for any other consumer
		},
	})
	return rep, err
}
