package ops

import (
	"math"
	"strconv"

	"github.com/chewxy/math32"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

type unaryKind uint8

const (
	kindNeg unaryKind = iota
	kindScale
	kindReLU
	kindGELU
	kindTanh
	kindExp
	kindLog
	kindSqrt
)

var unaryNames = [...]string{"Neg", "Scale", "ReLU", "GELU", "Tanh", "Exp", "Log", "Sqrt"}

// unaryOp is an elementwise function of one float32 input.
type unaryOp struct {
	kind unaryKind
	c    float32 // Scale's factor
}

func (o unaryOp) Type() string { return unaryNames[o.kind] }

func (o unaryOp) Attrs() string {
	if o.kind == kindScale {
		return "c=" + strconv.FormatFloat(float64(o.c), 'g', -1, 32)
	}
	return ""
}

func (o unaryOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	return in[0].Shape(), graph.Float32, nil
}

// geluC is √(2/π).
const geluC = 0.7978845608028654

// fastTanh is tanh(u) = 1 − 2/(e^{2u}+1) with fastExp: within about
// 2e-7 of tanh and several times faster than math32.Tanh, which is all
// GELU needs (ops.Tanh keeps the library function).
func fastTanh(u float32) float32 {
	if u > 9 {
		return 1
	}
	if u < -9 {
		return -1
	}
	return 1 - 2/(fastExp(2*u)+1)
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
	t := x * log2e
	n := float32(int32(t + 0.5))
	if t < -0.5 {
		n = float32(int32(t - 0.5))
	}
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

func (o unaryOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	return o.bindSlices(b.In[0].F32, b.Out.F32)
}

// bindSlices returns the kernel computing yAll from xAll.
func (o unaryOp) bindSlices(xAll, yAll []float32) (graph.Kernel, error) {
	xAll = xAll[:len(yAll)]
	c := o.c
	var k func(x, y []float32)
	switch o.kind {
	case kindNeg:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = -v
			}
		}
	case kindScale:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = c * v
			}
		}
	case kindReLU:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = max(v, 0)
			}
		}
	case kindGELU:
		k = func(x, y []float32) {
			done := kernels.GELU(y, x) // vector prefix, same results as this loop
			x, y = x[done:], y[done:]
			for i, v := range x {
				y[i] = 0.5 * v * (1 + fastTanh(geluC*(v+0.044715*v*v*v)))
			}
		}
	case kindTanh:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = math32.Tanh(v)
			}
		}
	case kindExp:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = math32.Exp(v)
			}
		}
	case kindLog:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = math32.Log(v)
			}
		}
	case kindSqrt:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = math32.Sqrt(v)
			}
		}
	}
	return newChunker(len(yAll), func(lo, hi int) { k(xAll[lo:hi], yAll[lo:hi]) }).kernel(), nil
}

func (o unaryOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	x := n.Input(0)
	var dx *graph.Node
	switch o.kind {
	case kindNeg:
		dx = Neg(dy)
	case kindScale:
		dx = Scale(dy, o.c)
	case kindReLU:
		dx = apply(unaryGradOp{kindReLU}, "", x, dy)
	case kindGELU:
		dx = apply(unaryGradOp{kindGELU}, "", x, dy)
	case kindTanh:
		dx = apply(unaryGradOp{kindTanh}, "", n, dy)
	case kindExp:
		dx = Mul(dy, n)
	case kindLog:
		dx = Div(dy, x)
	case kindSqrt:
		dx = Div(Scale(dy, 0.5), n)
	}
	return []*graph.Node{dx}
}

// unaryGradOp computes dx from (x or y, dy) for ReLU, GELU and Tanh.
type unaryGradOp struct{ kind unaryKind }

func (o unaryGradOp) Type() string { return unaryNames[o.kind] + "Grad" }

func (o unaryGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if !in[0].Shape().Equal(in[1].Shape()) {
		return nil, graph.Invalid, shapeMismatch(in[0], in[1])
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o unaryGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	return o.bindSlices(b.In[0].F32, b.In[1].F32, b.Out.F32)
}

// bindSlices returns the kernel computing dxAll from xAll and dyAll.
func (o unaryGradOp) bindSlices(xAll, dyAll, dxAll []float32) (graph.Kernel, error) {
	xAll, dyAll = xAll[:len(dxAll)], dyAll[:len(dxAll)]
	var k func(x, dy, dx []float32)
	switch o.kind {
	case kindReLU:
		k = func(x, dy, dx []float32) {
			done := kernels.ReLUGrad(dx, x, dy) // vector prefix, same results as this loop
			x, dy, dx = x[done:], dy[done:len(x)], dx[done:len(x)]
			for i, v := range x {
				// A select the compiler turns into a conditional move:
				// the sign of activations is a coin flip for a branch
				// predictor.
				g := dy[i]
				if !(v > 0) {
					g = 0
				}
				dx[i] = g
			}
		}
	case kindGELU:
		k = func(x, dy, dx []float32) {
			done := kernels.GELUGrad(dx, x, dy) // vector prefix, same results as this loop
			x, dy, dx = x[done:], dy[done:len(x)], dx[done:len(x)]
			for i, v := range x {
				u := geluC * (v + 0.044715*v*v*v)
				t := fastTanh(u)
				du := geluC * (1 + 3*0.044715*v*v)
				dx[i] = dy[i] * (0.5*(1+t) + 0.5*v*(1-t*t)*du)
			}
		}
	default: // Tanh: x holds y = tanh(x)
		k = func(x, dy, dx []float32) {
			dy, dx = dy[:len(x)], dx[:len(x)]
			for i, y := range x {
				dx[i] = dy[i] * (1 - y*y)
			}
		}
	}
	return newChunker(len(dxAll), func(lo, hi int) { k(xAll[lo:hi], dyAll[lo:hi], dxAll[lo:hi]) }).kernel(), nil
}

// Neg returns -x.
func Neg(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindNeg}, "", x) }

// Scale returns c·x.
func Scale(x *graph.Node, c float32) *graph.Node { return apply(unaryOp{kind: kindScale, c: c}, "", x) }

// ReLU returns max(x, 0).
func ReLU(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindReLU}, "", x) }

// GELU returns the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func GELU(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindGELU}, "", x) }

// Tanh returns tanh(x).
func Tanh(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindTanh}, "", x) }

// Exp returns eˣ.
func Exp(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindExp}, "", x) }

// Log returns the natural logarithm of x.
func Log(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindLog}, "", x) }

// Sqrt returns √x.
func Sqrt(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindSqrt}, "", x) }
