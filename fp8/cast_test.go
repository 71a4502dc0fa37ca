package fp8

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// castKinds are the quantizers a Cast casts with (NVFP4 apart).
func castKinds() []Quantizer {
	return []Quantizer{
		{Kind: DelayedScaling, Format: E4M3},
		{Kind: CurrentScaling, Format: E4M3},
		{Kind: CurrentScaling, Format: E5M2, Pow2: true},
		{Kind: CurrentScaling, Format: E4M3, Axiswise: true, Pow2: true},
		{Kind: MXFP8Blocks, Format: E4M3},
		{Kind: Float8Blocks, Format: E4M3, BlockDim: 1},
		{Kind: Float8Blocks, Format: E4M3, BlockDim: 2, FP32Scales: true},
	}
}

// TestCastRowsAsExact: a Cast built for more rows casts any number of
// rows as a Cast built for exactly those rows does — codes, scales, amax
// and the GEMM operand — along both axes, small and split over the
// workers, zero rows included; the delayed meta records the amax.
func TestCastRowsAsExact(t *testing.T) {
	const maxRows, cols = 700, 160
	x := make([]float32, maxRows*cols)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37)) * float32(1+i%53)
	}
	for _, q := range castKinds() {
		for _, axis := range []int{0, 1} {
			for _, rows := range []int{0, 1, 31, 129, 300, maxRows} {
				m1, m2 := NewMeta(q.Format, 4, 0, MostRecent, 1), NewMeta(q.Format, 4, 0, MostRecent, 1)
				m1.Scale, m1.ScaleInv, m2.Scale, m2.ScaleInv = 4, 0.25, 4, 0.25
				big, err := NewCast(q, maxRows, cols, axis, m1)
				require.NoError(t, err)
				exact, err := NewCast(q, rows, cols, axis, m2)
				require.NoError(t, err)
				a, b := make([]uint8, maxRows*cols), make([]uint8, rows*cols)
				require.NoError(t, big.QuantizeRows(a, x, rows, 0, true))
				require.NoError(t, exact.Quantize(b, x[:rows*cols], 0, true))
				what := []any{q, "axis", axis, "rows", rows}
				require.Equal(t, b, a[:rows*cols], what...)
				require.Equal(t, math.Float32bits(exact.Amax), math.Float32bits(big.Amax), what...)
				require.Equal(t, exact.ScaleInv, big.ScaleInv, what...)
				oa, ob := big.Operand(a[:rows*cols], axis == 0, axis == 0), exact.Operand(b, axis == 0, axis == 0)
				if ob.AxisScaleInv != nil {
					require.Equal(t, ob.AxisScaleInv, oa.AxisScaleInv[:len(ob.AxisScaleInv)], what...)
				}
				if ob.Block != nil {
					require.Equal(t, ob.Block, oa.Block[:len(ob.Block)], what...)
				}
				if ob.BlockScaleInv != nil {
					require.Equal(t, ob.BlockScaleInv, oa.BlockScaleInv[:len(ob.BlockScaleInv)], what...)
				}
				require.Equal(t, math.Float32bits(m2.Amax()), math.Float32bits(m1.Amax()), what...)
			}
		}
	}
}

// TestCastRefusals: quantizers and shapes a Cast cannot serve are
// errors, never panics.
func TestCastRefusals(t *testing.T) {
	_, err := NewCast(Quantizer{Kind: DelayedScaling}, 4, 4, 1, nil)
	require.ErrorContains(t, err, "fp8.Meta")
	_, err = NewCast(Quantizer{Kind: BF16Rounding}, 4, 4, 1, nil)
	require.ErrorContains(t, err, "does not cast")
	_, err = NewCast(Quantizer{Kind: MXFP8Blocks}, 4, 4, 2, nil)
	require.ErrorContains(t, err, "axis 2")
	_, err = NewCast(Quantizer{Kind: NVFP4Blocks, RHT: true}, 4, 20, 1, nil)
	require.ErrorContains(t, err, "multiple of 16")
	c, err := NewCast(Quantizer{Kind: CurrentScaling}, 4, 4, 1, nil)
	require.NoError(t, err)
	require.ErrorContains(t, c.QuantizeRows(make([]uint8, 32), make([]float32, 32), 5, 0, false), "5 rows")
	require.ErrorContains(t, c.Quantize(make([]uint8, 8), make([]float32, 16), 0, false), "FP8 buffer")
	n, err := NewCast(Quantizer{Kind: NVFP4Blocks}, 32, 32, 1, nil)
	require.NoError(t, err)
	require.ErrorContains(t, n.QuantizeRows(nil, make([]float32, 32*32), 16, 0, false), "NVFP4")
}

// TestCastAllocatesNothing: casting, after the first cast, allocates
// nothing, whatever the number of rows.
func TestCastAllocatesNothing(t *testing.T) {
	const maxRows, cols = 512, 256
	x := make([]float32, maxRows*cols)
	for i := range x {
		x[i] = float32(i%89) - 44
	}
	dst := make([]uint8, len(x))
	for _, q := range castKinds() {
		c, err := NewCast(q, maxRows, cols, 0, NewMeta(q.Format, 4, 0, MostRecent, 1))
		require.NoError(t, err)
		require.NoError(t, c.QuantizeRows(dst, x, 300, 0, true))
		rows := 0
		allocs := testing.AllocsPerRun(10, func() {
			rows = (rows + 97) % maxRows
			if err := c.QuantizeRows(dst, x, rows, 0, true); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "%v", q)
	}
}

// TestQuantizerAxes: which casts run along an axis, the axis a cast is
// made along, the names dumps show, and the canonical form that two
// quantizers casting alike share.
func TestQuantizerAxes(t *testing.T) {
	for _, c := range []struct {
		q       Quantizer
		along   bool
		scaling string
	}{
		{Quantizer{Kind: DelayedScaling}, false, "delayed"},
		{Quantizer{Kind: CurrentScaling}, false, "current"},
		{Quantizer{Kind: CurrentScaling, Axiswise: true}, true, "axiswise"},
		{Quantizer{Kind: MXFP8Blocks}, true, "mxfp8"},
		{Quantizer{Kind: Float8Blocks}, true, "float8block"},
		{Quantizer{Kind: Float8Blocks, BlockDim: 2}, false, "float8block"},
		{Quantizer{Kind: NVFP4Blocks, BlockDim: 1}, true, "nvfp4"},
		{Quantizer{Kind: NVFP4Blocks, BlockDim: 2}, false, "nvfp4"},
		{Quantizer{Kind: BF16Rounding}, false, "bf16"},
		{Quantizer{}, false, "none"},
	} {
		require.Equal(t, c.along, c.q.AlongAxis(), "%v", c.q)
		require.Equal(t, c.scaling, c.q.Scaling(), "%v", c.q)
		want := 0
		if c.along {
			want = 1
		}
		require.Equal(t, want, c.q.CastAxis(1), "%v", c.q)
		require.Equal(t, c.q.Kind != HighPrecision && c.q.Kind != BF16Rounding, c.q.Casts(), "%v", c.q)
	}
	// Fields a kind does not read do not tell two quantizers apart.
	a := Quantizer{Kind: MXFP8Blocks, Format: E4M3, Pow2: true, Eps: 3, BlockDim: 2}
	require.Equal(t, Quantizer{Kind: MXFP8Blocks, Format: E4M3}, a.Canonical())
	n := Quantizer{Kind: NVFP4Blocks, Format: E5M2, RHT: true, Seed: 9}
	require.Equal(t, Quantizer{Kind: NVFP4Blocks, BlockDim: 1, RHT: true, Seed: 9}, n.Canonical())
	f := Quantizer{Kind: Float8Blocks, Format: E4M3, FP32Scales: true, Eps: 1e-6, Axiswise: true}
	require.Equal(t, Quantizer{Kind: Float8Blocks, Format: E4M3, BlockDim: 1, FP32Scales: true, Eps: 1e-6}, f.Canonical())
	require.False(t, Quantizer{Kind: BF16Rounding + 1}.Casts())
}
