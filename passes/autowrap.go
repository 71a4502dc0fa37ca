package passes

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// AutowrapConfig configures Autowrap.
type AutowrapConfig struct {
	// EvalFP8 runs the FP8 path in evaluation programs too (TE's
	// use_autocast_during_eval). Evaluation never records amaxes either
	// way.
	EvalFP8 bool
	// Precision names the converted path in the report's note ("FP8"
	// when empty; "bf16" for recipe.BF16).
	Precision string
}

// Autowrap binds the FP8 region to training and evaluation programs, as
// Accelerate's apply_fp8_autowrap and contextual_fp8_autocast do: each
// converted layer's output becomes a Switch that a training program (or,
// with EvalFP8, an evaluation program) resolves to the FP8 path and an
// evaluation program otherwise resolves to the original float32 layer.
// Scaling states update at the end of every training step (the casts
// register the updates when a training program is compiled); evaluation
// programs neither update nor record. Applying it twice changes nothing
// and says so in the report.
func Autowrap(g *graph.Graph, cfg AutowrapConfig) (Report, error) {
	rep := Report{Backend: "autowrap"}
	reg := registryOf(g)
	if reg.wrapped {
		rep.Notes = append(rep.Notes, "autowrap was already applied; nothing changed")
		return rep, nil
	}
	evalFP8 := cfg.EvalFP8
	label := "fp8 if training"
	if evalFP8 {
		label = "fp8 always"
	}
	pred := func(o graph.Options) bool { return o.Training || evalFP8 }
	wrapped := 0
	for _, name := range reg.order {
		l := reg.layers[name]
		if !l.fp8 || l.fpFprop == nil || l.autocast != nil {
			continue
		}
		sw := g.Switch(l.fqn+".autocast", label, pred, l.fpFprop, l.hpFprop)
		if err := g.Err(); err != nil {
			return rep, fmt.Errorf("passes: autowrap %q: %w", l.fqn, err)
		}
		if err := g.ReplaceUses(l.fpFprop, sw); err != nil {
			return rep, fmt.Errorf("passes: autowrap %q: %w", l.fqn, err)
		}
		l.autocast = sw
		wrapped++
	}
	for _, gl := range groupedInOrder(reg) { // a Mixture of Experts' grouped GEMMs likewise
		if gl.sw != nil {
			continue
		}
		sw := g.Switch(gl.fqn+".autocast", label, pred, gl.fwd, gl.hp)
		if err := g.Err(); err != nil {
			return rep, fmt.Errorf("passes: autowrap %q: %w", gl.fqn, err)
		}
		if err := g.ReplaceUses(gl.fwd, sw); err != nil {
			return rep, fmt.Errorf("passes: autowrap %q: %w", gl.fqn, err)
		}
		gl.sw = sw
		wrapped++
	}
	reg.wrapped = true
	converted := cfg.Precision
	if converted == "" {
		converted = "FP8"
	}
	runs := "float32"
	if evalFP8 {
		runs = converted
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%d layer(s) wrapped; evaluation runs %s", wrapped, runs))
	return rep, nil
}

// checkFP8Graph states what a legal graph looks like once linear layers
// are converted: every ScaledMatMul reads values that carry scales (casts
// or Switches of them), and FP8 values feed only ScaledMatMul or Switch
// nodes.
func checkFP8Graph(g *graph.Graph) error {
	for _, n := range g.Nodes() {
		for i := 0; i < n.NumInputs(); i++ {
			in := n.Input(i)
			if !in.DType().IsQuantized() {
				continue
			}
			switch {
			case n.Is(graph.KindSwitch), n.Is(ops.KindDequantize), n.Is(ops.KindClassifierCrossEntropy), n.Is(ops.KindClassifierLoss), ops.GEMMKind(n) == ops.KindScaledMatMul: // fused epilogues included
			default:
				return fmt.Errorf("check: FP8 value %q feeds %q (%s); only ScaledMatMul, Dequantize and Switch read FP8", in.Name(), n.Name(), n.Op().Type())
			}
			if _, ok := graph.SettingsOf[ops.QuantizeConfig](in); !ok && !in.IsSwitch() {
				return fmt.Errorf("check: %q reads FP8 value %q, which no cast produced", n.Name(), in.Name())
			}
		}
	}
	return nil
}

// checkConverted is the check after ConvertLinear: checkFP8Graph, and no
// node reads the original GEMM of a converted layer that has a
// low-precision replacement.
func checkConverted(g *graph.Graph) error {
	if err := checkFP8Graph(g); err != nil {
		return err
	}
	return convertedReaders(g, g.Consumers())
}

// convertedReaders is checkConverted's own rule, over a consumers index.
func convertedReaders(g *graph.Graph, cons map[*graph.Node][]*graph.Node) error {
	for _, name := range registryOf(g).order {
		l := registryOf(g).layers[name]
		if !l.fp8 {
			continue
		}
		for _, p := range [][2]*graph.Node{{l.hpFprop, l.fpFprop}, {l.hpDgrad, l.fpDgrad}, {l.hpWgrad, l.fpWgrad}} {
			if p[0] == nil || p[1] == nil || l.autocast != nil && p[0] == l.hpFprop {
				continue
			}
			if c := cons[p[0]]; len(c) > 0 {
				return fmt.Errorf("check: %q still reads %q, which layer %q replaced with %q", c[0].Name(), p[0].Name(), name, p[1].Name())
			}
		}
	}
	return nil
}

// checkFused is the check after ConvertLN: checkConverted, and each
// active LayerNorm fusion's cast is read by nobody (its fused node took
// its place).
func checkFused(g *graph.Graph) error {
	if err := checkFP8Graph(g); err != nil {
		return err
	}
	return fusedReaders(g, g.Consumers())
}

// fusedReaders is checkFused's rules (and checkConverted's), over a
// consumers index.
func fusedReaders(g *graph.Graph, cons map[*graph.Node][]*graph.Node) error {
	if err := convertedReaders(g, cons); err != nil {
		return err
	}
	for _, f := range registryOf(g).ln {
		if f.active && len(cons[f.quantize]) > 0 {
			return fmt.Errorf("check: %q still reads %q, which LayerNorm %q was fused into (%q)", cons[f.quantize][0].Name(), f.quantize.Name(), f.ln.Name(), f.fused.Name())
		}
	}
	return nil
}

// checkWrapped is the check after Autowrap: checkFused, and every
// wrapped layer's FP8 output is read only through its Switch.
func checkWrapped(g *graph.Graph) error {
	if err := checkFP8Graph(g); err != nil {
		return err
	}
	cons := g.Consumers() // one index for all three stages' rules
	if err := fusedReaders(g, cons); err != nil {
		return err
	}
	for _, name := range registryOf(g).order {
		l := registryOf(g).layers[name]
		if l.autocast == nil || !l.fp8 {
			continue
		}
		for _, c := range cons[l.fpFprop] {
			if c != l.autocast {
				return fmt.Errorf("check: %q reads %q around its autocast Switch %q", c.Name(), l.fpFprop.Name(), l.autocast.Name())
			}
		}
	}
	for _, gl := range groupedInOrder(registryOf(g)) {
		if gl.sw == nil {
			continue
		}
		for _, c := range cons[gl.fwd] {
			if c != gl.sw {
				return fmt.Errorf("check: %q reads %q around its autocast Switch %q", c.Name(), gl.fwd.Name(), gl.sw.Name())
			}
		}
	}
	return nil
}
