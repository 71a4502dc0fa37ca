package ops

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
)

// dequantizeOp turns a quantized value (FP8 or NVFP4, with the scales
// its cast attached) back into float32: each element decoded times its
// scale_inv (tensorwise, axiswise, MXFP8, Float8BlockScaling) or its
// E4M3 block scale and the tensor's S_dec (NVFP4), in the value's own
// layout — the values its GEMMs multiply. The backward override
// "dequantized" feeds these to the backward GEMMs. Its gradient is the
// straight-through dy.
type dequantizeOp struct{}

func (dequantizeOp) Type() string     { return KindDequantize.String() }
func (dequantizeOp) Kind() graph.Kind { return KindDequantize }
func (dequantizeOp) Attrs() string    { return "" }

func (dequantizeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 1 {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want 1", len(in))
	}
	if !in[0].DType().IsQuantized() {
		return nil, graph.Invalid, fmt.Errorf("input %q is %v, want an FP8 or NVFP4 cast", in[0].Name(), in[0].DType())
	}
	return in[0].Shape(), graph.Float32, nil
}

func (dequantizeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	sc, ok := graph.Meta(b.In[0], scalesKey)
	if !ok {
		return nil, fmt.Errorf("input %q carries no scales (it must come from a cast)", b.Node.Input(0).Name())
	}
	codes, y := b.In[0].U8, b.Out.F32
	rows, cols := sc.Rows, sc.Cols
	cfg := sc.Config
	if sc.FP4 != nil {
		stored := make([]float32, rows*cols)
		return func() error {
			if err := sc.FP4.Dequantize(stored); err != nil {
				return err
			}
			if cfg.Axis == 0 && cfg.BlockDim == 1 { // stored transposed
				for j := 0; j < cols; j++ {
					for r := 0; r < rows; r++ {
						y[r*cols+j] = stored[j*rows+r]
					}
				}
				return nil
			}
			copy(y, stored)
			return nil
		}, nil
	}
	tab := cfg.Format.DecodeTable()
	return func() error {
		switch {
		case sc.Block != nil:
			return fp8.DequantizeMX(y, codes, sc.Block, rows, cols, cfg.Axis, cfg.Format)
		case sc.BlockScaleInv != nil:
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					s := sc.BlockScaleInv[fp8.Float8BlockIndex(rows, cols, cfg.Axis, cfg.BlockDim, r, j)]
					y[r*cols+j] = tab[codes[r*cols+j]] * s
				}
			}
		case sc.AxisScaleInv != nil:
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					s := sc.AxisScaleInv[r]
					if cfg.Axis == 0 {
						s = sc.AxisScaleInv[j]
					}
					y[r*cols+j] = tab[codes[r*cols+j]] * s
				}
			}
		default:
			return fp8.Dequantize(y, codes[:len(y)], cfg.Format, sc.ScaleInv)
		}
		return nil
	}, nil
}

func (dequantizeOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{dy}
}

// Dequantize adds a node that decodes the cast q (a Quantize or fused
// cast's output) into float32 with its scales: the values q's GEMMs
// multiply.
func Dequantize(name string, q *graph.Node) *graph.Node {
	return apply(dequantizeOp{}, name, q)
}
