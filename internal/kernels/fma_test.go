package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fma32Exact is the oracle: a·b + c in exact arithmetic, rounded once to
// float32 (nearest even) by math/big.
func fma32Exact(a, b, c float32) float32 {
	if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) || math.IsNaN(float64(c)) ||
		math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || math.IsInf(float64(c), 0) {
		return float32(float64(a)*float64(b) + float64(c))
	}
	x := new(big.Float).SetPrec(0).SetFloat64(float64(a))
	x.SetPrec(200).Mul(x, big.NewFloat(float64(b)).SetPrec(200))
	x.Add(x, big.NewFloat(float64(c)).SetPrec(200))
	if x.Sign() == 0 {
		// An exact zero sum: +0 unless both addends are -0 (IEEE 754).
		if math.Signbit(float64(a)*float64(b)) && math.Signbit(float64(c)) {
			return float32(math.Copysign(0, -1))
		}
		return 0
	}
	f, _ := x.Float32()
	return f
}

// TestFMA32RoundsOnce checks fma32 against the exact rounding, on random
// operands, operands built to land on float32 midpoints (where rounding
// twice goes wrong), subnormal results, cancellation and specials.
func TestFMA32RoundsOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(a, b, c float32) {
		t.Helper()
		want := fma32Exact(a, b, c)
		for name, f := range map[string]func(a, b, c float32) float32{"fma32": fma32, "fma32Emulated": fma32Emulated} {
			got := f(a, b, c)
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("%s(%g, %g, %g) = %g (%#x), want %g (%#x)", name, a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
	slow := 0
	for i := 0; i < 200000; i++ {
		a := math.Float32frombits(rng.Uint32())
		b := math.Float32frombits(rng.Uint32())
		c := math.Float32frombits(rng.Uint32())
		check(a, b, c)
		// Midpoint cases: c = the float32 rounding of a·b, a·b' with a
		// product whose low bits are exactly half an ulp plus a tiny
		// remainder below float64's precision.
		a = float32(1+float64(rng.IntN(1<<12))/(1<<12)) * float32(math.Ldexp(1, rng.IntN(40)-20))
		b = float32(1 + float64(rng.IntN(1<<12))/(1<<12))
		p := float64(a) * float64(b)
		c = -float32(p)
		check(a, b, c)
		check(a, b, float32(math.Ldexp(1, rng.IntN(60)-30)))
		// c one float32 ulp-ish away, so the sum's float32 midpoint is
		// reached only through the product's low bits.
		u := math.Float32frombits(math.Float32bits(float32(p)) + 1)
		check(a, b, -u)
		big := float32(math.Ldexp(1, 24+rng.IntN(8)))
		check(a, b, big)
		check(a, b, -big)
		// Subnormal results.
		check(float32(math.Ldexp(float64(a), -70)), float32(math.Ldexp(float64(b), -60)), float32(math.Ldexp(1, -140)))
	}
	// The case the double rounding gets wrong: 1 + 2^-24 + 2^-60 rounds
	// up once, but to 1 + 2^-24 in float64 then to even (1) in float32.
	a := float32(1 + math.Ldexp(1, -12))
	b := float32(1 + math.Ldexp(1, -12) - math.Ldexp(1, -23))
	// a·b = 1 + 2^-11 - 2^-23 + 2^-24 - 2^-35: pick c to leave 2^-24 + tiny.
	check(a, b, -float32(math.Ldexp(1, -11)))
	for _, v := range []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32} {
		for _, w := range []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), math.MaxFloat32, math.SmallestNonzeroFloat32} {
			check(v, w, 0)
			check(v, w, float32(math.Copysign(0, -1)))
			check(v, w, 1)
			check(w, w, v)
		}
	}
	_ = slow
}

// TestFMA32DoubleRoundingCase checks the case fma32 exists for: a
// product that is exactly a float32 midpoint plus an addend too small
// for float64 to keep, where rounding to float64 and then to float32
// goes to even instead of away from the addend.
func TestFMA32DoubleRoundingCase(t *testing.T) {
	one := float32(1 + math.Ldexp(1, -12))
	tiny := float32(math.Ldexp(1, -80))
	if naive := float32(float64(one)*float64(one) + float64(tiny)); naive == fma32Exact(one, one, tiny) {
		t.Fatal("the constructed case does not round twice wrongly")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	found := 0
	for i := 0; i < 100000; i++ {
		// 12-bit significands: products of up to 25 bits, often exactly
		// a float32 midpoint.
		a := float32(math.Ldexp(float64(1<<12|rng.IntN(1<<12)), rng.IntN(20)-22))
		b := float32(math.Ldexp(float64(1<<12|rng.IntN(1<<12)), rng.IntN(20)-22))
		if rng.IntN(2) == 0 {
			a = -a
		}
		c := float32(math.Ldexp(float64(rng.IntN(1<<20)|1), -100+rng.IntN(20)))
		if rng.IntN(2) == 0 {
			c = -c
		}
		want := fma32Exact(a, b, c)
		if float32(float64(a)*float64(b)+float64(c)) != want {
			found++
		}
		if got, emu := fma32(a, b, c), fma32Emulated(a, b, c); got != want || emu != want {
			t.Fatalf("fma32(%g, %g, %g) = %g (emulated %g), want %g", a, b, c, got, emu, want)
		}
	}
	if found < 100 {
		t.Fatalf("only %d double-rounding cases: the test does not exercise fma32's exact path", found)
	}
}

// TestFMA32ProductArgument: with a product as its addend, fma32 still
// fuses a·b and rounds the addend first (on arm64 the compiler could fuse
// the other product instead, unless fma32 rounds c explicitly).
func TestFMA32ProductArgument(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 100000; i++ {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		u, v := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		uv := u * v
		want := fma32Exact(a, b, uv)
		if got := fma32(a, b, u*v); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g·%g) = %g, want %g", a, b, u, v, got, want)
		}
	}
}
