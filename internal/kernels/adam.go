package kernels

import "math"

// AdamConsts are the per-step constants of one Adam update: the L2
// coefficient added to the gradient (0 for none), the decoupled decay
// factor applied to the weight (1 for none), β1, 1−β1, β2, 1−β2, the step
// size lr/(1−β1ᵗ), √(1−β2ᵗ) and ε.
type AdamConsts [9]float32

// Adam applies one Adam update in place:
//
//	gi = g + l2·w;  w = w·df
//	m = β1·m + (1−β1)·gi;  v = β2·v + ((1−β2)·gi)·gi
//	w = w − (step·m) / (√v/√(1−β2ᵗ) + ε)
//
// vectorised where the CPU allows, with identical results.
func Adam(w, g, m, v []float32, c *AdamConsts) {
	n := len(w)
	g, m, v = g[:n], m[:n], v[:n]
	done := adamVector(w, g, m, v, c)
	adamRef(w[done:], g[done:], m[done:], v[done:], c)
}

// adamRef is the scalar loop the vector kernel replaces.
func adamRef(w, g, m, v []float32, c *AdamConsts) {
	l2, df, b1, c1, b2, c2, step, bc2s, eps := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i := range w {
		// Every product converted before it is added: no fused
		// multiply-add on any architecture (the vector kernels use
		// none).
		gi := g[i] + float32(l2*w[i])
		wi := float32(w[i] * df)
		mi := float32(b1*m[i]) + float32(c1*gi)
		vi := float32(b2*v[i]) + float32(float32(c2*gi)*gi)
		m[i], v[i] = mi, vi
		den := float32(math.Sqrt(float64(vi)))/bc2s + eps
		w[i] = wi - float32(step*mi)/den
	}
}
