package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/chewxy/math32"
)

// TestElementKernelsStayInBounds runs every element kernel on every
// length up to 130 with the destination a slice of a larger buffer
// filled with guard values: the kernel may write only its slice's prefix
// of the length it reports done, and the guards before and after stay
// untouched.
func TestElementKernelsStayInBounds(t *testing.T) { withISA(t, testElementKernelsStayInBounds) }

func testElementKernelsStayInBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	const pad = 40
	f32 := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(rng.NormFloat64())
		}
		return s
	}
	guardF := float32(-31.5)
	checkF := func(t *testing.T, name string, buf []float32, n, done int) {
		t.Helper()
		if done < 0 || done > n {
			t.Fatalf("%s n=%d: done %d", name, n, done)
		}
		for i, v := range buf {
			inside := i >= pad && i < pad+done
			if !inside && v != guardF {
				t.Fatalf("%s n=%d done=%d: wrote element %d outside [%d, %d)", name, n, done, i-pad, 0, done)
			}
		}
	}
	newF := func(n int) []float32 {
		buf := make([]float32, n+2*pad)
		for i := range buf {
			buf[i] = guardF
		}
		return buf
	}
	for n := 0; n <= 130; n++ {
		x, dy := f32(n), f32(n)
		// float32 outputs
		for _, k := range []struct {
			name string
			run  func(dst []float32) int
		}{
			{"GELU", func(d []float32) int { return geluVector(d, x) }},
			{"GELUGrad", func(d []float32) int { return geluGradVector(d, x, dy) }},
			{"ReLUGrad", func(d []float32) int { return reluGradVector(d, x, dy) }},
			{"Scale", func(d []float32) int { return binaryScalarVector(OpMul, d, d, 3) }},
			{"Scale+twin", func(d []float32) int { Scale(d, 3); return n }},
			{"WidenBF16", func(d []float32) int {
				h := make([]uint16, n)
				for i := range h {
					h[i] = uint16(rng.Uint32())
				}
				return widenBF16Vector(d, h)
			}},
			{"DecodeFP8", func(d []float32) int {
				codes := make([]uint8, n)
				for i := range codes {
					codes[i] = uint8(rng.IntN(256))
				}
				return decodeFP8Vector(0, d, codes, 1)
			}},
			// The whole kernels (vector part and Go twin) write exactly
			// their n elements.
			{"GELU+twin", func(d []float32) int { GELU(d, x); return n }},
			{"GELUGrad+twin", func(d []float32) int { GELUGrad(d, x, dy); return n }},
			{"ReLUGrad+twin", func(d []float32) int { ReLUGrad(d, x, dy); return n }},
			{"DecodeFP8+twin", func(d []float32) int {
				codes := make([]uint8, n)
				for i := range codes {
					codes[i] = uint8(rng.IntN(256))
				}
				DecodeFP8(testCasts[1], d, codes, 2)
				return n
			}},
			{"DecodeFP16", func(d []float32) int {
				bits := make([]uint16, n)
				for i := range bits {
					bits[i] = uint16(rng.IntN(0x7c00))
				}
				DecodeFP16(d, bits, 0.5)
				return n
			}},
		} {
			buf := newF(n)
			done := k.run(buf[pad : pad+n])
			checkF(t, k.name, buf, n, done)
		}
		// byte and uint16 outputs
		q := make([]uint8, n+2*pad)
		for i := range q {
			q[i] = 0xA5
		}
		done, _ := quantizeFP8Vector(0, q[pad:pad+n], x, 3)
		for i, v := range q {
			if (i < pad || i >= pad+done) && v != 0xA5 {
				t.Fatalf("QuantizeFP8 n=%d done=%d: wrote byte %d", n, done, i-pad)
			}
		}
		for i := range q {
			q[i] = 0xA5
		}
		QuantizeFP8(testCasts[0], q[pad:pad+n], x, 3)
		for i, v := range q {
			if (i < pad || i >= pad+n) && v != 0xA5 {
				t.Fatalf("QuantizeFP8+twin n=%d: wrote byte %d", n, i-pad)
			}
		}
		h := make([]uint16, n+2*pad)
		for i := range h {
			h[i] = 0xBEEF
		}
		done = encodeFP16Vector(h[pad:pad+n], x, 1)
		for i, v := range h {
			if (i < pad || i >= pad+done) && v != 0xBEEF {
				t.Fatalf("EncodeFP16 n=%d done=%d: wrote half %d", n, done, i-pad)
			}
		}
		for i := range h {
			h[i] = 0xBEEF
		}
		EncodeFP16(h[pad:pad+n], x, 1)
		for i, v := range h {
			if (i < pad || i >= pad+n) && v != 0xBEEF {
				t.Fatalf("EncodeFP16+twin n=%d: wrote half %d", n, i-pad)
			}
		}
		// Adam updates w, m, v in place: every element of the slices, none
		// beyond.
		ws, ms, vs := newF(n), newF(n), newF(n)
		for i := pad; i < pad+n; i++ {
			ws[i], ms[i], vs[i] = 1, 0, 0
		}
		c := AdamConsts{0, 1, 0.9, 0.1, 0.999, 0.001, 0.01, 0.0316, 1e-8}
		Adam(ws[pad:pad+n], dy, ms[pad:pad+n], vs[pad:pad+n], &c)
		for _, b := range [][]float32{ws, ms, vs} {
			for i, v := range b {
				if (i < pad || i >= pad+n) && v != guardF {
					t.Fatalf("Adam n=%d: wrote element %d", n, i-pad)
				}
				if i >= pad && i < pad+n && math.IsNaN(float64(v)) {
					t.Fatalf("Adam n=%d: NaN at %d", n, i-pad)
				}
			}
		}
		// AmaxBits reads only its slice: NaN guards around must not leak in.
		nanBuf := make([]float32, n+2*pad)
		for i := range nanBuf {
			nanBuf[i] = float32(math.NaN())
		}
		copy(nanBuf[pad:], x)
		if done, bits := amaxBitsVector(nanBuf[pad : pad+n]); done > 0 && bits > 0x7F800000 {
			t.Fatalf("AmaxBits n=%d: read a NaN outside its slice", n)
		}
		if bits := AmaxBits(nanBuf[pad : pad+n]); bits > 0x7F800000 {
			t.Fatalf("AmaxBits+twin n=%d: read a NaN outside its slice", n)
		}
	}
}

// Add and AddTo give the loops' sums bit for bit at every length (the
// vector kernels' whole blocks and masked tails), with infinities and
// signed zeros, in place too, and touch nothing past dst.
func TestAddMatchesLoop(t *testing.T) { withISA(t, testAddMatchesLoop) }

func testAddMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0, 3e38, -3e38, 1e-45}
	for n := 0; n <= 70; n++ {
		x, y := make([]float32, n+1), make([]float32, n+1)
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			if rng.IntN(5) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
			if rng.IntN(5) == 0 {
				y[i] = specials[rng.IntN(len(specials))]
			}
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = x[i] + y[i]
		}
		got := make([]float32, n+1)
		got[n] = 42
		Add(got[:n], x, y)
		acc := append([]float32(nil), x...)
		AddTo(acc[:n], y)
		inPlace := append([]float32(nil), y...)
		Add(inPlace[:n], x, inPlace)
		for i := range want {
			for name, v := range map[string]float32{"Add": got[i], "AddTo": acc[i], "Add in place": inPlace[i]} {
				if math.Float32bits(v) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d %s[%d] = %v, want %v", n, name, i, v, want[i])
				}
			}
		}
		if got[n] != 42 || acc[n] != x[n] || inPlace[n] != y[n] {
			t.Fatalf("n=%d: a value past the end changed", n)
		}
	}
}

// ReLU is Go's max(x, 0) bit for bit at every length: −0 and negatives
// give +0, NaN (any sign or payload) as max leaves it, denormals and
// infinities as max gives them; in place too.
func TestReLUMatchesMax(t *testing.T) { withISA(t, testReLUMatchesMax) }

func testReLUMatchesMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 19))
	specials := []float32{float32(math.NaN()), math.Float32frombits(0xFFC00001), math.Float32frombits(0x7F800001),
		float32(math.Copysign(0, -1)), 0, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, -1e-45, -3e38}
	for n := 0; n <= 70; n++ {
		x := make([]float32, n+1)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if rng.IntN(3) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		got := make([]float32, n+1)
		got[n] = 42
		ReLU(got[:n], x)
		in := append([]float32(nil), x...)
		ReLU(in[:n], in)
		for i := range n {
			want := max(x[i], 0)
			if math.Float32bits(got[i]) != math.Float32bits(want) || math.Float32bits(in[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d ReLU(%v) [%08x] = %v [%08x] (in place %08x), want %v [%08x]", n, x[i], math.Float32bits(x[i]),
					got[i], math.Float32bits(got[i]), math.Float32bits(in[i]), want, math.Float32bits(want))
			}
		}
		if got[n] != 42 || math.Float32bits(in[n]) != math.Float32bits(x[n]) {
			t.Fatalf("n=%d: a value past the end changed", n)
		}
	}
}

// TestActivationsMatchScalarLoop checks the vector GELU, GELUGrad and
// ReLUGrad against their Go loops (run one element at a time) bit for
// bit, on every length up to 70 and on the values where tanh saturates,
// the exponential clamps, zeros, infinities and NaN.
func TestActivationsMatchScalarLoop(t *testing.T) { withISA(t, testActivationsMatchScalarLoop) }

func testActivationsMatchScalarLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 3, -3, 4.2, -4.2, 5.6, -5.6, 9, -9, 9.5, -9.5,
		40, -40, 100, -100, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.5, -0.5}
	for n := 1; n <= 70; n++ {
		x, dy := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
			if rng.IntN(4) == 0 {
				x[i] = special[rng.IntN(len(special))]
			}
			dy[i] = float32(rng.NormFloat64())
		}
		y, dx, rg := make([]float32, n), make([]float32, n), make([]float32, n)
		GELU(y, x)
		GELUGrad(dx, x, dy)
		ReLUGrad(rg, x, dy)
		one := make([]float32, 1)
		for i := range x {
			same := func(name string, got float32, f func()) {
				f()
				if math.Float32bits(got) != math.Float32bits(one[0]) && !(got != got && one[0] != one[0]) {
					t.Fatalf("n=%d: %s(%v)[%d] = %v, loop %v", n, name, x[i], i, got, one[0])
				}
			}
			same("GELU", y[i], func() { GELU(one, x[i:i+1]) })
			same("GELUGrad", dx[i], func() { GELUGrad(one, x[i:i+1], dy[i:i+1]) })
			same("ReLUGrad", rg[i], func() { ReLUGrad(one, x[i:i+1], dy[i:i+1]) })
		}
	}
}

// AmaxBits finds the largest |x| wherever it lies — every position of
// every length up to 130 and a long one — and a NaN anywhere.
func TestAmaxEveryPosition(t *testing.T) { withISA(t, testAmaxEveryPosition) }

func testAmaxEveryPosition(t *testing.T) {
	for _, n := range append(seq(1, 130), 4099) {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%7) * 0.125
		}
		step := 1
		if n > 200 {
			step = 37
		}
		for p := 0; p < n; p += step {
			old := x[p]
			for _, v := range []float32{-7, 7} {
				x[p] = v
				if got := AmaxBits(x); got != math.Float32bits(7) {
					t.Fatalf("n=%d, %v at %d: amax bits %#x, want 7's", n, v, p, got)
				}
			}
			x[p] = float32(math.NaN())
			if got := AmaxBits(x); got <= 0x7F800000 {
				t.Fatalf("n=%d, NaN at %d: amax bits %#x, want a NaN's", n, p, got)
			}
			x[p] = old
		}
	}
}

// seq is lo, lo+1, …, hi.
func seq(lo, hi int) []int {
	s := make([]int, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestScaleMatchesLoop checks Scale against x[i] *= s one value at a
// time, bit for bit, on every length up to 70 (every tail), with zeros,
// subnormals, infinities and NaNs among the values and the factors, and
// products that overflow and underflow.
func TestScaleMatchesLoop(t *testing.T) { withISA(t, testScaleMatchesLoop) }

func testScaleMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3.4e38, -3.4e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xFFC01234), 1, -1}
	for _, s := range []float32{3, 0.1, -7.5, 1e-30, 1e30, 0, float32(math.Inf(-1)), float32(math.NaN())} {
		for n := 0; n <= 70; n++ {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30)))
				if rng.IntN(4) == 0 {
					x[i] = special[rng.IntN(len(special))]
				}
			}
			want := append([]float32(nil), x...)
			for i := range want {
				want[i] *= s
			}
			Scale(x, s)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("s=%v n=%d: x[%d] = %#x, loop %#x", s, n, i, math.Float32bits(x[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestWidenBF16MatchesLoop checks WidenBF16 against BF16ToFloat32 value
// by value on every length up to 70 and every bf16 bit pattern.
func TestWidenBF16MatchesLoop(t *testing.T) { withISA(t, testWidenBF16) }

func testWidenBF16(t *testing.T) {
	h := make([]uint16, 1<<16)
	for i := range h {
		h[i] = uint16(i)
	}
	for n := 0; n <= 70; n++ {
		v := WidenBF16(make([]float32, n+3), h[100:100+n])
		if len(v) != n {
			t.Fatalf("n=%d: %d values", n, len(v))
		}
		for i := range v {
			if math.Float32bits(v[i]) != uint32(h[100+i])<<16 {
				t.Fatalf("n=%d: v[%d] = %#x, want %#x", n, i, math.Float32bits(v[i]), uint32(h[100+i])<<16)
			}
		}
	}
	v := WidenBF16(make([]float32, len(h)), h)
	for i := range v {
		if math.Float32bits(v[i]) != uint32(i)<<16 {
			t.Fatalf("bits %#x: %#x", i, math.Float32bits(v[i]))
		}
	}
}

// TestDecodeFP16MatchesTable checks DecodeFP16 (VCVTPH2PS where there is
// one) against the table loop bit for bit, NaN payloads included, for
// every FP16 pattern, at scales that leave the values alone, shrink them
// to float32 subnormals, overflow them and make them NaN, on every
// length up to 40.
func TestDecodeFP16MatchesTable(t *testing.T) { withISA(t, testDecodeFP16) }

func testDecodeFP16(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, scale := range []float32{1, 0.5, 3e-41, 1e35, float32(math.NaN())} {
		got := make([]float32, len(src))
		DecodeFP16(got, src, scale)
		for i, b := range src {
			if want := fp16Table[b] * scale; math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("scale %g: %#04x -> %#x, table %#x", scale, b, math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
	}
	for n := 0; n <= 40; n++ {
		got := make([]float32, n+2)
		got[n], got[n+1] = -7, -7
		DecodeFP16(got[:n], src[0x3BF0:0x3BF0+n], 2)
		for i := 0; i < n; i++ {
			if got[i] != fp16Table[0x3BF0+i]*2 {
				t.Fatalf("n=%d: value %d", n, i)
			}
		}
		if got[n] != -7 || got[n+1] != -7 {
			t.Fatalf("n=%d: wrote past the end", n)
		}
	}
}

// TestBinaryMatchesLoop checks Binary and BinaryScalar against Go's
// float32 operations one value at a time, bit for bit, on every length
// up to 70, in place and not. NaN payloads too, but where both operands
// are NaN: which one x86 keeps then follows the order of the registers,
// which Go's compiler is free to swap for + and · (the loops themselves
// give either).
func TestBinaryMatchesLoop(t *testing.T) { withISA(t, testBinaryMatchesLoop) }

func testBinaryMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3.4e38, -3.4e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xFFC01234), math.Float32frombits(0x7F800001), 1, -1}
	val := func() float32 {
		if rng.IntN(4) == 0 {
			return special[rng.IntN(len(special))]
		}
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20)))
	}
	apply := func(op int, a, b float32) float32 {
		switch op {
		case OpAdd:
			return a + b
		case OpSub:
			return a - b
		case OpMul:
			return a * b
		}
		return a / b
	}
	same := func(got, want, a, b float32) bool {
		return math.Float32bits(got) == math.Float32bits(want) || a != a && b != b && got != got
	}
	for op := OpAdd; op <= OpDiv; op++ {
		for n := 0; n <= 70; n++ {
			x, y := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], y[i] = val(), val()
			}
			c := val()
			got, gotS := make([]float32, n), make([]float32, n)
			Binary(op, got, x, y)
			BinaryScalar(op, gotS, x, c)
			inPlace := append([]float32(nil), x...)
			Binary(op, inPlace, inPlace, y)
			for i := range x {
				want, wantS := apply(op, x[i], y[i]), apply(op, x[i], c)
				if !same(got[i], want, x[i], y[i]) || !same(inPlace[i], want, x[i], y[i]) {
					t.Fatalf("op %d n=%d: %#x ∘ %#x = %#x (in place %#x), loop %#x", op, n, math.Float32bits(x[i]), math.Float32bits(y[i]), math.Float32bits(got[i]), math.Float32bits(inPlace[i]), math.Float32bits(want))
				}
				if !same(gotS[i], wantS, x[i], c) {
					t.Fatalf("op %d n=%d: %#x ∘ c %#x = %#x, loop %#x", op, n, math.Float32bits(x[i]), math.Float32bits(c), math.Float32bits(gotS[i]), math.Float32bits(wantS))
				}
			}
		}
	}
}

// TestSqrtNegMatchLoops checks Sqrt against math32.Sqrt and Neg against
// Go's negation value by value, bit for bit (NaN payloads, negative
// inputs, zeros, subnormals, infinities), on every length up to 70, in
// place and not.
func TestSqrtNegMatchLoops(t *testing.T) { withISA(t, testSqrtNeg) }

func testSqrtNeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(79, 80))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3.4e38, -2, 4,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xFFC01234), math.Float32frombits(0x7F800001)}
	for n := 0; n <= 70; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(math.Abs(rng.NormFloat64()) * math.Pow(10, float64(rng.IntN(40)-20)))
			if rng.IntN(3) == 0 {
				x[i] = special[rng.IntN(len(special))]
			}
		}
		s, ng := make([]float32, n), make([]float32, n)
		Sqrt(s, x)
		Neg(ng, x)
		in := append([]float32(nil), x...)
		Sqrt(in, in)
		for i, v := range x {
			if w := math32.Sqrt(v); math.Float32bits(s[i]) != math.Float32bits(w) || math.Float32bits(in[i]) != math.Float32bits(w) {
				t.Fatalf("n=%d: sqrt(%#x) = %#x (in place %#x), math32 %#x", n, math.Float32bits(v), math.Float32bits(s[i]), math.Float32bits(in[i]), math.Float32bits(w))
			}
			if w := -v; math.Float32bits(ng[i]) != math.Float32bits(w) {
				t.Fatalf("n=%d: −%#x = %#x, Go %#x", n, math.Float32bits(v), math.Float32bits(ng[i]), math.Float32bits(w))
			}
		}
	}
}
