package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// linearOp is a fully connected layer: y = x·Wᵀ + b with x [..., in],
// W [out, in] and an optional bias b [out]. Its node carries role Fprop;
// its gradient is two role-tagged GEMMs (Dgrad, Wgrad) and a bias sum.
type linearOp struct{}

func (linearOp) Type() string     { return KindLinear.String() }
func (linearOp) Kind() graph.Kind { return KindLinear }

func (linearOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 2 && len(in) != 3 {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want x, W and an optional bias", len(in))
	}
	if err := float32In(in, len(in)); err != nil {
		return nil, graph.Invalid, err
	}
	xs, ws := in[0].Shape(), in[1].Shape()
	if len(ws) != 2 {
		return nil, graph.Invalid, fmt.Errorf("weight %q has shape %v, want [out in]", in[1].Name(), ws)
	}
	if len(xs) < 1 || xs[len(xs)-1] != ws[1] {
		return nil, graph.Invalid, fmt.Errorf("input %q %v does not end in the weight's in-features (%q %v)", in[0].Name(), xs, in[1].Name(), ws)
	}
	if len(in) == 3 && !in[2].Shape().Equal(graph.Shape{ws[0]}) {
		return nil, graph.Invalid, fmt.Errorf("bias %q has shape %v, want [%d] (weight %q %v)", in[2].Name(), in[2].Shape(), ws[0], in[1].Name(), ws)
	}
	out := xs.Clone()
	out[len(out)-1] = ws[0]
	return out, graph.Float32, nil
}

func (o linearOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	k, _, err := o.bind(b)
	return k, err
}

// bind returns the kernel and the GEMM it runs (fused epilogues attach
// to it).
func (linearOp) bind(b *graph.Binding) (graph.Kernel, *kernels.Gemm, error) {
	ws := b.In[1].Shape
	outF, inF := ws[0], ws[1]
	rows := b.In[0].Shape.Numel() / inF
	x, w, y := b.In[0].F32, b.In[1].F32, b.Out.F32
	var bias []float32
	if len(b.In) == 3 {
		bias = b.In[2].F32
	}
	g, err := newGemm()
	if err != nil {
		return nil, nil, err
	}
	if bias != nil {
		return func() error {
			g.RunBias(false, true, rows, outF, inF, 1, x, inF, w, inF, bias, y, outF)
			return nil
		}, g, nil
	}
	return func() error {
		g.Run(false, true, rows, outF, inF, 1, x, inF, w, inF, 0, y, outF)
		return nil
	}, g, nil
}

func (linearOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	x, w := n.Input(0), n.Input(1)
	ws := w.Shape()
	gs := make([]*graph.Node, n.NumInputs())
	dy2 := Reshape(dy, -1, ws[0])
	if need[0] {
		dx := apply(matMulOp{}, n.Name()+".dgrad", dy2, w)
		dx.SetRole(graph.Dgrad, n)
		gs[0] = Reshape(dx, x.Shape()...)
	}
	if need[1] {
		dw := apply(matMulOp{transA: true}, n.Name()+".wgrad", dy2, Reshape(x, -1, ws[1]))
		dw.SetRole(graph.Wgrad, n)
		gs[1] = dw
	}
	if len(gs) == 3 && need[2] {
		gs[2] = SumTo(dy2, n.Input(2).Shape())
	}
	return gs
}

// Linear returns x·Wᵀ + b, the forward GEMM of a linear layer named name
// (its fully qualified name, e.g. "mlp.fc1"); bias may be nil. The node
// has role Fprop and its backward GEMMs are named name+".dgrad" and
// name+".wgrad".
func Linear(name string, x, w, bias *graph.Node) *graph.Node {
	var n *graph.Node
	if bias == nil {
		n = apply(linearOp{}, name, x, w)
	} else {
		n = apply(linearOp{}, name, x, w, bias)
	}
	if n != nil && n.DType() != graph.Invalid {
		n.SetRole(graph.Fprop, nil)
	}
	return n
}
