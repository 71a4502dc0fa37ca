package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDecodeFP8MatchesTables decodes every code of both formats with the
// vector kernel (the first 256) and its Go twin (the last 16), and
// compares with an independent decode from the bit fields.
func TestDecodeFP8MatchesTables(t *testing.T) { withISA(t, testDecodeFP8MatchesTables) }

func testDecodeFP8MatchesTables(t *testing.T) {
	for format := 0; format < 2; format++ {
		src := make([]uint8, 256+16)
		for i := range src {
			src[i] = uint8(i)
		}
		for _, scale := range []float32{1, 0.25, 3} {
			dst := make([]float32, len(src))
			DecodeFP8(testCasts[format], dst, src, scale)
			twin := make([]float32, len(src))
			decodeFP8Go(testCasts[format], twin, src, scale)
			for i := range dst {
				if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
					t.Fatalf("format %d code %#02x scale %v: %#08x, twin %#08x", format, src[i], scale, math.Float32bits(dst[i]), math.Float32bits(twin[i]))
				}
				want := fp8Ref(format, src[i]) * float64(scale)
				got := float64(dst[i])
				if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && got != want) {
					t.Fatalf("format %d code %#02x scale %v: %v, want %v", format, src[i], scale, got, want)
				}
			}
		}
		// A scale per block of 32 (MXFP8's fold): every code, every
		// block its own scale (a NaN one too), a ragged last block.
		scales := []float32{0.5, 4, 1, 0x1p-20, float32(math.NaN()), 3, 0.125, 1024, 2}
		dst, twin := make([]float32, len(src)), make([]float32, len(src))
		DecodeFP8Blocks32(testCasts[format], dst, src, scales)
		for b := 0; 32*b < len(src); b++ {
			lo, hi := 32*b, min(len(src), 32*b+32)
			decodeFP8Go(testCasts[format], twin[lo:hi], src[lo:hi], scales[b])
		}
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(twin[i]) {
				t.Fatalf("format %d code %#02x, blocks of 32: %#08x, twin %#08x", format, src[i], math.Float32bits(dst[i]), math.Float32bits(twin[i]))
			}
		}
	}
}

// fp8Ref decodes an FP8 code (format 0: E4M3, 1: E5M2) from its bit
// fields, independently of the tables and kernels.
func fp8Ref(format int, c uint8) float64 {
	mbits, bias := 3, 7
	if format == 1 {
		mbits, bias = 2, 15
	}
	sign := 1.0
	if c&0x80 != 0 {
		sign = -1
	}
	mag := int(c & 0x7F)
	e, m := mag>>mbits, mag&(1<<mbits-1)
	switch {
	case format == 0 && mag == 0x7F, format == 1 && mag > 0x7C:
		return math.NaN()
	case format == 1 && mag == 0x7C:
		return math.Inf(int(sign))
	case e == 0:
		return sign * float64(m) * math.Ldexp(1, 1-bias-mbits)
	}
	return sign * (1 + float64(m)/float64(int(1)<<mbits)) * math.Ldexp(1, e-bias)
}

// testCasts are the two formats' casts, built from fp8Ref as package fp8
// builds them from its definition.
var testCasts = [2]*FP8Cast{
	NewFP8Cast(0, 3, 7, 0x7E, 0x7F, func(c uint8) float32 { return float32(fp8Ref(0, c)) }),
	NewFP8Cast(1, 2, 15, 0x7B, 0x7E, func(c uint8) float32 { return float32(fp8Ref(1, c)) }),
}

// TestQuantizeFP8MatchesTwin checks the vector cast against its Go twin
// bit for bit, codes and amax, on every kind of value (NaN, ±inf,
// subnormals, ties, any bit pattern), at lengths that leave a tail.
func TestQuantizeFP8MatchesTwin(t *testing.T) { withISA(t, testQuantizeFP8MatchesTwin) }

func testQuantizeFP8MatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 464, 465, 61440, 1.0 / 1024, 3.0 / 1024,
		math.SmallestNonzeroFloat32, math.MaxFloat32, 1e-7, -1e-3, float32(math.NaN()),
		1.1875, -1.1875, 1.375, -1.375, 2.375, 0.296875} // normal-range ties whose lower neighbour is odd (E4M3, E5M2)
	for _, n := range []int{1, 15, 16, 17, 50, 100, 4099} {
		src := make([]float32, n)
		for i := range src {
			switch rng.IntN(3) {
			case 0:
				src[i] = special[rng.IntN(len(special))]
			case 1:
				src[i] = math.Float32frombits(rng.Uint32())
			default:
				src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
			}
		}
		for f, c := range testCasts {
			for _, scale := range []float32{1, 0.37, 1e4} {
				got, want := make([]uint8, n), make([]uint8, n)
				ga := QuantizeFP8(c, got, src, scale)
				wa := quantizeFP8Go(c, want, src, scale)
				if string(got) != string(want) {
					t.Fatalf("format %d n=%d scale=%v: codes differ from the twin", f, n, scale)
				}
				if (ga > 0x7F800000) != (wa > 0x7F800000) || (wa <= 0x7F800000 && ga != wa) {
					t.Fatalf("format %d n=%d: amax bits %#x, twin %#x", f, n, ga, wa)
				}
				if ab := AmaxBits(src); (ab > 0x7F800000) != (wa > 0x7F800000) || (wa <= 0x7F800000 && ab != wa) {
					t.Fatalf("n=%d: AmaxBits %#x, cast's %#x", n, ab, wa)
				}
				if ab, tw := AmaxBits(src), amaxBitsGo(src); (ab > 0x7F800000) != (tw > 0x7F800000) || (tw <= 0x7F800000 && ab != tw) {
					t.Fatalf("n=%d: AmaxBits %#x, twin %#x", n, ab, tw)
				}
			}
		}
	}
}

// TestQuantizeFP8LanesAndAmaxColsMatchTwins checks the per-lane cast and
// the column-amax fold against their Go twins bit for bit (codes, amax,
// accumulators), with per-value scales of every kind, on every kind of
// value, at lengths that leave a tail; and the per-lane cast against the
// one-scale cast when all scales are equal.
func TestQuantizeFP8LanesAndAmaxColsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 464, 465, 61440,
		math.SmallestNonzeroFloat32, math.MaxFloat32, 1e-7, -1e-3, float32(math.NaN()),
		1.1875, -1.1875, 1.375, -1.375, 2.375, 0.296875} // normal-range ties whose lower neighbour is odd (E4M3, E5M2)
	gen := func(n int) []float32 {
		src := make([]float32, n)
		for i := range src {
			switch rng.IntN(3) {
			case 0:
				src[i] = special[rng.IntN(len(special))]
			case 1:
				src[i] = math.Float32frombits(rng.Uint32())
			default:
				src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
			}
		}
		return src
	}
	for _, n := range []int{1, 15, 16, 17, 100, 128, 300, 4099} {
		src := gen(n)
		scales := make([]float32, n)
		for i := range scales {
			scales[i] = float32(math.Ldexp(1+rng.Float64(), rng.IntN(60)-30))
		}
		for f, c := range testCasts {
			got, want := make([]uint8, n), make([]uint8, n)
			ga := QuantizeFP8Lanes(c, got, src, scales)
			wa := quantizeFP8LanesGo(c, want, src, scales)
			if string(got) != string(want) {
				t.Fatalf("format %d n=%d: per-lane codes differ from the twin", f, n)
			}
			if (ga > 0x7F800000) != (wa > 0x7F800000) || (wa <= 0x7F800000 && ga != wa) {
				t.Fatalf("format %d n=%d: amax bits %#x, twin %#x", f, n, ga, wa)
			}
			same := make([]float32, n)
			for i := range same {
				same[i] = 0.37
			}
			one := make([]uint8, n)
			QuantizeFP8Lanes(c, got, src, same)
			QuantizeFP8(c, one, src, 0.37)
			if string(got) != string(one) {
				t.Fatalf("format %d n=%d: equal per-lane scales differ from one scale", f, n)
			}
			// A scale per block of 128 (and of 32): the vector kernel
			// against its twin, and against the per-lane cast with
			// each block's scale repeated.
			for _, size := range []int{128, 32} {
				bs := scales[:(n+size-1)/size]
				blk, twin, lanes := make([]uint8, n), make([]uint8, n), make([]uint8, n)
				for i := range blk {
					blk[i], twin[i] = 0xAA, 0x55
					same[i] = bs[i/size]
				}
				if size == 128 {
					QuantizeFP8Blocks(c, blk, src, bs)
				} else {
					QuantizeFP8Blocks32(c, blk, src, bs)
				}
				quantizeFP8BlocksGo(c, size, twin, src, bs)
				QuantizeFP8Lanes(c, lanes, src, same)
				if string(blk) != string(twin) || string(blk) != string(lanes) {
					t.Fatalf("format %d n=%d: per-block codes (blocks of %d) differ from the twin or the per-lane cast", f, n, size)
				}
			}
		}
		acc, twin := make([]uint32, n), make([]uint32, n)
		for i := range acc {
			acc[i] = rng.Uint32() & 0x7F7FFFFF // finite starting amaxes
			twin[i] = acc[i]
		}
		for r := 0; r < 3; r++ {
			row := gen(n)
			s, ws := AmaxCols(acc, row), amaxColsGo(twin, row)
			if (s > 0x7F800000) != (ws > 0x7F800000) || (ws <= 0x7F800000 && s != ws) {
				t.Fatalf("n=%d: seen %#x, twin %#x", n, s, ws)
			}
		}
		for i := range acc {
			if acc[i] != twin[i] {
				t.Fatalf("n=%d: acc[%d] = %#x, twin %#x", n, i, acc[i], twin[i])
			}
			if acc[i] > 0x7F800000 {
				t.Fatalf("n=%d: a NaN reached acc[%d]", n, i)
			}
		}
	}
}

// TestMulRowIsFloat32Multiplication: MulRow equals Go's float32
// multiplication bit for bit on every kind of value (NaN, ±inf,
// subnormal products, overflow), at lengths that leave a tail.
func TestMulRowIsFloat32Multiplication(t *testing.T) { withISA(t, testMulRow) }

func testMulRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 7, 8, 9, 100} {
		row, f := make([]float32, n), make([]float32, n)
		for i := range row {
			row[i] = math.Float32frombits(rng.Uint32())
			f[i] = math.Float32frombits(rng.Uint32())
			if i%3 == 0 {
				f[i] = float32(math.Ldexp(1, rng.IntN(300)-150))
			}
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = row[i] * f[i]
		}
		MulRow(row, f)
		for i := range row {
			if math.Float32bits(row[i]) != math.Float32bits(want[i]) && !(row[i] != row[i] && want[i] != want[i]) {
				t.Fatalf("n=%d: row[%d] = %v, want %v", n, i, row[i], want[i])
			}
		}
	}
}

// TestColumnBandKernelsMatchTwins checks the band kernels of the
// column-wise block cast (column amaxes down a band, the cast with a
// scale per column) against their Go twins bit for bit, on every kind of
// value, with widths that leave a tail of columns and strides wider than
// the band.
func TestColumnBandKernelsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, shape := range [][3]int{{1, 1, 1}, {3, 16, 16}, {5, 17, 40}, {128, 64, 64}, {130, 50, 99}, {7, 300, 301}} {
		rows, n, ld := shape[0], shape[1], shape[2]
		src := make([]float32, (rows-1)*ld+n)
		for i := range src {
			switch rng.IntN(4) {
			case 0:
				src[i] = math.Float32frombits(rng.Uint32())
			case 1:
				src[i] = []float32{0, float32(math.Inf(1)), float32(math.NaN()), 464, 61440, 1e-40}[rng.IntN(6)]
			default:
				src[i] = float32(rng.NormFloat64())
			}
		}
		acc, twin := make([]uint32, n), make([]uint32, n)
		for i := range acc {
			acc[i], twin[i] = rng.Uint32(), rng.Uint32() // overwritten, not folded
		}
		s, ws := AmaxColsBand(acc, src, ld, rows, n), amaxColsBandGo(twin, src, ld, rows)
		if (s > 0x7F800000) != (ws > 0x7F800000) || (ws <= 0x7F800000 && s != ws) {
			t.Fatalf("%v: seen %#x, twin %#x", shape, s, ws)
		}
		for j := range acc {
			if acc[j] != twin[j] {
				t.Fatalf("%v: column %d amax %#x, twin %#x", shape, j, acc[j], twin[j])
			}
		}
		scales := make([]float32, n)
		for j := range scales {
			scales[j] = float32(math.Ldexp(1+rng.Float64(), rng.IntN(60)-30))
		}
		ldd := n + 3
		for f, c := range testCasts {
			got, want := make([]uint8, (rows-1)*ldd+n), make([]uint8, (rows-1)*ldd+n)
			for i := range got {
				got[i], want[i] = 0xAA, 0xAA // the gaps between rows stay
			}
			QuantizeFP8Cols(c, got, ldd, src, ld, scales, rows, n)
			quantizeFP8ColsGo(c, want, ldd, src, ld, scales, rows, n)
			if string(got) != string(want) {
				t.Fatalf("format %d %v: column-scaled codes differ from the twin", f, shape)
			}
		}
	}
}

// TestE2M1StochasticAtTheDraw puts each value just above the point
// where its own draw decides (the fraction of the gap above the lower
// code equal to the draw plus the smallest step the value can hold, and
// exactly equal), in the gaps below 0.5 and below 1, both signs, and
// checks the kernel against its twin: a rounding of |v|·2^23 the wrong
// way, or a draw off by one step, moves these codes.
func TestE2M1StochasticAtTheDraw(t *testing.T) {
	const n, key, base = 512, 0x1234567, 77
	src := make([]float32, n)
	for j := range src {
		u := float64(StochasticUniform(key, base+uint32(j/2), j%2 == 1))
		var v float64
		switch j % 4 {
		case 0: // gap [0.5, 1), just above the draw
			v = 0.5 + 0.5*u + 0x1p-24
		case 1: // gap [0, 0.5), just above the draw
			v = 0.5*u + 0x1p-25
		case 2: // exactly at the draw: stays down
			v = 0.5 + 0.5*u
		default:
			v = 0.5 * u
		}
		if j%8 >= 4 {
			v = -v
		}
		src[j] = float32(v)
		if float64(src[j]) != v {
			t.Fatalf("value %d: %v not a float32", j, v)
		}
	}
	es := make([]float32, n/16)
	for i := range es {
		es[i] = 1
	}
	got, want := make([]uint8, n/2), make([]uint8, n/2)
	E2M1StochasticBlocks(got, src, es, key, base)
	e2m1StochasticGo(want, src, es, key, base)
	ups := 0
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("byte %d: %#x, twin %#x", i, got[i], want[i])
		}
		for _, c := range []uint8{want[i] & 7, want[i] >> 4 & 7} {
			if c == 2 {
				ups++
			}
		}
	}
	if ups == 0 {
		t.Fatal("no value rounded up to 1: the test's values miss the draws")
	}
}

// TestE2M1AndRHTMatchTwins checks the E2M1 per-lane cast (of float32
// and of bf16 values) and the random Hadamard transform against their Go
// twins bit for bit, on every kind of value (NaN, ±inf, subnormals,
// ties, any bit pattern) at lengths that leave a tail.
func TestE2M1AndRHTMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6, 7,
		math.SmallestNonzeroFloat32, math.MaxFloat32, float32(math.NaN()), float32(-math.NaN())}
	gen := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			switch rng.IntN(3) {
			case 0:
				v[i] = special[rng.IntN(len(special))]
			case 1:
				v[i] = math.Float32frombits(rng.Uint32())
			default:
				v[i] = float32(rng.NormFloat64() * 3)
			}
		}
		return v
	}
	for _, n := range []int{1, 15, 16, 17, 50, 100, 4099} {
		src, es := gen(n), make([]float32, (n+15)/16)
		for i := range es {
			es[i] = 1
			if rng.IntN(2) == 0 {
				es[i] = float32(math.Ldexp(1+rng.Float64(), rng.IntN(20)-10))
			}
		}
		for _, stochastic := range []bool{false, true} {
			got, want := make([]uint8, (n+1)/2), make([]uint8, (n+1)/2)
			for i := range got {
				got[i], want[i] = 0xAA, 0x55 // every byte is written
			}
			if stochastic {
				E2M1StochasticBlocks(got, src, es, 77, 5)
				e2m1StochasticGo(want, src, es, 77, 5)
			} else {
				QuantizeE2M1Blocks(got, src, es)
				e2m1BlocksGo(want, src, es)
			}
			if string(got) != string(want) {
				t.Fatalf("n=%d stochastic=%v: packed E2M1 codes differ from the twin", n, stochastic)
			}
			if n%2 == 1 && got[n/2]>>4 != 0 {
				t.Fatalf("n=%d: the padding nibble is %#x", n, got[n/2]>>4)
			}
			// The bf16 variants: the high halves of the values, against
			// the float32 twin of their float32 values.
			h, w := make([]uint16, n), make([]float32, n)
			for i, v := range src {
				h[i] = uint16(math.Float32bits(v) >> 16)
				w[i] = math.Float32frombits(uint32(h[i]) << 16)
			}
			for i := range got {
				got[i] = 0xAA
			}
			if stochastic {
				E2M1StochasticBlocksBF16(got, h, es, 77, 5)
				e2m1StochasticGo(want, w, es, 77, 5)
			} else {
				QuantizeE2M1BlocksBF16(got, h, es)
				e2m1BlocksGo(want, w, es)
			}
			if string(got) != string(want) {
				t.Fatalf("n=%d stochastic=%v: packed E2M1 codes of bf16 values differ from the twin", n, stochastic)
			}
		}
		x := gen(n)
		y := append([]float32(nil), x...)
		RHT16(x)
		rht16Go(y[:len(y)/16*16])
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) && !(x[i] != x[i] && y[i] != y[i]) {
				t.Fatalf("n=%d: RHT16[%d] = %v, twin %v", n, i, x[i], y[i])
			}
		}
	}
}

// TestNVFP4ColsMatchesTwin checks the fused column pass of NVFP4's
// column-wise cast (transpose, transform, block amaxes) against the
// three loops it replaces, bit for bit (NaN for NaN), on every kind of
// value, for column ranges that start, end or fall between strips of
// 16, rows that are and are not multiples of 16, and checks that the
// rows outside the range are not written; where the vector kernel takes
// bands of source rows, the same by two bands.
func TestNVFP4ColsMatchesTwin(t *testing.T) { withISA(t, testNVFP4Cols) }

func testNVFP4Cols(t *testing.T) {
	defer func(v bool) { nvfp4ColsBF16 = v }(nvfp4ColsBF16)
	rng := rand.New(rand.NewPCG(23, 24))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-42,
		math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, float32(math.NaN()), math.Float32frombits(0x7FFFFFFF), math.Float32frombits(0xFF800001)}
	for _, c := range []struct{ rows, cols, c0, c1 int }{
		{16, 16, 0, 16}, {64, 48, 0, 48}, {32, 40, 3, 37}, {48, 128, 16, 80}, {768, 128, 64, 128}, {20, 33, 0, 33}, {7, 16, 0, 16}, {16, 5, 1, 4},
		{96, 32, 0, 32}, {48, 16, 0, 16}, {32, 24, 0, 24}, {48, 40, 5, 29},
	} {
		for _, mode := range []string{"plain", "rht", "rht-bf16"} {
			rht := mode != "plain"
			if rht && c.rows%16 != 0 || mode == "rht-bf16" && !hasBF16 {
				continue
			}
			nvfp4ColsBF16 = mode == "rht-bf16"
			for _, kind := range []string{"normal", "special", "bits", "zeros", "tiny"} {
				src := make([]float32, c.rows*c.cols)
				for i := range src {
					switch kind {
					case "normal":
						src[i] = float32(rng.NormFloat64() * 3)
					case "special":
						src[i] = special[rng.IntN(len(special))]
						if rng.IntN(2) == 0 {
							src[i] = float32(rng.NormFloat64())
						}
					case "bits":
						src[i] = math.Float32frombits(rng.Uint32())
					case "zeros":
						src[i] = float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
					case "tiny": // normal values whose transforms can be denormal
						src[i] = float32(rng.NormFloat64() * 1e-37)
					}
				}
				nb := (c.rows + 15) / 16
				got, want := make([]float32, c.rows*c.cols), make([]float32, c.rows*c.cols)
				got16 := make([]uint16, c.rows*c.cols)
				gam, wam := make([]uint32, c.cols*nb), make([]uint32, c.cols*nb)
				guards := func() {
					for i := range got {
						got[i], got16[i] = 7, 7
					}
					for i := range gam {
						gam[i] = 9
					}
				}
				guards()
				for i := range want {
					want[i] = 7
				}
				for i := range wam {
					wam[i] = 9
				}
				if rht {
					NVFP4ColsRHT(got16, gam, src, c.rows, c.cols, c.c0, c.c1)
				} else {
					NVFP4Cols(got, gam, src, c.rows, c.cols, c.c0, c.c1)
				}
				if c.c0 == 0 && c.c1 == c.cols && NVFP4ColsBands(c.rows, c.cols) {
					// The same by bands of source rows, in two calls
					// (the second band first), over guard values.
					guards()
					mid := c.rows / 32 * 16
					for _, b := range [][2]int{{mid, c.rows}, {0, mid}} {
						if rht {
							NVFP4ColsBandRHT(got16, gam, src, c.rows, c.cols, b[0], b[1])
						} else {
							NVFP4ColsBand(got, gam, src, c.rows, c.cols, b[0], b[1])
						}
					}
				}
				transposeGo(want, src, c.rows, c.cols, 0, c.rows, c.c0, c.c1)
				if rht {
					rht16Go(want[c.c0*c.rows : c.c1*c.rows])
				}
				for r := c.c0; r < c.c1; r++ {
					amax16Go(wam[r*nb:(r+1)*nb], want[r*c.rows:(r+1)*c.rows])
				}
				for i := range got {
					in := i/c.rows >= c.c0 && i/c.rows < c.c1
					if rht {
						// The bf16 bits of the twin's values (bf16 values:
						// their low halves are 0), a NaN for a NaN.
						w := math.Float32bits(want[i])
						ok := got16[i] == uint16(w>>16) && w&0xFFFF == 0
						if want[i] != want[i] {
							ok = BF16ToFloat32(got16[i]) != BF16ToFloat32(got16[i])
						}
						if !in {
							ok = got16[i] == 7
						}
						if !ok {
							t.Fatalf("%+v %s %s: stored value %d (row %d) = %#x, twin %#x", c, mode, kind, i, i/c.rows, got16[i], w)
						}
						continue
					}
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("%+v %s: stored value %d (row %d) = %#x, twin %#x", c, kind, i, i/c.rows, math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
				for i := range gam {
					if gam[i] != wam[i] {
						t.Fatalf("%+v %s %s: block amax %d (row %d) = %#x, twin %#x", c, mode, kind, i, i/nb, gam[i], wam[i])
					}
				}
			}
		}
	}
}

// TestDecodeE2M1MatchesTwin checks the vector E2M1 decode to bf16
// against its Go twin bit for bit over every byte, with factors of every
// kind, at lengths that leave a tail (odd ones included).
func TestDecodeE2M1MatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 15, 16, 17, 33, 512, 1001} {
		src := make([]uint8, (n+1)/2)
		for i := range src {
			src[i] = uint8(rng.IntN(256))
		}
		factors := make([]float32, (n+15)/16)
		for i := range factors {
			factors[i] = math.Float32frombits(rng.Uint32())
		}
		got, want := make([]uint16, n), make([]uint16, n)
		DecodeE2M1BF16(got, src, factors, n)
		decodeE2M1BF16Go(want, src, factors)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d: element %d = %#x, twin %#x", n, i, got[i], want[i])
			}
		}
	}
}

// TestAmax128MatchesTwin: the per-128 (and per-32) block amaxes of the
// vector kernels equal the twin's, NaN (above +inf), infinities and any
// bit pattern included, and a block holding one NaN among finite values.
func TestAmax128MatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, size := range []int{128, 32} {
		src := make([]float32, size*9+size/2+3) // a partial block left alone
		for i := range src {
			src[i] = math.Float32frombits(rng.Uint32())
			if rng.IntN(4) == 0 || i < 2*size {
				src[i] = float32(rng.NormFloat64())
			}
		}
		src[size+7] = float32(math.NaN()) // in block 1, else finite
		got, want := make([]uint32, 9), make([]uint32, 9)
		if size == 128 {
			Amax128(got, src)
		} else {
			Amax32(got, src)
		}
		amaxBlocksGo(want, src[:9*size], size)
		for b := range got {
			if (got[b] > 0x7F800000) != (want[b] > 0x7F800000) || (want[b] <= 0x7F800000 && got[b] != want[b]) {
				t.Fatalf("size %d block %d: %#x, twin %#x", size, b, got[b], want[b])
			}
		}
		if got[0] > 0x7F800000 || got[1] <= 0x7F800000 {
			t.Fatalf("size %d: the NaN block's amax %#x, the finite one's %#x", size, got[1], got[0])
		}
	}
}

// TestNVFP4ScaleKernelsMatchTwins checks the block amaxes, the block
// scales and the transpose against their Go twins bit for bit: NaN,
// infinities, zeros and any bit pattern, lengths that leave a tail.
func TestNVFP4ScaleKernelsMatchTwins(t *testing.T) { withISA(t, testNVFP4ScaleKernels) }

func testNVFP4ScaleKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, n := range []int{1, 15, 16, 17, 255, 256, 257, 16 * 33} {
		src := make([]float32, n)
		for i := range src {
			switch rng.IntN(4) {
			case 0:
				src[i] = math.Float32frombits(rng.Uint32())
			case 1:
				src[i] = []float32{0, float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, 1e-40}[rng.IntN(5)]
			default:
				src[i] = float32(rng.NormFloat64())
			}
		}
		nb := (n + 15) / 16
		got, want := make([]uint32, nb), make([]uint32, nb)
		Amax16(got, src)
		amax16Go(want, src)
		for b := range got {
			if got[b] != want[b] || got[b] > 0x7F800000 {
				t.Fatalf("n=%d block %d: amax %#x, twin %#x", n, b, got[b], want[b])
			}
		}
		// Block amaxes of every kind, including ones whose scales
		// saturate, underflow to subnormal E4M3 or to zero.
		am := make([]uint32, n)
		for i := range am {
			switch rng.IntN(4) {
			case 0:
				am[i] = rng.Uint32() &^ (1 << 31) % 0x7F800001
			case 1:
				am[i] = []uint32{0, 0x7F800000, 0x7F7FFFFF, 1}[rng.IntN(4)]
			default:
				am[i] = math.Float32bits(float32(math.Ldexp(rng.Float64(), rng.IntN(40)-20)))
			}
		}
		for _, ms := range [][2]float32{{448, 1.0 / 2688}, {math.MaxFloat32, 1e-38}, {1e-30, 3e30}, {1, 1}} {
			sg, sw := make([]uint8, n), make([]uint8, n)
			eg, ew := make([]float32, n), make([]float32, n)
			NVFP4BlockScales(sg, eg, am, ms[0], ms[1])
			nvfp4ScalesGo(sw, ew, am, ms[0], ms[1])
			for b := range sg {
				if sg[b] != sw[b] || math.Float32bits(eg[b]) != math.Float32bits(ew[b]) {
					t.Fatalf("n=%d m=%g block %d (amax %#x): sf %#x es %g, twin %#x %g", n, ms[0], b, am[b], sg[b], eg[b], sw[b], ew[b])
				}
			}
		}
	}
	for _, shape := range [][2]int{{1, 1}, {16, 16}, {17, 35}, {48, 64}, {64, 20}, {33, 130}} {
		rows, cols := shape[0], shape[1]
		src := make([]float32, rows*cols)
		for i := range src {
			src[i] = float32(i)
		}
		for _, span := range [][2]int{{0, cols}, {cols / 3, cols}, {1, max(1, cols-1)}} {
			got := make([]float32, rows*cols)
			Transpose(got, src, rows, cols, span[0], span[1])
			for j := 0; j < cols; j++ {
				for i := 0; i < rows; i++ {
					want := float32(0)
					if j >= span[0] && j < span[1] {
						want = src[i*cols+j]
					}
					if got[j*rows+i] != want {
						t.Fatalf("%d×%d columns %v: dst[%d][%d] = %v, want %v", rows, cols, span, j, i, got[j*rows+i], want)
					}
				}
			}
		}
	}
}

// TestBlockKernelsMatchTwins checks the fused Float8BlockScaling casts
// (tiles side by side, and columns of a band) against their Go twins
// bit for bit — codes, scale_invs, counts and amaxes — on every kind of
// value, with power-of-two and float32 scales, an amax floor, widths
// that are and are not multiples of 16, and NaNs that stop them, on
// every ISA (AVX2's tiles are its column kernels).
func TestBlockKernelsMatchTwins(t *testing.T) { withISA(t, testBlockKernels) }

func testBlockKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	gen := func(n int, nanEvery int) []float32 {
		v := make([]float32, n)
		for i := range v {
			switch rng.IntN(6) {
			case 0:
				v[i] = math.Float32frombits(rng.Uint32() &^ (0xFF << 23)) // subnormal or zero
			case 1:
				v[i] = []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 464, 61440, 1e-40, math.MaxFloat32}[rng.IntN(8)]
			default:
				v[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(20)-10))
			}
			if v[i] != v[i] || (nanEvery > 0 && rng.IntN(nanEvery) == 0) {
				v[i] = float32(math.NaN())
			}
		}
		return v
	}
	type opts struct {
		eps  float32
		mask uint32
	}
	for _, o := range []opts{{0, 0xFF800000}, {0, 0xFFFFFFFF}, {1e-3, 0xFF800000}, {1e30, 0xFFFFFFFF}} {
		for _, shape := range [][3]int{{1, 1, 128}, {1, 6, 128}, {1, 37, 128}, {2, 20, 16}, {40, 5, 64}, {3, 2, 16}, {128, 2, 128}, {5, 3, 40}, {2, 1, 7}, {130, 1, 48}} {
			rows, tiles, width := shape[0], shape[1], shape[2]
			for _, nanEvery := range []int{0, 3000} {
				ld, ldd := tiles*width+5, tiles*width+3
				src := gen((rows-1)*ld+tiles*width, nanEvery)
				for f, c := range testCasts {
					got, want := make([]uint8, (rows-1)*ldd+tiles*width), make([]uint8, (rows-1)*ldd+tiles*width)
					for i := range got {
						got[i], want[i] = 0xAA, 0xAA
					}
					gi, wi := make([]float32, tiles), make([]float32, tiles)
					gd, ga := BlockTiles(c, got, ldd, src, ld, gi, tiles, rows, width, width, width, o.eps, o.mask)
					wd, wa := blockTilesGo(c, want, ldd, src, ld, wi, tiles, rows, width, width, width, o.eps, o.mask)
					if gd != wd || ga != wa || string(got) != string(want) {
						t.Fatalf("tiles %v %v format %d: done %d amax %#x, twin %d %#x; codes equal %v", o, shape, f, gd, ga, wd, wa, string(got) == string(want))
					}
					for i := range gi {
						if math.Float32bits(gi[i]) != math.Float32bits(wi[i]) {
							t.Fatalf("tiles %v %v format %d: scale_inv[%d] %v, twin %v", o, shape, f, i, gi[i], wi[i])
						}
					}
					if nanEvery == 0 && gd != tiles {
						t.Fatalf("tiles %v %v: stopped at %d of %d without a NaN", o, shape, gd, tiles)
					}
					// The first block of each row as a tile of one row,
					// stacked down the rows.
					for i := range got {
						got[i], want[i] = 0xAA, 0xAA
					}
					gi, wi = make([]float32, rows), make([]float32, rows)
					gd, ga = BlockTiles(c, got, ldd, src, ld, gi, rows, 1, width, ld, ldd, o.eps, o.mask)
					wd, wa = blockTilesGo(c, want, ldd, src, ld, wi, rows, 1, width, ld, ldd, o.eps, o.mask)
					if gd != wd || ga != wa || string(got) != string(want) {
						t.Fatalf("stacked tiles %v %v format %d: done %d amax %#x, twin %d %#x; codes equal %v", o, shape, f, gd, ga, wd, wa, string(got) == string(want))
					}
					for i := range gi {
						if math.Float32bits(gi[i]) != math.Float32bits(wi[i]) {
							t.Fatalf("stacked tiles %v %v format %d: scale_inv[%d] %v, twin %v", o, shape, f, i, gi[i], wi[i])
						}
					}
					// Columns: the band rows × tiles·width.
					n := tiles * width
					for i := range got {
						got[i], want[i] = 0xAA, 0xAA
					}
					gi, wi = make([]float32, n), make([]float32, n)
					gd, ga = BlockCols(c, got, ldd, src, ld, gi, rows, n, o.eps, o.mask)
					wd, wa = blockColsGo(c, want, ldd, src, ld, wi, rows, n, o.eps, o.mask)
					if gd != wd || ga != wa || string(got) != string(want) {
						t.Fatalf("cols %v %v format %d: done %d amax %#x, twin %d %#x; codes equal %v", o, shape, f, gd, ga, wd, wa, string(got) == string(want))
					}
					for i := range gi {
						if math.Float32bits(gi[i]) != math.Float32bits(wi[i]) {
							t.Fatalf("cols %v %v format %d: scale_inv[%d] %v, twin %v", o, shape, f, i, gi[i], wi[i])
						}
					}
				}
			}
		}
	}
}

// TestBF16BitsMatchesTwin: BF16Bits' vector kernel gives bf16Bits of
// every value — any bit pattern, quiet and signalling NaNs of both
// signs, infinities, denormals — at lengths that leave a tail.
func TestBF16BitsMatchesTwin(t *testing.T) { withISA(t, testBF16BitsMatchesTwin) }

func testBF16BitsMatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	special := []uint32{0x7F800001, 0xFF800001, 0x7FC00000, 0xFFBFFFFF, 0x7F800000, 0xFF800000, 0, 0x80000000, 1, 0x807FFFFF, 0x7F7F0000}
	for _, n := range []int{1, 15, 16, 17, 48, 100} {
		src := make([]float32, n)
		for i := range src {
			src[i] = math.Float32frombits(rng.Uint32())
			if i < len(special) {
				src[i] = math.Float32frombits(special[(i+n)%len(special)])
			}
		}
		got := make([]uint16, n+3)
		for i := range got {
			got[i] = 0xBEEF
		}
		BF16Bits(got, src)
		for i, x := range src {
			if got[i] != bf16Bits(x) {
				t.Fatalf("n=%d value %d (%#x): %#x, twin %#x", n, i, math.Float32bits(x), got[i], bf16Bits(x))
			}
		}
		if got[n] != 0xBEEF {
			t.Fatalf("n=%d: wrote past the end", n)
		}
	}
}

// TestMXScalesMatchesTwin checks MXScales (the AVX2 kernel on whole
// groups of 8 blocks) against mxScalesGo at every tail length, for
// amaxes of every kind (zero, subnormal, normal on both sides of the
// rounding threshold, the largest finite, infinite, NaN patterns), both
// exponent rules and the formats' emax (and small ones the kernel
// leaves to the twin).
func TestMXScalesMatchesTwin(t *testing.T) { withISA(t, testMXScales) }

func testMXScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	special := []uint32{0, 1, 0x7FFFFF, 0x800000, 0x3F600000, 0x3F600001, 0x3FE00001, 0x7F7FFFFF, 0x7F000000, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF}
	for n := 0; n <= 70; n++ {
		am := make([]uint32, n)
		for i := range am {
			switch rng.IntN(3) {
			case 0:
				am[i] = rng.Uint32() &^ (1 << 31)
			case 1:
				am[i] = special[rng.IntN(len(special))]
			default:
				am[i] = math.Float32bits(float32(math.Ldexp(rng.Float64(), rng.IntN(300)-150)))
			}
		}
		for _, emax := range []int{0, 1, 2, 8, 15} {
			for _, ceil := range []bool{false, true} {
				sg, sw := make([]uint8, n), make([]uint8, n)
				ig, iw := make([]float32, n), make([]float32, n)
				thr := uint32(1<<23 - 1)
				if ceil {
					thr = 0x600000
				}
				mg := MXScales(sg, ig, am, emax, ceil)
				mw := mxScalesGo(sw, iw, am, uint32(emax), thr)
				if mg != mw {
					t.Fatalf("n=%d emax %d ceil %v: max %#x, twin %#x", n, emax, ceil, mg, mw)
				}
				for j := range sg {
					if sg[j] != sw[j] || math.Float32bits(ig[j]) != math.Float32bits(iw[j]) {
						t.Fatalf("n=%d emax %d ceil %v block %d (amax %#x): code %d factor %g, twin %d %g", n, emax, ceil, j, am[j], sg[j], ig[j], sw[j], iw[j])
					}
				}
			}
		}
	}
}

// TestE8M0KernelsMatchTwins checks E8M0Range and E8M0Factors (the AVX2
// kernels on whole vectors) against their Go twins and a float64
// reference at every tail length, with NaN codes among the others and
// shifts that make factors normal, subnormal, zero and infinite.
func TestE8M0KernelsMatchTwins(t *testing.T) { withISA(t, testE8M0Kernels) }

func testE8M0Kernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	for n := 0; n <= 100; n++ {
		sc := make([]uint8, n)
		for i := range sc {
			sc[i] = uint8(rng.IntN(256))
			if rng.IntN(4) == 0 {
				sc[i] = 255
			}
		}
		if n > 0 && rng.IntN(3) == 0 {
			sc[rng.IntN(n)] = 0
		}
		lo, hi, ok := E8M0Range(sc)
		wlo, whi, wok := uint8(255), uint8(0), false
		for _, s := range sc {
			wlo = min(wlo, s)
			if s != 255 {
				whi, wok = max(whi, s), true
			}
		}
		if ok != wok || ok && (lo != wlo || hi != whi) {
			t.Fatalf("n=%d: range %d %d %v, want %d %d %v", n, lo, hi, ok, wlo, whi, wok)
		}
		for _, shift := range []int{-127, -40, 0, 1, 60, 127, 200, -600, 600} {
			got, twin := make([]float32, n), make([]float32, n)
			E8M0Factors(got, sc, shift)
			e8m0FactorsGo(twin, sc, min(max(shift, -512), 512))
			for j, s := range sc {
				want := float32(math.Ldexp(1, int(s)-127-shift))
				if s == 255 {
					want = float32(math.NaN())
				}
				if math.Float32bits(got[j]) != math.Float32bits(twin[j]) || math.Float32bits(got[j]) != math.Float32bits(want) {
					t.Fatalf("n=%d shift %d code %d: factor %g (%#x), twin %g, want %g", n, shift, s, got[j], math.Float32bits(got[j]), twin[j], want)
				}
			}
		}
	}
}
