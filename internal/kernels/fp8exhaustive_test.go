package kernels

import (
	"math"
	"os"
	"testing"
)

// TestFP8CastsOverBitPatterns runs the vector FP8 casts over float32 bit
// patterns, in slices, against their Go twins, both formats: the
// tensorwise cast (quantizeFP8Vector, scales 1 and 0.37, every pattern
// NaNs included) and the fused 1×128 block cast (blockTilesVector,
// both scale masks, NaNs replaced by an infinity of their sign: a block
// holding a NaN leaves the fused kernel). All 2^32 patterns with
// OCTET_EXHAUSTIVE=1 (minutes), else every 4099th run of 1,024 and the
// patterns around every FP8 value's rounding boundaries.
func TestFP8CastsOverBitPatterns(t *testing.T) { withISA(t, testFP8CastsOverBitPatterns) }

func testFP8CastsOverBitPatterns(t *testing.T) {
	if !hasAVX512 && !hasAVX2 {
		t.Skip("no vector FP8 casts in this build")
	}
	const chunk = 1 << 14
	src := make([]float32, chunk)
	got, want := make([]uint8, chunk), make([]uint8, chunk)
	ig, iw := make([]float32, chunk/128), make([]float32, chunk/128)
	check := func(f int, c *FP8Cast, what string) {
		t.Helper()
		for _, scale := range []float32{1, 0.37} {
			if n, _ := quantizeFP8Vector(f, got, src, scale); n != chunk {
				t.Fatalf("format %d: the vector cast did %d of %d", f, n, chunk)
			}
			quantizeFP8Go(c, want, src, scale)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("format %d %s, scale %v: %#08x → %#02x, twin %#02x", f, what, scale, math.Float32bits(src[i]), got[i], want[i])
				}
			}
		}
		fin := append([]float32(nil), src...)
		for i, v := range fin {
			if b := math.Float32bits(v); b&0x7FFFFFFF > 0x7F800000 {
				fin[i] = math.Float32frombits(b & 0xFF800000)
			}
		}
		if !hasAVX512 {
			return // the fused block cast is AVX-512 only
		}
		for _, mask := range []uint32{0xFF800000, 0xFFFFFFFF} {
			d, _, ok := blockTilesVector(f, got, 0, fin, 0, ig, chunk/128, 1, 128, 128, 128, 0, mask)
			if !ok || d != chunk/128 {
				t.Fatalf("format %d: the fused block cast did %d of %d blocks", f, d, chunk/128)
			}
			blockTilesGo(c, want, 0, fin, 0, iw, chunk/128, 1, 128, 128, 128, 0, mask)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("format %d %s, block mask %#x: %#08x → %#02x, twin %#02x", f, what, mask, math.Float32bits(fin[i]), got[i], want[i])
				}
			}
			for i := range ig {
				if math.Float32bits(ig[i]) != math.Float32bits(iw[i]) {
					t.Fatalf("format %d %s, block mask %#x: block %d scale_inv %v, twin %v", f, what, mask, i, ig[i], iw[i])
				}
			}
		}
	}
	for f, c := range testCasts {
		step := uint64(4099) * 1024
		if os.Getenv("OCTET_EXHAUSTIVE") == "1" {
			step = 1024
		}
		for base := uint64(0); base < 1<<32; {
			n := 0
			for ; n < chunk && base < 1<<32; base += step {
				for i := uint64(0); i < 1024; i++ {
					src[n] = math.Float32frombits(uint32(base + i))
					n++
				}
			}
			for ; n < chunk; n++ {
				src[n] = 0
			}
			check(f, c, "patterns")
		}
		// Around the rounding boundaries: every code's value and the
		// midpoint to the next (ties), one ulp either side, both signs,
		// at a spread of binary exponents above and below the format's.
		n := 0
		for code := 0; code < 0x7F; code++ {
			v, next := float64(c.Decode[code]), float64(c.Decode[code+1])
			if math.IsNaN(next) {
				continue
			}
			for _, e := range []int{0, -3, 5} {
				mid := float32(math.Ldexp((v+next)/2, e))
				for _, u := range []uint32{math.Float32bits(float32(math.Ldexp(v, e))), math.Float32bits(mid) - 1, math.Float32bits(mid), math.Float32bits(mid) + 1} {
					for _, s := range []uint32{0, 1 << 31} {
						src[n%chunk] = math.Float32frombits(u | s)
						n++
					}
				}
			}
		}
		for ; n%chunk != 0; n++ {
			src[n%chunk] = 0
		}
		check(f, c, "boundaries")
	}
}
