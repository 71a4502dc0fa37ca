package kernels

import "github.com/chewxy/math32"

// Add writes x + y to dst element by element (x, y at least as long as
// dst; dst may be x or y): the vector kernel where there is one, the
// loop addGo (its twin) elsewhere.
func Add(dst, x, y []float32) {
	if len(dst) == 0 || addVector(dst, x, y) {
		return
	}
	addGo(dst, x, y)
}

func addGo(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i := range dst {
		dst[i] = x[i] + y[i]
	}
}

// AddTo adds src to dst element by element (src at least as long as
// dst): dst[i] += src[i].
func AddTo(dst, src []float32) {
	if len(dst) == 0 {
		return
	}
	src = src[:len(dst)]
	if addRowVector(dst, src) {
		return
	}
	for i := range dst {
		dst[i] += src[i]
	}
}

// The operations of Binary and BinaryScalar.
const (
	OpAdd = iota
	OpSub
	OpMul
	OpDiv
)

// Binary writes x ∘ y to dst element by element, ∘ the operation op
// (OpAdd, OpSub, OpMul or OpDiv); x and y are at least as long as dst,
// which may be x or y. One float32 operation a value: the vector kernel
// where there is one, the loop elsewhere, the same bits.
func Binary(op int, dst, x, y []float32) {
	if op == OpAdd {
		Add(dst, x, y)
		return
	}
	x, y = x[:len(dst)], y[:len(dst)]
	i := binaryVector(op, dst, x, y)
	switch op {
	case OpSub:
		for ; i < len(dst); i++ {
			dst[i] = x[i] - y[i]
		}
	case OpMul:
		for ; i < len(dst); i++ {
			dst[i] = x[i] * y[i]
		}
	case OpDiv:
		for ; i < len(dst); i++ {
			dst[i] = x[i] / y[i]
		}
	}
}

// BinaryScalar writes x ∘ c to dst element by element (x at least as
// long as dst, which may be x), as Binary does.
func BinaryScalar(op int, dst, x []float32, c float32) {
	x = x[:len(dst)]
	i := binaryScalarVector(op, dst, x, c)
	switch op {
	case OpAdd:
		for ; i < len(dst); i++ {
			dst[i] = x[i] + c
		}
	case OpSub:
		for ; i < len(dst); i++ {
			dst[i] = x[i] - c
		}
	case OpMul:
		for ; i < len(dst); i++ {
			dst[i] = x[i] * c
		}
	case OpDiv:
		for ; i < len(dst); i++ {
			dst[i] = x[i] / c
		}
	}
}

// Sqrt writes √x to y element by element (x at least as long as y; y
// may be x): correctly rounded, as math32.Sqrt, the vector kernel
// where there is one.
func Sqrt(y, x []float32) {
	x = x[:len(y)]
	for i := unaryVector(unarySqrt, y, x); i < len(y); i++ {
		y[i] = math32.Sqrt(x[i])
	}
}

// Neg writes −x to y element by element (the sign bit flipped, NaN's
// too; y may be x).
func Neg(y, x []float32) {
	x = x[:len(y)]
	for i := unaryVector(unaryNeg, y, x); i < len(y); i++ {
		y[i] = -x[i]
	}
}

// The kernels of unaryVector.
const (
	unarySqrt = iota
	unaryNeg
)

// Scale multiplies x by s element by element in place: x[i] *= s, one
// float32 multiplication each (the vector kernel where there is one,
// the loop elsewhere, the same bits).
func Scale(x []float32, s float32) { BinaryScalar(OpMul, x, x, s) }

// ReLU writes max(x, 0) to y element by element with Go's max (−0 and
// every negative value give +0, a NaN keeps its bits but the sign); y
// may be x.
func ReLU(y, x []float32) {
	x = x[:len(y)]
	if len(y) == 0 || reluVector(y, x) {
		return
	}
	reluGo(y, x)
}

func reluGo(y, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] = max(v, 0)
	}
}
