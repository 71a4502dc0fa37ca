package recipe_test

import (
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

func layer(fqn string, index, count, out, in, rows int) recipe.Layer {
	return recipe.Layer{FQN: fqn, Index: index, Count: count, Out: out, In: in, Rows: rows}
}

// TestLoweringPlans: what each recipe's Lower gives a layer — which
// layers convert and why not, the quantizer of every GEMM operand, the
// GEMMs kept in high precision, notes — and the state it keeps.
func TestLoweringPlans(t *testing.T) {
	l := layer("m.fc", 1, 3, 64, 32, 48)
	// TE: delayed scaling, HYBRID formats; wgrad overridden.
	p, err := recipe.TE{OverrideLinearPrecision: recipe.Override{Wgrad: true}}.Lower(l)
	require.NoError(t, err)
	require.Empty(t, p.Skip)
	require.Equal(t, [2]fp8.Quantizer{{Kind: fp8.DelayedScaling, Format: fp8.E4M3}, {Kind: fp8.DelayedScaling, Format: fp8.E4M3}}, p.GEMMs[fp8.Fprop])
	require.Equal(t, [2]fp8.Quantizer{{Kind: fp8.DelayedScaling, Format: fp8.E5M2}, {Kind: fp8.DelayedScaling, Format: fp8.E4M3}}, p.GEMMs[fp8.Dgrad])
	require.Equal(t, [2]fp8.Quantizer{}, p.GEMMs[fp8.Wgrad])
	st := recipe.TE{}.NewLayerState("m.fc")
	require.NotNil(t, st.Input)
	require.Equal(t, fp8.E5M2, st.GradOutput.Format)
	// MXFP8 with the OCP rule; no metas.
	p, err = recipe.TE{UseMXFP8BlockScaling: true, MXFP8Rule: fp8.ExpOCPFloor}.Lower(l)
	require.NoError(t, err)
	require.Equal(t, fp8.Quantizer{Kind: fp8.MXFP8Blocks, Format: fp8.E5M2, Rule: fp8.ExpOCPFloor}, p.GEMMs[fp8.Wgrad][0])
	require.Nil(t, recipe.TE{UseMXFP8BlockScaling: true}.NewLayerState("m.fc").Input)
	// Sizes and the caller's filter.
	p, _ = recipe.TE{}.Lower(layer("m.odd", 1, 3, 10, 32, 48))
	require.Equal(t, "weight dims [10 32] are not both divisible by 16", p.Skip)
	no := l
	no.Accept = func() bool { return false }
	p, _ = recipe.Float8Block{}.Lower(no)
	require.Equal(t, "excluded by the filter", p.Skip)
	// MS-AMP: the TE plan, power-of-two metas, its own backend.
	ms := recipe.MSAMP{}.NewLayerState("m.fc")
	require.True(t, ms.Input.Pow2 && ms.Weight.Pow2 && ms.GradOutput.Pow2)
	require.Equal(t, fp8.BackendMSAMP, ms.Backend)
	// bf16: any size.
	p, _ = recipe.BF16{}.Lower(layer("m.odd", 0, 1, 10, 3, 5))
	require.Empty(t, p.Skip)
	require.Equal(t, fp8.BF16Rounding, p.GEMMs[fp8.Dgrad][1].Kind)
	// AO: torchao's default filter, rowwise casts, a high-precision wgrad.
	ao, _ := recipe.NewAO(recipe.AORowwiseWithGWHP)
	p, _ = ao.Lower(layer("m.first", 0, 3, 64, 32, 48))
	require.Equal(t, "first linear layer stays in high precision (torchao default filter)", p.Skip)
	p, _ = ao.Lower(layer("m.last", 2, 3, 64, 32, 48))
	require.Equal(t, "last linear layer stays in high precision (torchao default filter)", p.Skip)
	p, err = ao.Lower(l)
	require.NoError(t, err)
	require.True(t, p.GEMMs[fp8.Fprop][0].Axiswise)
	require.Equal(t, fp8.CurrentScaling, p.GEMMs[fp8.Fprop][0].Kind)
	require.Equal(t, [2]fp8.Quantizer{}, p.GEMMs[fp8.Wgrad], "rowwise_with_gw_hp keeps the wgrad in high precision")
	aoFilter := ao
	aoFilter.ModuleFilter = func(node any, fqn string) bool { return fqn != "m.fc" }
	p, _ = aoFilter.Lower(l)
	require.Equal(t, "excluded by the recipe's module filter", p.Skip)
}

// TestNVFP4Lowering: first and last layers kept, the transform off (and
// said) when the rows are not a multiple of 16, the run's seed used when
// the recipe has none.
func TestNVFP4Lowering(t *testing.T) {
	r := recipe.NVFP4{KeepFirst: 1, KeepLast: 1}
	p, _ := r.Lower(layer("a", 0, 4, 32, 32, 32))
	require.Equal(t, "one of the first 1 linear layers, kept in high precision (NVFP4 recipe's keep_first)", p.Skip)
	p, _ = r.Lower(layer("d", 3, 4, 32, 32, 32))
	require.Equal(t, "one of the last 1 linear layers, kept in high precision (NVFP4 recipe's keep_last)", p.Skip)
	l := layer("b", 1, 4, 32, 32, 24)
	l.Seed = 42
	p, err := r.Lower(l)
	require.NoError(t, err)
	require.Equal(t, []string{"b: wgrad operands cast without the random Hadamard transform: 24 rows, not a multiple of 16"}, p.Notes)
	require.False(t, p.GEMMs[fp8.Wgrad][1].RHT)
	require.Equal(t, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 1, Stochastic: true, Seed: 42}, p.GEMMs[fp8.Wgrad][0])
	require.Equal(t, 2, p.GEMMs[fp8.Fprop][1].Dim(), "weights in 16×16 tiles")
	l.Rows = 32
	p, _ = recipe.NVFP4{Seed: 7}.Lower(l)
	require.Empty(t, p.Notes)
	require.Equal(t, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 1, RHT: true, Stochastic: true, Seed: 7}, p.GEMMs[fp8.Wgrad][0], "a seed of its own is kept")
}

// TestCustomLowering: the quantizers asked for, the run's seed for NVFP4,
// a layer kept whole, refusals naming the layer and GEMM, and the note.
func TestCustomLowering(t *testing.T) {
	mx := fp8.Quantizer{Kind: fp8.MXFP8Blocks}
	r := recipe.Custom{Quantizer: func(fqn string, g fp8.GEMM, _ fp8.TensorRole) fp8.Quantizer {
		switch {
		case fqn == "hp":
			return fp8.Quantizer{}
		case g == fp8.Wgrad:
			return fp8.Quantizer{}
		case g == fp8.Dgrad:
			return fp8.Quantizer{Kind: fp8.NVFP4Blocks}
		}
		return mx
	}}
	l := layer("x", 0, 1, 32, 32, 32)
	l.Seed = 9
	p, err := r.Lower(l)
	require.NoError(t, err)
	require.Equal(t, [2]fp8.Quantizer{mx, mx}, p.GEMMs[fp8.Fprop])
	require.Equal(t, uint64(9), p.GEMMs[fp8.Dgrad][0].Seed)
	require.Equal(t, "by the custom recipe", p.KeptBy[fp8.Wgrad])
	require.Equal(t, []string{"x: custom recipe: fprop MXFP8 E4M3 × MXFP8 E4M3; dgrad NVFP4 1×16 × NVFP4 1×16; wgrad high precision"}, p.Notes)
	p, _ = r.Lower(layer("hp", 0, 1, 32, 32, 32))
	require.Equal(t, "the custom recipe keeps its three GEMMs in high precision", p.Skip)
	bad := recipe.Custom{Quantizer: func(string, fp8.GEMM, fp8.TensorRole) fp8.Quantizer {
		return fp8.Quantizer{Kind: fp8.DelayedScaling}
	}}
	_, err = bad.Lower(l)
	require.ErrorContains(t, err, `layer "x": the custom recipe's input quantizer of the fprop GEMM: delayed scaling`)
	mixed := recipe.Custom{Quantizer: func(_ string, _ fp8.GEMM, t fp8.TensorRole) fp8.Quantizer {
		if t == fp8.RoleWeight {
			return fp8.Quantizer{Kind: fp8.CurrentScaling}
		}
		return mx
	}}
	_, err = mixed.Lower(l)
	require.ErrorContains(t, err, `layer "x": the custom recipe's fprop GEMM cannot run`)
}
