package kernels

import "math"

// fma32 is the float32 fused multiply-add a·b + c rounded once to
// nearest even, as VFMADD231PS and FMADD compute it, on every
// architecture (the Go compiler fuses a*b+c on some and not on others;
// this never depends on that).
//
// The product of two float32 values is exact in float64, so
// math.FMA is not needed for it; the sum p + c rounded to float64 and
// then to float32 rounds twice, which differs from one rounding only
// when the float64 sum lands exactly on a float32 rounding midpoint (or
// in the float32 subnormal range, where the midpoints lie elsewhere).
// That case takes the exact path: the float64 sum is corrected to round
// to odd (its error, by TwoSum, decides the direction), and a value
// rounded to odd with 53 bits rounds correctly to 24.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	cc := float64(c)
	s := p + cc
	bits := math.Float64bits(s)
	// Low 29 bits of the significand: exactly half a float32 ulp is a
	// midpoint; exponent below float32's smallest normal (2^-126).
	if bits&(1<<29-1) != 1<<28 && bits&0x7FF0000000000000 >= (1023-126)<<52 {
		return float32(s)
	}
	return fma32Slow(p, cc, s)
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
