// Package hooks holds the elementwise loops that the graph package runs
// (AddN), which depends only on the standard library: the loops here are
// the defaults, and internal/kernels, linked into every program that
// uses package ops, installs its vector kernels in their place when it
// is initialised. Both give the same bits.
package hooks

// Add writes x + y to dst element by element (x and y at least as long
// as dst; dst may be either).
var Add = func(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i := range dst {
		dst[i] = x[i] + y[i]
	}
}

// AddTo adds src to dst element by element (src at least as long as
// dst).
var AddTo = func(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
