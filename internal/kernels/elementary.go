package kernels

import "math"

// Elementary functions with the same bits on every machine. The float32
// results of math32.Exp and math32.Log come from assembly on amd64 and
// from Go (whose products the compiler fuses) on arm64, so they differ
// between the two in the last bit now and then, and a run's losses with
// them. These evaluate in float64 with every product rounded explicitly
// (no fused multiply-add on any architecture, no assembly), then round
// once to float32: deterministic everywhere, and correctly rounded but
// where the float64 value lies within its few-ulp error of a float32
// rounding midpoint.

const (
	log2e   = 1.4426950408889634
	ln2Hi64 = 6.93147180369123816490e-01 // ln 2 with its low 32 bits clear: n·ln2Hi is exact for |n| < 2^20
	ln2Lo64 = 1.90821492927058770002e-10
)

// exp64 is e^x for |x| ≤ 745 (the callers clamp): x = n·ln2 + r with
// |r| ≤ ln2/2, e^r by its Taylor polynomial to degree 14 (truncation
// below 1e-17 of the result), times 2^n.
func exp64(x float64) float64 {
	n := math.Floor(float64(x*log2e) + 0.5)
	r := float64(x-float64(n*ln2Hi64)) - float64(n*ln2Lo64)
	p := 1.0 / 87178291200 // 1/14!
	for _, c := range [...]float64{1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880,
		1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1} {
		p = float64(p*r) + c
	}
	return math.Ldexp(p, int(n))
}

// expm1Small64 is e^x − 1 for |x| ≤ 1, by its Taylor series to degree
// 18 (no cancellation for small x).
func expm1Small64(x float64) float64 {
	p := 1.0 / 6402373705728000 // 1/18!
	for _, c := range [...]float64{1.0 / 355687428096000, 1.0 / 20922789888000, 1.0 / 1307674368000, 1.0 / 87178291200,
		1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040,
		1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1} {
		p = float64(p*x) + c
	}
	return float64(p * x)
}

// Exp32 returns e^x: +Inf above 88.8, +0 below −104, NaN for NaN.
func Exp32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.8:
		return float32(math.Inf(1))
	case x < -104:
		return 0
	}
	return float32(exp64(float64(x)))
}

// Log32 returns ln x: NaN for a negative x or NaN, −Inf for ±0, +Inf for
// +Inf. x = m·2^e with m in [√½, √2); ln m = 2·atanh(s), s = (m−1)/(m+1)
// (|s| ≤ 0.172), by its series to s^25; then e·ln2 + ln m.
func Log32(x float32) float32 {
	switch {
	case x != x || x < 0:
		return float32(math.NaN())
	case x == 0:
		return float32(math.Inf(-1))
	case math.IsInf(float64(x), 1):
		return x
	}
	m, e := math.Frexp(float64(x))
	if m < math.Sqrt2/2 {
		m, e = m*2, e-1
	}
	s := (m - 1) / (m + 1)
	s2 := float64(s * s)
	p := 1.0 / 25
	for k := 23; k >= 1; k -= 2 {
		p = float64(p*s2) + 1/float64(k)
	}
	lnm := float64(2 * float64(s*p))
	fe := float64(e)
	return float32(float64(fe*ln2Hi64) + (float64(fe*ln2Lo64) + lnm))
}

// Tanh32 returns tanh x: (e^2x − 1)/(e^2x + 1), with e^2x − 1 from its
// series where |x| ≤ ½; ±1 beyond ±20; NaN for NaN.
func Tanh32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 20:
		return 1
	case x < -20:
		return -1
	}
	t := 2 * float64(x)
	var em1 float64
	if math.Abs(t) <= 1 {
		em1 = expm1Small64(t)
	} else {
		em1 = exp64(t) - 1
	}
	return float32(em1 / (em1 + 2))
}
