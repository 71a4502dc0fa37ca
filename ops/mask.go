package ops

import (
	"fmt"

	"github.com/chewxy/math32"
	"github.com/octetml/octet/graph"
)

// causalMaskOp sets, in every trailing [T, T] matrix, the entries above
// the diagonal (key j > query i) to fill: −∞ before a softmax, 0 for the
// gradient.
type causalMaskOp struct{ grad bool }

func (o causalMaskOp) Type() string { return o.Kind().String() }
func (o causalMaskOp) Kind() graph.Kind {
	if o.grad {
		return KindCausalMaskGrad
	}
	return KindCausalMask
}

func (o causalMaskOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	s := in[0].Shape()
	if len(s) < 2 || s[len(s)-1] != s[len(s)-2] {
		return nil, graph.Invalid, fmt.Errorf("input %q %v does not end in a square [T T] matrix", in[0].Name(), s)
	}
	return s, graph.Float32, nil
}

func (o causalMaskOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, y := b.In[0].F32, b.Out.F32
	t := b.Out.Shape[len(b.Out.Shape)-1]
	fill := math32.Inf(-1)
	if o.grad {
		fill = 0
	}
	return func() error {
		for m := 0; m+t*t <= len(y); m += t * t {
			for i := 0; i < t; i++ {
				row, src := y[m+i*t:m+i*t+t], x[m+i*t:m+i*t+t]
				copy(row[:i+1], src[:i+1])
				for j := i + 1; j < t; j++ {
					row[j] = fill
				}
			}
		}
		return nil
	}, nil
}

func (o causalMaskOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(causalMaskOp{grad: true}, "", dy)}
}

// CausalMask sets the entries of x's trailing [T, T] matrices above the
// diagonal to −∞, so that after a softmax query i attends only to keys
// j ≤ i. Its gradient passes dy through below the diagonal and zero above.
func CausalMask(x *graph.Node) *graph.Node { return apply(causalMaskOp{}, "", x) }
