package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// correctly returns the float32 nearest to v (a float64 close to the
// exact value: the reference from math, within an ulp of float64).
func nearest32(v float64) float32 { return float32(v) }

// TestElementaryAccuracy: Exp32, Log32 and Tanh32 are within an ulp of
// the float32 rounding of math's float64 results on random inputs, equal
// to it almost always, and exact on the special cases.
func TestElementaryAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ulps := func(a, b float32) int64 {
		ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
		if ia < 0 {
			ia = math.MinInt32 - ia
		}
		if ib < 0 {
			ib = math.MinInt32 - ib
		}
		d := ia - ib
		if d < 0 {
			d = -d
		}
		return d
	}
	for _, f := range []struct {
		name string
		got  func(float32) float32
		ref  func(float64) float64
		gen  func() float32
	}{
		{"Exp32", Exp32, math.Exp, func() float32 { return float32(rng.Float64()*200 - 104) }},
		{"Log32", Log32, math.Log, func() float32 { return math.Float32frombits(rng.Uint32() &^ (1 << 31)) }},
		{"Tanh32", Tanh32, math.Tanh, func() float32 { return float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(12)-8))) }},
	} {
		off := 0
		const n = 200000
		for i := 0; i < n; i++ {
			x := f.gen()
			if x != x || math.IsInf(float64(x), 0) {
				continue
			}
			want := nearest32(f.ref(float64(x)))
			got := f.got(x)
			if want != want && got != got {
				continue
			}
			if d := ulps(got, want); d > 1 {
				t.Fatalf("%s(%g) = %g, want %g (%d ulps)", f.name, x, got, want, d)
			} else if d == 1 {
				off++
			}
		}
		if off > n/10000 {
			t.Errorf("%s: %d of %d results an ulp off the rounding of math's", f.name, off, n)
		}
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct {
		name      string
		got, want float32
	}{
		{"Exp32(0)", Exp32(0), 1}, {"Exp32(NaN)", Exp32(nan), nan}, {"Exp32(+Inf)", Exp32(inf), inf}, {"Exp32(-Inf)", Exp32(-inf), 0},
		{"Exp32(89)", Exp32(89), inf}, {"Exp32(-105)", Exp32(-105), 0}, {"Exp32(1)", Exp32(1), float32(math.E)},
		{"Log32(1)", Log32(1), 0}, {"Log32(0)", Log32(0), -inf}, {"Log32(-1)", Log32(-1), nan}, {"Log32(+Inf)", Log32(inf), inf},
		{"Log32(NaN)", Log32(nan), nan}, {"Log32(e)", Log32(float32(math.E)), float32(math.Log(float64(float32(math.E))))}, {"Log32(smallest)", Log32(math.SmallestNonzeroFloat32), float32(math.Log(math.SmallestNonzeroFloat32))},
		{"Tanh32(0)", Tanh32(0), 0}, {"Tanh32(30)", Tanh32(30), 1}, {"Tanh32(-30)", Tanh32(-30), -1}, {"Tanh32(NaN)", Tanh32(nan), nan},
		{"Tanh32(1e-30)", Tanh32(1e-30), 1e-30},
	} {
		if !(c.got == c.want || c.got != c.got && c.want != c.want) {
			t.Errorf("%s = %g, want %g", c.name, c.got, c.want)
		}
	}
}
