package fp8_test

import (
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/stretchr/testify/require"
)

// TestRecipesAnswer: what each recipe tells the compiler and the trainer
// (its label, evaluation behaviour, float8 all-gather, low-bit
// optimizer), so that neither needs its type.
func TestRecipesAnswer(t *testing.T) {
	ao, err := fp8.NewAORecipe(fp8.AORowwise)
	require.NoError(t, err)
	aoTW, err := fp8.NewAORecipe(fp8.AOTensorwise)
	require.NoError(t, err)
	aoTW.EnableFSDPFloat8AllGather = true
	for _, c := range []struct {
		r        fp8.Recipe
		label    string
		eval, ag bool
		msam     bool
	}{
		{fp8.TERecipe{}, "te/HYBRID", false, false, false},
		{fp8.TERecipe{Format: fp8.AllE4M3, UseMXFP8BlockScaling: true, UseAutocastDuringEval: true}, "te/E4M3/mxfp8", true, false, false},
		{ao, "ao/rowwise", true, false, false},
		{aoTW, "ao/tensorwise", true, true, false},
		{fp8.MSAMPRecipe{OptLevel: "O1"}, "msamp/O1", true, false, true},
		{fp8.BF16Recipe{}, "bf16", true, false, false},
		{fp8.Float8BlockRecipe{FSDPFloat8AllGather: true}, "block/E4M3/x1w2g1", false, true, false},
		{fp8.NVFP4Recipe{UseAutocastDuringEval: true}, "nvfp4", true, false, false},
		{fp8.CustomRecipe{}, "custom", false, false, false},
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
