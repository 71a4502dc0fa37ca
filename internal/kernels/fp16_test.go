package kernels

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

// TestToFP16MatchesX448 compares ToFP16 with x448/float16 on every
// float32 with OCTET_EXHAUSTIVE=1, else on a stride through all bit
// patterns plus every value near each FP16 rounding boundary.
func TestToFP16MatchesX448(t *testing.T) {
	check := func(u uint32) {
		x := math.Float32frombits(u)
		if got, want := ToFP16(x), float16.Fromfloat32(x).Bits(); got != want {
			t.Fatalf("ToFP16(%g = %#08x) = %#04x, x448 gives %#04x", x, u, got, want)
		}
	}
	if os.Getenv("OCTET_EXHAUSTIVE") == "1" {
		for u := uint64(0); u < 1<<32; u++ {
			check(uint32(u))
		}
		return
	}
	for u := uint64(0); u < 1<<32; u += 4099 {
		check(uint32(u))
	}
	// Every FP16 value, the midpoints between neighbours (ties) and one
	// float32 ulp either side, both signs.
	for h := 0; h < 1<<15; h++ {
		v := float16.Frombits(uint16(h)).Float32()
		next := float16.Frombits(uint16(h + 1)).Float32()
		mid := math.Float32bits(v/2 + next/2)
		for _, u := range []uint32{math.Float32bits(v), mid - 1, mid, mid + 1} {
			check(u)
			check(u | 1<<31)
		}
	}
	require.Equal(t, uint16(0x7c00), ToFP16(65520))
	require.Equal(t, uint16(0x7bff), ToFP16(65519.996))
	require.Equal(t, uint16(0xfc00), ToFP16(float32(math.Inf(-1))))
	require.Equal(t, uint16(0x0001), ToFP16(float32(math.Ldexp(1, -24))))
	require.Equal(t, uint16(0x0000), ToFP16(float32(math.Ldexp(1, -25))))   // tie to even (0)
	require.Equal(t, uint16(0x0002), ToFP16(float32(math.Ldexp(3, -25))))   // tie to even (2)
	require.Equal(t, uint16(0x8000), ToFP16(float32(math.Copysign(0, -1)))) // −0 kept
}

// TestEncode16MatchesX448 runs EncodeFP16 (vector kernel plus its Go twin)
// over float32 bit patterns in slices of 4096 and compares every value
// with x448/float16: all 2^32 with OCTET_EXHAUSTIVE=1, else a stride.
func TestEncode16MatchesX448(t *testing.T) {
	const chunk = 4096
	src, dst := make([]float32, chunk), make([]uint16, chunk)
	step := uint64(7919)
	if os.Getenv("OCTET_EXHAUSTIVE") == "1" {
		step = 1
	}
	for base := uint64(0); base < 1<<32; base += chunk * step {
		for i := range src {
			src[i] = math.Float32frombits(uint32(base + uint64(i)*step))
		}
		EncodeFP16(dst, src, 1)
		for i, x := range src {
			if want := float16.Fromfloat32(x).Bits(); dst[i] != want {
				t.Fatalf("EncodeFP16(%g = %#08x) = %#04x, x448 gives %#04x", x, math.Float32bits(x), dst[i], want)
			}
		}
	}
	// A scale is applied before rounding, as the scalar loop does.
	src = src[:37]
	for i := range src {
		src[i] = float32(i)*0.37 - 5
	}
	EncodeFP16(dst, src, 1024)
	for i, x := range src {
		require.Equal(t, float16.Fromfloat32(x*1024).Bits(), dst[i], "value %d", i)
	}
}

// EncodeFP16 gives its twin's bits for every non-NaN value — ties,
// subnormals, overflow to ±inf, ±0 — at every length to 70 (vector body
// and Go tail), with scales that move values across those edges.
func TestEncodeFP16MatchesTwin(t *testing.T) { withISA(t, testEncodeFP16MatchesTwin) }

func testEncodeFP16MatchesTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	specials := []float32{0, float32(math.Copysign(0, -1)), 65504, 65520, 65519.99, -65520, 1e-8, 6.1e-5, 5.96e-8, 2.98e-8,
		1 + 1.0/2048, 1 + 3.0/2048, float32(math.Inf(1)), float32(math.Inf(-1)), 3e38}
	for n := 0; n <= 70; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
			if rng.IntN(4) == 0 {
				x[i] = specials[rng.IntN(len(specials))]
			}
		}
		for _, scale := range []float32{1, 0.37, 1024} {
			got, want := make([]uint16, n+1), make([]uint16, n)
			got[n] = 0xBEEF
			EncodeFP16(got[:n], x, scale)
			encodeFP16Go(want, x, scale)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n=%d scale=%v: x=%v gives %#04x, twin %#04x", n, scale, x[i], got[i], want[i])
				}
			}
			if got[n] != 0xBEEF {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
	}
}
