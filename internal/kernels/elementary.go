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
	return float32(log64(float64(x)))
}

// log64 is ln x for a finite x > 0 (subnormal included): x = m·2^e with
// m in [√½, √2), ln m = 2·atanh(s), s = (m−1)/(m+1) (|s| ≤ 0.172), by
// its series to s^25; then e·ln2 + ln m.
func log64(x float64) float64 {
	m, e := math.Frexp(x)
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
	return float64(fe*ln2Hi64) + (float64(fe*ln2Lo64) + lnm)
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

// The float64 functions below give the same bits on every machine (the
// ones of package math differ in the last bit between amd64 and arm64,
// whose compiler fuses their products): evaluations with every product
// rounded, accurate to a few float64 ulps. Code that rounds their
// results to float32 (learning-rate schedules, rotary tables, losses)
// then gets the same float32 on every machine too.

// Exp64 returns e^x: +Inf above 709.78, +0 below −745.2, NaN for NaN.
func Exp64(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709.78:
		return math.Inf(1)
	case x < -745.2:
		return 0
	}
	return exp64(x)
}

// Log64 returns ln x: NaN for a negative x or NaN, −Inf for ±0, +Inf
// for +Inf.
func Log64(x float64) float64 {
	switch {
	case x != x || x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	}
	return log64(x)
}

// Log1p64 returns ln(1 + x) for x ≥ −1, accurate for small x: its
// series below 1e-4, else ln u · x/(u − 1) with u = 1 + x rounded (the
// quotient corrects u's rounding).
func Log1p64(x float64) float64 {
	switch {
	case x != x || x < -1:
		return math.NaN()
	case x == -1:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	case math.Abs(x) < 1e-4:
		p := -1.0 / 6
		for _, c := range [...]float64{1.0 / 5, -1.0 / 4, 1.0 / 3, -0.5, 1} {
			p = float64(p*x) + c
		}
		return float64(p * x)
	}
	u := 1 + x
	return float64(log64(u) * float64(x/float64(u-1)))
}

// π/2 in three parts (the first two of 33 bits, so k·part is exact for
// |k| < 2^20), for the reduction of Sin64 and Cos64.
const (
	pio2a = 1.57079632673412561417e+00
	pio2b = 6.07710050630396597660e-11
	pio2c = 2.02226624879595063154e-21
)

// sinCos64 returns sin x and cos x for |x| < 1.6e6 (beyond it, NaN):
// x = k·π/2 + r with |r| ≤ π/4, the Taylor polynomials of sin r (to
// r^21) and cos r (to r^20), and k mod 4 choosing the signs and order.
func sinCos64(x float64) (sin, cos float64) {
	if x != x || math.Abs(x) > 1.6e6 {
		return math.NaN(), math.NaN()
	}
	k := math.Floor(float64(x*(2/math.Pi)) + 0.5)
	r := float64(float64(x-float64(k*pio2a))-float64(k*pio2b)) - float64(k*pio2c)
	r2 := float64(r * r)
	s := 1.0 / 51090942171709440000 // 1/21!
	for _, c := range [...]float64{-1.0 / 121645100408832000, 1.0 / 355687428096000, -1.0 / 1307674368000, 1.0 / 6227020800,
		-1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6, 1} {
		s = float64(s*r2) + c
	}
	s = float64(s * r)
	c := 1.0 / 2432902008176640000 // 1/20!
	for _, d := range [...]float64{-1.0 / 6402373705728000, 1.0 / 20922789888000, -1.0 / 87178291200, 1.0 / 479001600,
		-1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24, -0.5, 1} {
		c = float64(c*r2) + d
	}
	switch int64(k) & 3 {
	case 0:
		return s, c
	case 1:
		return c, -s
	case 2:
		return -s, -c
	}
	return -c, s
}

// Sin64 returns sin x (|x| < 1.6e6; NaN beyond and for NaN or ±Inf).
func Sin64(x float64) float64 { s, _ := sinCos64(x); return s }

// Cos64 returns cos x (|x| < 1.6e6; NaN beyond and for NaN or ±Inf).
func Cos64(x float64) float64 { _, c := sinCos64(x); return c }
