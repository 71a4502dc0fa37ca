package fp8

import (
	"fmt"
	"strings"
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
	GEMMs [3][2]Quantizer
	// KeptBy says, for a GEMM kept in high precision, by what ("by the
	// custom recipe"); "" reads "by the recipe".
	KeptBy [3]string
	// Notes go to the conversion report.
	Notes []string
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
	NewLayerState(fqn string) *LayerState
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
func planOf(q func(g GEMM, t TensorRole) Quantizer) LayerPlan {
	var p LayerPlan
	for _, g := range []GEMM{Fprop, Dgrad, Wgrad} {
		roles := g.Operands()
		p.GEMMs[g] = [2]Quantizer{q(g, roles[0]), q(g, roles[1])}
	}
	return p
}

// Lower converts layers whose dims are divisible by 16 (and that the
// filter accepts): delayed scaling per tensor (or MXFP8 blocks along
// each GEMM's contraction axis), the forward tensors in the format's
// forward format and the gradient in its backward one; the GEMMs
// OverrideLinearPrecision names stay in high precision.
func (r TERecipe) Lower(l Layer) (LayerPlan, error) {
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	ov := r.OverrideLinearPrecision
	kept := [3]bool{ov.Fprop, ov.Dgrad, ov.Wgrad}
	return planOf(func(g GEMM, t TensorRole) Quantizer {
		if kept[g] {
			return Quantizer{}
		}
		f := r.Format.Forward()
		if t.IsBackward() {
			f = r.Format.Backward()
		}
		if r.UseMXFP8BlockScaling {
			return Quantizer{Kind: MXFP8Blocks, Format: f, Rule: r.MXFP8Rule}
		}
		return Quantizer{Kind: DelayedScaling, Format: f}
	}), nil
}

// NewLayerState returns delayed scaling's three metas (none with MXFP8
// blocks).
func (r TERecipe) NewLayerState(fqn string) *LayerState {
	st := &LayerState{FQN: fqn, Backend: r.Backend()}
	if !r.UseMXFP8BlockScaling {
		st.Input, st.Weight, st.GradOutput = r.NewMeta(false), r.NewMeta(false), r.NewMeta(true)
	}
	return st
}

// Lower is the GEMM recipe's (GEMMRecipe: HYBRID delayed scaling).
func (r MSAMPRecipe) Lower(l Layer) (LayerPlan, error) { return r.GEMMRecipe().Lower(l) }

// NewLayerState returns the GEMM recipe's metas with power-of-two
// scales.
func (r MSAMPRecipe) NewLayerState(fqn string) *LayerState {
	st := r.GEMMRecipe().NewLayerState(fqn)
	st.Backend = r.Backend()
	st.Input.Pow2, st.Weight.Pow2, st.GradOutput.Pow2 = true, true, true
	return st
}

// Lower converts every layer the filter accepts, whatever its size, each
// GEMM rounding both operands to bf16.
func (BF16Recipe) Lower(l Layer) (LayerPlan, error) {
	if l.Accept != nil && !l.Accept() {
		return LayerPlan{Skip: "excluded by the filter"}, nil
	}
	return planOf(func(GEMM, TensorRole) Quantizer { return Quantizer{Kind: BF16Rounding} }), nil
}

// NewLayerState returns a state without metas.
func (r BF16Recipe) NewLayerState(fqn string) *LayerState {
	return &LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower applies torchao's filter (the caller's, else ModuleFilter, else
// the default: not the first or last linear layer, dims divisible by
// 16; other dims convert only with PadInnerDim) and casts each operand
// as its CastConfig says, current scaling per tensor or per slice along
// the contraction axis; a GEMM with a disabled operand stays in high
// precision.
func (r AORecipe) Lower(l Layer) (LayerPlan, error) {
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
	casts := [3][2]CastConfig{
		Fprop: {r.Input, r.Weight},
		Dgrad: {r.GradOutput, r.WeightForGradInput},
		Wgrad: {r.GradOutputForGradWeight, r.InputForGradWeight},
	}
	var p LayerPlan
	for g, pair := range casts {
		if pair[0].Disabled || pair[1].Disabled {
			continue
		}
		for i, cc := range pair {
			p.GEMMs[g][i] = Quantizer{Kind: CurrentScaling, Format: cc.Format, Pow2: r.RoundScalesToPowerOf2, Axiswise: cc.Granularity == Axiswise}
		}
	}
	return p, nil
}

// NewLayerState returns a state without metas.
func (r AORecipe) NewLayerState(fqn string) *LayerState {
	return &LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower converts layers whose dims are divisible by 16 (and that the
// filter accepts), each operand cast in 1×128 blocks along its GEMM's
// contraction axis or in 128×128 tiles as Cast says.
func (r Float8BlockRecipe) Lower(l Layer) (LayerPlan, error) {
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	return planOf(func(_ GEMM, t TensorRole) Quantizer {
		bc := r.Cast(t)
		return Quantizer{Kind: Float8Blocks, Format: bc.Format, BlockDim: bc.Dim, FP32Scales: bc.FP32Scales, Eps: bc.Eps}
	}), nil
}

// NewLayerState returns a state without metas.
func (r Float8BlockRecipe) NewLayerState(fqn string) *LayerState {
	return &LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower keeps the first KeepFirst and last KeepLast linear layers in high
// precision, then converts layers whose dims are divisible by 16 (and
// that the filter accepts): each operand cast as Cast says, the
// transform on the wgrad operands only when the rows are a multiple of
// 16 (a note says so otherwise).
func (r NVFP4Recipe) Lower(l Layer) (LayerPlan, error) {
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
	p := planOf(func(g GEMM, t TensorRole) Quantizer {
		nc := r.Cast(t, g == Wgrad)
		dim := 1
		if nc.TwoD {
			dim = 2
		}
		return Quantizer{Kind: NVFP4Blocks, BlockDim: dim, RHT: nc.RHT && rhtOK, Stochastic: nc.Stochastic, Seed: seed}
	})
	if !rhtOK {
		p.Notes = append(p.Notes, fmt.Sprintf("%s: wgrad operands cast without the random Hadamard transform: %d rows, not a multiple of 16", l.FQN, l.Rows))
	}
	return p, nil
}

// NewLayerState returns a state without metas.
func (r NVFP4Recipe) NewLayerState(fqn string) *LayerState {
	return &LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower asks Quantizer for each operand of each GEMM: a layer whose three
// GEMMs it keeps in high precision stays so; the others convert when
// their dims are divisible by 16 (and the filter accepts them), and each
// GEMM's pair of quantizers must be one a GEMM multiplies (Multiplies).
// Delayed scaling needs state a custom recipe does not keep, and is
// refused. NVFP4 quantizers draw with the recipe's Seed (the run's when
// it is 0).
func (r CustomRecipe) Lower(l Layer) (LayerPlan, error) {
	seed := r.Seed
	if seed == 0 {
		seed = l.Seed
	}
	p := planOf(func(g GEMM, t TensorRole) Quantizer {
		q := r.Quantizer(l.FQN, g, t)
		if q.Kind == NVFP4Blocks {
			q.Seed = seed
		}
		return q
	})
	hp := true
	for _, pair := range p.GEMMs {
		hp = hp && pair[0].Kind == HighPrecision && pair[1].Kind == HighPrecision
	}
	if hp {
		return LayerPlan{Skip: "the custom recipe keeps its three GEMMs in high precision"}, nil
	}
	if why := sizeAndFilter(l); why != "" {
		return LayerPlan{Skip: why}, nil
	}
	var parts []string
	for _, g := range []GEMM{Fprop, Dgrad, Wgrad} {
		roles := g.Operands()
		qa, qb := p.GEMMs[g][0], p.GEMMs[g][1]
		for i, q := range []Quantizer{qa, qb} {
			if err := q.Check(); err != nil {
				return LayerPlan{}, fmt.Errorf("layer %q: the custom recipe's %s quantizer of the %s GEMM: %w", l.FQN, roles[i], g, err)
			}
			if q.Kind == DelayedScaling {
				return LayerPlan{}, fmt.Errorf("layer %q: the custom recipe's %s quantizer of the %s GEMM: delayed scaling keeps an amax history a custom recipe has no state for; use current scaling, or TERecipe", l.FQN, roles[i], g)
			}
		}
		if err := Multiplies(qa, qb); err != nil {
			return LayerPlan{}, fmt.Errorf("layer %q: the custom recipe's %s GEMM cannot run: %w", l.FQN, g, err)
		}
		if qa.Kind == HighPrecision {
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
func (r CustomRecipe) NewLayerState(fqn string) *LayerState {
	return &LayerState{FQN: fqn, Backend: r.Backend()}
}
