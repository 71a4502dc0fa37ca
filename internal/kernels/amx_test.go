package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tileKernels lists the bf16 kernels that compute tile grids.
func tileKernels() []bf16Kernel {
	var ks []bf16Kernel
	for _, k := range availableBF16Kernels() {
		if k.tiles != nil {
			ks = append(ks, k)
		}
	}
	return ks
}

// TestAMXTiles runs every tile kernel against the twin on grids of
// blocks with padded strides and guard values around C: bit for bit in
// every store mode when all sums are exact (small integers), within the
// float32 bound of a k-term sum on random values, and NaN-safe
// overwrites.
func TestAMXTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	ks := tileKernels()
	if len(ks) == 0 {
		t.Fatal("no tile kernel: the pure-Go one is always available")
	}
	for _, k := range ks {
		for _, g := range []struct{ kt, mt, nt, pad int }{{1, 1, 1, 0}, {2, 2, 1, 16}, {12, 1, 3, 0}, {3, 3, 2, 32}} {
			kp := 16 * g.kt
			lda := kp + g.pad
			for _, exact := range []bool{true, false} {
				val := func() uint16 {
					if exact {
						return BF16FromFloat32(float32(rng.IntN(9) - 4))
					}
					return BF16FromFloat32(float32(rng.NormFloat64()))
				}
				a := make([]uint32, g.mt*32*lda)
				for i := range a {
					a[i] = bf16Pair(val(), val())
				}
				b := make([]uint32, g.nt*32*kp)
				for i := range b {
					b[i] = bf16Pair(val(), val())
				}
				ldc := 32*g.nt + 5
				rows := 32 * g.mt
				for mode := 0; mode < 4; mode++ {
					alpha, alphaLo := float32(0.75), float32(0)
					if mode&2 != 0 {
						alpha, alphaLo = 0.1, float32(0.1-float64(float32(0.1)))
					}
					got := make([]float32, rows*ldc+7)
					want := make([]float32, len(got))
					for i := range got {
						got[i], want[i] = guard, guard
						if i < rows*ldc && i%ldc < 32*g.nt {
							got[i], want[i] = float32(i%7), float32(i%7)
							if mode&1 != 0 {
								got[i] = float32(math.NaN()) // overwritten, never read
							}
						}
					}
					scratch := make([]float32, 1024)
					k.tiles(g.kt, a, lda, b, got, ldc, g.mt, g.nt, alpha, alphaLo, mode, scratch)
					amxTilesRef(g.kt, a, lda, b, want, ldc, g.mt, g.nt, alpha, alphaLo, mode, nil)
					for i := range got {
						gv, wv := got[i], want[i]
						if i >= rows*ldc || i%ldc >= 32*g.nt {
							if math.Float32bits(gv) != math.Float32bits(guard) {
								t.Fatalf("%s %+v mode %d: guard c[%d] overwritten with %v", k.name, g, mode, i, gv)
							}
							continue
						}
						if exact || k.name == goAMXKernel.name {
							if math.Float32bits(gv) != math.Float32bits(wv) {
								t.Fatalf("%s %+v exact=%v mode %d: c[%d] = %v, twin %v", k.name, g, exact, mode, i, gv, wv)
							}
							continue
						}
						// |Σ computed − Σ exact| ≤ kp·2·2^-24·Σ|a·b| for the
						// sum, plus the store's rounding.
						r, col := i/ldc, i%ldc
						var sum, abs float64
						for p := 0; p < kp; p++ {
							av, bv := a[r*lda+p], b[(col/32)*32*kp+p*32+col%32]
							for h := 0; h < 2; h++ {
								x := float64(BF16ToFloat32(uint16(av >> (16 * h))))
								y := float64(BF16ToFloat32(uint16(bv >> (16 * h))))
								sum += x * y
								abs += math.Abs(x * y)
							}
						}
						scale := float64(alpha) + float64(alphaLo)
						ref := sum * scale
						if mode&1 == 0 {
							ref += float64(i % 7)
						}
						bound := (float64(2*kp)*0x1p-24*abs+0x1p-23*math.Abs(sum))*math.Abs(scale) + 0x1p-22*math.Abs(ref)
						if math.Abs(float64(gv)-ref) > bound {
							t.Fatalf("%s %+v mode %d: c[%d] = %v, float64 %v (bound %g)", k.name, g, mode, i, gv, ref, bound)
						}
					}
				}
			}
		}
	}
}

// TestAMXTilesSpecialValues: denormal inputs read as zero, denormal
// results flush, infinities propagate and inf·0 is NaN on every tile
// kernel, as on VDPBF16PS.
func TestAMXTilesSpecialValues(t *testing.T) {
	one, big, small := BF16FromFloat32(1), BF16FromFloat32(0x1p100), BF16FromFloat32(0x1p-70)
	cases := []struct {
		name               string
		aLo, aHi, bLo, bHi uint16
		want               float32
	}{
		{"denormal input is zero", 0x0040, 0, big, 0, 0},
		{"denormal result flushed", small, 0, small, 0, 0},
		{"inf", 0x7F80, 0, one, 0, float32(math.Inf(1))},
		{"inf·0 is NaN", 0x7F80, 0, 0, 0, float32(math.NaN())},
	}
	for _, k := range tileKernels() {
		for _, tc := range cases {
			a, b := make([]uint32, 32*16), make([]uint32, 32*16)
			for i := range a {
				a[i] = bf16Pair(tc.aLo, tc.aHi)
				b[i] = bf16Pair(tc.bLo, tc.bHi)
			}
			// One pair of k per row: the others zero.
			for i := range a {
				if i%16 != 0 {
					a[i] = 0
				}
			}
			c := make([]float32, 32*32)
			k.tiles(1, a, 16, b, c, 32, 1, 1, 1, 0, 1, make([]float32, 1024))
			for i, v := range c {
				if math.Float32bits(v) != math.Float32bits(tc.want) && !(v != v && tc.want != tc.want) {
					t.Fatalf("%s, %s: c[%d] = %v, want %v", k.name, tc.name, i, v, tc.want)
				}
			}
		}
	}
}
