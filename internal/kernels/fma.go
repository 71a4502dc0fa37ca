package kernels

import "math"

// fma32Emulated is the float32 fused multiply-add a·b + c rounded once
// to nearest even, as VFMADD231PS and FMADD compute it, from float64
// arithmetic: fma32 on every architecture but arm64, where the compiler
// fuses float32 a*b+c into one FMADD (fma_arm64.go), and the test of
// fma32 against math/big runs there too (under qemu in CI).
//
// The product of two float32 values is exact in float64, so
// math.FMA is not needed for it; the sum p + c rounded to float64 and
// then to float32 rounds twice, which differs from one rounding only
// when the float64 sum lands exactly on a float32 rounding midpoint (or
// in the float32 subnormal range, where the midpoints lie elsewhere).
// That case takes the exact path: the float64 sum is corrected to round
// to odd (its error, by TwoSum, decides the direction), and a value
// rounded to odd with 53 bits rounds correctly to 24.
func fma32Emulated(a, b, c float32) float32 {
	// (The product is exact, so whether the compiler fuses this
	// multiply-add in float64 makes no difference.)
	s := float64(a)*float64(b) + float64(c) // fused: the product is exact
	if roundsTwice(s) {
		return fma32Slow(float64(a)*float64(b), float64(c), s)
	}
	return float32(s)
}

// roundsTwice reports whether rounding the float64 s to float32 may
// differ from rounding the exact value s came from: s is exactly a
// float32 rounding midpoint (its low 29 significand bits are half a
// float32 ulp), or below float32's smallest normal (2^-126), where the
// midpoints lie elsewhere. The test is one mask and compare each way:
// bits 0–28 equal to 1<<28, or a biased exponent under 1023−126.
func roundsTwice(s float64) bool {
	b := math.Float64bits(s)
	return b&(1<<29-1) == 1<<28 || b&(0x7FF<<52) < (1023-126)<<52
}

// fma32Slow rounds the exact p + cc (whose float64 rounding is s) to
// float32 through a round-to-odd float64.
func fma32Slow(p, cc, s float64) float32 {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	// TwoSum: e is the exact error p + cc - s.
	bb := s - p
	e := (p - (s - bb)) + (cc - bb)
	bits := math.Float64bits(s)
	if e != 0 && bits&1 == 0 {
		// s is even and inexact: the odd neighbour on e's side.
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}
