package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/internal/kernels"
	"github.com/stretchr/testify/require"
)

func sqnr(ref []float64, out []float32) float64 {
	var num, den float64
	for i := range ref {
		d := ref[i] - float64(out[i])
		num += d * d
		den += ref[i] * ref[i]
	}
	return 10 * math.Log10(den/num)
}

func normal(rng *rand.Rand, n int, std float64) ([]float32, []float64) {
	s := make([]float32, n)
	r := make([]float64, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * std)
		r[i] = float64(s[i])
	}
	return s, r
}

func TestQuantizeRoundTripSQNR(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 64, 96
	src, ref := normal(rng, rows*cols, 3)
	// Give rows very different magnitudes, where axiswise scaling helps.
	for r := 0; r < rows; r++ {
		f := float32(math.Pow(2, 2*float64(r%13-6)))
		for c := 0; c < cols; c++ {
			src[r*cols+c] *= f
			ref[r*cols+c] = float64(src[r*cols+c])
		}
	}
	q := make([]uint8, len(src))
	out := make([]float32, len(src))
	// The references' 25 dB bar is for E4M3; E5M2's two mantissa bits
	// give about 26 dB at best, so it gets a 22 dB floor.
	bar := map[Format]float64{E4M3: 25, E5M2: 22}
	for _, f := range []Format{E4M3, E5M2} {
		// Tensorwise, current scaling.
		amax := Amax(src)
		s := CurrentScale(amax, f, false)
		if got := quantize(q, src, f, s); got != amax {
			t.Fatalf("Quantize returned amax %v, Amax says %v", got, amax)
		}
		Dequantize(out, q, f, 1/s)
		tw := sqnr(ref, out)
		qTW := append([]uint8(nil), q...)
		// Axiswise along both axes.
		scales := make([]float32, max(rows, cols))
		for _, axis := range []int{0, 1} {
			if err := QuantizeAxiswise(q, scales, nil, src, rows, cols, axis, f, true); err != nil {
				t.Fatal(err)
			}
			if err := DequantizeAxiswise(out, q, scales, rows, cols, axis, f); err != nil {
				t.Fatal(err)
			}
			ax := sqnr(ref, out)
			if ax < bar[f] {
				t.Errorf("%v axiswise(axis %d) round trip SQNR %.1f dB < %v", f, axis, ax, bar[f])
			}
			t.Logf("%v axiswise axis %d SQNR %.1f dB", f, axis, ax)
			if axis == 1 && f == E4M3 {
				// On the rows scaled by 2^-12, tensorwise scaling
				// underflows while rowwise keeps full precision.
				small := func(o []float32) float64 {
					var rr []float64
					var oo []float32
					for r := 0; r < rows; r += 13 {
						rr = append(rr, ref[r*cols:r*cols+cols]...)
						oo = append(oo, o[r*cols:r*cols+cols]...)
					}
					return sqnr(rr, oo)
				}
				smallAx := small(out)
				Dequantize(out, qTW, f, 1/s)
				smallTW := small(out)
				if smallAx < 25 || smallTW > 10 {
					t.Errorf("small rows: rowwise SQNR %.1f dB (want ≥ 25), tensorwise %.1f dB (want < 10)", smallAx, smallTW)
				}
			}
		}
		// MXFP8 along both axes, both exponent rules.
		for _, rule := range []ExpRule{ExpRoundUp, ExpOCPFloor} {
			for _, axis := range []int{0, 1} {
				bs := make([]E8M0, MXScaleCount(rows, cols, axis))
				a, err := QuantizeMX(q, bs, src, rows, cols, axis, f, rule)
				if err != nil {
					t.Fatal(err)
				}
				if a != amax {
					t.Fatalf("QuantizeMX amax %v, want %v", a, amax)
				}
				if err := DequantizeMX(out, q, bs, rows, cols, axis, f); err != nil {
					t.Fatal(err)
				}
				mx := sqnr(ref, out)
				if mx < bar[f] {
					t.Errorf("%v MXFP8 %v axis %d round trip SQNR %.1f dB < %v", f, rule, axis, mx, bar[f])
				}
				t.Logf("%v MXFP8 %v axis %d SQNR %.1f dB", f, rule, axis, mx)
			}
		}
		if f == E4M3 && tw < bar[f] {
			t.Errorf("E4M3 tensorwise round trip SQNR %.1f dB < 25", tw)
		}
		t.Logf("%v tensorwise SQNR %.1f dB", f, tw)
	}
}

func TestQuantizeMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	src, _ := normal(rng, 4096, 100)
	src = append(src, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e30)
	q := make([]uint8, len(src))
	for _, f := range []Format{E4M3, E5M2} {
		for _, scale := range []float32{1, 0.37, 3.5} {
			Quantize(q, src, f, scale)
			for i, v := range src {
				if want := f.Encode(v * scale); q[i] != want {
					t.Fatalf("%v: Quantize(%v·%v) = %#02x, Encode gives %#02x", f, v, scale, q[i], want)
				}
			}
		}
	}
	// A NaN anywhere makes the amax NaN.
	if a := quantize(q[:3], []float32{1, float32(math.NaN()), 2}, E4M3, 1); !math.IsNaN(float64(a)) {
		t.Fatalf("amax with a NaN input = %v", a)
	}
	if a := Amax([]float32{-7, 3, float32(math.NaN())}); !math.IsNaN(float64(a)) {
		t.Fatalf("Amax with NaN = %v", a)
	}
	if a := Amax([]float32{-7, 3}); a != 7 {
		t.Fatalf("Amax = %v", a)
	}
}

func TestCurrentScale(t *testing.T) {
	if s := CurrentScale(2, E4M3, false); s != 224 {
		t.Errorf("scale %v", s)
	}
	if s := CurrentScale(3, E4M3, true); s != 128 { // 149.33 rounded down
		t.Errorf("pow2 scale %v", s)
	}
	if s := CurrentScale(0, E4M3, false); s != float32(448/1e-12) {
		t.Errorf("zero amax scale %v, want 448/1e-12", s)
	}
	if s := CurrentScale(3, E5M2, false); s != float32(57344.0/3) {
		t.Errorf("E5M2 scale %v", s)
	}
	// Transformer Engine's rule for non-finite amaxes: scale 1, so the
	// inverse scale stays finite.
	for _, a := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		for _, pow2 := range []bool{false, true} {
			if s := CurrentScale(a, E4M3, pow2); s != 1 || math.IsInf(float64(1/s), 0) {
				t.Errorf("CurrentScale(%v, pow2=%v) = %v, want 1", a, pow2, s)
			}
		}
	}
	if s := CurrentScale(math.SmallestNonzeroFloat32, E5M2, false); math.IsInf(float64(s), 0) || s <= 0 {
		t.Errorf("CurrentScale of the smallest amax = %v, want a finite scale", s)
	}
	for _, v := range []float32{1, 1.5, 1000, 3e-40, 0.75} {
		p := RoundDownPow2(v)
		if p > v || p*2 <= v {
			t.Errorf("RoundDownPow2(%v) = %v", v, p)
		}
	}
}

func TestMXBlockExponent(t *testing.T) {
	// One block whose amax is 448·2^3 gets 2^3 under the round-up rule and
	// its largest value maps to 448 exactly; scaled maxima lie in (224, 448].
	src := make([]float32, 64)
	for i := range src {
		src[i] = float32(i+1) * 0.01
	}
	src[5] = 448 * 8
	q := make([]uint8, 64)
	bs := make([]E8M0, 2)
	if _, err := QuantizeMX(q, bs, src, 1, 64, 1, E4M3, ExpRoundUp); err != nil {
		t.Fatal(err)
	}
	if bs[0].Exp() != 3 || E4M3.Decode(q[5]) != 448 {
		t.Fatalf("block 0 scale %v, value %v", bs[0], E4M3.Decode(q[5]))
	}
	if bs[1].Exp() != int(math.Ceil(math.Log2(0.64/448))) {
		t.Fatalf("block 1 scale %v", bs[1])
	}
	// Bad shapes are errors, not panics.
	if _, err := QuantizeMX(q, bs[:1], src, 1, 64, 1, E4M3, ExpRoundUp); err == nil {
		t.Fatal("too few scales accepted")
	}
	if err := QuantizeAxiswise(q, make([]float32, 1), nil, src, 2, 32, 1, E4M3, false); err == nil {
		t.Fatal("too few axiswise scales accepted")
	}
	if err := QuantizeAxiswise(q, make([]float32, 2), nil, src, 2, 32, 2, E4M3, false); err == nil {
		t.Fatal("axis 2 accepted")
	}
}

func refMatMul(a []float32, b []float32, m, n, k int, ta, tb bool) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				av := a[i*k+p]
				if ta {
					av = a[p*m+i]
				}
				bv := b[p*n+j]
				if tb {
					bv = b[j*k+p]
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = s
		}
	}
	return out
}

func TestScaledGEMMSQNR(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const m, n, k = 48, 40, 96
	g := NewScaledGEMM()
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			a, _ := normal(rng, m*k, 1)
			b, _ := normal(rng, k*n, 0.05)
			ref := refMatMul(a, b, m, n, k, ta, tb)
			c := make([]float32, m*n)
			qa, qb := make([]uint8, m*k), make([]uint8, k*n)

			// Tensorwise.
			sa, sb := CurrentScale(Amax(a), E4M3, false), CurrentScale(Amax(b), E4M3, false)
			Quantize(qa, a, E4M3, sa)
			Quantize(qb, b, E4M3, sb)
			if err := g.Run(m, n, k, Operand{Codes: qa, Format: E4M3, Trans: ta, ScaleInv: 1 / sa},
				Operand{Codes: qb, Format: E4M3, Trans: tb, ScaleInv: 1 / sb}, c); err != nil {
				t.Fatal(err)
			}
			if s := sqnr(ref, c); s < 25 {
				t.Errorf("tensorwise ta=%v tb=%v: SQNR %.1f dB < 25", ta, tb, s)
			}

			// Axiswise: scales per row of op(A) and per column of op(B).
			ra, rb := make([]float32, m), make([]float32, n)
			arows, acols, aaxis := m, k, 1
			if ta {
				arows, acols, aaxis = k, m, 0
			}
			brows, bcols, baxis := k, n, 0
			if tb {
				brows, bcols, baxis = n, k, 1
			}
			if err := QuantizeAxiswise(qa, ra, nil, a, arows, acols, aaxis, E4M3, true); err != nil {
				t.Fatal(err)
			}
			if err := QuantizeAxiswise(qb, rb, nil, b, brows, bcols, baxis, E4M3, true); err != nil {
				t.Fatal(err)
			}
			inv := func(s []float32) []float32 {
				o := make([]float32, len(s))
				for i, v := range s {
					o[i] = 1 / v
				}
				return o
			}
			if err := g.Run(m, n, k, Operand{Codes: qa, Format: E4M3, Trans: ta, AxisScaleInv: inv(ra)},
				Operand{Codes: qb, Format: E4M3, Trans: tb, AxisScaleInv: inv(rb)}, c); err != nil {
				t.Fatal(err)
			}
			if s := sqnr(ref, c); s < 25 {
				t.Errorf("axiswise ta=%v tb=%v: SQNR %.1f dB < 25", ta, tb, s)
			}

			// MXFP8, blocked along k for each operand.
			ba, bb := make([]E8M0, MXScaleCount(arows, acols, aaxis)), make([]E8M0, MXScaleCount(brows, bcols, baxis))
			if _, err := QuantizeMX(qa, ba, a, arows, acols, aaxis, E4M3, ExpRoundUp); err != nil {
				t.Fatal(err)
			}
			if _, err := QuantizeMX(qb, bb, b, brows, bcols, baxis, E4M3, ExpRoundUp); err != nil {
				t.Fatal(err)
			}
			if err := g.Run(m, n, k, Operand{Codes: qa, Format: E4M3, Trans: ta, Block: ba},
				Operand{Codes: qb, Format: E4M3, Trans: tb, Block: bb}, c); err != nil {
				t.Fatal(err)
			}
			if s := sqnr(ref, c); s < 25 {
				t.Errorf("MXFP8 ta=%v tb=%v: SQNR %.1f dB < 25", ta, tb, s)
			}

			// B kept in float32 (a precision override): better still.
			if err := g.Run(m, n, k, Operand{Codes: qa, Format: E4M3, Trans: ta, Block: ba},
				Operand{F32: b, Trans: tb}, c); err != nil {
				t.Fatal(err)
			}
			if s := sqnr(ref, c); s < 28 {
				t.Errorf("MXFP8·float32 ta=%v tb=%v: SQNR %.1f dB < 28", ta, tb, s)
			}
		}
	}
	// Errors instead of panics.
	if err := g.Run(4, 4, 4, Operand{Codes: make([]uint8, 3)}, Operand{F32: make([]float32, 16)}, make([]float32, 16)); err == nil {
		t.Error("short operand accepted")
	}
	if err := g.Run(4, 4, 4, Operand{F32: make([]float32, 16)}, Operand{F32: make([]float32, 16)}, make([]float32, 15)); err == nil {
		t.Error("short C accepted")
	}
	if err := g.Run(4, 4, 32, Operand{Codes: make([]uint8, 128), Block: make([]E8M0, 4)}, Operand{Codes: make([]uint8, 128), ScaleInv: 1}, make([]float32, 16)); err == nil {
		t.Error("MXFP8 mixed with tensorwise accepted")
	}
}

func BenchmarkQuantizeAmax(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	src, _ := normal(rng, 1<<20, 1)
	dst := make([]uint8, len(src))
	b.SetBytes(int64(4 * len(src)))
	for i := 0; i < b.N; i++ {
		Quantize(dst, src, E4M3, 100)
	}
}

func BenchmarkCopy(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	src, _ := normal(rng, 1<<20, 1)
	dst := make([]float32, len(src))
	b.SetBytes(int64(4 * len(src)))
	for i := 0; i < b.N; i++ {
		copy(dst, src)
	}
}

func BenchmarkDequantize(b *testing.B) {
	q := make([]uint8, 1<<20)
	for i := range q {
		q[i] = uint8(i)
	}
	dst := make([]float32, len(q))
	b.SetBytes(int64(4 * len(q)))
	for i := 0; i < b.N; i++ {
		Dequantize(dst, q, E4M3, 0.01)
	}
}

// TestQuantizeVectorMatchesScalar checks the slice cast (vector kernel
// and its Go twin) against the one-value Encode on every kind of value,
// including NaN, ±inf, subnormals and ties, at lengths that leave a tail
// for the twin.
func TestQuantizeVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 464, 465, 61440, 1.0 / 1024, 3.0 / 1024,
		math.SmallestNonzeroFloat32, math.MaxFloat32, 1e-7, -1e-3}
	for _, n := range []int{1, 15, 16, 17, 100, 4099} {
		src := make([]float32, n)
		for i := range src {
			switch rng.IntN(4) {
			case 0:
				src[i] = special[rng.IntN(len(special))]
			case 1:
				src[i] = math.Float32frombits(rng.Uint32()) // any bit pattern, NaNs included
			default:
				src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
			}
		}
		for _, f := range []Format{E4M3, E5M2} {
			for _, scale := range []float32{1, 0.37, 1e4} {
				got, want := make([]uint8, n), make([]uint8, n)
				ga := quantize(got, src, f, scale)
				wa := float32(0)
				for i, v := range src {
					want[i] = f.Encode(v * scale)
					if a := float32(math.Abs(float64(v))); a != a || wa != wa {
						wa = float32(math.NaN())
					} else {
						wa = max(wa, a)
					}
				}
				for i := range got {
					if got[i] != want[i] && !(f.IsNaN(got[i]) && f.IsNaN(want[i])) {
						t.Fatalf("%v n=%d scale=%v: [%d] %v → %#02x, scalar %#02x", f, n, scale, i, src[i], got[i], want[i])
					}
				}
				if math.Float32bits(ga) != math.Float32bits(wa) && !(math.IsNaN(float64(ga)) && math.IsNaN(float64(wa))) {
					t.Fatalf("%v n=%d: amax %v, scalar %v", f, n, ga, wa)
				}
			}
		}
	}
}

// BenchmarkGEMM1024 compares, in one run, the float32 GEMM with the FP8
// GEMM including the quantization of both inputs (delayed scaling: scale
// known, cast and amax in one pass).
func BenchmarkGEMM1024(b *testing.B) {
	const n = 1024
	rng := rand.New(rand.NewPCG(1, 1))
	x, _ := normal(rng, n*n, 1)
	w, _ := normal(rng, n*n, 0.05)
	c := make([]float32, n*n)
	flops := 2 * float64(n) * n * n
	b.Run("fp32", func(b *testing.B) {
		g := kernels.NewGemm()
		for i := 0; i < b.N; i++ {
			g.Run(false, true, n, n, n, 1, x, n, w, n, 0, c, n)
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("fp8", func(b *testing.B) {
		g := NewScaledGEMM()
		qx, qw := make([]uint8, n*n), make([]uint8, n*n)
		sx, sw := CurrentScale(Amax(x), E4M3, false), CurrentScale(Amax(w), E4M3, false)
		for i := 0; i < b.N; i++ {
			Quantize(qx, x, E4M3, sx)
			Quantize(qw, w, E4M3, sw)
			if err := g.Run(n, n, n, Operand{Codes: qx, Format: E4M3, ScaleInv: 1 / sx}, Operand{Codes: qw, Format: E4M3, Trans: true, ScaleInv: 1 / sw}, c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

// TestAmaxAgainstPlainLoop checks Amax on every length up to 11 and on
// lengths around the vector kernel's 64-value blocks, with a NaN, an
// infinity, a negative zero, a huge and a tiny value at every position,
// against the plain definition.
func TestAmaxAgainstPlainLoop(t *testing.T) {
	plain := func(v []float32) float32 {
		var m float64
		for _, x := range v {
			if x != x {
				return float32(math.NaN())
			}
			m = math.Max(m, math.Abs(float64(x)))
		}
		return float32(m)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	specials := []float32{float32(math.NaN()), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), -1e30, 1e-45}
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 63, 64, 65, 128, 200, 257} {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		check := func() {
			got, want := Amax(v), plain(v)
			if want != want {
				if got == got {
					t.Fatalf("Amax(%v) = %v, want NaN", v, got)
				}
				return
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("Amax(%v) = %v, want %v", v, got, want)
			}
		}
		check()
		for pos := 0; pos < n; pos++ {
			for _, s := range specials {
				old := v[pos]
				v[pos] = s
				check()
				v[pos] = old
			}
		}
	}
}

// The slice casts refuse a quantizer of another family or a bad block
// dimension, naming what they want.
func TestCastsRefuseOtherQuantizers(t *testing.T) {
	src := make([]float32, 4*128)
	codes, inv := make([]uint8, len(src)), make([]float32, 8)
	err := QuantizeFloat8Block(codes, inv, src, 4, 128, Quantizer{Kind: MXFP8Blocks})
	require.ErrorContains(t, err, "Float8Blocks")
	err = QuantizeFloat8Block(codes, inv, src, 4, 128, Quantizer{Kind: Float8Blocks, BlockDim: 3})
	require.ErrorContains(t, err, "block dimension 3")
	require.NoError(t, QuantizeFloat8Block(codes, inv, src, 4, 128, Quantizer{Kind: Float8Blocks}), "BlockDim 0 means 1")
	_, err = QuantizeNVFP4(src, 4, 128, Quantizer{Kind: Float8Blocks})
	require.ErrorContains(t, err, "NVFP4Blocks")
	_, err = QuantizeNVFP4(src, 4, 128, Quantizer{Kind: NVFP4Blocks, BlockDim: -1})
	require.ErrorContains(t, err, "block dimension -1")
	_, err = NewNVFP4Quantizer(4, 128, 1, Quantizer{})
	require.ErrorContains(t, err, "NVFP4Blocks")
}

// TestQuantizeSplitMatchesOneLoop: Quantize, Dequantize and Amax split
// long slices over the workers (forced to four parts here) and give the
// one-part loop's codes, values and amax bit for bit — with the largest
// value, and then a NaN, in the first part and in the last.
func TestQuantizeSplitMatchesOneLoop(t *testing.T) {
	const n = 3*splitMin + 1234
	rng := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 100)
	}
	splitMu.Lock()
	saved, savedCount := freeSplitters, splitPartCount
	freeSplitters, splitPartCount = nil, 4
	splitMu.Unlock()
	defer func() {
		splitMu.Lock()
		freeSplitters, splitPartCount = saved, savedCount
		splitMu.Unlock()
	}()
	for trial, special := range []float32{1e4, float32(math.NaN()), 1e4, float32(math.NaN())} {
		at := []int{5, 5, n - 7, n - 7}[trial]
		saved := src[at]
		src[at] = special
		for _, f := range []Format{E4M3, E5M2} {
			got, want := make([]uint8, n), make([]uint8, n)
			amax, err := Quantize(got, src, f, 0.37)
			require.NoError(t, err)
			wantAmax := kernels.QuantizeFP8(formats[f].cast, want, src, 0.37)
			require.Equal(t, want, got, "%v codes", f)
			require.Equal(t, math.Float32bits(fromAmaxBits(wantAmax)), math.Float32bits(amax), "%v amax", f)
			require.Equal(t, math.Float32bits(fromAmaxBits(kernels.AmaxBits(src))), math.Float32bits(Amax(src)))
			vals, wantVals := make([]float32, n), make([]float32, n)
			require.NoError(t, Dequantize(vals, got, f, 2.5))
			kernels.DecodeFP8(formats[f].cast, wantVals, got, 2.5)
			for i := range vals {
				if math.Float32bits(vals[i]) != math.Float32bits(wantVals[i]) {
					t.Fatalf("%v value %d: %v, want %v", f, i, vals[i], wantVals[i])
				}
			}
		}
		src[at] = saved
	}
}

// quantizeMXLoop is QuantizeMX as a plain loop over the blocks (the
// reference the vector form is held to): each block's amax (a NaN
// making it NaN), its scale, Encode of each value times 2^−e.
func quantizeMXLoop(dst []uint8, scales []E8M0, src []float32, rows, cols, axis int, f Format, rule ExpRule) float32 {
	var total float32
	nan := false
	forEachBlock(rows, cols, axis, func(k, start, stride, n int) {
		var m float32
		bn := false
		for i := 0; i < n; i++ {
			a := float32(math.Abs(float64(src[start+i*stride])))
			if a > m {
				m = a
			} else if a != a {
				bn = true
			}
		}
		if bn {
			m = float32(math.NaN())
			nan = true
		} else if m > total {
			total = m
		}
		s := BlockScale(m, f, rule)
		scales[k] = s
		inv := float32(math.Ldexp(1, -s.Exp()))
		if s == E8M0NaN {
			inv = float32(math.NaN())
		}
		for i := 0; i < n; i++ {
			dst[start+i*stride] = f.Encode(src[start+i*stride] * inv)
		}
	})
	if nan {
		return float32(math.NaN())
	}
	return total
}

// TestQuantizeMXMatchesLoop holds QuantizeMX (vector kernels, a band's
// columns a chunk at a time) and quantizeMXRange over two ranges to the
// block loop, bit for bit: both axes, rules and formats, ragged shapes
// (short last blocks, more columns than a chunk), blocks of zeros, of
// denormals, with ±inf, and with NaN (one NaN in a column block of an
// otherwise finite chunk).
func TestQuantizeMXMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, sh := range [][2]int{{1, 1}, {3, 70}, {64, 32}, {70, 33}, {33, 300}, {96, 520}, {5, 257}, {2, 8250}} { // 8250: more blocks a row than a chunk
		rows, cols := sh[0], sh[1]
		for _, kind := range []string{"normal", "special", "nan"} {
			src := make([]float32, rows*cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(30)-15))
				if kind == "special" {
					switch rng.IntN(8) {
					case 0:
						src[i] = 0
					case 1:
						src[i] = math.Float32frombits(rng.Uint32() & 0x807FFFFF) // denormal
					case 2:
						src[i] = float32(math.Inf(rng.IntN(2)*2 - 1))
					}
				}
			}
			if kind == "nan" {
				src[rng.IntN(len(src))] = float32(math.NaN())
			}
			for _, f := range []Format{E4M3, E5M2} {
				for _, rule := range []ExpRule{ExpRoundUp, ExpOCPFloor} {
					for _, axis := range []int{0, 1} {
						n := MXScaleCount(rows, cols, axis)
						got, want := make([]uint8, rows*cols), make([]uint8, rows*cols)
						gs, ws := make([]E8M0, n), make([]E8M0, n)
						ga, err := QuantizeMX(got, gs, src, rows, cols, axis, f, rule)
						if err != nil {
							t.Fatal(err)
						}
						wa := quantizeMXLoop(want, ws, src, rows, cols, axis, f, rule)
						if math.Float32bits(ga) != math.Float32bits(wa) && !(ga != ga && wa != wa) {
							t.Fatalf("%v %s %v %v axis %d: amax %v, loop %v", sh, kind, f, rule, axis, ga, wa)
						}
						for i := range want {
							if got[i] != want[i] {
								t.Fatalf("%v %s %v %v axis %d: code %d = %#x, loop %#x", sh, kind, f, rule, axis, i, got[i], want[i])
							}
						}
						for i := range ws {
							if gs[i] != ws[i] {
								t.Fatalf("%v %s %v %v axis %d: scale %d = %v, loop %v", sh, kind, f, rule, axis, i, gs[i], ws[i])
							}
						}
						// Two ranges give the same codes and scales.
						slices := mXSlices(rows, cols, axis)
						half := slices / 2
						clear(got)
						clear(gs)
						a1, err1 := quantizeMXRange(got, gs, src, rows, cols, axis, f, rule, half, slices)
						a0, err0 := quantizeMXRange(got, gs, src, rows, cols, axis, f, rule, 0, half)
						if err0 != nil || err1 != nil {
							t.Fatal(err0, err1)
						}
						if string(got) != string(want) || fmt.Sprint(gs) != fmt.Sprint(ws) {
							t.Fatalf("%v %s %v %v axis %d: two ranges differ from the whole", sh, kind, f, rule, axis)
						}
						if m := max(math.Float32bits(a0), math.Float32bits(a1)); m != math.Float32bits(ga) && !(ga != ga && m > 0x7F800000) {
							t.Fatalf("%v %s axis %d: ranges' amaxes %v %v, whole %v", sh, kind, axis, a0, a1, ga)
						}
					}
				}
			}
		}
	}
	if _, err := quantizeMXRange(make([]uint8, 4), make([]E8M0, 4), make([]float32, 4), 4, 1, 1, E4M3, ExpRoundUp, 2, 5); err == nil {
		t.Fatal("a range past the slices: no error")
	}
}

// TestBlockScaleFastMatchesFloat64: BlockScale's integer path gives the
// float64 form's scale for every exponent of a normal amax, mantissas at
// and around 1.75 (where ⌈log2(amax/max)⌉ steps) and at the ends, both
// formats and rules; and both agree on zero, denormals, infinities, NaN.
func TestBlockScaleFastMatchesFloat64(t *testing.T) {
	var vals []float32
	for _, b := range amaxBitCases(rand.New(rand.NewPCG(73, 74)), 255) {
		vals = append(vals, math.Float32frombits(b))
	}
	vals = append(vals, float32(math.Inf(1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1)), -3)
	for _, f := range []Format{E4M3, E5M2} {
		for _, rule := range []ExpRule{ExpRoundUp, ExpOCPFloor} {
			for _, v := range vals {
				if got, want := BlockScale(v, f, rule), blockScaleSlow(v, f, rule); got != want {
					t.Fatalf("%v %v amax %v (%#x): scale %v, float64 form %v", f, rule, v, math.Float32bits(v), got, want)
				}
			}
		}
	}
}

// amaxBitCases returns, for every exponent field below fields, float32
// bits with the mantissas at and around 1.75's (where ⌈log2(amax/max)⌉
// steps), at the ends, and one drawn from rng.
func amaxBitCases(rng *rand.Rand, fields uint32) []uint32 {
	var bits []uint32
	for e := uint32(0); e < fields; e++ {
		for _, m := range []uint32{0, 1, 0x5FFFFF, 0x600000, 0x600001, 0x7FFFFF, 0x400000} {
			bits = append(bits, e<<23|m)
		}
		bits = append(bits, e<<23|rng.Uint32()&0x7FFFFF)
	}
	return bits
}

// TestMXScalesMatchBlockScale: mxScales (the vector kernel's integer
// form for both formats) gives BlockScale's scale and its factor
// 2^−e for every exponent field with mantissas around 1.75, zero,
// subnormals, infinity and NaN patterns, both rules, written with
// stride 1 and with a stride, and returns the largest amax bits.
func TestMXScalesMatchBlockScale(t *testing.T) {
	bits := amaxBitCases(rand.New(rand.NewPCG(75, 76)), 256)
	for _, f := range []Format{E4M3, E5M2} {
		for _, rule := range []ExpRule{ExpRoundUp, ExpOCPFloor} {
			for lo := 0; lo < len(bits); lo += 200 {
				am := bits[lo:min(len(bits), lo+200)]
				for _, stride := range []int{1, 3} {
					scales := make([]E8M0, len(am)*stride)
					inv := make([]float32, len(am))
					var want uint32
					for _, b := range am {
						want = max(want, b)
					}
					if got := mxScales(scales, stride, inv, am, f, rule); got != want {
						t.Fatalf("%v %v: largest amax %#x, want %#x", f, rule, got, want)
					}
					for j, b := range am {
						s := BlockScale(fromAmaxBits(b), f, rule)
						if scales[j*stride] != s || math.Float32bits(inv[j]) != math.Float32bits(mxInv[s]) {
							t.Fatalf("%v %v stride %d amax %#x: scale %v factor %g, want %v %g", f, rule, stride, b, scales[j*stride], inv[j], s, mxInv[s])
						}
					}
				}
			}
		}
	}
}

// TestQuantizeMXRangePiecesMatchWhole: quantizeMXRange over disjoint
// slices (rows of whole blocks run together, ragged rows one by one)
// writes QuantizeMX's codes and scales, and its amaxes' largest is
// QuantizeMX's amax.
func TestQuantizeMXRangePiecesMatchWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	for _, sh := range [][2]int{{300, 32}, {21, 480}, {50, 96}, {37, 70}} {
		rows, cols := sh[0], sh[1]
		for _, axis := range []int{0, 1} {
			src := make([]float32, rows*cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(30)-15))
			}
			n := MXScaleCount(rows, cols, axis)
			whole, wholeSc := make([]uint8, len(src)), make([]E8M0, n)
			want, err := QuantizeMX(whole, wholeSc, src, rows, cols, axis, E4M3, ExpRoundUp)
			if err != nil {
				t.Fatal(err)
			}
			codes, sc := make([]uint8, len(src)), make([]E8M0, n)
			slices := mXSlices(rows, cols, axis)
			var got float32
			for lo := 0; lo < slices; {
				hi := min(slices, lo+1+rng.IntN(9))
				a, err := quantizeMXRange(codes, sc, src, rows, cols, axis, E4M3, ExpRoundUp, lo, hi)
				if err != nil {
					t.Fatal(err)
				}
				got, lo = max(got, a), hi
			}
			if got != want || !slices8Equal(codes, whole) || !slices8Equal(sc, wholeSc) {
				t.Fatalf("%d×%d axis %d: pieces differ from the whole (amax %v, want %v)", rows, cols, axis, got, want)
			}
		}
	}
}

func slices8Equal[T ~uint8](a, b []T) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
