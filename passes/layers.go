package passes

import (
	"fmt"
	"sort"
	"strings"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/recipe"
)

// layer is what the passes know about one linear layer of a graph.
type layer struct {
	fqn                       string
	hpFprop, hpDgrad, hpWgrad *graph.Node // the original GEMMs
	fpFprop, fpDgrad, fpWgrad *graph.Node // their FP8 replacements (nil: kept in high precision)
	autocast                  *graph.Node // Autowrap's Switch, if any
	fp8                       bool        // consumers currently read the FP8 nodes
	state                     *fp8.LayerState
	plan                      recipe.LayerPlan // how the recipe lowered it
}

// lnFusion records one LayerNorm (RMSNorm, GELU) fused into an FP8
// cast: what names the kind.
type lnFusion struct {
	ln, quantize, fused *graph.Node
	what                string
	active              bool
}

// registry is kept as a graph annotation.
type registry struct {
	layers  map[string]*layer
	order   []string
	byNode  map[*graph.Node]*layer        // original fprop node → layer
	grouped map[*graph.Node]*groupedLayer // original grouped fprop node → its conversion
	ln      []*lnFusion
	wrapped bool
}

// registryKey is the graph annotation where the passes keep their layers.
var registryKey = graph.NewKey[*registry]("passes.registry")

func registryOf(g *graph.Graph) *registry {
	if r, ok := graph.Annotation(g, registryKey); ok {
		return r
	}
	r := &registry{layers: map[string]*layer{}, byNode: map[*graph.Node]*layer{}, grouped: map[*graph.Node]*groupedLayer{}}
	graph.Annotate(g, registryKey, r)
	return r
}

func (r *registry) add(l *layer) {
	if _, ok := r.layers[l.fqn]; !ok {
		r.order = append(r.order, l.fqn)
	}
	r.layers[l.fqn] = l
	r.byNode[l.hpFprop] = l
}

// LayerReport says what a pass did with one linear layer.
type LayerReport struct {
	// FQN is the layer's fully qualified name.
	FQN string
	// Out and In are the weight's dimensions.
	Out, In int
	// Converted reports whether the layer now runs in FP8.
	Converted bool
	// FP8 lists the GEMMs that run in FP8 ("fprop", "dgrad", "wgrad").
	FP8 []string
	// Reason explains a skip or a partial conversion.
	Reason string
}

// Report is the outcome of a conversion, one entry per linear layer in
// graph order.
type Report struct {
	// Backend names the pass or the recipe's backend: "te" (TE's
	// recipes: delayed and current scaling, Float8BlockScaling, MXFP8,
	// NVFP4), "ao", "msamp", "bf16"; "float32", "ln", "debug" or
	// "autowrap" for the passes that convert no recipe.
	Backend string
	// Recipe is the recipe's Label ("te/HYBRID", "block/E4M3/x1w2g1",
	// "nvfp4/no-rht"); "" for passes that convert no recipe.
	Recipe string
	Layers []LayerReport
	// Notes holds pass-level remarks (fusions, repeated application).
	Notes []string
	// Fusions records each fusion ConvertLN made, in order.
	Fusions []Fusion
}

// FusionKind is what ConvertLN fused into an FP8 cast.
type FusionKind uint8

// The fusions of ConvertLN.
const (
	FusedLayerNorm FusionKind = iota
	FusedRMSNorm
	FusedGELU
	FusedCrossEntropyGrad
	FusedClassifier
)

var fusionNames = [...]string{"LayerNorm", "RMSNorm", "GELU", "cross-entropy gradient", "classifier"}

// String names the kind as the report's notes do: "LayerNorm",
// "RMSNorm", "GELU", "cross-entropy gradient", "classifier".
func (k FusionKind) String() string {
	if int(k) < len(fusionNames) {
		return fusionNames[k]
	}
	return fmt.Sprintf("FusionKind(%d)", uint8(k))
}

// Fusion is one fusion ConvertLN made: the node whose output it fused
// (a LayerNorm, an RMSNorm, a GELU, a cross-entropy gradient, a
// classifier's logits) and the fused node that took the cast's place.
type Fusion struct {
	Kind        FusionKind
	Node, Fused string
}

// Converted returns the names of the converted layers.
func (r Report) Converted() []string {
	var out []string
	for _, l := range r.Layers {
		if l.Converted {
			out = append(out, l.FQN)
		}
	}
	return out
}

// Layer returns the entry for fqn.
func (r Report) Layer(fqn string) (LayerReport, bool) {
	for _, l := range r.Layers {
		if l.FQN == fqn {
			return l, true
		}
	}
	return LayerReport{}, false
}

// String formats the report as a table; it is "" for a run that
// converted nothing and has no backend (float32).
func (r Report) String() string {
	if r.Backend == "" && len(r.Layers) == 0 && len(r.Notes) == 0 {
		return ""
	}
	var b strings.Builder
	kind := "FP8"
	if r.Backend == fp8.BackendBF16.String() {
		kind = "bf16"
	}
	if r.Backend == "" {
		b.WriteString("no conversion (float32):\n")
	} else if r.Recipe != "" && r.Recipe != r.Backend {
		fmt.Fprintf(&b, "%s conversion (recipe %s, %s backend):\n", kind, r.Recipe, r.Backend)
	} else {
		fmt.Fprintf(&b, "%s conversion (%s backend):\n", kind, r.Backend)
	}
	w := 5
	for _, l := range r.Layers {
		w = max(w, len(l.FQN))
	}
	for _, l := range r.Layers {
		status := "kept float32"
		if l.Converted {
			status = kind + " " + strings.Join(l.FP8, "+")
		}
		fmt.Fprintf(&b, "  %-*s  [%d %d]  %-22s %s\n", w, l.FQN, l.Out, l.In, status, l.Reason)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// HasFP8Layers reports whether any linear layer of g currently runs in
// FP8 (Accelerate's has_transformer_engine_layers / has_ao_layers).
// Layers in bf16 mixed precision do not count (see BF16Layers).
func HasFP8Layers(g *graph.Graph) bool { return len(FP8Layers(g)) > 0 }

// FP8Layers returns the names of the layers of g that run in FP8, sorted.
func FP8Layers(g *graph.Graph) []string { return convertedLayers(g, false) }

// BF16Layers returns the names of the layers of g that run in bf16 mixed
// precision, sorted.
func BF16Layers(g *graph.Graph) []string { return convertedLayers(g, true) }

func convertedLayers(g *graph.Graph, bf16 bool) []string {
	r, ok := graph.Annotation(g, registryKey)
	if !ok {
		return nil
	}
	var out []string
	for name, l := range r.layers {
		if l.fp8 && (l.state.Backend == fp8.BackendBF16) == bf16 {
			out = append(out, name)
		}
	}
	for _, gl := range r.grouped { // a Mixture of Experts' grouped GEMMs
		if gl.fp8 && gl.fwd != nil && len(gl.states) > 0 && (gl.states[0].Backend == fp8.BackendBF16) == bf16 {
			out = append(out, gl.fqn)
		}
	}
	sort.Strings(out)
	return out
}
