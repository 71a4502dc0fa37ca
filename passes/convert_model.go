package passes

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/recipe"
)

// ModelConfig configures ConvertModel.
type ModelConfig struct {
	// ToFP8 converts to FP8; false converts back to high precision.
	ToFP8 bool
	// Linear and LayerNorm select what converts.
	Linear, LayerNorm bool
	// Recipe and Filter are ConvertLinear's (ToFP8 only).
	Recipe recipe.Recipe
	Filter func(n *graph.Node, fqn string) bool
	// Outputs are the training outputs (for ConvertLN's liveness).
	Outputs []*graph.Node
}

// ConvertModel converts a model's linear layers and/or LayerNorms to FP8
// or back, Accelerate's convert_model(to_transformer_engine=…). Weights
// are never touched: the FP8 and float32 paths read the same parameters,
// and converting back points consumers at the original nodes again (the
// scaling state stays in the store for a later conversion).
func ConvertModel(g *graph.Graph, store *graph.Store, cfg ModelConfig) (Report, error) {
	if _, err := Unfuse(g); err != nil {
		return Report{}, fmt.Errorf("passes: convert model: %w", err)
	}
	if cfg.ToFP8 {
		var rep Report
		if cfg.Linear {
			r, err := ConvertLinear(g, store, LinearConfig{Recipe: cfg.Recipe, Filter: cfg.Filter})
			if err != nil {
				return r, err
			}
			rep = r
		}
		if cfg.LayerNorm {
			reg := registryOf(g)
			reused := 0
			for _, f := range reg.ln {
				if !f.active {
					if err := g.ReplaceUses(f.quantize, f.fused); err != nil {
						return rep, err
					}
					f.active = true
					reused++
				}
			}
			if reused == 0 {
				r, err := ConvertLN(g, cfg.Outputs...)
				if err != nil {
					return rep, err
				}
				rep.Notes = append(rep.Notes, r.Notes...)
			} else {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%d fusion(s) into FP8 casts restored", reused))
			}
		}
		return rep, graph.Verify(g)
	}
	rep := Report{Backend: "float32"}
	reg := registryOf(g)
	if cfg.LayerNorm {
		for _, f := range reg.ln {
			if f.active {
				if err := g.ReplaceUses(f.fused, f.quantize); err != nil {
					return rep, err
				}
				f.active = false
				rep.Notes = append(rep.Notes, f.ln.Name()+": "+f.what+" fusion undone")
			}
		}
	}
	if cfg.Linear {
		for _, name := range reg.order {
			l := reg.layers[name]
			lr := LayerReport{FQN: name, Out: l.hpFprop.Input(1).Shape()[0], In: l.hpFprop.Input(1).Shape()[1]}
			if l.fp8 {
				if err := l.point(g, false); err != nil {
					return rep, err
				}
				lr.Reason = "converted back to float32"
			} else {
				lr.Reason = "already float32"
			}
			rep.Layers = append(rep.Layers, lr)
		}
		for _, gl := range groupedInOrder(reg) { // a Mixture of Experts' grouped GEMMs
			w := gl.hp.Input(2).Shape()
			lr := LayerReport{FQN: gl.fqn, Out: w[1], In: w[2], Reason: "already float32"}
			if gl.fp8 {
				if err := gl.point(g, false); err != nil {
					return rep, err
				}
				lr.Reason = "converted back to float32"
			}
			rep.Layers = append(rep.Layers, lr)
		}
	}
	return rep, graph.Verify(g)
}
