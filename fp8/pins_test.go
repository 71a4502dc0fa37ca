package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tests in this file pin behaviours that mutation testing found
// unguarded: each fails when the behaviour it names changes.

func nanFill(s []float32) {
	for i := range s {
		s[i] = float32(math.NaN())
	}
}

func randMatrix(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(12)-6)))
	}
	return x
}

// blockOf returns the MXFP8 block index of element (r, c) and the
// elements of its block, computed from the definition.
func blockOf(rows, cols, axis, r, c int) (k int, members [][2]int) {
	if axis == 1 {
		b := c / BlockSize
		for cc := b * BlockSize; cc < min(cols, (b+1)*BlockSize); cc++ {
			members = append(members, [2]int{r, cc})
		}
		return r*((cols+BlockSize-1)/BlockSize) + b, members
	}
	b := r / BlockSize
	for rr := b * BlockSize; rr < min(rows, (b+1)*BlockSize); rr++ {
		members = append(members, [2]int{rr, c})
	}
	return c*((rows+BlockSize-1)/BlockSize) + b, members
}

// MXFP8 on shapes that are not multiples of 32, along both axes: every
// scale and code equals the definition (the block's amax through
// BlockScale, Encode(x/2^e)), the scale count is right, and the
// dequantize writes every element (its buffer starts as NaN).
func TestMXFP8EdgeBlocksMatchTheDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][2]int{{1, 1}, {3, 33}, {33, 3}, {40, 70}, {64, 32}, {31, 65}, {300, 32}, {21, 480}} {
		rows, cols := sh[0], sh[1]
		for _, axis := range []int{0, 1} {
			want := map[int]int{0: cols * ((rows + 31) / 32), 1: rows * ((cols + 31) / 32)}[axis]
			require.Equal(t, want, MXScaleCount(rows, cols, axis), "%v axis %d", sh, axis)
			for _, f := range []Format{E4M3, E5M2} {
				src := randMatrix(rng, rows*cols)
				dst := make([]uint8, rows*cols)
				scales := make([]E8M0, MXScaleCount(rows, cols, axis))
				for i := range scales {
					scales[i] = 0xAB
				}
				amax, err := QuantizeMX(dst, scales, src, rows, cols, axis, f, ExpRoundUp)
				require.NoError(t, err)
				var total float32
				for r := 0; r < rows; r++ {
					for c := 0; c < cols; c++ {
						k, members := blockOf(rows, cols, axis, r, c)
						var m float32
						for _, e := range members {
							m = max(m, float32(math.Abs(float64(src[e[0]*cols+e[1]]))))
						}
						total = max(total, m)
						s := BlockScale(m, f, ExpRoundUp)
						require.Equal(t, s, scales[k], "%v axis %d (%d,%d)", sh, axis, r, c)
						x := src[r*cols+c]
						require.Equal(t, f.Encode(x*float32(math.Ldexp(1, -s.Exp()))), dst[r*cols+c], "%v axis %d (%d,%d)", sh, axis, r, c)
					}
				}
				require.Equal(t, total, amax)
				out := make([]float32, rows*cols)
				nanFill(out)
				require.NoError(t, DequantizeMX(out, dst, scales, rows, cols, axis, f))
				for r := 0; r < rows; r++ {
					for c := 0; c < cols; c++ {
						k, _ := blockOf(rows, cols, axis, r, c)
						require.Equal(t, f.Decode(dst[r*cols+c])*scales[k].Float32(), out[r*cols+c], "%v axis %d (%d,%d)", sh, axis, r, c)
					}
				}
			}
		}
	}
}

// Axiswise along both axes: one CurrentScale per row (axis 1) or column
// (axis 0) from its amax, every code Encode(x·scale), and the inverse
// writes every element.
func TestAxiswiseMatchesTheDefinition(t *testing.T) {
	for _, shape := range [][3]int{{7, 37, 5}, {20, 300, 270}, {3, 530, -1}} {
		testAxiswise(t, shape[0], shape[1], shape[2])
	}
}

// testAxiswise is TestAxiswiseMatchesTheDefinition on one shape, with a
// NaN in row 2 at column nanCol (none if negative): wide enough shapes
// take the column amaxes in several chunks, the NaN in the second.
func testAxiswise(t *testing.T, rows, cols, nanCol int) {
	rng := rand.New(rand.NewPCG(5, uint64(cols)))
	src := randMatrix(rng, rows*cols)
	if nanCol >= 0 {
		src[2*cols+nanCol] = float32(math.NaN()) // a NaN row and column
	}
	src[cols-1] = float32(math.Inf(-1))
	for _, axis := range []int{0, 1} {
		for _, pow2 := range []bool{false, true} {
			outer := map[int]int{0: cols, 1: rows}[axis]
			scales, amaxes := make([]float32, outer), make([]float32, outer)
			nanFill(scales)
			nanFill(amaxes)
			dst := make([]uint8, rows*cols)
			require.NoError(t, QuantizeAxiswise(dst, scales, amaxes, src, rows, cols, axis, E4M3, pow2))
			for i := 0; i < outer; i++ {
				var m float32
				nan := false
				for j := 0; j < map[int]int{0: rows, 1: cols}[axis]; j++ {
					idx := j*cols + i
					if axis == 1 {
						idx = i*cols + j
					}
					v := src[idx]
					if v != v {
						nan = true
					}
					m = max(m, float32(math.Abs(float64(v))))
				}
				if nan {
					require.True(t, math.IsNaN(float64(amaxes[i])), "axis %d slice %d", axis, i)
				} else {
					require.Equal(t, m, amaxes[i], "axis %d slice %d", axis, i)
				}
				requireSame(t, CurrentScale(amaxes[i], E4M3, pow2), scales[i], "axis %d slice %d", axis, i)
			}
			out := make([]float32, rows*cols)
			nanFill(out)
			require.NoError(t, DequantizeAxiswise(out, dst, scales, rows, cols, axis, E4M3))
			for r := 0; r < rows; r++ {
				for c := 0; c < cols; c++ {
					s := scales[r]
					if axis == 0 {
						s = scales[c]
					}
					require.Equal(t, E4M3.Encode(src[r*cols+c]*s), dst[r*cols+c], "axis %d (%d,%d)", axis, r, c)
					requireSame(t, E4M3.Decode(dst[r*cols+c])/s, out[r*cols+c], "axis %d (%d,%d)", axis, r, c)
				}
			}
		}
	}
}

// Ties round to the even code in the slice cast, on the vector part and
// on the Go twin (lengths below 16 run only the twin): for each format,
// the midpoints between neighbouring codes, normal and subnormal.
func TestSliceCastTiesToEven(t *testing.T) {
	for _, f := range []Format{E4M3, E5M2} {
		var src []float32
		var want []uint8
		maxCode := uint8(0x7E)
		if f == E5M2 {
			maxCode = 0x7B
		}
		for c := uint8(0); c < maxCode; c++ {
			lo, hi := f.Decode(c), f.Decode(c+1)
			mid := float32((float64(lo) + float64(hi)) / 2)
			even := c
			if c&1 == 1 {
				even = c + 1
			}
			src = append(src, mid, -mid)
			want = append(want, even, even|0x80)
		}
		for _, n := range []int{len(src), 15, 7, 1} {
			got := make([]uint8, n)
			_, err := Quantize(got, src[:n], f, 1)
			require.NoError(t, err)
			for i := range got {
				require.Equal(t, want[i], got[i], "%v n=%d: %v", f, n, src[i])
			}
		}
	}
}

// Record keeps the largest amax of a step (the max over repeated casts).
func TestRecordKeepsTheLargest(t *testing.T) {
	m := NewMeta(E4M3, 4, 0, MostRecent, 1)
	m.Record(5)
	m.Record(2)
	m.Record(3)
	require.Equal(t, float32(5), m.History[0])
	m.Update()
	require.Equal(t, float32(448.0/5), m.Scale)
	require.Equal(t, float32(5), m.History[3])
	m.Record(1)
	m.Record(7)
	require.Equal(t, float32(7), m.History[0])
}

// Under the max algorithm, a window holding only NaN keeps the scale
// (Amax is NaN); one finite entry among NaNs sets it.
func TestMaxAlgoNaNWindowKeepsTheScale(t *testing.T) {
	nan := float32(math.NaN())
	m := NewMeta(E4M3, 3, 0, MaxAlgo, 1)
	m.Scale, m.ScaleInv = 2, 0.5
	m.History[1], m.History[2] = nan, nan
	m.Record(nan)
	require.True(t, math.IsNaN(float64(m.Amax())))
	m.Update()
	require.Equal(t, float32(2), m.Scale, "a NaN-only window keeps the scale")
	require.Equal(t, float32(0.5), m.ScaleInv)
	require.Equal(t, 1, m.NonFinite)
	m.Record(4)
	m.Update()
	require.Equal(t, float32(448.0/4), m.Scale, "NaN entries are skipped")
}

// ScaledGEMM refuses operands with too few scales or codes and a short C,
// naming the operand, and multiplies empty shapes without error.
func TestScaledGEMMRefusesShortInputs(t *testing.T) {
	g := NewScaledGEMM()
	m, n, k := 4, 5, 40
	codes := func(sz int) []uint8 { return make([]uint8, sz) }
	blocks := func(sz int) []E8M0 {
		b := make([]E8M0, sz)
		for i := range b {
			b[i] = E8M0FromExp(0)
		}
		return b
	}
	c := make([]float32, m*n)
	okA := Operand{Codes: codes(m * k), Format: E4M3, ScaleInv: 1}
	okB := Operand{Codes: codes(n * k), Format: E4M3, ScaleInv: 1}
	require.NoError(t, g.Run(m, n, k, okA, okB, c))
	for _, tc := range []struct {
		a, b Operand
		c    []float32
		says string
	}{
		{Operand{Codes: codes(m*k - 1), Format: E4M3, ScaleInv: 1}, okB, c, "operand A has 159 codes, want 160"},
		{okA, Operand{Codes: codes(n*k - 1), Format: E4M3, ScaleInv: 1}, c, "operand B has 199 codes, want 200"},
		{okA, okB, c[:m*n-1], "C has 19 elements, want 20"},
		{Operand{Codes: codes(m * k), Format: E4M3, AxisScaleInv: make([]float32, m-1)}, okB, c, "operand A has 3 axiswise scales, want 4"},
		{okA, Operand{Codes: codes(n * k), Format: E4M3, AxisScaleInv: make([]float32, n-1)}, c, "operand B has 4 axiswise scales, want 5"},
		{Operand{Codes: codes(m * k), Format: E4M3, Block: blocks(2*m - 1)}, Operand{Codes: codes(n * k), Format: E4M3, Block: blocks(2 * n)}, c, "operand A has 7 block scales, want 8"},
		{Operand{Codes: codes(m * k), Format: E4M3, Block: blocks(2 * m)}, Operand{Codes: codes(n * k), Format: E4M3, Block: blocks(2*n - 1)}, c, "operand B has 9 block scales, want 10"},
		{Operand{Codes: codes(m * k), Format: E4M3, Block: blocks(2 * m)}, okB, c, "MXFP8 needs block scales on both"},
		{Operand{F32: make([]float32, m*k-1)}, okB, c, "float32 operand A has 159 elements"},
		{Operand{Codes: codes(m * k), Format: Format(7), ScaleInv: 1}, okB, c, "format"},
	} {
		err := g.Run(m, n, k, tc.a, tc.b, tc.c)
		require.Error(t, err, tc.says)
		require.Contains(t, err.Error(), tc.says)
	}
	require.ErrorContains(t, g.Run(-1, n, k, okA, okB, c), "negative size")
	require.NoError(t, g.Run(0, 0, 0, Operand{Codes: []uint8{}, Format: E4M3, ScaleInv: 1}, Operand{Codes: []uint8{}, Format: E4M3, ScaleInv: 1}, nil))
}

// Every slice-taking function refuses short slices, naming the slice, and
// handles zero-size shapes.
func TestShortSlicesAndEmptyShapes(t *testing.T) {
	src := make([]float32, 64)
	_, err := Quantize(make([]uint8, 63), src, E4M3, 1)
	require.ErrorContains(t, err, "dst has 63 elements, src 64")
	require.ErrorContains(t, Dequantize(make([]float32, 3), make([]uint8, 4), E4M3, 1), "dst has 3 elements, src 4")
	_, err = Quantize(nil, nil, E4M3, 1)
	require.NoError(t, err)
	for _, c := range []struct {
		err  error
		says string
	}{
		{QuantizeAxiswise(make([]uint8, 63), make([]float32, 8), nil, src, 8, 8, 1, E4M3, false), "dst has 63 elements, want 64"},
		{QuantizeAxiswise(make([]uint8, 64), make([]float32, 7), nil, src, 8, 8, 0, E4M3, false), "scales has 7 elements, want 8"},
		{QuantizeAxiswise(make([]uint8, 64), make([]float32, 8), make([]float32, 7), src, 8, 8, 1, E4M3, false), "amaxes has 7 elements, want 8"},
		{QuantizeAxiswise(make([]uint8, 64), make([]float32, 8), nil, src[:63], 8, 8, 1, E4M3, false), "src has 63 elements, want 64"},
		{QuantizeAxiswise(make([]uint8, 64), make([]float32, 8), nil, src, 8, 8, 2, E4M3, false), "axis 2"},
		{QuantizeAxiswise(nil, nil, nil, nil, -1, 8, 1, E4M3, false), "negative shape"},
		{DequantizeAxiswise(make([]float32, 64), make([]uint8, 64), make([]float32, 7), 8, 8, 1, E4M3), "scales has 7 elements, want 8"},
		{DequantizeAxiswise(make([]float32, 64), make([]uint8, 64), make([]float32, 8), 8, 8, -1, E4M3), "axis -1"},
		{DequantizeMX(make([]float32, 64), make([]uint8, 64), make([]E8M0, 1), 2, 32, 1, E4M3), "scales has 1 elements, want 2"},
		{DequantizeMX(make([]float32, 64), make([]uint8, 64), make([]E8M0, 2), 2, 32, 3, E4M3), "axis 3"},
	} {
		require.Error(t, c.err, c.says)
		require.Contains(t, c.err.Error(), c.says)
	}
	_, err = QuantizeMX(make([]uint8, 64), make([]E8M0, 32), src, 2, 32, 0, E4M3, ExpRoundUp)
	require.NoError(t, err, "axis 0 of [2 32]: one scale per column")
	_, err = QuantizeMX(make([]uint8, 64), make([]E8M0, 31), src, 2, 32, 0, E4M3, ExpRoundUp)
	require.ErrorContains(t, err, "scales has 31 elements, want 32")
	_, err = QuantizeMX(make([]uint8, 64), make([]E8M0, 1), src, 2, 32, 1, E4M3, ExpRoundUp)
	require.ErrorContains(t, err, "scales has 1 elements, want 2")
	require.NoError(t, QuantizeAxiswise(nil, nil, nil, nil, 0, 5, 1, E4M3, false))
	require.NoError(t, QuantizeAxiswise(nil, make([]float32, 5), nil, nil, 0, 5, 0, E4M3, false))
	amax, err := QuantizeMX(nil, nil, nil, 0, 0, 1, E4M3, ExpRoundUp)
	require.NoError(t, err)
	require.Zero(t, amax)
	require.True(t, strings.HasPrefix(checkLen("x", 1, 2).Error(), "fp8: x:"))
}

// requireSame requires two float32s to be equal, or both NaN.
func requireSame(t *testing.T, want, got float32, msg string, args ...any) {
	t.Helper()
	if want != got && !(want != want && got != got) {
		t.Fatalf("%s: want %v, got %v", fmt.Sprintf(msg, args...), want, got)
	}
}

// MXFP8 block scales fold into the bf16 operands only while every folded
// value stays a normal float: blocks 2^60 and 2^-60 in one operand do
// not fold (the float32 path runs instead), blocks 2^20 and 2^-20 do, and
// an all-zero block's scale does not count.
func TestMXFP8FoldRange(t *testing.T) {
	if !useBF16() {
		t.Skip("no bf16 kernels on this CPU")
	}
	const m, n, k = 2, 3, 64
	ones := func(sz int) []uint8 {
		c := make([]uint8, sz)
		for i := range c {
			c[i] = 0x01 // the smallest subnormal: the worst case for the range
		}
		return c
	}
	scales := func(sz int, e ...int) []E8M0 {
		s := make([]E8M0, sz)
		for i := range s {
			s[i] = E8M0FromExp(e[i%len(e)])
		}
		return s
	}
	g := NewScaledGEMM()
	for _, c := range []struct {
		expA []int
		zero bool // the 2^-60 blocks hold only zeros
		ok   bool
	}{{[]int{60, -60}, false, false}, {[]int{20, -20}, false, true}, {[]int{60, -60}, true, true}, {[]int{0}, false, true},
		// Exactly at the edge: the smallest folded product is 2^-126
		// (A's smallest value 2^(-54-54-9), B's 2^-9), still normal;
		// one step further it is not.
		{[]int{54, -54}, false, true}, {[]int{55, -55}, false, false}} {
		a := Operand{Codes: ones(m * k), Format: E4M3, Block: scales(2*m, c.expA...)}
		if c.zero {
			for i := 0; i < m; i++ {
				for p := BlockSize; p < k; p++ {
					a.Codes[i*k+p] = 0x80 // −0
				}
			}
		}
		b := Operand{Codes: ones(n * k), Format: E4M3, Block: scales(2*n, 0), Trans: true}
		_, ok := g.prepareBF16(m, n, k, &a, &b)
		require.Equal(t, c.ok, ok, "%+v", c)
	}
}

// The names of the enumerations, and of the values just past them.
func TestEnumNames(t *testing.T) {
	require.Equal(t, "none", Backend(0).String())
	require.Equal(t, "bf16", BackendBF16.String())
	require.Equal(t, "Backend(5)", Backend(5).String())
	require.Equal(t, "E5M2", E5M2.String())
	require.Equal(t, "Format(2)", Format(2).String())
	require.Equal(t, "round_up", ExpRoundUp.String())
	require.Equal(t, "ocp_floor", ExpOCPFloor.String())
	require.Equal(t, "grad_output", RoleGradOutput.String())
	require.Equal(t, "", TensorRole(0).String())
	require.Equal(t, "TensorRole(4)", TensorRole(4).String())
	for b := BackendTE; b <= BackendBF16; b++ {
		txt, err := b.MarshalText()
		require.NoError(t, err)
		var back Backend
		require.NoError(t, back.UnmarshalText(txt))
		require.Equal(t, b, back)
	}
	for _, b := range []Backend{0, 5} {
		_, err := b.MarshalText()
		require.Error(t, err, "%d", b)
	}
	var b Backend
	require.ErrorContains(t, b.UnmarshalText([]byte("none")), "unknown backend")
	require.True(t, RoleGradOutput.IsBackward())
	require.False(t, RoleWeight.IsBackward())
}

func TestRoundDownPow2Bounds(t *testing.T) {
	for _, c := range [][2]float32{{0, 0}, {-3, -3}, {1, 1}, {1.5, 1}, {3, 2}, {0.75, 0.5},
		{math.MaxFloat32, float32(math.Ldexp(1, 127))}, {math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32},
		{3 * math.SmallestNonzeroFloat32, 2 * math.SmallestNonzeroFloat32}} {
		require.Equal(t, c[1], RoundDownPow2(c[0]), "%v", c[0])
	}
	require.True(t, math.IsInf(float64(RoundDownPow2(float32(math.Inf(1)))), 1))
}

// The inverse casts refuse short sources and destinations too.
func TestDequantizeShortSlices(t *testing.T) {
	for _, c := range []struct {
		err  error
		says string
	}{
		{DequantizeAxiswise(make([]float32, 64), make([]uint8, 63), make([]float32, 8), 8, 8, 1, E4M3), "src has 63 elements, want 64"},
		{DequantizeAxiswise(make([]float32, 63), make([]uint8, 64), make([]float32, 8), 8, 8, 0, E4M3), "dst has 63 elements, want 64"},
		{DequantizeMX(make([]float32, 64), make([]uint8, 63), make([]E8M0, 2), 2, 32, 1, E4M3), "src has 63 elements, want 64"},
		{DequantizeMX(make([]float32, 63), make([]uint8, 64), make([]E8M0, 2), 2, 32, 1, E4M3), "dst has 63 elements, want 64"},
		{DequantizeMX(make([]float32, 64), make([]uint8, 64), make([]E8M0, 31), 2, 32, 0, E4M3), "scales has 31 elements, want 32"},
	} {
		require.Error(t, c.err, c.says)
		require.Contains(t, c.err.Error(), c.says)
	}
}

// The all-zero-block rule reads the right elements in both layouts: a
// zero block whose scale is far from the others does not count, a
// non-zero one next to it does.
func TestMXFP8ZeroBlockLayouts(t *testing.T) {
	if !useBF16() {
		t.Skip("no bf16 kernels on this CPU")
	}
	const k = 64
	g := NewScaledGEMM()
	one := func(sz int) []uint8 {
		c := make([]uint8, sz)
		for i := range c {
			c[i] = 0x38 // 1.0
		}
		return c
	}
	for _, zeroFar := range []bool{true, false} {
		// A: 2 rows, row-major; row 1's second block is far (2^-120).
		a := Operand{Codes: one(2 * k), Format: E4M3, Block: []E8M0{E8M0FromExp(0), E8M0FromExp(0), E8M0FromExp(0), E8M0FromExp(-120)}}
		if zeroFar {
			for p := BlockSize; p < k; p++ {
				a.Codes[k+p] = 0
			}
		}
		b := Operand{Codes: one(2 * k), Format: E4M3, Block: []E8M0{E8M0FromExp(0), E8M0FromExp(0), E8M0FromExp(0), E8M0FromExp(0)}, Trans: true}
		_, ok := g.prepareBF16(2, 2, k, &a, &b)
		require.Equal(t, zeroFar, ok, "A row-major, far block zero: %v", zeroFar)
		// B: 2 columns stored [k][n] (not transposed): column 0's second
		// block is far.
		a2 := Operand{Codes: one(2 * k), Format: E4M3, Block: []E8M0{E8M0FromExp(0), E8M0FromExp(0), E8M0FromExp(0), E8M0FromExp(0)}}
		b2 := Operand{Codes: one(2 * k), Format: E4M3, Block: []E8M0{E8M0FromExp(0), E8M0FromExp(-120), E8M0FromExp(0), E8M0FromExp(0)}}
		if zeroFar {
			for p := BlockSize; p < k; p++ {
				b2.Codes[p*2+0] = 0x80
			}
		}
		_, ok = g.prepareBF16(2, 2, k, &a2, &b2)
		require.Equal(t, zeroFar, ok, "B column-major, far block zero: %v", zeroFar)
	}
}

// A ScaledGEMM allocates on its first run of a shape and never again:
// every scratch buffer is kept (bf16 path and float32 path, every kind
// of scale).
func TestScaledGEMMReusesItsBuffers(t *testing.T) {
	const m, n, k = 24, 20, 70
	rng := rand.New(rand.NewPCG(9, 9))
	codes := func(sz int) []uint8 {
		c := make([]uint8, sz)
		for i := range c {
			c[i] = uint8(rng.IntN(0x70))
		}
		return c
	}
	nb := (k + BlockSize - 1) / BlockSize
	blk := func(sz int) []E8M0 {
		b := make([]E8M0, sz)
		for i := range b {
			b[i] = E8M0FromExp(i%5 - 2)
		}
		return b
	}
	c := make([]float32, m*n)
	saved := useBF16
	defer func() { useBF16 = saved }()
	for _, bf16 := range []bool{true, false} {
		if bf16 && !saved() {
			continue
		}
		useBF16 = func() bool { return bf16 }
		for _, ops := range [][2]Operand{
			{{Codes: codes(m * k), Format: E4M3, ScaleInv: 0.5}, {Codes: codes(n * k), Format: E5M2, ScaleInv: 2, Trans: true}},
			{{Codes: codes(m * k), Format: E4M3, AxisScaleInv: make([]float32, m)}, {Codes: codes(n * k), Format: E4M3, AxisScaleInv: make([]float32, n)}},
			{{Codes: codes(m * k), Format: E4M3, Block: blk(m * nb)}, {Codes: codes(n * k), Format: E4M3, Block: blk(n * nb)}},
			{{Codes: codes(m * k), Format: E4M3, Block: blk(m * nb), Trans: true}, {Codes: codes(n * k), Format: E4M3, Block: blk(n * nb), Trans: true}},
			// Float8BlockScaling: power-of-two (folded) and float32 scales.
			{{Codes: codes(m * k), Format: E4M3, BlockScaleInv: []float32{0.5, 0.25, 1, 2, 4, 8, 16, 32, 64, 0.5, 0.25, 1, 2, 4, 8, 16, 32, 64, 0.5, 0.25, 1, 2, 4, 8}}, {Codes: codes(n * k), Format: E4M3, BlockScaleInv: []float32{2}, BlockTiles: true, Trans: true}},
			{{Codes: codes(m * k), Format: E4M3, BlockScaleInv: []float32{0.3}, BlockTiles: true}, {Codes: codes(n * k), Format: E5M2, BlockScaleInv: make([]float32, n), Trans: true}},
		} {
			g := NewScaledGEMM()
			require.NoError(t, g.Run(m, n, k, ops[0], ops[1], c))
			allocs := testing.AllocsPerRun(3, func() { _ = g.Run(m, n, k, ops[0], ops[1], c) })
			require.Zero(t, allocs, "bf16 %v, %s × %s", bf16, ops[0].kind(), ops[1].kind())
		}
	}
}

// quantizeAxiswiseRange over disjoint ranges, in any order, writes what
// QuantizeAxiswise writes, and only its own slices; a range outside the
// slices is refused.
func TestAxiswiseRangesMakeTheWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rows, cols := 9, 300
	src := randMatrix(rng, rows*cols)
	for _, axis := range []int{0, 1} {
		outer := map[int]int{0: cols, 1: rows}[axis]
		want, wantS, wantA := make([]uint8, rows*cols), make([]float32, outer), make([]float32, outer)
		require.NoError(t, QuantizeAxiswise(want, wantS, wantA, src, rows, cols, axis, E5M2, false))
		got, gotS, gotA := make([]uint8, rows*cols), make([]float32, outer), make([]float32, outer)
		cuts := []int{0, outer / 3, outer / 3, outer/2 + 1, outer}
		for i := len(cuts) - 2; i >= 0; i-- {
			require.NoError(t, quantizeAxiswiseRange(got, gotS, gotA, src, rows, cols, axis, E5M2, false, cuts[i], cuts[i+1]))
		}
		require.Equal(t, want, got, "axis %d", axis)
		require.Equal(t, wantS, gotS, "axis %d", axis)
		require.Equal(t, wantA, gotA, "axis %d", axis)
		// One range writes its slices only.
		part := make([]uint8, rows*cols)
		ps := make([]float32, outer)
		require.NoError(t, quantizeAxiswiseRange(part, ps, nil, src, rows, cols, axis, E5M2, false, 2, 5))
		for i := range ps {
			if (i < 2 || i >= 5) && ps[i] != 0 {
				t.Fatalf("axis %d: scale %d written", axis, i)
			}
		}
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				s := map[int]int{0: c, 1: r}[axis]
				if (s < 2 || s >= 5) && part[r*cols+c] != 0 {
					t.Fatalf("axis %d: code (%d,%d) written", axis, r, c)
				}
			}
		}
		require.ErrorContains(t, quantizeAxiswiseRange(got, gotS, nil, src, rows, cols, axis, E5M2, false, 3, outer+1), "slices [3, ")
	}
	require.NoError(t, quantizeAxiswiseRange(nil, make([]float32, 5), nil, nil, 0, 5, 0, E4M3, false, 2, 5))
}
