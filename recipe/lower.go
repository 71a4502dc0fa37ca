package recipe

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/fp8"
)

// Layer is a linear layer as a recipe sees it when it lowers it.
type Layer struct {
	// FQN is the layer's fully qualified name; Node its forward node (a
	// *graph.Node in Octet's passes), which module filters receive.
	FQN  string
	Node any
	// Index is the layer's place among the graph's Count linear layers,
	// in graph order (from 0).
	Index, Count int
	// Out and In are the weight's dims; Rows the rows of the input's
	// 2-D view (the tokens of a batch).
	Out, In, Rows int
	// Accept, when set, is the caller's filter (passes.Config.Filter)
	// applied to the layer; nil when the caller has none.
	Accept func() bool
	// Seed is the run's seed (train.Config.Seed), which a recipe that
	// draws (stochastic rounding) uses unless it has a seed of its own.
	Seed uint64
}

// LayerPlan is how a recipe lowers one linear layer.
type LayerPlan struct {
	// Skip, when not empty, keeps the whole layer in high precision and
	// says why (for the conversion report).
	Skip string
	// GEMMs holds, for Fprop, Dgrad and Wgrad, the quantizers of the
	// GEMM's two operands in GEMM.Operands order. A GEMM whose
	// quantizers are HighPrecision stays in high precision.
	GEMMs [3][2]fp8.Quantizer
	// KeptBy says, for a GEMM kept in high precision, by what ("by the
	// custom recipe"); "" reads "by the recipe".
	KeptBy [3]string
	// Notes go to the conversion report.
	Notes []string
	// Backward, when set, runs the layer's dgrad and wgrad GEMMs
	// unquantized whatever GEMMs says (Transformer Engine's
	// NVTE_BACKWARD_OVERRIDE; see WithBackward).
	Backward BackwardOverride
}

// Lowerer is the part of Recipe that lowers layers; every recipe of this
// package implements it (see Recipe).
type Lowerer interface {
	// Lower decides whether a layer converts and how each operand of its
	// three GEMMs is quantized. An error refuses the recipe for that
	// layer (a custom recipe's quantizers that no GEMM multiplies).
	Lower(l Layer) (LayerPlan, error)
	// NewLayerState returns a converted layer's scaling state, kept in
	// the parameter store and in checkpoints: the delayed-scaling metas
	// of its tensors, or none for recipes that scale each cast anew.
	NewLayerState(fqn string) *fp8.LayerState
}

// sizeAndFilter is the default condition: both weight dims divisible by
// 16, then the caller's filter. It returns why not ("" when the layer
// converts).
func sizeAndFilter(l Layer) string {
	if l.Out%16 != 0 || l.In%16 != 0 {
		return dimsWhy(l)
	}
	if l.Accept != nil && !l.Accept() {
		return "excluded by the filter"
	}
	return ""
}

func dimsWhy(l Layer) string {
	return fmt.Sprintf("weight dims [%d %d] are not both divisible by 16", l.Out, l.In)
}

// planOf fills a plan's GEMMs with q(gemm, tensor) for every operand.
func planOf(q func(g fp8.GEMM, t fp8.TensorRole) fp8.Quantizer) LayerPlan {
	var p LayerPlan
	for _, g := range []fp8.GEMM{fp8.Fprop, fp8.Dgrad, fp8.Wgrad} {
		roles := g.Operands()
		p.GEMMs[g] = [2]fp8.Quantizer{q(g, roles[0]), q(g, roles[1])}
	}
	return p
}

// Lower converts layers whose dims are divisible by 16 (and that the
// filter accepts): delayed scaling per tensor (or MXFP8 blocks along
// each GEMM's contraction axis), the forward tensors in the format's
// forward format and the gradient in its backward one; the GEMMs
// OverrideLinearPrecision names stay in high precision.
func (r TE) Lower(l Layer) (LayerPlan, error) {
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	ov := r.OverrideLinearPrecision
	kept := [3]bool{ov.Fprop, ov.Dgrad, ov.Wgrad}
	return planOf(func(g fp8.GEMM, t fp8.TensorRole) fp8.Quantizer {
		if kept[g] {
			return fp8.Quantizer{}
		}
		f := r.Format.Forward()
		if t.IsBackward() {
			f = r.Format.Backward()
		}
		if r.UseMXFP8BlockScaling {
			return fp8.Quantizer{Kind: fp8.MXFP8Blocks, Format: f, Rule: r.MXFP8Rule}
		}
		return fp8.Quantizer{Kind: fp8.DelayedScaling, Format: f}
	}), nil
}

// NewLayerState returns delayed scaling's three metas (none with MXFP8
// blocks).
func (r TE) NewLayerState(fqn string) *fp8.LayerState {
	st := &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
	if !r.UseMXFP8BlockScaling {
		st.Input, st.Weight, st.GradOutput = r.NewMeta(false), r.NewMeta(false), r.NewMeta(true)
	}
	return st
}

// Lower is the GEMM recipe's (GEMMRecipe: HYBRID delayed scaling).
func (r MSAMP) Lower(l Layer) (LayerPlan, error) { return r.GEMMRecipe().Lower(l) }

// NewLayerState returns the GEMM recipe's metas with power-of-two
// scales.
func (r MSAMP) NewLayerState(fqn string) *fp8.LayerState {
	st := r.GEMMRecipe().NewLayerState(fqn)
	st.Backend = r.Backend()
	st.Input.Pow2, st.Weight.Pow2, st.GradOutput.Pow2 = true, true, true
	return st
}

// Lower converts every layer the filter accepts, whatever its size, each
// GEMM rounding both operands to bf16.
func (BF16) Lower(l Layer) (LayerPlan, error) {
	if l.Accept != nil && !l.Accept() {
		return LayerPlan{Skip: "excluded by the filter"}, nil
	}
	return planOf(func(fp8.GEMM, fp8.TensorRole) fp8.Quantizer { return fp8.Quantizer{Kind: fp8.BF16Rounding} }), nil
}

// NewLayerState returns a state without metas.
func (r BF16) NewLayerState(fqn string) *fp8.LayerState {
	return &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower applies torchao's filter (the caller's, else ModuleFilter, else
// the default: not the first or last linear layer, dims divisible by
// 16; other dims convert only with PadInnerDim) and casts each operand
// as its cast says, current scaling per tensor or per slice along
// the contraction axis; a GEMM with a disabled operand stays in high
// precision.
func (r AO) Lower(l Layer) (LayerPlan, error) {
	divisible := l.Out%16 == 0 && l.In%16 == 0
	switch {
	case l.Accept != nil:
		if !l.Accept() {
			return LayerPlan{Skip: "excluded by the filter"}, nil
		}
	case r.ModuleFilter != nil:
		if !r.ModuleFilter(l.Node, l.FQN) {
			return LayerPlan{Skip: "excluded by the recipe's module filter"}, nil
		}
	default:
		if l.Index == 0 {
			return LayerPlan{Skip: "first linear layer stays in high precision (torchao default filter)"}, nil
		}
		if l.Index == l.Count-1 {
			return LayerPlan{Skip: "last linear layer stays in high precision (torchao default filter)"}, nil
		}
		if !divisible {
			return LayerPlan{Skip: dimsWhy(l) + " (torchao default filter)"}, nil
		}
	}
	if !divisible && !r.PadInnerDim {
		return LayerPlan{Skip: dimsWhy(l) + " and pad_inner_dim is off"}, nil
	}
	casts := [3][2]fp8.Quantizer{
		fp8.Fprop: {r.Input, r.Weight},
		fp8.Dgrad: {r.GradOutput, r.WeightForGradInput},
		fp8.Wgrad: {r.GradOutputForGradWeight, r.InputForGradWeight},
	}
	var p LayerPlan
	for g, pair := range casts {
		if off(pair[0]) || off(pair[1]) {
			continue
		}
		for i, q := range pair {
			q.Pow2 = q.Pow2 || r.RoundScalesToPowerOf2
			p.GEMMs[g][i] = q
		}
	}
	return p, nil
}

// NewLayerState returns a state without metas.
func (r AO) NewLayerState(fqn string) *fp8.LayerState {
	return &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower converts layers whose dims are divisible by 16 (and that the
// filter accepts), each operand cast in 1×128 blocks along its GEMM's
// contraction axis or in 128×128 tiles as Cast says.
func (r Float8Block) Lower(l Layer) (LayerPlan, error) {
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	return planOf(func(_ fp8.GEMM, t fp8.TensorRole) fp8.Quantizer { return r.Cast(t) }), nil
}

// NewLayerState returns a state without metas.
func (r Float8Block) NewLayerState(fqn string) *fp8.LayerState {
	return &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower keeps the first KeepFirst and last KeepLast linear layers in high
// precision, then converts layers whose dims are divisible by 16 (and
// that the filter accepts): each operand cast as Cast says, the
// transform on the wgrad operands only when the rows are a multiple of
// 16 (a note says so otherwise).
func (r NVFP4) Lower(l Layer) (LayerPlan, error) {
	if l.Index < r.KeepFirst {
		return LayerPlan{Skip: fmt.Sprintf("one of the first %d linear layers, kept in high precision (NVFP4 recipe's keep_first)", r.KeepFirst)}, nil
	}
	if l.Index >= l.Count-r.KeepLast {
		return LayerPlan{Skip: fmt.Sprintf("one of the last %d linear layers, kept in high precision (NVFP4 recipe's keep_last)", r.KeepLast)}, nil
	}
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	// The wgrad's transform runs along the rows (tokens) of x and dy.
	rhtOK := r.DisableRHT || l.Rows%16 == 0
	seed := r.Seed
	if seed == 0 {
		seed = l.Seed
	}
	p := planOf(func(g fp8.GEMM, t fp8.TensorRole) fp8.Quantizer {
		q := r.Cast(t, g == fp8.Wgrad)
		q.RHT = q.RHT && rhtOK
		q.Seed = seed
		return q
	})
	if !rhtOK {
		p.Notes = append(p.Notes, fmt.Sprintf("%s: wgrad operands cast without the random Hadamard transform: %d rows, not a multiple of 16", l.FQN, l.Rows))
	}
	return p, nil
}

// NewLayerState returns a state without metas.
func (r NVFP4) NewLayerState(fqn string) *fp8.LayerState {
	return &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower asks Quantizer for each operand of each GEMM: a layer whose three
// GEMMs it keeps in high precision stays so; the others convert when
// their dims are divisible by 16 (and the filter accepts them), and each
// GEMM's pair of quantizers must be one a GEMM multiplies (Multiplies).
// Delayed scaling needs state a custom recipe does not keep, and is
// refused. NVFP4 quantizers draw with the recipe's Seed (the run's when
// it is 0).
func (r Custom) Lower(l Layer) (LayerPlan, error) {
	seed := r.Seed
	if seed == 0 {
		seed = l.Seed
	}
	p := planOf(func(g fp8.GEMM, t fp8.TensorRole) fp8.Quantizer {
		q := r.Quantizer(l.FQN, g, t)
		if q.Kind == fp8.NVFP4Blocks {
			q.Seed = seed
		}
		return q
	})
	hp := true
	for _, pair := range p.GEMMs {
		hp = hp && pair[0].Kind == fp8.HighPrecision && pair[1].Kind == fp8.HighPrecision
	}
	if hp {
		return LayerPlan{Skip: "the custom recipe keeps its three GEMMs in high precision"}, nil
	}
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	var parts []string
	for _, g := range []fp8.GEMM{fp8.Fprop, fp8.Dgrad, fp8.Wgrad} {
		roles := g.Operands()
		qa, qb := p.GEMMs[g][0], p.GEMMs[g][1]
		for i, q := range []fp8.Quantizer{qa, qb} {
			if err := q.Check(); err != nil {
				return LayerPlan{}, fmt.Errorf("layer %q: the custom recipe's %s quantizer of the %s GEMM: %w", l.FQN, roles[i], g, err)
			}
			if q.Kind == fp8.DelayedScaling {
				return LayerPlan{}, fmt.Errorf("layer %q: the custom recipe's %s quantizer of the %s GEMM: delayed scaling keeps an amax history a custom recipe has no state for; use current scaling, or recipe.TE", l.FQN, roles[i], g)
			}
		}
		if err := fp8.Multiplies(qa, qb); err != nil {
			return LayerPlan{}, fmt.Errorf("layer %q: the custom recipe's %s GEMM cannot run: %w", l.FQN, g, err)
		}
		if qa.Kind == fp8.HighPrecision {
			p.KeptBy[g] = "by the custom recipe"
			parts = append(parts, g.String()+" high precision")
		} else {
			parts = append(parts, fmt.Sprintf("%s %s × %s", g, qa, qb))
		}
	}
	p.Notes = append(p.Notes, fmt.Sprintf("%s: custom recipe: %s", l.FQN, strings.Join(parts, "; ")))
	return p, nil
}

// NewLayerState returns a state without metas.
func (r Custom) NewLayerState(fqn string) *fp8.LayerState {
	return &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
}
