package ops

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
)

// fakeQuantOp quantizes a float32 tensor to FP8 with one current scale
// (torchao's tensorwise dynamic scaling) and dequantizes it again: its
// output holds exactly the values an FP8 GEMM would read, in float32, so
// that the GEMM can run in high precision on them (Transformer Engine's
// FakeQuant debug feature). Its gradient is the straight-through dy.
type fakeQuantOp struct{ format fp8.Format }

func (o fakeQuantOp) Type() string     { return KindFakeQuant.String() }
func (o fakeQuantOp) Kind() graph.Kind { return KindFakeQuant }
func (o fakeQuantOp) Attrs() string    { return o.format.String() }

func (o fakeQuantOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if o.format != fp8.E4M3 && o.format != fp8.E5M2 {
		return nil, graph.Invalid, fmt.Errorf("format %v", o.format)
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o fakeQuantOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, y := b.In[0].F32, b.Out.F32
	codes := make([]uint8, len(x))
	return func() error {
		scale := fp8.CurrentScale(fp8.Amax(x), o.format, false)
		if _, err := fp8.Quantize(codes, x, o.format, scale); err != nil {
			return err
		}
		return fp8.Dequantize(y, codes, o.format, 1/scale)
	}, nil
}

func (o fakeQuantOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{dy}
}

// FakeQuant adds a node that rounds x through the FP8 format f (one
// current scale per tensor) and back to float32.
func FakeQuant(name string, x *graph.Node, f fp8.Format) *graph.Node {
	return apply(fakeQuantOp{format: f}, name, x)
}
