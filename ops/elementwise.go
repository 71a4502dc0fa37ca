package ops

import (
	"strconv"

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
	kindSiLU
	kindSigmoid
)

// unaryOp is an elementwise function of one float32 input.
type unaryOp struct {
	kind unaryKind
	c    float32 // Scale's factor
}

func (o unaryOp) Type() string     { return o.Kind().String() }
func (o unaryOp) Kind() graph.Kind { return unaryKinds[o.kind] }

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

func (o unaryOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	return o.bindSlices(b.In[0].F32, b.Out.F32)
}

// ChainStep makes Neg, Scale, ReLU, GELU, SiLU and Sigmoid steps of
// fused chains, with the loops of their own kernel (run in place).
func (o unaryOp) ChainStep(n *graph.Node, vi int) (ChainStep, bool) {
	switch o.kind {
	case kindNeg, kindScale, kindReLU, kindGELU, kindSiLU, kindSigmoid:
		k := o.rows()
		return ChainStep{Name: o.Type(), Operand: -1, Apply: func(v, _ []float32, _ bool) { k(v, v) }}, vi == 0
	}
	return ChainStep{}, false
}

// bindSlices returns the kernel computing yAll from xAll.
func (o unaryOp) bindSlices(xAll, yAll []float32) (graph.Kernel, error) {
	xAll = xAll[:len(yAll)]
	k := o.rows()
	return newChunker(len(yAll), func(lo, hi int) { k(xAll[lo:hi], yAll[lo:hi]) }).kernel(), nil
}

// rows returns the function computing y from x (of one length) for the
// op's kind.
func (o unaryOp) rows() func(x, y []float32) {
	c := o.c
	var k func(x, y []float32)
	switch o.kind {
	case kindNeg:
		k = func(x, y []float32) { kernels.Neg(y, x) }
	case kindScale:
		k = func(x, y []float32) { kernels.BinaryScalar(kernels.OpMul, y, x, c) }
	case kindReLU:
		k = func(x, y []float32) { kernels.ReLU(y, x) }
	case kindGELU:
		k = func(x, y []float32) { kernels.GELU(y, x) }
	case kindSiLU:
		k = func(x, y []float32) { kernels.SiLU(y, x) }
	case kindSigmoid:
		k = func(x, y []float32) { kernels.Sigmoid(y, x) }
	case kindTanh:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = kernels.Tanh32(v)
			}
		}
	case kindExp:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = kernels.Exp32(v)
			}
		}
	case kindLog:
		k = func(x, y []float32) {
			for i, v := range x {
				y[i] = kernels.Log32(v)
			}
		}
	case kindSqrt:
		k = func(x, y []float32) { kernels.Sqrt(y, x) }
	}
	return k
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
	case kindSiLU:
		dx = apply(unaryGradOp{kindSiLU}, "", x, dy)
	case kindSigmoid:
		dx = apply(unaryGradOp{kindSigmoid}, "", n, dy)
	case kindExp:
		dx = Mul(dy, n)
	case kindLog:
		dx = Div(dy, x)
	case kindSqrt:
		dx = Div(Scale(dy, 0.5), n)
	}
	return []*graph.Node{dx}
}

// unaryGradOp computes dx from (x or y, dy) for ReLU, GELU, SiLU (from
// x), Tanh and Sigmoid (from y).
type unaryGradOp struct{ kind unaryKind }

func (o unaryGradOp) Type() string     { return o.Kind().String() }
func (o unaryGradOp) Kind() graph.Kind { return unaryGradKinds[o.kind] }

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

// ChainStep makes ReLUGrad, GELUGrad, SiLUGrad and SigmoidGrad steps of
// fused chains whose running value is the incoming gradient (input 1),
// the forward input or output (input 0) their operand.
func (o unaryGradOp) ChainStep(n *graph.Node, vi int) (ChainStep, bool) {
	if vi != 1 || !n.Input(0).Shape().Equal(n.Shape()) || (o.kind != kindReLU && o.kind != kindGELU && o.kind != kindSiLU && o.kind != kindSigmoid) {
		return ChainStep{}, false
	}
	k := o.rows()
	return ChainStep{Name: o.Type(), Operand: 0, Apply: func(v, a []float32, _ bool) { k(a, v, v) }}, true
}

// bindSlices returns the kernel computing dxAll from xAll and dyAll.
func (o unaryGradOp) bindSlices(xAll, dyAll, dxAll []float32) (graph.Kernel, error) {
	xAll, dyAll = xAll[:len(dxAll)], dyAll[:len(dxAll)]
	k := o.rows()
	return newChunker(len(dxAll), func(lo, hi int) { k(xAll[lo:hi], dyAll[lo:hi], dxAll[lo:hi]) }).kernel(), nil
}

// rows returns the function computing dx from x and dy for the op's
// kind.
func (o unaryGradOp) rows() func(x, dy, dx []float32) {
	var k func(x, dy, dx []float32)
	switch o.kind {
	case kindReLU:
		k = func(x, dy, dx []float32) { kernels.ReLUGrad(dx, x, dy) }
	case kindGELU:
		k = func(x, dy, dx []float32) { kernels.GELUGrad(dx, x, dy) }
	case kindSiLU:
		k = func(x, dy, dx []float32) { kernels.SiLUGrad(dx, x, dy) }
	case kindSigmoid: // x holds y = σ(x)
		k = func(y, dy, dx []float32) { kernels.SigmoidGrad(dx, y, dy) }
	default: // Tanh: x holds y = tanh(x)
		k = func(x, dy, dx []float32) {
			dy, dx = dy[:len(x)], dx[:len(x)]
			for i, y := range x {
				dx[i] = dy[i] * (1 - float32(y*y))
			}
		}
	}
	return k
}

// Neg returns -x.
func Neg(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindNeg}, "", x) }

// Scale returns c·x.
func Scale(x *graph.Node, c float32) *graph.Node { return apply(unaryOp{kind: kindScale, c: c}, "", x) }

// ReLU returns max(x, 0).
func ReLU(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindReLU}, "", x) }

// GELU returns the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func GELU(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindGELU}, "", x) }

// SiLU returns x·σ(x) (the swish of Llama's MLP), σ the logistic
// sigmoid.
func SiLU(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindSiLU}, "", x) }

// Sigmoid returns the logistic σ(x) = 1/(1 + e^{−x}).
func Sigmoid(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindSigmoid}, "", x) }

// Tanh returns tanh(x).
func Tanh(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindTanh}, "", x) }

// Exp returns eˣ.
func Exp(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindExp}, "", x) }

// Log returns the natural logarithm of x.
func Log(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindLog}, "", x) }

// Sqrt returns √x.
func Sqrt(x *graph.Node) *graph.Node { return apply(unaryOp{kind: kindSqrt}, "", x) }
