package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// refE2M1 rounds x to the nearest E2M1 magnitude by distance, ties to the
// even code, saturating at 6.
func refE2M1(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign, x = 8, -x
	}
	if x >= 6 || math.IsInf(float64(x), 0) {
		return sign | 7 // saturating
	}
	best, bestD := uint8(0), math.Inf(1)
	for c := uint8(0); c < 8; c++ {
		d := math.Abs(float64(x) - float64(nvfp4Values[c]))
		if d < bestD || (d == bestD && c%2 == 0) {
			best, bestD = c, d
		}
	}
	return sign | best
}

// TestE2M1Encode: every value on a fine grid through 0…8 (every
// midpoint included), both signs, infinities and NaN, against the
// nearest-even definition; decode inverts every code.
func TestE2M1Encode(t *testing.T) {
	for i := 0; i <= 8*64; i++ {
		for _, sgn := range []float32{1, -1} {
			x := sgn * float32(i) / 64
			if got, want := E2M1Encode(x), refE2M1(x); got != want {
				t.Fatalf("E2M1Encode(%v) = %d, want %d", x, got, want)
			}
		}
	}
	for _, c := range []struct {
		x    float32
		code uint8
	}{{0.25, 0}, {0.75, 2}, {1.25, 2}, {1.75, 4}, {2.5, 4}, {3.5, 6}, {5, 6}, {5.0001, 7}, {7, 7},
		{float32(math.Inf(1)), 7}, {float32(math.Inf(-1)), 15}, {float32(math.Copysign(0, -1)), 8}, {float32(math.NaN()), 7}, {1e-30, 0}} {
		if got := E2M1Encode(c.x); got != c.code {
			t.Errorf("E2M1Encode(%v) = %d, want %d", c.x, got, c.code)
		}
	}
	for c := uint8(0); c < 16; c++ {
		if E2M1Encode(E2M1Decode(c)) != c {
			t.Errorf("code %d does not round-trip", c)
		}
	}
}

// TestE2M1StochasticIsUnbiased: the mean of many stochastic roundings of
// a value lies within 3 standard errors of it, and a key gives the same
// codes again.
func TestE2M1StochasticIsUnbiased(t *testing.T) {
	for _, x := range []float32{0.3, 1.1, 2.9, 4.7, -5.5, 0.01} {
		const n = 200000
		var s, s2 float64
		for i := 0; i < n; i++ {
			v := float64(E2M1Decode(E2M1Stochastic(x, nvfp4Uniform(42, 0, i, n))))
			s += v
			s2 += v * v
		}
		mean := s / n
		se := math.Sqrt((s2/n - mean*mean) / n)
		if math.Abs(mean-float64(x)) > 3*se {
			t.Errorf("x=%v: mean of stochastic roundings %v, standard error %v", x, mean, se)
		}
	}
	src := make([]float32, 3*48)
	for i := range src {
		src[i] = float32(math.Sin(float64(i)))
	}
	a, _ := QuantizeNVFP4(src, 3, 48, Quantizer{Kind: NVFP4Blocks, Stochastic: true, Seed: 7})
	b, _ := QuantizeNVFP4(src, 3, 48, Quantizer{Kind: NVFP4Blocks, Stochastic: true, Seed: 7})
	c, _ := QuantizeNVFP4(src, 3, 48, Quantizer{Kind: NVFP4Blocks, Stochastic: true, Seed: 8})
	if string(a.Codes) != string(b.Codes) || string(a.Codes) == string(c.Codes) {
		t.Error("stochastic rounding is not a function of its key")
	}
}

// TestRHT16: worked vectors (a unit vector spreads to ±0.25, the signs
// and the Hadamard pattern as defined), norm preserved to bf16 rounding,
// lengths not a multiple of 16 refused.
func TestRHT16(t *testing.T) {
	s := [16]float32{1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1}
	for k := 0; k < 16; k++ {
		x := make([]float32, 16)
		x[k] = 1
		if err := RHT16(x); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 16; j++ {
			want := 0.25 * s[k]
			if popcount4(j&k)%2 == 1 {
				want = -want
			}
			if x[j] != want {
				t.Fatalf("e_%d: y[%d] = %v, want %v", k, j, x[j], want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(81, 82))
	x := make([]float32, 64)
	var n0, n1 float64
	for i := range x {
		x[i] = bf16Round(float32(rng.NormFloat64()))
		n0 += float64(x[i]) * float64(x[i])
	}
	_ = RHT16(x)
	for _, v := range x {
		n1 += float64(v) * float64(v)
	}
	if math.Abs(math.Sqrt(n1)-math.Sqrt(n0)) > 1e-2*math.Sqrt(n0) {
		t.Errorf("norm %v → %v", math.Sqrt(n0), math.Sqrt(n1))
	}
	if RHT16(make([]float32, 17)) == nil {
		t.Error("17 values: no error")
	}
}

// refNVFP4 casts from the definition, element by element.
func refNVFP4(src []float32, rows, cols int, twoD, rht bool) (codes []uint8, scales []uint8, sDec float32) {
	y := append([]float32(nil), src...)
	if rht {
		_ = RHT16(y)
	}
	var amax float32
	for _, v := range y {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax = a
		}
	}
	sEnc := 2688 / amax
	if math.IsInf(float64(sEnc), 0) {
		sEnc = math.MaxFloat32
	}
	if amax == 0 || sEnc == 0 {
		sEnc = 1
	}
	m := sEnc * float32(1.0/6)
	sDec = float32(1 / float64(sEnc))
	h := 1
	if twoD {
		h = 16
	}
	sr, sc := (rows+h-1)/h, (cols+15)/16
	scales = make([]uint8, sr*sc)
	codes = make([]uint8, rows*cols)
	for br := 0; br < sr; br++ {
		for bc := 0; bc < sc; bc++ {
			var b float32
			for r := br * h; r < min(rows, (br+1)*h); r++ {
				for j := bc * 16; j < min(cols, (bc+1)*16); j++ {
					b = max(b, float32(math.Abs(float64(y[r*cols+j]))))
				}
			}
			sf := E4M3.Encode(min(b*m, math.MaxFloat32))
			scales[br*sc+bc] = sf
			es := 1 / (E4M3.Decode(sf) * sDec)
			if es > math.MaxFloat32 {
				es = math.MaxFloat32
			}
			for r := br * h; r < min(rows, (br+1)*h); r++ {
				for j := bc * 16; j < min(cols, (bc+1)*16); j++ {
					codes[r*cols+j] = refE2M1(y[r*cols+j] * es)
				}
			}
		}
	}
	return codes, scales, sDec
}

// TestNVFP4MatchesDefinition: codes (unpacked from their nibbles), block
// scales and S_dec equal the definition's for 1-D and 2-D blocks, with
// and without the transform, on ragged shapes (odd rows pad a zero
// nibble) with a zero block and a huge one; dequantized values are
// e2m1·decode(sf)·S_dec.
func TestNVFP4MatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	for _, sh := range [][2]int{{1, 1}, {3, 17}, {33, 48}, {20, 64}, {17, 31}} {
		rows, cols := sh[0], sh[1]
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * math.Exp(2*rng.NormFloat64()))
		}
		for j := 0; j < min(cols, 16); j++ {
			src[j] = 0 // a zero block in 1-D
		}
		for _, huge := range []bool{false, true} {
			if huge && rows > 2 {
				src[2*cols] = 3e38 // every other block's scale then flushes
			}
			for _, twoD := range []bool{false, true} {
				for _, rht := range []bool{false, true} {
					if rht && cols%16 != 0 {
						if _, err := QuantizeNVFP4(src, rows, cols, Quantizer{Kind: NVFP4Blocks, RHT: true}); err == nil {
							t.Fatalf("%v: RHT on %d columns: no error", sh, cols)
						}
						continue
					}
					q, err := QuantizeNVFP4(src, rows, cols, Quantizer{Kind: NVFP4Blocks, BlockDim: nvfp4Dim(twoD), RHT: rht})
					if err != nil {
						t.Fatal(err)
					}
					codes, scales, sDec := refNVFP4(src, rows, cols, twoD, rht)
					if q.SDec != sDec || string(q.BlockScales) != string(scales) {
						t.Fatalf("%v twoD=%v rht=%v: scales differ", sh, twoD, rht)
					}
					for r := 0; r < rows; r++ {
						for j := 0; j < cols; j++ {
							if q.Code(r, j) != codes[r*cols+j] {
								t.Fatalf("%v twoD=%v rht=%v: code (%d,%d) = %d, want %d", sh, twoD, rht, r, j, q.Code(r, j), codes[r*cols+j])
							}
						}
						if cols%2 == 1 && q.Codes[r*((cols+1)/2)+cols/2]>>4 != 0 {
							t.Fatalf("%v: odd row %d does not end with a zero nibble", sh, r)
						}
					}
					d := make([]float32, rows*cols)
					_ = q.Dequantize(d)
					_, sc := NVFP4ScaleShape(rows, cols, twoD)
					for r := 0; r < rows; r++ {
						br := r
						if twoD {
							br = r / 16
						}
						for j := 0; j < cols; j++ {
							want := E2M1Decode(codes[r*cols+j]) * E4M3.Decode(scales[br*sc+j/16]) * sDec
							if d[r*cols+j] != want {
								t.Fatalf("dequantize (%d,%d) = %v, want %v", r, j, d[r*cols+j], want)
							}
						}
					}
				}
			}
		}
	}
	// An all-zero tensor: S_enc 1, every code and scale 0.
	q, _ := QuantizeNVFP4(make([]float32, 32), 2, 16, Quantizer{Kind: NVFP4Blocks})
	if q.SDec != 1 || q.Amax != 0 {
		t.Errorf("zeros: S_dec %v amax %v", q.SDec, q.Amax)
	}
}

// TestNVFP4ColumnwiseAndGEMM: a column-wise cast (axis 0) is the row-wise
// cast of the transpose, bit for bit (codes, block scales, amax, S_dec),
// with and without the transform and stochastic rounding, 1-D and 2-D
// (2-D tiles ignore the axis); and the NVFP4 GEMM of every layout, on
// ragged sizes, is within the float32 accumulation bound of the float64
// product of the dequantized operands, C's guard band untouched, on the
// bf16 kernels and on the float32 path. Mismatched operands are errors.
func TestNVFP4ColumnwiseAndGEMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	gen := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		}
		return v
	}
	for _, sh := range [][2]int{{16, 32}, {48, 17}, {33, 64}} {
		rows, cols := sh[0], sh[1]
		src := gen(rows * cols)
		tr := make([]float32, len(src))
		transposeF32(tr, src, rows, cols)
		for _, c := range []Quantizer{{Kind: NVFP4Blocks}, {Kind: NVFP4Blocks, RHT: true}, {Kind: NVFP4Blocks, Stochastic: true, Seed: 9}, {Kind: NVFP4Blocks, RHT: true, Stochastic: true, Seed: 3}, {Kind: NVFP4Blocks, BlockDim: 2}} {
			if c.RHT && rows%16 != 0 {
				continue
			}
			want, err := QuantizeNVFP4(tr, cols, rows, c)
			if c.twoD() {
				want, err = QuantizeNVFP4(src, rows, cols, c)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := NewNVFP4(want.Rows, want.Cols, c.twoD())
			if err := QuantizeNVFP4Into(got, src, rows, cols, 0, c); err != nil {
				t.Fatal(err)
			}
			if string(got.Codes) != string(want.Codes) || string(got.BlockScales) != string(want.BlockScales) || got.Amax != want.Amax || got.SDec != want.SDec {
				t.Fatalf("%v %+v: the column-wise cast differs from the row-wise cast of the transpose", sh, c)
			}
		}
	}
	if err := QuantizeNVFP4Into(NewNVFP4(4, 4, false), gen(16), 4, 4, 0, Quantizer{Kind: NVFP4Blocks}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func() error{
		func() error {
			return QuantizeNVFP4Into(NewNVFP4(4, 5, false), gen(20), 4, 5, 0, Quantizer{Kind: NVFP4Blocks})
		}, // stored [5 4]
		func() error {
			return QuantizeNVFP4Into(NewNVFP4(4, 4, false), gen(16), 4, 4, 2, Quantizer{Kind: NVFP4Blocks})
		},
		func() error {
			return QuantizeNVFP4Into(NewNVFP4(5, 8, false), gen(40), 8, 5, 0, Quantizer{Kind: NVFP4Blocks, RHT: true})
		},
	} {
		if bad() == nil {
			t.Fatal("no error")
		}
	}

	check := func() {
		g := NewScaledGEMM()
		for _, size := range [][3]int{{1, 1, 1}, {5, 7, 33}, {20, 17, 48}, {70, 40, 130}} {
			m, n, k := size[0], size[1], size[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, twoD := range []bool{false, true} {
						ar, ac := m, k
						if ta {
							ar, ac = k, m
						}
						br, bc := k, n
						if tb {
							br, bc = n, k
						}
						qa, _ := QuantizeNVFP4(gen(ar*ac), ar, ac, Quantizer{Kind: NVFP4Blocks, Stochastic: true, Seed: 1})
						qb, _ := QuantizeNVFP4(gen(br*bc), br, bc, Quantizer{Kind: NVFP4Blocks, BlockDim: nvfp4Dim(twoD)})
						da, db := make([]float32, ar*ac), make([]float32, br*bc)
						_ = qa.Dequantize(da)
						_ = qb.Dequantize(db)
						c := make([]float32, m*n+5)
						for i := range c {
							c[i] = -777
						}
						if err := g.Run(m, n, k, Operand{FP4: qa, Trans: ta}, Operand{FP4: qb, Trans: tb}, c); err != nil {
							t.Fatal(err)
						}
						for i := 0; i < m; i++ {
							for j := 0; j < n; j++ {
								var s, abs float64
								for p := 0; p < k; p++ {
									av, bv := da[i*k+p], db[p*n+j]
									if ta {
										av = da[p*m+i]
									}
									if tb {
										bv = db[j*k+p]
									}
									v := float64(av) * float64(bv)
									s += v
									abs += math.Abs(v)
								}
								// The dequantized values round S_dec in once more.
								bound := (float64(k) + 4) * 0x1p-24 * abs
								if d := math.Abs(float64(c[i*n+j]) - s); d > bound || math.IsNaN(d) {
									t.Fatalf("%v ta=%v tb=%v: C[%d,%d] = %v, want %v (error %.3g > %.3g)", size, ta, tb, i, j, c[i*n+j], s, d, bound)
								}
							}
						}
						for _, v := range c[m*n:] {
							if v != -777 {
								t.Fatalf("%v: wrote past C", size)
							}
						}
					}
				}
			}
		}
		q, _ := QuantizeNVFP4(gen(6), 2, 3, Quantizer{Kind: NVFP4Blocks})
		c := make([]float32, 4)
		if err := g.Run(2, 2, 3, Operand{FP4: q}, Operand{FP4: q}, c); err == nil {
			t.Fatal("mismatched shapes: no error")
		}
		if err := g.Run(2, 2, 3, Operand{FP4: q}, Operand{F32: make([]float32, 6)}, c); err == nil {
			t.Fatal("NVFP4 × float32: no error")
		}
	}
	check()
	if useBF16() {
		useBF16 = func() bool { return false }
		defer func() { useBF16 = kernels.HasBF16 }()
		check()
	}
}

// refRHT16 is the definition: it applies Transformer Engine's random Hadamard transform to each
// group of 16 consecutive values of x (its length a multiple of 16),
// in place: the values rounded to bf16, then y_j = 0.25·Σ_k s_k·
// (−1)^popcount(j&k)·v_k accumulated in float32 over k in order, rounded
// to bf16.
func refRHT16(x []float32) error {
	if len(x)%NVFP4Block != 0 {
		return fmt.Errorf("fp8: random Hadamard transform: %d values, want a multiple of 16", len(x))
	}
	var v [16]float32
	for g := 0; g < len(x); g += 16 {
		for k := range v {
			v[k] = bf16Round(x[g+k])
			if rhtSigns>>k&1 != 0 {
				v[k] = -v[k]
			}
		}
		for j := 0; j < 16; j++ {
			var s float32
			for k := 0; k < 16; k++ {
				if popcount4(j&k)&1 != 0 {
					s -= v[k]
				} else {
					s += v[k]
				}
			}
			x[g+j] = bf16Round(0.25 * s)
		}
	}
	return nil
}

// transposeF32 writes the cols × rows transpose of src into dst.
func transposeF32(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		for j := 0; j < cols; j++ {
			dst[j*rows+r] = src[r*cols+j]
		}
	}
}

// TestNVFP4KernelsMatchDefinitions: the transform's kernel equals its
// definition (bf16 inputs, float32 sums in k order, bf16 outputs) bit for
// bit; the vector E2M1 cast equals E2M1Encode and the bit-truncating
// vector stochastic rounding equals E2M1Stochastic on every kind of value.
func TestNVFP4KernelsMatchDefinitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	special := []float32{0, float32(math.Copysign(0, -1)), 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6, 6.5, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, 1e-30, 0.5, 1, 1.5, 2, 3, 4}
	x := make([]float32, 16*200)
	for i := range x {
		switch rng.IntN(3) {
		case 0:
			x[i] = special[rng.IntN(len(special))]
		case 1:
			x[i] = math.Float32frombits(rng.Uint32())
		default:
			x[i] = float32(rng.NormFloat64() * math.Exp(4*rng.NormFloat64()))
		}
	}
	y := append([]float32(nil), x...)
	if err := RHT16(x); err != nil {
		t.Fatal(err)
	}
	_ = refRHT16(y)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) && !(x[i] != x[i] && y[i] != y[i]) {
			t.Fatalf("RHT16[%d] = %v, definition %v", i, x[i], y[i])
		}
	}
	vals := make([]float32, 0, 20000)
	vals = append(vals, special...)
	for len(vals) < cap(vals) {
		vals = append(vals, float32(rng.NormFloat64()*3), math.Float32frombits(rng.Uint32()))
	}
	ones := make([]float32, (len(vals)+15)/16)
	for i := range ones {
		ones[i] = 1
	}
	codes, sr := make([]uint8, (len(vals)+1)/2), make([]uint8, (len(vals)+1)/2)
	kernels.QuantizeE2M1Blocks(codes, vals, ones)
	// The vector stochastic rounding against E2M1Stochastic with the
	// same uniform numbers.
	kernels.E2M1StochasticBlocks(sr, vals, ones, 77, 0)
	for i, v := range vals {
		if c, w := codes[i/2]>>(4*(i&1))&0xF, E2M1Encode(v); c != w {
			t.Fatalf("E2M1 of %v: kernel %#x, E2M1Encode %#x", v, c, w)
		}
		if c, w := sr[i/2]>>(4*(i&1))&0xF, E2M1Stochastic(v, nvfp4Uniform(77, 0, i, len(vals))); c != w {
			t.Fatalf("stochastic E2M1 of %v: %#x, E2M1Stochastic %#x", v, c, w)
		}
	}
	// Values on the edge of their draw: the fraction of the gap above
	// the lower code equal to the draw's u, or 2^−23 or 2^−22 of the gap
	// either side of it, below every code, either sign. A value's code
	// turns on a comparison such values decide.
	type gap struct{ lo, width float64 }
	gaps := []gap{{0, 0.5}, {0.5, 0.5}, {1, 0.5}, {1.5, 0.5}, {2, 1}, {3, 1}, {4, 2}}
	offsets := []float64{-0x1p-22, -0x1p-23, 0, 0x1p-23, 0x1p-22}
	edge := make([]float32, 16*len(gaps)*len(offsets)*4)
	for i := range edge {
		u := nvfp4Uniform(77, 0, i, len(edge))
		g, d := gaps[i/2%len(gaps)], offsets[i/2/len(gaps)%len(offsets)]
		v := float32(g.lo + g.width*(u+d))
		if i&2 != 0 {
			v = -v
		}
		edge[i] = v
	}
	esEdge := make([]float32, len(edge)/16)
	for i := range esEdge {
		esEdge[i] = 1
	}
	sr = make([]uint8, len(edge)/2)
	kernels.E2M1StochasticBlocks(sr, edge, esEdge, 77, 0)
	for i, v := range edge {
		if c, w := sr[i/2]>>(4*(i&1))&0xF, E2M1Stochastic(v, nvfp4Uniform(77, 0, i, len(edge))); c != w {
			t.Fatalf("stochastic E2M1 of %v (element %d, u %v): %#x, E2M1Stochastic %#x", v, i, nvfp4Uniform(77, 0, i, len(edge)), c, w)
		}
	}
}

// TestNVFP4QuantizerAtSize: casts large enough to split over the
// workers (row-wise and column-wise, with and without the transform, 2-D
// tiles, nearest and stochastic rounding) equal the definition element by
// element — the stochastic codes E2M1Stochastic of each value scaled by
// its block's definition scale, with the generator's uniform of its
// stored index — and NVFP4Scales' worked values, scale shapes one short
// of a block and the refusals hold.
func TestNVFP4QuantizerAtSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	// 528 rows: the column-wise passes split the rows over the parts.
	for _, sh := range [][2]int{{256, 160}, {528, 48}} {
		testNVFP4QuantizerAtSize(t, rng, sh[0], sh[1])
	}
	// Worked scale values: amax 2688 → S_enc 1, M 1/6, S_dec 1; amax 448
	// → 6, 1, 1/6; amax 0 → 1.
	for _, w := range [][4]float32{{2688, 1, float32(1.0 / 6), 1}, {448, 6, 1, float32(1.0 / 6)}, {0, 1, float32(1.0 / 6), 1}} {
		if e, m, d := NVFP4Scales(w[0]); e != w[1] || m != w[2] || d != w[3] {
			t.Fatalf("NVFP4Scales(%v) = %v %v %v, want %v %v %v", w[0], e, m, d, w[1], w[2], w[3])
		}
	}
	for _, sh := range [][3]int{{15, 15, 1}, {16, 16, 1}, {17, 17, 2}, {31, 33, 2}} {
		r, cl := NVFP4ScaleShape(sh[0], sh[1], true)
		if r != sh[2] || cl != (sh[1]+15)/16 {
			t.Fatalf("2-D scale shape of %v: [%d %d]", sh, r, cl)
		}
		if q := NewNVFP4(sh[0], sh[1], true); len(q.BlockScales) != r*cl || len(q.Codes) != sh[0]*((sh[1]+1)/2) {
			t.Fatalf("NewNVFP4%v: %d codes, %d scales", sh, len(q.Codes), len(q.BlockScales))
		}
	}
	if _, err := NewNVFP4Quantizer(-1, 4, 1, Quantizer{Kind: NVFP4Blocks}); err == nil {
		t.Fatal("negative rows: no error")
	}
	if _, err := QuantizeNVFP4(make([]float32, 3), 2, 2, Quantizer{Kind: NVFP4Blocks}); err == nil {
		t.Fatal("short source: no error")
	}
	z, _ := NewNVFP4Quantizer(2, 16, 1, Quantizer{Kind: NVFP4Blocks})
	if err := z.Quantize(NewNVFP4(2, 16, false), make([]float32, 31), 0); err == nil {
		t.Fatal("short source: no error")
	}
	short := NewNVFP4(2, 16, false)
	short.BlockScales = short.BlockScales[:1]
	if err := z.Quantize(short, make([]float32, 32), 0); err == nil {
		t.Fatal("short block scales: no error")
	}
	if err := NewNVFP4(2, 16, false).Dequantize(make([]float32, 31)); err == nil {
		t.Fatal("short dequantize destination: no error")
	}
}

func testNVFP4QuantizerAtSize(t *testing.T, rng *rand.Rand, rows, cols int) {
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	tr := make([]float32, len(src))
	transposeF32(tr, src, rows, cols)
	for _, c := range []struct {
		axis int
		cast Quantizer
	}{{1, Quantizer{Kind: NVFP4Blocks}}, {1, Quantizer{Kind: NVFP4Blocks, RHT: true}}, {0, Quantizer{Kind: NVFP4Blocks}}, {0, Quantizer{Kind: NVFP4Blocks, RHT: true}}, {0, Quantizer{Kind: NVFP4Blocks, BlockDim: 2}},
		{1, Quantizer{Kind: NVFP4Blocks, Stochastic: true, Seed: 5}}, {0, Quantizer{Kind: NVFP4Blocks, RHT: true, Stochastic: true, Seed: 1 << 40}}} {
		r, cl, s := rows, cols, src
		if c.axis == 0 && !c.cast.twoD() {
			r, cl, s = cols, rows, tr
		}
		z, err := NewNVFP4Quantizer(rows, cols, c.axis, c.cast)
		if err != nil {
			t.Fatal(err)
		}
		if z.parts < 2 && parallel.Workers() > 1 {
			t.Fatalf("%+v: a %d-element cast runs in %d part(s)", c, rows*cols, z.parts)
		}
		if wantBands := z.trans && z.parts > 1 && rows >= 512 && kernels.NVFP4ColsBands(rows, cols); z.bands != wantBands {
			t.Fatalf("%+v [%d %d]: parts split the rows: %v, want %v", c, rows, cols, z.bands, wantBands)
		}
		q := NewNVFP4(r, cl, c.cast.twoD())
		if err := z.Quantize(q, src, c.cast.Seed); err != nil {
			t.Fatal(err)
		}
		codes, scales, sDec := refNVFP4(s, r, cl, c.cast.twoD(), c.cast.RHT)
		if q.SDec != sDec || string(q.BlockScales) != string(scales) {
			t.Fatalf("%+v: scales differ from the definition", c)
		}
		y := append([]float32(nil), s...)
		if c.cast.RHT {
			_ = refRHT16(y)
		}
		if got := z.Cast(); len(got) > 0 && &got[0] != &src[0] {
			for i := range y {
				if math.Float32bits(got[i]) != math.Float32bits(y[i]) {
					t.Fatalf("%+v: the cast's source %d = %v, want %v", c, i, got[i], y[i])
				}
			}
		}
		_, bc := NVFP4ScaleShape(r, cl, c.cast.twoD())
		for i := 0; i < r; i++ {
			br := i
			if c.cast.twoD() {
				br = i / 16
			}
			for j := 0; j < cl; j++ {
				want := codes[i*cl+j]
				if c.cast.Stochastic {
					es := min(1/(E4M3.Decode(scales[br*bc+j/16])*sDec), math.MaxFloat32)
					want = E2M1Stochastic(float32(y[i*cl+j]*es), nvfp4Uniform(c.cast.Seed, i, j, cl))
				}
				if got := q.Code(i, j); got != want {
					t.Fatalf("%+v: code (%d,%d) = %#x, want %#x", c, i, j, got, want)
				}
			}
		}
	}
}

// bf16Round rounds x to bfloat16 (nearest even; NaN kept), as a float32.
func bf16Round(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return x
	}
	return math.Float32frombits((b + 0x7FFF + (b>>16)&1) &^ 0xFFFF)
}

// nvfp4Dim is the block dimension of a 2-D (16×16 tiles) or 1-D cast.
func nvfp4Dim(twoD bool) int {
	if twoD {
		return 2
	}
	return 1
}
