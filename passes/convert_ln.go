package passes

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// ConvertLN fuses each LayerNorm (or RMSNorm) whose output is cast to FP8
// into that cast: a LayerNormQuantize (RMSNormQuantize) node computes the
// normalisation in float32 and writes FP8 straight to the ScaledMatMul
// nodes that read the cast, with no float32 tensor in between
// (Transformer Engine's LayerNormLinear, normalization "LayerNorm" or
// "RMSNorm"), and likewise a GELU whose output an FP8 linear layer
// casts (GELUQuantize).
// Likewise a cross-entropy gradient whose only reader is a delayed
// tensorwise cast (a classifier's grad_output) becomes a
// CrossEntropyGradQuantize node; and when that classifier's FP8 logits
// (tensorwise-scaled operands) feed only its CrossEntropy and that
// gradient, the three become a ClassifierCrossEntropy node, which
// computes the logits ops.ClassifierRows rows at a time so that they
// never exist whole, and the loss a Switch that training programs take
// to a ClassifierLoss and evaluation programs to the CrossEntropy.
// When the LayerNorm has other float32 consumers in the training graph,
// it stays for them and keeps its float32 output. When a second cast
// reads it (the column-wise copy of Float8BlockScaling and NVFP4, cast
// again from the float32 values), nothing is fused: the output exists
// anyway, and a cast reading it costs less than computing the norm (or
// GELU) a second time; a note says so. outputs are the training
// program's outputs, which decide what is live; with none, every node
// counts.
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
	consumers := g.Consumers(nodes...)
	// The cast of a LayerNorm takes its place, unless a second cast
	// reads the same output (the column-wise copy of Float8BlockScaling
	// and NVFP4, quantized again from the float32 values): that output
	// exists anyway, and fusing would compute the norm twice. Float32
	// readers keep reading the LayerNorm.
	casts := func(n *graph.Node) (k int) {
		for _, c := range consumers[n] {
			if c.Is(ops.KindQuantize) {
				k++
			}
		}
		return k
	}
	soleCast := func(q *graph.Node) bool {
		for _, c := range consumers[q.Input(0)] {
			if c.Is(ops.KindQuantize) {
				return c == q && casts(q.Input(0)) == 1
			}
		}
		return false
	}
	for _, n := range nodes {
		if k := casts(n); k > 1 && (n.Is(ops.KindLayerNorm) || n.Is(ops.KindRMSNorm) || n.Is(ops.KindGELU)) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: not fused: %d FP8 casts read its float32 output", n.Name(), k))
		}
	}
	// fuseNorm replaces the first cast of a LayerNorm or RMSNorm output
	// with the fused node that norm builds.
	fuseNorm := func(kind FusionKind, q, ln *graph.Node, norm func(qcfg ops.QuantizeConfig) *graph.Node) (*graph.Node, error) {
		what := kind.String()
		qcfg, _ := graph.SettingsOf[ops.QuantizeConfig](q)
		fused := norm(qcfg)
		if err := g.Err(); err != nil {
			return nil, err
		}
		reg.ln = append(reg.ln, &lnFusion{ln: ln, quantize: q, fused: fused, what: what, active: true})
		note := fmt.Sprintf("%s: %s fused into its %s cast (%s)", ln.Name(), what, qcfg.Tensor, q.Name())
		if rest := len(consumers[ln]) - 1; rest > 0 {
			note += fmt.Sprintf("; float32 output kept for %d other consumer(s)", rest)
		}
		rep.Notes = append(rep.Notes, note)
		rep.Fusions = append(rep.Fusions, Fusion{Kind: kind, Node: ln.Name(), Fused: fused.Name()})
		return fused, nil // the norm itself stays for any other consumer
	}
	_, err := Rewrite(g, nodes,
		Rule{
			Name: "layernorm-quantize",
			Pattern: &Pattern{Kind: ops.KindQuantize, Bind: "cast", Where: soleCast,
				Inputs: []*Pattern{{Kind: ops.KindLayerNorm, Bind: "ln"}}},
			Apply: func(q *graph.Node, m Match) (*graph.Node, error) {
				ln := m["ln"]
				return fuseNorm(FusedLayerNorm, q, ln, func(qcfg ops.QuantizeConfig) *graph.Node {
					cfg, _ := graph.SettingsOf[ops.LayerNormConfig](ln)
					return ops.LayerNormQuantize(ln.Name()+"/fp8", ln.Input(0), ln.Input(1), ln.Input(2), cfg, qcfg)
				})
			},
		},
		Rule{
			// A GELU whose output an FP8 linear layer casts: GELU's
			// backward reads its input, so once fused the float32 output
			// is gone unless something else reads it.
			Name: "gelu-quantize",
			Pattern: &Pattern{Kind: ops.KindQuantize, Bind: "cast", Where: soleCast,
				Inputs: []*Pattern{{Kind: ops.KindGELU, Bind: "gelu"}}},
			Apply: func(q *graph.Node, m Match) (*graph.Node, error) {
				n := m["gelu"]
				return fuseNorm(FusedGELU, q, n, func(qcfg ops.QuantizeConfig) *graph.Node {
					return ops.GELUQuantize(n.Name()+"/fp8", n.Input(0), qcfg)
				})
			},
		},
		Rule{
			Name: "rmsnorm-quantize",
			Pattern: &Pattern{Kind: ops.KindQuantize, Bind: "cast", Where: soleCast,
				Inputs: []*Pattern{{Kind: ops.KindRMSNorm, Bind: "norm"}}},
			Apply: func(q *graph.Node, m Match) (*graph.Node, error) {
				n := m["norm"]
				return fuseNorm(FusedRMSNorm, q, n, func(qcfg ops.QuantizeConfig) *graph.Node {
					cfg, _ := graph.SettingsOf[ops.RMSNormConfig](n)
					return ops.RMSNormQuantize(n.Name()+"/fp8", n.Input(0), n.Input(1), cfg, qcfg)
				})
			},
		})
	if err != nil {
		return rep, err
	}
	// A classifier's output gradient read only by its grad_output cast
	// (delayed tensorwise scaling) is written as FP8 by the cross-entropy
	// gradient itself: the float32 gradient, as large as the logits,
	// never exists.
	only := func(n, reader *graph.Node) bool {
		cs := consumers[n]
		return len(cs) == 1 && cs[0] == reader
	}
	delayed := func(q *graph.Node) bool {
		cfg, ok := graph.SettingsOf[ops.QuantizeConfig](q)
		return ok && cfg.Kind == fp8.DelayedScaling
	}
	fuseCE := func(q *graph.Node, ceg *graph.Node) (*graph.Node, error) {
		// The fused node is the 2-D matrix [rows, classes]: it replaces a
		// cast of that shape (of the gradient or of its 2-D view).
		s := ceg.Shape()
		classes := s[len(s)-1]
		if classes == 0 || !q.Shape().Equal(graph.Shape{s.Numel() / classes, classes}) {
			return nil, nil
		}
		qcfg, _ := graph.SettingsOf[ops.QuantizeConfig](q)
		fused := ops.CrossEntropyGradQuantize(ceg.Name()+"/fp8", ceg.Input(0), ceg.Input(1), ceg.Input(2), qcfg)
		if err := g.Err(); err != nil {
			return nil, err
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s: cross-entropy gradient fused into its %s cast (%s)", ceg.Name(), qcfg.Tensor, q.Name()))
		rep.Fusions = append(rep.Fusions, Fusion{Kind: FusedCrossEntropyGrad, Node: ceg.Name(), Fused: fused.Name()})
		return fused, nil
	}
	_, err = Rewrite(g, nodes,
		Rule{
			Name: "crossentropygrad-quantize",
			Pattern: &Pattern{Kind: ops.KindQuantize, Bind: "cast", Where: delayed,
				Inputs: []*Pattern{{Kind: ops.KindCrossEntropyGrad, Bind: "ceg"}}},
			Apply: func(q *graph.Node, m Match) (*graph.Node, error) {
				if !only(m["ceg"], q) {
					return nil, nil
				}
				return fuseCE(q, m["ceg"])
			},
		},
		Rule{
			Name: "crossentropygrad-reshape-quantize",
			Pattern: &Pattern{Kind: ops.KindQuantize, Bind: "cast", Where: delayed,
				Inputs: []*Pattern{{Kind: ops.KindReshape, Bind: "view", Inputs: []*Pattern{{Kind: ops.KindCrossEntropyGrad, Bind: "ceg"}}}}},
			Apply: func(q *graph.Node, m Match) (*graph.Node, error) {
				if !only(m["ceg"], m["view"]) || !only(m["view"], q) {
					return nil, nil
				}
				return fuseCE(q, m["ceg"])
			},
		})
	if err != nil {
		return rep, err
	}
	// A classifier whose logits only its loss and that loss's FP8
	// gradient read (tensorwise-scaled operands) is fused with both:
	// ClassifierCrossEntropy computes the logits a band of rows at a
	// time, so they never exist whole, and the loss becomes a Switch
	// that training takes to ClassifierLoss and evaluation to the
	// CrossEntropy it was.
	nodes = g.Nodes()
	if len(outputs) > 0 {
		nodes = graph.Live(graph.Options{Training: true}, outputs...)
	}
	consumers = g.Consumers(nodes...)
	tensorwise := func(n *graph.Node) bool {
		cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n)
		return ok && (cfg.Kind == fp8.DelayedScaling || (cfg.Kind == fp8.CurrentScaling && !cfg.Axiswise))
	}
	_, err = Rewrite(g, nodes, Rule{
		Name: "classifier-crossentropy",
		Pattern: &Pattern{Kind: ops.KindCrossEntropyGradQuantize, Bind: "cast",
			Inputs: []*Pattern{{Kind: ops.KindScaledMatMul, Roles: []graph.Role{graph.Fprop}, Bind: "logits"}, {Bind: "labels"}, {Bind: "dloss"}}},
		Apply: func(q *graph.Node, m Match) (*graph.Node, error) {
			logits, labels := m["logits"], m["labels"]
			cs := consumers[logits]
			if len(cs) != 2 {
				return nil, nil
			}
			loss := cs[0]
			if loss == q {
				loss = cs[1]
			}
			if !loss.Is(ops.KindCrossEntropy) || loss.Input(0) != logits || loss.Input(1) != labels {
				return nil, nil
			}
			mm, _ := graph.SettingsOf[ops.MatMulConfig](logits)
			x, w := logits.Input(0), logits.Input(1)
			if mm.TransA || !mm.TransB || !tensorwise(x) || !tensorwise(w) {
				return nil, nil
			}
			var bias *graph.Node
			if logits.NumInputs() == 3 {
				bias = logits.Input(2)
			}
			qcfg, _ := graph.SettingsOf[ops.QuantizeConfig](q)
			fused := ops.ClassifierCrossEntropy(q.Name()+"/classifier", x, w, bias, labels, m["dloss"], qcfg)
			fusedLoss := ops.ClassifierLoss(loss.Name()+"/classifier", fused, labels)
			sw := g.Switch(loss.Name()+".fused", "training: fused classifier", func(o graph.Options) bool { return o.Training }, fusedLoss, loss)
			if err := g.Err(); err != nil {
				return nil, err
			}
			if err := g.ReplaceUses(loss, sw); err != nil {
				return nil, err
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: classifier fused with its cross-entropy and gradient cast (%s): logits computed %d rows at a time, never whole", logits.Name(), fused.Name(), min(ops.ClassifierRows, logits.Shape().Numel()/logits.Shape()[len(logits.Shape())-1])))
			rep.Fusions = append(rep.Fusions, Fusion{Kind: FusedClassifier, Node: logits.Name(), Fused: fused.Name()})
			return fused, nil
		},
	})
	return rep, err
}
