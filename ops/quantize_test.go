package ops

import (
	"math"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestCastSplitAmax casts a tensor large enough to be split over the
// workers: the codes equal one fp8.Quantize over the whole tensor, and
// the amax is the largest |x| wherever it lies (NaN winning), for delayed
// and current scaling.
func TestCastSplitAmax(t *testing.T) {
	const rows, cols = 256, 512
	for _, where := range []int{0, rows*cols/2 - 1, rows*cols/2 + 1, rows*cols - 1} {
		for _, special := range []float32{1000, float32(math.Inf(-1)), float32(math.NaN())} {
			for _, scaling := range []fp8.QuantizerKind{fp8.DelayedScaling, fp8.CurrentScaling} {
				xs := make([]float32, rows*cols)
				for i := range xs {
					xs[i] = float32(i%97) * 0.01
				}
				xs[where] = special
				cfg := QuantizeConfig{Quantizer: fp8.Quantizer{Kind: scaling, Format: fp8.E4M3}, Meta: recipe.TE{Margin: 3}.NewMeta(false)}
				sc, err := newScales(cfg, graph.Shape{rows, cols})
				require.NoError(t, err)
				dst := make([]uint8, len(xs))
				require.NoError(t, castKernel(cfg, sc, dst, xs, false)())
				if special != special {
					require.True(t, sc.Amax != sc.Amax, "NaN at %d: amax %v", where, sc.Amax)
				} else {
					require.Equal(t, float32(math.Abs(float64(special))), sc.Amax, "%v at %d", special, where)
				}
				want := make([]uint8, len(xs))
				fp8.Quantize(want, xs, fp8.E4M3, 1/sc.ScaleInv)
				require.Equal(t, want, dst, "%v at %d, %v", special, where, scaling)
			}
		}
	}
}
