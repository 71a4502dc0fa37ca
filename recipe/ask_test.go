package recipe_test

import (
	"testing"

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
