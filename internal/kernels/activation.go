package kernels

import "math"

// The activation kernels: each runs its AVX-512 routine over the longest
// multiple of 16 it can and its Go loop — the routine's twin, with the
// same operations in the same order, so the results are bit-identical —
// over the rest.

// geluC is √(2/π).
const geluC = 0.7978845608028654

// FastTanh is tanh(u) = 1 − 2/(e^{2u}+1) with a fast exponential: within
// about 2e-7 of tanh and several times faster than math32.Tanh, which is
// all GELU needs; ±1 beyond |u| > 9.
func FastTanh(u float32) float32 {
	if u > 9 {
		return 1
	}
	if u < -9 {
		return -1
	}
	return 1 - 2/(fastExp(float32(2*u))+1)
}

// fastExp is e^x for |x| < 87: x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split
// in two for an exact reduction), e^r by its Taylor polynomial to degree
// 7 (truncation below 1e-8), and 2^n put into the exponent bits.
func fastExp(x float32) float32 {
	const (
		log2e = 1.4426950408889634
		ln2hi = 0.693145751953125
		ln2lo = 1.428606765330187e-06
	)
	x = max(min(x, 87), -87)
	t := float32(x * log2e)
	n := float32(int32(t + 0.5))
	if t < -0.5 {
		n = float32(int32(t - 0.5))
	}
	// Every product converted before it is added: no fused
	// multiply-add on any architecture (the vector kernels use none).
	r := float32(x-float32(n*ln2hi)) - float32(n*ln2lo)
	p := float32(r * (1.0 / 5040))
	for _, c := range [...]float32{1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1} {
		p = float32(float32(p+c) * r)
	}
	p = p + 1
	return float32(p * math.Float32frombits(uint32(int32(n)+127)<<23))
}

// GELU writes y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) for every x
// (y at least as long as x).
func GELU(y, x []float32) {
	y = y[:len(x)]
	done := geluVector(y, x)
	for i, v := range x[done:] {
		u := float32(geluC * float32(v+float32(float32(float32(0.044715*v)*v)*v)))
		y[done+i] = float32(float32(0.5*v) * (1 + FastTanh(u)))
	}
}

// GELUGrad writes dx = dy·GELU'(x).
func GELUGrad(dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	done := geluGradVector(dx, x, dy)
	for i, v := range x[done:] {
		u := float32(geluC * float32(v+float32(float32(float32(0.044715*v)*v)*v)))
		t := FastTanh(u)
		du := float32(geluC * float32(1+float32(float32(3*0.044715*v)*v)))
		g := float32(float32(0.5*(1+t)) + float32(float32(float32(0.5*v)*float32(1-float32(t*t)))*du))
		dx[done+i] = float32(dy[done+i] * g)
	}
}

// ReLUGrad writes dx = dy where x > 0, else +0 (a NaN x gives 0).
func ReLUGrad(dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	done := reluGradVector(dx, x, dy)
	for i, v := range x[done:] {
		// A select the compiler turns into a conditional move: the sign
		// of activations is a coin flip for a branch predictor.
		g := dy[done+i]
		if !(v > 0) {
			g = 0
		}
		dx[done+i] = g
	}
}
