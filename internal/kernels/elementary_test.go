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

// TestElementary64: Exp64, Log64, Log1p64, Sin64 and Cos64 within a few
// float64 ulps (relative; absolute near sin's and cos's zeros) of package
// math's, and their float32 roundings equal almost always.
func TestElementary64(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range []struct {
		name     string
		got, ref func(float64) float64
		gen      func() float64
	}{
		{"Exp64", Exp64, math.Exp, func() float64 { return rng.Float64()*1400 - 700 }},
		{"Log64", Log64, func(x float64) float64 {
			if x < 0x1p-1022 { // math.Log on amd64 is off for subnormals: scale first
				return math.Log(x*0x1p54) - 54*math.Ln2
			}
			return math.Log(x)
		}, func() float64 { return math.Float64frombits(rng.Uint64() &^ (1 << 63)) }},
		{"Log1p64", Log1p64, math.Log1p, func() float64 { return math.Pow(10, rng.Float64()*20-15) * float64(rng.IntN(2)*2-1) * 0.99 }},
		{"Sin64", Sin64, math.Sin, func() float64 { return (rng.Float64()*2 - 1) * math.Pow(10, float64(rng.IntN(6))) }},
		{"Cos64", Cos64, math.Cos, func() float64 { return (rng.Float64()*2 - 1) * math.Pow(10, float64(rng.IntN(6))) }},
	} {
		off32 := 0
		const n = 200000
		for i := 0; i < n; i++ {
			x := f.gen()
			want, got := f.ref(x), f.got(x)
			if math.IsNaN(want) || math.IsInf(want, 0) {
				if !(math.IsNaN(want) && math.IsNaN(got) || want == got) {
					t.Fatalf("%s(%g) = %g, want %g", f.name, x, got, want)
				}
				continue
			}
			tol := 8 * math.Abs(want) * 0x1p-52
			if f.name == "Sin64" || f.name == "Cos64" {
				tol = 8 * math.Max(math.Abs(x), 1) * 0x1p-52
			}
			if math.Abs(got-want) > tol {
				t.Fatalf("%s(%g) = %g, want %g (diff %g)", f.name, x, got, want, got-want)
			}
			if float32(got) != float32(want) {
				off32++
			}
		}
		if off32 > n/10000 {
			t.Errorf("%s: %d of %d float32 roundings differ from math's", f.name, off32, n)
		}
	}
	if Exp64(710) != math.Inf(1) || Exp64(-746) != 0 || !math.IsNaN(Log64(-1)) || Log64(0) != math.Inf(-1) || Log1p64(-1) != math.Inf(-1) ||
		!math.IsNaN(Sin64(math.Inf(1))) || Cos64(0) != 1 || Sin64(0) != 0 || Log1p64(0) != 0 {
		t.Error("special cases")
	}
}
