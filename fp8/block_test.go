package fp8

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refBlockCodes is Float8BlockScaling from its definition, element by
// element (Format.Encode on the float32 product), for a block given as
// its values: the codes and scale_inv.
func refBlock(vals []float32, f Format, eps float32, fp32 bool) ([]uint8, float32) {
	var amax float32
	for _, v := range vals {
		if v != v {
			continue // fmaxf: NaN left out
		}
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax < eps {
		amax = eps
	}
	scale := float32(1)
	if amax != 0 && !math.IsInf(float64(amax), 0) {
		scale = f.Max() / amax
		if math.IsInf(float64(scale), 1) {
			scale = math.MaxFloat32
		}
	}
	if !fp32 {
		scale = math.Float32frombits(math.Float32bits(scale) & 0xFF800000)
	}
	codes := make([]uint8, len(vals))
	for i, v := range vals {
		codes[i] = f.Encode(v * scale)
	}
	return codes, 1 / scale
}

// TestFloat8BlockMatchesDefinition: codes and scales of QuantizeFloat8Block
// equal the definition's (0 mismatches) for 1-D and 2-D blocks, both
// formats, both scale modes and an epsilon, on ragged shapes with
// all-zero blocks, blocks at the edges of the float32 range, NaN and
// infinite elements and exact ties.
func TestFloat8BlockMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, sh := range [][2]int{{1, 1}, {3, 130}, {130, 200}, {257, 129}, {128, 128}} {
		rows, cols := sh[0], sh[1]
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * math.Exp(3*rng.NormFloat64()))
		}
		// Special rows: zeros, huge, tiny, NaN, inf, ties.
		special := func(r int, fill func(j int) float32) {
			if r < rows {
				for j := 0; j < cols; j++ {
					src[r*cols+j] = fill(j)
				}
			}
		}
		special(1, func(int) float32 { return 0 })
		special(2, func(j int) float32 { return float32(j%5) * 1e38 })
		special(3, func(j int) float32 { return float32(j%7+1) * 1e-40 })
		special(4, func(j int) float32 {
			if j%9 == 0 {
				return float32(math.NaN())
			}
			return float32(j)
		})
		special(5, func(j int) float32 {
			if j == 3 {
				return float32(math.Inf(-1))
			}
			return 1
		})
		special(6, func(j int) float32 { return float32(j%4) * 7 }) // amax 21: scale 448/21, ties on rounding
		for _, f := range []Format{E4M3, E5M2} {
			for _, dim := range []int{1, 2} {
				for _, mode := range []struct {
					fp32 bool
					eps  float32
				}{{false, 0}, {true, 0}, {false, 1e-4}} {
					c := Quantizer{Kind: Float8Blocks, BlockDim: dim, Format: f, FP32Scales: mode.fp32, Eps: mode.eps}
					sr, sc := Float8BlockScaleShape(rows, cols, dim)
					codes, inv := make([]uint8, rows*cols), make([]float32, sr*sc)
					if err := QuantizeFloat8Block(codes, inv, src, rows, cols, c); err != nil {
						t.Fatal(err)
					}
					h := 1
					if dim == 2 {
						h = Float8BlockSize
					}
					for br := 0; br < sr; br++ {
						for bc := 0; bc < sc; bc++ {
							var vals []float32
							var idx []int
							for r := br * h; r < min(rows, (br+1)*h); r++ {
								for j := bc * 128; j < min(cols, (bc+1)*128); j++ {
									vals, idx = append(vals, src[r*cols+j]), append(idx, r*cols+j)
								}
							}
							want, wantInv := refBlock(vals, f, mode.eps, mode.fp32)
							if math.Float32bits(inv[br*sc+bc]) != math.Float32bits(wantInv) {
								t.Fatalf("%v %v dim %d %+v block (%d,%d): scale_inv %v, want %v", sh, f, dim, mode, br, bc, inv[br*sc+bc], wantInv)
							}
							for i, o := range idx {
								if codes[o] != want[i] {
									t.Fatalf("%v %v dim %d %+v: code[%d] of %v = %#x, want %#x", sh, f, dim, mode, o, src[o], codes[o], want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestFloat8BlockScaleCases pins the scale rules on worked values.
func TestFloat8BlockScaleCases(t *testing.T) {
	for _, c := range []struct {
		amax, eps float32
		fp32      bool
		f         Format
		scale     float32
	}{
		{3, 0, true, E4M3, 448.0 / 3},
		{3, 0, false, E4M3, 128},                       // 149.33 rounded down
		{0, 0, false, E4M3, 1},                         // all zeros
		{float32(math.Inf(1)), 0, false, E4M3, 1},      // an infinite element
		{float32(math.NaN()), 0, false, E4M3, 1},       // (NaN never reaches here from a block: fmax skips it)
		{1e-40, 0, true, E4M3, math.MaxFloat32},        // the quotient overflows
		{1e-40, 0, false, E4M3, 0x1p127},               // … rounded down to 2^127
		{1e-40, 1e-3, true, E4M3, 448 / float32(1e-3)}, // the epsilon floor
		{57344, 0, false, E5M2, 1},
		{448, 0, false, E4M3, 1},
		{449, 0, false, E4M3, 0.5},
	} {
		s, inv := Float8BlockScale(c.amax, c.f, c.eps, c.fp32)
		if s != c.scale || inv != 1/c.scale {
			t.Errorf("%+v: scale %v inv %v, want %v", c, s, inv, c.scale)
		}
	}
	// scale_inv 2^-127 is subnormal in float32 and survives.
	if _, inv := Float8BlockScale(1e-40, E4M3, 0, false); inv != 0x1p-127 {
		t.Errorf("scale_inv %v, want 2^-127", inv)
	}
}

// TestFloat8BlockTransposeAndGEMM: a 2-D cast transposes exactly; the
// block-scaled GEMM of a 1-D and a 2-D operand (and of two 1-D ones)
// matches the float64 product of the dequantized operands within the
// float32 accumulation bound, on ragged sizes; two 2-D operands and bad
// lengths are refused.
func TestFloat8BlockTransposeAndGEMM(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	m, n, k := 70, 150, 300
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range b {
		b[i] = float32(rng.NormFloat64() * 3)
	}
	for _, dims := range [][2]int{{1, 1}, {1, 2}, {2, 1}} {
		ac, bc := Quantizer{Kind: Float8Blocks, BlockDim: dims[0], Format: E4M3}, Quantizer{Kind: Float8Blocks, BlockDim: dims[1], Format: E4M3}
		ar, acn := Float8BlockScaleShape(m, k, ac.Dim())
		br, bcn := Float8BlockScaleShape(n, k, bc.Dim())
		qa, sa, qb, sb := make([]uint8, m*k), make([]float32, ar*acn), make([]uint8, n*k), make([]float32, br*bcn)
		if err := QuantizeFloat8Block(qa, sa, a, m, k, ac); err != nil {
			t.Fatal(err)
		}
		if err := QuantizeFloat8Block(qb, sb, b, n, k, bc); err != nil {
			t.Fatal(err)
		}
		da, db := make([]float32, m*k), make([]float32, n*k)
		_ = DequantizeFloat8Block(da, qa, sa, m, k, ac)
		_ = DequantizeFloat8Block(db, qb, sb, n, k, bc)
		c := make([]float32, m*n+3)
		c[m*n], c[m*n+1], c[m*n+2] = -7, -7, -7
		if err := Float8BlockGEMM(c[:m*n], m, n, k, qa, sa, ac, qb, sb, bc); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s, abs float64
				for p := 0; p < k; p++ {
					v := float64(da[i*k+p]) * float64(db[j*k+p])
					s += v
					abs += math.Abs(v)
				}
				if d := math.Abs(float64(c[i*n+j]) - s); d > float64(k+2)*0x1p-24*abs {
					t.Fatalf("dims %v C[%d][%d] = %v, want %v", dims, i, j, c[i*n+j], s)
				}
			}
		}
		if c[m*n] != -7 {
			t.Fatal("wrote past C")
		}
	}
	// Two 2-D operands.
	two := Quantizer{Kind: Float8Blocks, BlockDim: 2, Format: E4M3}
	if err := Float8BlockGEMM(make([]float32, 4), 2, 2, 2, make([]uint8, 4), make([]float32, 1), two, make([]uint8, 4), make([]float32, 1), two); err == nil {
		t.Error("two 2-D operands: no error")
	}
	// Exact transpose of a 2-D cast.
	rows, cols := 130, 257
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	c2 := Quantizer{Kind: Float8Blocks, BlockDim: 2, Format: E4M3}
	sr, sc := Float8BlockScaleShape(rows, cols, 2)
	q, s := make([]uint8, rows*cols), make([]float32, sr*sc)
	_ = QuantizeFloat8Block(q, s, src, rows, cols, c2)
	tq, ts := make([]uint8, rows*cols), make([]float32, sr*sc)
	if err := TransposeFloat8Block2D(tq, ts, q, s, rows, cols); err != nil {
		t.Fatal(err)
	}
	d, dt := make([]float32, rows*cols), make([]float32, rows*cols)
	_ = DequantizeFloat8Block(d, q, s, rows, cols, c2)
	_ = DequantizeFloat8Block(dt, tq, ts, cols, rows, c2)
	for r := 0; r < rows; r++ {
		for j := 0; j < cols; j++ {
			if d[r*cols+j] != dt[j*rows+r] {
				t.Fatalf("transpose [%d][%d]: %v vs %v", r, j, d[r*cols+j], dt[j*rows+r])
			}
		}
	}
	// Refusals.
	if err := QuantizeFloat8Block(make([]uint8, 3), make([]float32, 1), make([]float32, 4), 2, 2, Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: E4M3}); err == nil {
		t.Error("short dst: no error")
	}
	if err := QuantizeFloat8Block(make([]uint8, 4), make([]float32, 2), make([]float32, 4), 2, 2, Quantizer{Kind: Float8Blocks, BlockDim: 3, Format: E4M3}); err == nil {
		t.Error("dim 3: no error")
	}
}

// TestFloat8BlockEdgesAndLengths: shapes one short of a whole block
// (127, 255) get the right number of scales; k a multiple of 128 runs
// the GEMM's last slice; every function refuses a slice one element
// short, naming it.
func TestFloat8BlockEdgesAndLengths(t *testing.T) {
	for _, c := range []struct{ rows, cols, dim, r, c int }{{3, 127, 1, 3, 1}, {3, 255, 1, 3, 2}, {127, 255, 2, 1, 2}, {255, 129, 2, 2, 2}} {
		r, cc := Float8BlockScaleShape(c.rows, c.cols, c.dim)
		if r != c.r || cc != c.c {
			t.Errorf("%+v: scale shape [%d %d]", c, r, cc)
		}
	}
	// k = 256: two whole slices.
	m, n, k := 3, 2, 256
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(i%9) - 4
	}
	for i := range b {
		b[i] = float32(i%5) - 2
	}
	ac, bc := Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: E4M3}, Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: E4M3}
	qa, sa, qb, sb := make([]uint8, m*k), make([]float32, m*2), make([]uint8, n*k), make([]float32, n*2)
	if QuantizeFloat8Block(qa, sa, a, m, k, ac) != nil || QuantizeFloat8Block(qb, sb, b, n, k, bc) != nil {
		t.Fatal("quantize")
	}
	c := make([]float32, m*n)
	if err := Float8BlockGEMM(c, m, n, k, qa, sa, ac, qb, sb, bc); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i*k+p]) * float64(b[j*k+p]) // small integers: exact in E4M3 at these scales
			}
			if math.Abs(float64(c[i*n+j])-s) > 1e-3*math.Abs(s)+1e-3 {
				t.Fatalf("C[%d][%d] = %v, want %v", i, j, c[i*n+j], s)
			}
		}
	}
	short := func(name string, err error) {
		if err == nil {
			t.Errorf("%s one short: no error", name)
		}
	}
	d := make([]float32, m*k)
	short("dequantize dst", DequantizeFloat8Block(d[:m*k-1], qa, sa, m, k, ac))
	short("dequantize src", DequantizeFloat8Block(d, qa[:m*k-1], sa, m, k, ac))
	short("dequantize scale_inv", DequantizeFloat8Block(d, qa, sa[:len(sa)-1], m, k, ac))
	short("quantize scale_inv", QuantizeFloat8Block(qa, sa[:len(sa)-1], a, m, k, ac))
	short("quantize src", QuantizeFloat8Block(qa, sa, a[:m*k-1], m, k, ac))
	tq, ts := make([]uint8, m*k), make([]float32, 4)
	c2 := Quantizer{Kind: Float8Blocks, BlockDim: 2, Format: E4M3}
	q2, s2 := make([]uint8, m*k), make([]float32, 2)
	if err := QuantizeFloat8Block(q2, s2, a, m, k, c2); err != nil {
		t.Fatal(err)
	}
	short("transpose dst", TransposeFloat8Block2D(tq[:m*k-1], ts, q2, s2, m, k))
	short("transpose src", TransposeFloat8Block2D(tq, ts, q2[:m*k-1], s2, m, k))
	short("transpose scale_inv", TransposeFloat8Block2D(tq, ts, q2, s2[:1], m, k))
	short("transpose dst scale_inv", TransposeFloat8Block2D(tq, ts[:1], q2, s2, m, k))
	short("GEMM C", Float8BlockGEMM(c[:m*n-1], m, n, k, qa, sa, ac, qb, sb, bc))
	short("GEMM A", Float8BlockGEMM(c, m, n, k, qa[:m*k-1], sa, ac, qb, sb, bc))
	short("GEMM B", Float8BlockGEMM(c, m, n, k, qa, sa, ac, qb[:n*k-1], sb, bc))
	short("GEMM A scale_inv", Float8BlockGEMM(c, m, n, k, qa, sa[:len(sa)-1], ac, qb, sb, bc))
	short("GEMM B scale_inv", Float8BlockGEMM(c, m, n, k, qa, sa, ac, qb, sb[:len(sb)-1], bc))
}

// TestFloat8BlockAxisIsColumnwiseCopy: a 1-D cast along axis 0 gives the
// codes and scale_inv of Transformer Engine's column-wise copy (the
// source transposed, then cast row-wise by the definition), 0
// mismatches, on ragged shapes with NaN, infinite and zero columns; a
// 2-D cast does not depend on the axis; the returned amax is the
// tensor's (NaN when an element is). Bad axes and short slices are
// errors.
func TestFloat8BlockAxisIsColumnwiseCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][2]int{{1, 1}, {127, 3}, {129, 130}, {300, 17}} {
		rows, cols := sh[0], sh[1]
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * math.Exp(2*rng.NormFloat64()))
		}
		for r := 0; r < rows; r++ {
			src[r*cols] = 0 // an all-zero column
		}
		if rows > 2 && cols > 1 {
			src[2*cols+1] = float32(math.Inf(-1))
		}
		for _, f := range []Format{E4M3, E5M2} {
			for _, fp32 := range []bool{false, true} {
				c := Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: f, FP32Scales: fp32}
				nb := (rows + 127) / 128
				codes, inv := make([]uint8, rows*cols), make([]float32, cols*nb)
				amax, err := QuantizeFloat8BlockAxis(codes, inv, src, rows, cols, 0, c, nil)
				if err != nil {
					t.Fatal(err)
				}
				if want := Amax(src); math.Float32bits(amax) != math.Float32bits(want) {
					t.Fatalf("%v: amax %v, want %v", sh, amax, want)
				}
				for j := 0; j < cols; j++ {
					for b := 0; b < nb; b++ {
						var vals []float32
						for r := b * 128; r < min(rows, (b+1)*128); r++ {
							vals = append(vals, src[r*cols+j])
						}
						wc, wi := refBlock(vals, f, 0, fp32)
						if math.Float32bits(inv[j*nb+b]) != math.Float32bits(wi) {
							t.Fatalf("%v %v fp32=%v: scale_inv[%d,%d] = %v, want %v", sh, f, fp32, j, b, inv[j*nb+b], wi)
						}
						for i, w := range wc {
							if got := codes[(b*128+i)*cols+j]; got != w {
								t.Fatalf("%v %v: code (%d,%d) = %#x, want %#x", sh, f, b*128+i, j, got, w)
							}
						}
					}
				}
				// Axis 1 is QuantizeFloat8Block; a 2-D cast is the same on
				// either axis.
				for _, dim := range []int{1, 2} {
					c.BlockDim = dim
					sr, sc := Float8BlockScaleShape(rows, cols, dim)
					wc, wi := make([]uint8, rows*cols), make([]float32, sr*sc)
					if err := QuantizeFloat8Block(wc, wi, src, rows, cols, c); err != nil {
						t.Fatal(err)
					}
					for _, axis := range []int{0, 1} {
						if dim == 1 && axis == 0 {
							continue
						}
						if n := Float8BlockScaleCount(rows, cols, axis, dim); n != sr*sc {
							t.Fatalf("scale count %d, want %d", n, sr*sc)
						}
						gc, gi := make([]uint8, rows*cols), make([]float32, sr*sc)
						if _, err := QuantizeFloat8BlockAxis(gc, gi, src, rows, cols, axis, c, nil); err != nil {
							t.Fatal(err)
						}
						for i := range wc {
							if gc[i] != wc[i] {
								t.Fatalf("dim %d axis %d: code %d differs", dim, axis, i)
							}
						}
						for i := range wi {
							if gi[i] != wi[i] {
								t.Fatalf("dim %d axis %d: scale %d differs", dim, axis, i)
							}
						}
					}
				}
			}
		}
	}
	if n := Float8BlockScaleCount(300, 17, 0, 1); n != 17*3 {
		t.Fatalf("column-wise scale count %d, want 51", n)
	}
	nanSrc := []float32{1, float32(math.NaN()), 3, 4}
	a, err := QuantizeFloat8BlockAxis(make([]uint8, 4), make([]float32, 2), nanSrc, 2, 2, 0, Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: E4M3}, make([]float32, 4))
	if err != nil || a == a {
		t.Fatalf("amax with a NaN = %v, %v; want NaN", a, err)
	}
	c := Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: E4M3}
	for _, tc := range []struct {
		axis     int
		dst, inv int
	}{{2, 4, 2}, {0, 3, 2}, {0, 4, 1}, {1, 4, 1}} {
		if _, err := QuantizeFloat8BlockAxis(make([]uint8, tc.dst), make([]float32, tc.inv), []float32{1, 2, 3, 4}, 2, 2, tc.axis, c, nil); err == nil {
			t.Fatalf("%+v: no error", tc)
		}
	}
	if _, err := QuantizeFloat8BlockAxis(make([]uint8, 4), make([]float32, 2), []float32{1, 2, 3, 4}, 2, 2, 0, Quantizer{Kind: Float8Blocks, BlockDim: 3, Format: E4M3}, nil); err == nil {
		t.Fatal("dim 3: no error")
	}
}

// TestScaledGEMMFloat8BlockRefusals: a Float8BlockScaling operand beside
// one with other scales, two 2-D operands, and too few block scales are
// errors that say so.
func TestScaledGEMMFloat8BlockRefusals(t *testing.T) {
	g := NewScaledGEMM()
	const m, n, k = 2, 3, 130
	mk := func(outer int, tiles bool) Operand {
		return Operand{Codes: make([]uint8, outer*k), Format: E4M3, Trans: true, BlockTiles: tiles,
			BlockScaleInv: []float32{1, 1, 1, 1, 1, 1}[:float8BlockFactors(outer, k, tiles)]}
	}
	c := make([]float32, m*n)
	a, b := mk(m, false), mk(n, false)
	a.Trans = false
	if err := g.Run(m, n, k, a, b, c); err != nil {
		t.Fatal(err)
	}
	tensorwise := Operand{Codes: make([]uint8, n*k), Format: E4M3, Trans: true, ScaleInv: 1}
	ta, tb := mk(m, true), mk(n, true)
	ta.Trans = false
	short := b
	short.BlockScaleInv = short.BlockScaleInv[:5]
	for name, tc := range map[string][2]Operand{"mixed": {a, tensorwise}, "two 2-D": {ta, tb}, "short": {a, short}} {
		if err := g.Run(m, n, k, tc[0], tc[1], c); err == nil {
			t.Fatalf("%s: no error", name)
		}
	}
	// One 2-D operand is fine either side.
	if err := g.Run(m, n, k, ta, b, c); err != nil {
		t.Fatal(err)
	}
}

// TestFloat8BlockRangeSplits: a cast run as two ranges of slices (any
// split, for rows, bands of 128 rows and columns) writes what one run of
// all of them writes, codes and scales, and returns the amax of its own
// slices; empty ranges are fine, ranges past the slices are refused; a
// block holding both a NaN and an infinity takes the infinity as its
// amax.
func TestFloat8BlockRangeSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, cols := range []int{260, 256} { // rows of whole blocks are cast in one run
		testFloat8BlockRangeSplits(t, rng, cols)
	}
}

func testFloat8BlockRangeSplits(t *testing.T, rng *rand.Rand, cols int) {
	const rows = 300
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	src[7*cols+3], src[90*cols+200] = float32(math.NaN()), float32(math.Inf(-1))
	for _, cfg := range []struct{ axis, dim int }{{1, 1}, {0, 1}, {1, 2}} {
		c := Quantizer{Kind: Float8Blocks, BlockDim: cfg.dim, Format: E4M3}
		n := float8BlockSlices(rows, cols, cfg.axis, cfg.dim)
		nsc := Float8BlockScaleCount(rows, cols, cfg.axis, cfg.dim)
		wc, wi := make([]uint8, len(src)), make([]float32, nsc)
		wa, err := quantizeFloat8BlockRange(wc, wi, src, rows, cols, cfg.axis, c, 0, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{0, 1, n / 3, n - 1, n} {
			gc, gi := make([]uint8, len(src)), make([]float32, nsc)
			a1, err1 := quantizeFloat8BlockRange(gc, gi, src, rows, cols, cfg.axis, c, 0, k, make([]float32, 2*cols+rows*3))
			a2, err2 := quantizeFloat8BlockRange(gc, gi, src, rows, cols, cfg.axis, c, k, n, make([]float32, 2*cols+rows*3))
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if string(gc) != string(wc) {
				t.Fatalf("%+v split at %d: codes differ", cfg, k)
			}
			for i := range wi {
				if gi[i] != wi[i] {
					t.Fatalf("%+v split at %d: scale %d differs", cfg, k, i)
				}
			}
			if m := max(a1, a2); !(m == wa || (m != m && wa != wa)) {
				t.Fatalf("%+v split at %d: amaxes %v, %v; whole %v", cfg, k, a1, a2, wa)
			}
		}
		// Scratch one value too short for the cast is not used (the cast
		// allocates its own) and changes nothing.
		nb := (cols + Float8BlockSize - 1) / Float8BlockSize
		short := map[int]int{1: nb - 1, 2: Float8BlockSize*nb + nb - 1}[cfg.dim]
		if cfg.axis == 0 && cfg.dim == 1 {
			short = 2*cols - 1
		}
		sc, si := make([]uint8, len(src)), make([]float32, nsc)
		if _, err := quantizeFloat8BlockRange(sc, si, src, rows, cols, cfg.axis, c, 0, n, make([]float32, short)); err != nil {
			t.Fatal(err)
		}
		if string(sc) != string(wc) {
			t.Fatalf("%+v with short scratch: codes differ", cfg)
		}
		for _, r := range [][2]int{{-1, 1}, {0, n + 1}, {2, 1}} {
			if _, err := quantizeFloat8BlockRange(wc, wi, src, rows, cols, cfg.axis, c, r[0], r[1], nil); err == nil {
				t.Fatalf("%+v range %v: no error", cfg, r)
			}
		}
	}
}

// TestFloat8BlockBandsSplits: the column-wise cast split into bands of
// 128 rows (quantizeFloat8BlockBands) writes exactly the codes and
// scales of the whole cast, whatever the split (a ragged last band, NaN
// and infinity included), each band's amax combining to the whole's;
// bad bands and 2-D blocks are refused.
func TestFloat8BlockBandsSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const rows, cols = 300, 70
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	src[7*cols+3], src[200*cols+69] = float32(math.NaN()), float32(math.Inf(-1))
	for _, f := range []Format{E4M3, E5M2} {
		c := Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: f, Eps: 1e-30}
		nsc := Float8BlockScaleCount(rows, cols, 0, 1)
		wc, wi := make([]uint8, len(src)), make([]float32, nsc)
		wa, err := QuantizeFloat8BlockAxis(wc, wi, src, rows, cols, 0, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		const bands = 3
		for k := 0; k <= bands; k++ {
			gc, gi := make([]uint8, len(src)), make([]float32, nsc)
			a1, err1 := quantizeFloat8BlockBands(gc, gi, src, rows, cols, c, 0, k, nil)
			a2, err2 := quantizeFloat8BlockBands(gc, gi, src, rows, cols, c, k, bands, make([]float32, 2*cols))
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if string(gc) != string(wc) {
				t.Fatalf("%v split at band %d: codes differ", f, k)
			}
			for i := range wi {
				if math.Float32bits(gi[i]) != math.Float32bits(wi[i]) {
					t.Fatalf("%v split at band %d: scale_inv %d = %v, want %v", f, k, i, gi[i], wi[i])
				}
			}
			if m := max(a1, a2); !(m == wa || (m != m && wa != wa)) {
				t.Fatalf("%v split at band %d: amaxes %v, %v; whole %v", f, k, a1, a2, wa)
			}
		}
		for _, r := range [][2]int{{-1, 1}, {0, bands + 1}, {2, 1}} {
			if _, err := quantizeFloat8BlockBands(wc, wi, src, rows, cols, c, r[0], r[1], nil); err == nil {
				t.Fatalf("bands %v: no error", r)
			}
		}
	}
	// A band past the last is refused when the rows fill their bands
	// exactly too.
	if _, err := quantizeFloat8BlockBands(make([]uint8, 256*cols), make([]float32, 2*cols), make([]float32, 256*cols), 256, cols, Quantizer{Kind: Float8Blocks, BlockDim: 1}, 0, 3, nil); err == nil {
		t.Fatal("band 2 of 256 rows: no error")
	}
	if _, err := quantizeFloat8BlockBands(make([]uint8, rows*cols), make([]float32, 9), src, rows, cols, Quantizer{Kind: Float8Blocks, BlockDim: 2}, 0, 1, nil); err == nil {
		t.Fatal("2-D blocks in bands: no error")
	}
	if _, err := quantizeFloat8BlockBands(make([]uint8, 10), make([]float32, 1000), src, rows, cols, Quantizer{Kind: Float8Blocks, BlockDim: 1}, 0, 1, nil); err == nil {
		t.Fatal("short dst: no error")
	}
}

// TestFloat8BlockNaNAndInfinity: a block holding both a NaN and an
// infinity takes the infinity as its amax.
func TestFloat8BlockNaNAndInfinity(t *testing.T) {
	// A NaN and an infinity in one block (row-wise and down a column).
	x := make([]float32, 4*128)
	x[3], x[5] = float32(math.NaN()), float32(math.Inf(1))
	inv := make([]float32, 4)
	if _, err := QuantizeFloat8BlockAxis(make([]uint8, len(x)), inv, x, 4, 128, 1, Quantizer{Kind: Float8Blocks, BlockDim: 1, Format: E4M3}, nil); err != nil {
		t.Fatal(err)
	}
	if inv[0] != 1 { // an infinite amax: scale 1
		t.Fatalf("scale_inv of a block with NaN and inf = %v, want 1", inv[0])
	}
	// A NaN in a tile, a row block or a column block (ragged ones too)
	// is left out of the block's amax, an infinity is not; the cast's
	// amax is NaN only when an element is NaN. Values of widely spread
	// magnitudes, so that a block's amax taken over any other range
	// gives another scale; every block against the definition.
	rng := rand.New(rand.NewPCG(81, 82))
	const rows, cols = 200, 300
	for _, c := range []struct{ axis, dim int }{{1, 2}, {1, 1}, {0, 1}} {
		for _, special := range []string{"nan", "inf", "both", "none"} {
			y := make([]float32, rows*cols)
			for i := range y {
				y[i] = float32(rng.NormFloat64() * math.Exp(4*rng.NormFloat64()))
			}
			at := func(r, col int, v float64) { y[r*cols+col] = float32(v) }
			if special == "nan" || special == "both" {
				at(21, 4, math.NaN())
				at(150, 290, math.NaN()) // the ragged corner
				at(130, 140, math.NaN())
			}
			if special == "inf" || special == "both" {
				at(150, 291, math.Inf(-1))
				at(3, 200, math.Inf(1))
			}
			f := Quantizer{Kind: Float8Blocks, BlockDim: c.dim, Format: E4M3}
			inv := make([]float32, Float8BlockScaleCount(rows, cols, c.axis, c.dim))
			codes := make([]uint8, len(y))
			a, err := QuantizeFloat8BlockAxis(codes, inv, y, rows, cols, c.axis, f, nil)
			if err != nil {
				t.Fatal(err)
			}
			var want float32
			nan := false
			for _, v := range y {
				nan = nan || v != v
				want = max(want, float32(math.Abs(float64(v))))
			}
			if nan != (a != a) || (!nan && a != want) {
				t.Fatalf("%+v %s: amax %v, want %v (NaN: %v)", c, special, a, want, nan)
			}
			// Every block's elements, gathered, against refBlock.
			blocks := map[int][]int{}
			for i := range y {
				k := Float8BlockIndex(rows, cols, c.axis, c.dim, i/cols, i%cols)
				blocks[k] = append(blocks[k], i)
			}
			for k, idx := range blocks {
				vals := make([]float32, len(idx))
				for j, i := range idx {
					vals[j] = y[i]
				}
				wc, wi := refBlock(vals, E4M3, 0, false)
				if math.Float32bits(inv[k]) != math.Float32bits(wi) {
					t.Fatalf("%+v %s: block %d scale_inv %v, want %v", c, special, k, inv[k], wi)
				}
				for j, i := range idx {
					if codes[i] != wc[j] {
						t.Fatalf("%+v %s: element %d code %#x, want %#x", c, special, i, codes[i], wc[j])
					}
				}
			}
		}
	}
}

// TestFloat8BlockFastPath: a cast without NaNs never leaves the fused
// kernels for the slower paths of blocks that hold one (every block
// option, ragged rows and columns, whole casts and parts of them), and a
// cast with a NaN takes them.
func TestFloat8BlockFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	for _, sh := range [][2]int{{128, 784}, {200, 300}, {3, 512}, {130, 40}, {257, 129}} {
		rows, cols := sh[0], sh[1]
		for _, c := range []struct{ axis, dim int }{{1, 2}, {1, 1}, {0, 1}} {
			for _, nan := range []bool{false, true} {
				y := make([]float32, rows*cols)
				for i := range y {
					y[i] = float32(rng.NormFloat64() * math.Exp(2*rng.NormFloat64()))
				}
				if nan {
					y[rng.IntN(len(y))] = float32(math.NaN())
				}
				f := Quantizer{Kind: Float8Blocks, BlockDim: c.dim, Format: E4M3}
				inv := make([]float32, Float8BlockScaleCount(rows, cols, c.axis, c.dim))
				codes := make([]uint8, len(y))
				n := float8BlockSlices(rows, cols, c.axis, c.dim)
				before := nanPaths.Load()
				for _, part := range [][2]int{{0, n / 2}, {n / 2, n}} {
					if _, err := quantizeFloat8BlockRange(codes, inv, y, rows, cols, c.axis, f, part[0], part[1], nil); err != nil {
						t.Fatal(err)
					}
				}
				if took := nanPaths.Load() - before; (took > 0) != nan {
					t.Fatalf("%v %+v NaN %v: %d calls of the NaN paths", sh, c, nan, took)
				}
			}
		}
	}
}
