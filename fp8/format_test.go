package fp8

import (
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// specValues lists the non-negative finite values of a format in code
// order, built from the spec table (bias, mantissa bits, max) without the
// package's decoder.
func specValues(f Format) []float64 {
	bias, mbits, last := 7, 3, 0x7E
	if f == E5M2 {
		bias, mbits, last = 15, 2, 0x7B
	}
	var v []float64
	steps := 1 << mbits
	for k := 0; k < steps; k++ { // subnormals k·2^(1−bias−mbits)
		v = append(v, float64(k)*math.Pow(2, float64(1-bias-mbits)))
	}
	for e := 1 - bias; len(v) <= last; e++ {
		for m := 0; m < steps && len(v) <= last; m++ {
			v = append(v, float64(steps+m)*math.Pow(2, float64(e-mbits)))
		}
	}
	return v
}

func TestDecodeMatchesSpecTable(t *testing.T) {
	for _, f := range []Format{E4M3, E5M2} {
		vals := specValues(f)
		for c := 0; c < 256; c++ {
			got := f.Decode(uint8(c))
			mag := c & 0x7F
			neg := c&0x80 != 0
			switch {
			case mag < len(vals):
				want := vals[mag]
				if neg {
					want = -want
				}
				if float64(got) != want || math.Signbit(float64(got)) != neg {
					t.Fatalf("%v: code %#02x decodes to %v, want %v", f, c, got, want)
				}
			case f == E5M2 && mag == 0x7C:
				if !math.IsInf(float64(got), map[bool]int{false: 1, true: -1}[neg]) {
					t.Fatalf("E5M2 code %#02x decodes to %v, want ±inf", c, got)
				}
			default:
				if !math.IsNaN(float64(got)) || !f.IsNaN(uint8(c)) {
					t.Fatalf("%v: code %#02x decodes to %v, want NaN", f, c, got)
				}
			}
		}
	}
	// The spec table's landmarks.
	for _, c := range []struct {
		f    Format
		code uint8
		want float32
	}{
		{E4M3, 0x7E, 448}, {E4M3, 0xFE, -448}, {E4M3, 0x08, 1.0 / 64}, {E4M3, 0x01, 1.0 / 512}, {E4M3, 0x38, 1},
		{E5M2, 0x7B, 57344}, {E5M2, 0x04, 1.0 / 16384}, {E5M2, 0x01, 1.0 / 65536}, {E5M2, 0x3C, 1},
	} {
		if got := c.f.Decode(c.code); got != c.want {
			t.Errorf("%v %#02x = %v, want %v", c.f, c.code, got, c.want)
		}
	}
	if E4M3.Max() != 448 || E5M2.Max() != 57344 || E4M3.MinNormal() != 1.0/64 || E5M2.MinSubnormal() != 1.0/65536 {
		t.Error("Max/MinNormal/MinSubnormal disagree with the spec table")
	}
}

func nextUp(x float32) float32   { return math.Nextafter32(x, float32(math.Inf(1))) }
func nextDown(x float32) float32 { return math.Nextafter32(x, float32(math.Inf(-1))) }

func TestEncodeRepresentablesMidpointsAndNeighbours(t *testing.T) {
	for _, f := range []Format{E4M3, E5M2} {
		vals := specValues(f)
		last := len(vals) - 1
		for _, sign := range []float32{1, -1} {
			sbit := uint8(0)
			if sign < 0 {
				sbit = 0x80
			}
			for c, v := range vals {
				x := sign * float32(v)
				for _, enc := range []func(float32) uint8{f.Encode, f.EncodeNoSat} {
					if got := enc(x); got != sbit|uint8(c) {
						t.Fatalf("%v: Encode(%v) = %#02x, want %#02x", f, x, got, sbit|uint8(c))
					}
					if c > 0 {
						if got := enc(nextDown(float32(v)) * sign); got != sbit|uint8(c) {
							t.Fatalf("%v: Encode(%v−ulp) = %#02x, want %#02x", f, x, got, sbit|uint8(c))
						}
					}
					if got := enc(nextUp(float32(v)) * sign); got != sbit|uint8(c) && c < last {
						t.Fatalf("%v: Encode(%v+ulp) = %#02x, want %#02x", f, x, got, sbit|uint8(c))
					}
				}
				if c == last {
					continue
				}
				mid := float32((v + vals[c+1]) / 2) // exact in float32
				even := uint8(c)
				if c%2 == 1 {
					even = uint8(c + 1)
				}
				for _, enc := range []func(float32) uint8{f.Encode, f.EncodeNoSat} {
					if got := enc(sign * mid); got != sbit|even {
						t.Fatalf("%v: Encode(midpoint %v) = %#02x, want %#02x (even)", f, sign*mid, got, sbit|even)
					}
					if got := enc(sign * nextDown(mid)); got != sbit|uint8(c) {
						t.Fatalf("%v: Encode(%v) = %#02x, want %#02x", f, sign*nextDown(mid), got, sbit|uint8(c))
					}
					if got := enc(sign * nextUp(mid)); got != sbit|uint8(c+1) {
						t.Fatalf("%v: Encode(%v) = %#02x, want %#02x", f, sign*nextUp(mid), got, sbit|uint8(c+1))
					}
				}
			}
		}
	}
}

func TestEncodeOverflowInfNaNZero(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, c := range []struct {
		f         Format
		x         float32
		sat, nsat uint8
	}{
		{E4M3, 464, 0x7E, 0x7E}, // the tie at the overflow boundary rounds to 448 (even)
		{E4M3, nextUp(464), 0x7E, 0x7F},
		{E4M3, -nextUp(464), 0xFE, 0xFF},
		{E4M3, 1e30, 0x7E, 0x7F},
		{E4M3, inf, 0x7E, 0x7F},
		{E4M3, -inf, 0xFE, 0xFF},
		{E5M2, nextDown(61440), 0x7B, 0x7B},
		{E5M2, 61440, 0x7B, 0x7C}, // the tie rounds to the (even) code past max
		{E5M2, -61440, 0xFB, 0xFC},
		{E5M2, inf, 0x7B, 0x7C},
		{E5M2, -inf, 0xFB, 0xFC},
		{E4M3, 0, 0x00, 0x00},
		{E4M3, float32(math.Copysign(0, -1)), 0x80, 0x80},
		{E5M2, float32(math.Copysign(0, -1)), 0x80, 0x80},
		{E4M3, 1.0 / 1024, 0x00, 0x00}, // half the smallest subnormal: tie to even (0)
		{E4M3, nextUp(1.0 / 1024), 0x01, 0x01},
		{E4M3, 3.0 / 1024, 0x02, 0x02}, // 1.5 subnormal steps: tie to even (2)
		{E4M3, math.SmallestNonzeroFloat32, 0x00, 0x00},
		{E5M2, 1.0 / 131072, 0x00, 0x00},
	} {
		if got := c.f.Encode(c.x); got != c.sat {
			t.Errorf("%v.Encode(%v) = %#02x, want %#02x", c.f, c.x, got, c.sat)
		}
		if got := c.f.EncodeNoSat(c.x); got != c.nsat {
			t.Errorf("%v.EncodeNoSat(%v) = %#02x, want %#02x", c.f, c.x, got, c.nsat)
		}
	}
	for _, f := range []Format{E4M3, E5M2} {
		for _, x := range []float32{nan, -nan, math.Float32frombits(0x7F800001), math.Float32frombits(0xFFC00000)} {
			if b := f.Encode(x); !f.IsNaN(b) || !math.IsNaN(float64(f.Decode(b))) {
				t.Errorf("%v.Encode(NaN %#x) = %#02x, not NaN", f, math.Float32bits(x), b)
			}
			if b := f.EncodeNoSat(x); !f.IsNaN(b) {
				t.Errorf("%v.EncodeNoSat(NaN) = %#02x, not NaN", f, b)
			}
		}
		for c := 0; c < 256; c++ {
			if f.IsNaN(uint8(c)) != math.IsNaN(float64(f.Decode(uint8(c)))) {
				t.Errorf("%v code %#02x: IsNaN and Decode disagree", f, c)
			}
		}
	}
}

func TestDecodeEncodeRoundTripAllCodes(t *testing.T) {
	for _, f := range []Format{E4M3, E5M2} {
		for c := 0; c < 256; c++ {
			b := uint8(c)
			if f.IsNaN(b) {
				continue
			}
			if got := f.EncodeNoSat(f.Decode(b)); got != b {
				t.Errorf("%v: EncodeNoSat(Decode(%#02x)) = %#02x", f, b, got)
			}
		}
	}
}

// refEncode is the slow reference: search the sorted list of finite
// values (plus the first value past max, standing for overflow) for the
// nearest, ties to the even code.
func refEncode(f Format, vals []float64, x float32, sat bool) uint8 {
	fi := formats[f]
	sign := uint8(0)
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	if math.IsNaN(float64(x)) {
		return sign | fi.nanCode
	}
	a := math.Abs(float64(x))
	over := func() uint8 {
		if sat {
			return sign | fi.maxCode
		}
		if fi.infCode != 0 {
			return sign | fi.infCode
		}
		return sign | fi.nanCode
	}
	if math.IsInf(a, 0) {
		return over()
	}
	i := sort.SearchFloat64s(vals, a) // vals[i-1] < a <= vals[i]
	if i == len(vals) {
		return over()
	}
	if i < len(vals) && vals[i] == a {
		if i == len(vals)-1 {
			return over()
		}
		return sign | uint8(i)
	}
	lo, hi := i-1, i
	dl, dh := a-vals[lo], vals[hi]-a
	pick := lo
	if dh < dl || (dh == dl && hi%2 == 0) {
		pick = hi
	}
	if pick == len(vals)-1 {
		return over()
	}
	return sign | uint8(pick)
}

// TestExhaustive checks every float32 bit pattern against the slow
// reference in both modes. It takes about ten minutes on two cores; run it
// with OCTET_EXHAUSTIVE=1.
func TestExhaustive(t *testing.T) {
	if os.Getenv("OCTET_EXHAUSTIVE") != "1" {
		t.Skip("set OCTET_EXHAUSTIVE=1 to check all 2^32 float32 inputs")
	}
	start := time.Now()
	for _, f := range []Format{E4M3, E5M2} {
		vals := specValues(f)
		next := 2*vals[len(vals)-1] - vals[len(vals)-2] // the value one step past max
		vals = append(vals, next)
		var bad atomic.Int64
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for hi := uint64(w); hi < 1<<16; hi += uint64(workers) {
					for lo := uint64(0); lo < 1<<16; lo++ {
						x := math.Float32frombits(uint32(hi<<16 | lo))
						for _, sat := range []bool{true, false} {
							got := f.encode(x, sat)
							want := refEncode(f, vals, x, sat)
							if got != want && !(f.IsNaN(got) && f.IsNaN(want)) {
								if bad.Add(1) < 10 {
									t.Errorf("%v sat=%v: encode(%#08x = %v) = %#02x, want %#02x", f, sat, math.Float32bits(x), x, got, want)
								}
							}
						}
					}
				}
			}(w)
		}
		wg.Wait()
		if bad.Load() > 0 {
			t.Fatalf("%v: %d mismatches", f, bad.Load())
		}
	}
	t.Logf("2^32 inputs × 2 formats × 2 modes in %v", time.Since(start))
}

func FuzzEncodeDecode(f *testing.F) {
	for _, x := range []float32{0, 1, -1, 448, 464, 465, 57344, 61440, 1e-3, 1.0 / 1024, float32(math.Inf(1)), float32(math.NaN())} {
		f.Add(math.Float32bits(x))
	}
	valsE4 := append(specValues(E4M3), 480)
	valsE5 := append(specValues(E5M2), 65536)
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		for _, c := range []struct {
			f    Format
			vals []float64
		}{{E4M3, valsE4}, {E5M2, valsE5}} {
			for _, sat := range []bool{true, false} {
				got, want := c.f.encode(x, sat), refEncode(c.f, c.vals, x, sat)
				if got != want && !(c.f.IsNaN(got) && c.f.IsNaN(want)) {
					t.Fatalf("%v sat=%v: encode(%v) = %#02x, want %#02x", c.f, sat, x, got, want)
				}
			}
			// Decoding then re-encoding is the identity on non-NaN codes.
			b := c.f.Encode(x)
			if !c.f.IsNaN(b) && c.f.Encode(c.f.Decode(b)) != b {
				t.Fatalf("%v: round trip of %#02x", c.f, b)
			}
		}
	})
}

func TestE8M0(t *testing.T) {
	if E8M0(127).Float32() != 1 || E8M0(0).Float32() != float32(math.Ldexp(1, -127)) || E8M0(254).Float32() != float32(math.Ldexp(1, 127)) {
		t.Fatal("E8M0 decode")
	}
	if !math.IsNaN(float64(E8M0NaN.Float32())) {
		t.Fatal("E8M0 NaN")
	}
	for _, c := range []struct {
		amax float32
		rule ExpRule
		want int
	}{
		{448, ExpRoundUp, 0}, {449, ExpRoundUp, 1}, {224, ExpRoundUp, -1}, {225, ExpRoundUp, 0}, {1, ExpRoundUp, -8},
		{448, ExpOCPFloor, 0}, {511, ExpOCPFloor, 0}, {512, ExpOCPFloor, 1}, {1, ExpOCPFloor, -8},
		{1e-38, ExpRoundUp, -127}, {0, ExpRoundUp, -127}, {0, ExpOCPFloor, -127}, // a zero block: code 0, as TE and torchao
	} {
		if got := BlockScale(c.amax, E4M3, c.rule).Exp(); got != c.want {
			t.Errorf("BlockScale(%v, %v) = 2^%d, want 2^%d", c.amax, c.rule, got, c.want)
		}
	}
	if BlockScale(float32(math.Inf(1)), E4M3, ExpRoundUp) != E8M0NaN || BlockScale(float32(math.NaN()), E4M3, ExpRoundUp) != E8M0NaN {
		t.Error("a non-finite block amax must give a NaN scale")
	}
}
