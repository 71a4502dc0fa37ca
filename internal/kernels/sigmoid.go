package kernels

// The sigmoid family: σ(x) = 1/(1 + e^{−x}) with the fast exponential
// (within a few float32 ulps of the true σ; e^{−x} saturates for |x| >
// 87, so σ(x) ≥ 1.6e-38 there), the SiLU x·σ(x) and the SwiGLU gate
// silu(a)·b, forward and backward. Each runs its AVX-512 routine over the
// longest multiple of 16 and its Go loop — the routine's twin, the same
// operations in the same order — over the rest, so results are
// bit-identical either way.

// sigma is σ(v) as the kernels compute it.
func sigma(v float32) float32 { return 1 / (1 + fastExp(0-v)) }

// Sigmoid writes y = σ(x).
func Sigmoid(y, x []float32) {
	y = y[:len(x)]
	done := sigmoidVector(sigSigmoid, y, x, nil, nil, nil)
	for i, v := range x[done:] {
		y[done+i] = sigma(v)
	}
}

// SigmoidGrad writes dx = dy·σ'(x) from y = σ(x): dx = dy·(y·(1 − y)).
func SigmoidGrad(dx, y, dy []float32) {
	dx, dy = dx[:len(y)], dy[:len(y)]
	done := sigmoidVector(sigSigmoidGrad, dx, y, dy, nil, nil)
	for i, v := range y[done:] {
		dx[done+i] = float32(v*(1-v)) * dy[done+i]
	}
}

// SiLU writes y = x·σ(x) (the swish of Llama's MLP).
func SiLU(y, x []float32) {
	y = y[:len(x)]
	done := sigmoidVector(sigSiLU, y, x, nil, nil, nil)
	for i, v := range x[done:] {
		y[done+i] = v * sigma(v)
	}
}

// siluSlope is SiLU'(v) given s = σ(v): σ·(1 + v·(1 − σ)).
func siluSlope(v, s float32) float32 { return float32(float32(v*(1-s))+1) * s }

// SiLUGrad writes dx = dy·SiLU'(x).
func SiLUGrad(dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	done := sigmoidVector(sigSiLUGrad, dx, x, dy, nil, nil)
	for i, v := range x[done:] {
		dx[done+i] = siluSlope(v, sigma(v)) * dy[done+i]
	}
}

// SwiGLU writes y = silu(a)·b.
func SwiGLU(y, a, b []float32) {
	y, b = y[:len(a)], b[:len(a)]
	done := sigmoidVector(sigSwiGLU, y, a, b, nil, nil)
	for i, v := range a[done:] {
		y[done+i] = float32(v*sigma(v)) * b[done+i]
	}
}

// SwiGLUGrad writes the gradients of y = silu(a)·b: db = dy·silu(a) and
// da = (dy·b)·silu'(a).
func SwiGLUGrad(da, db, a, b, dy []float32) {
	da, db, b, dy = da[:len(a)], db[:len(a)], b[:len(a)], dy[:len(a)]
	done := sigmoidVector(sigSwiGLUGrad, da, a, b, dy, db)
	for i, v := range a[done:] {
		j := done + i
		s := sigma(v)
		g := dy[j]
		db[j] = float32(v*s) * g
		da[j] = siluSlope(v, s) * float32(g*b[j])
	}
}

// The kernels of the family, as sigmoidVector takes them.
const (
	sigSigmoid = iota
	sigSigmoidGrad
	sigSiLU
	sigSiLUGrad
	sigSwiGLU
	sigSwiGLUGrad
)
