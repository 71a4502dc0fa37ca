package recipe_test

import (
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestRecipesAnswer: what each recipe tells the compiler and the trainer
// (its label, evaluation behaviour, float8 all-gather, low-bit
// optimizer), so that neither needs its type.
func TestRecipesAnswer(t *testing.T) {
	ao, err := recipe.NewAO(recipe.AORowwise)
	require.NoError(t, err)
	aoTW, err := recipe.NewAO(recipe.AOTensorwise)
	require.NoError(t, err)
	aoTW.EnableFSDPFloat8AllGather = true
	for _, c := range []struct {
		r        recipe.Recipe
		label    string
		eval, ag bool
		msam     bool
	}{
		{recipe.TE{}, "te/HYBRID", false, false, false},
		{recipe.TE{Format: recipe.AllE4M3, UseMXFP8BlockScaling: true, UseAutocastDuringEval: true}, "te/E4M3/mxfp8", true, false, false},
		{ao, "ao/rowwise", true, false, false},
		{aoTW, "ao/tensorwise", true, true, false},
		{recipe.MSAMP{OptLevel: "O1"}, "msamp/O1", true, false, true},
		{recipe.BF16{}, "bf16", true, false, false},
		{recipe.Float8Block{FSDPFloat8AllGather: true}, "block/E4M3/x1w2g1", false, true, false},
		{recipe.NVFP4{UseAutocastDuringEval: true}, "nvfp4", true, false, false},
		{recipe.Custom{}, "custom", false, false, false},
	} {
		require.Equal(t, c.label, c.r.Label())
		require.Equal(t, c.eval, c.r.EvalQuantized(), c.label)
		require.Equal(t, c.ag, c.r.Float8AllGather(), c.label)
		ms, ok := c.r.LowBitOptimizer()
		require.Equal(t, c.msam, ok, c.label)
		if ok {
			require.Equal(t, c.r, ms)
		}
	}
}

// WithBackward: the plan of every converted layer carries the override,
// skipped layers none; the label says it; a bad override is refused; no
// override or no recipe leaves the recipe as it was.
func TestWithBackward(t *testing.T) {
	r := recipe.WithBackward(recipe.Float8Block{}, recipe.BackwardHighPrecision)
	require.Equal(t, "block/E4M3/x1w2g1/backward=high_precision", r.Label())
	p, err := r.Lower(recipe.Layer{FQN: "fc", Out: 64, In: 32, Count: 1})
	require.NoError(t, err)
	require.Equal(t, recipe.BackwardHighPrecision, p.Backward)
	require.Equal(t, fp8.Float8Blocks, p.GEMMs[fp8.Dgrad][0].Kind, "the recipe's quantizers are kept")
	p, err = r.Lower(recipe.Layer{FQN: "odd", Out: 10, In: 32, Count: 1})
	require.NoError(t, err)
	require.NotEmpty(t, p.Skip)
	require.Equal(t, recipe.BackwardQuantized, p.Backward)
	require.NoError(t, r.Validate())
	require.ErrorContains(t, recipe.WithBackward(recipe.TE{}, 7).Validate(), "backward override 7")
	require.ErrorContains(t, recipe.WithBackward(recipe.TE{Margin: -1}, recipe.BackwardDequantized).Validate(), "margin")
	require.Equal(t, recipe.Recipe(recipe.TE{}), recipe.WithBackward(recipe.TE{}, recipe.BackwardQuantized))
	require.Nil(t, recipe.WithBackward(nil, recipe.BackwardDequantized))
	ms, ok := recipe.WithBackward(recipe.MSAMP{OptLevel: "O1"}, recipe.BackwardDequantized).LowBitOptimizer()
	require.True(t, ok)
	require.Equal(t, "O1", ms.Level())
}

// An AO recipe takes current-scaling or high-precision casts only.
func TestAORefusesOtherCasts(t *testing.T) {
	r, err := recipe.NewAO(recipe.AOTensorwise)
	require.NoError(t, err)
	r.Input = fp8.Quantizer{Kind: fp8.MXFP8Blocks}
	r.Weight = r.Input
	require.ErrorContains(t, r.Validate(), "torchao's casts are current scaling")
	r, _ = recipe.NewAO(recipe.AOTensorwise)
	r.GradOutput.Format = 9
	require.ErrorContains(t, r.Validate(), "format 9")
}
