package ops

import (
	"math"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// geluQuantizeOp is GELU whose output is cast to FP8 in the same kernel:
// the float32 activation that an MLP's second GEMM reads only through
// its input cast never exists (GELU's backward reads GELU's input, not
// its output). Codes, scales and the recorded amax are those of GELU
// followed by Quantize, bit for bit.
type geluQuantizeOp struct{ q QuantizeConfig }

func (o geluQuantizeOp) Type() string     { return KindGELUQuantize.String() }
func (o geluQuantizeOp) Kind() graph.Kind { return KindGELUQuantize }
func (o geluQuantizeOp) Attrs() string    { return quantizeOp{o.q}.Attrs() }

func (o geluQuantizeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	s, _, err := unaryOp{kind: kindGELU}.Infer(in)
	if err != nil {
		return nil, graph.Invalid, err
	}
	if err := validateQuantize(o.q); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkNVFP4Shape(o.q, in[0]); err != nil {
		return nil, graph.Invalid, err
	}
	return s, castDType(o.q), nil
}

// geluQuantizeBlock is how many values each worker runs through GELU
// into its scratch before casting them.
const geluQuantizeBlock = 4096

func (o geluQuantizeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, out := b.In[0].F32, b.Out.U8
	sc, err := bindScales(b, o.q, b.In[0].Shape)
	if err != nil {
		return nil, err
	}
	graph.SetMeta(b.Out, scalesKey, sc)
	record := b.Training && o.q.Kind == fp8.DelayedScaling
	if record {
		b.AtStepEnd(func() error { o.q.Meta.Update(); return nil })
	}
	if o.q.Kind != fp8.DelayedScaling {
		// The scale depends on the whole tensor: GELU into scratch, then
		// the cast.
		tmp := make([]float32, len(x))
		gelu, _ := unaryOp{kind: kindGELU}.bindSlices(x, tmp)
		cast := castKernel(o.q, sc, out, tmp, record)
		return func() error {
			if err := gelu(); err != nil {
				return err
			}
			return cast()
		}, nil
	}
	// Delayed tensorwise scaling: the scale is known, so each worker
	// casts its values a block at a time as soon as GELU has them.
	m, f := o.q.Meta, o.q.Format
	var scale float32
	scratch := make([][]float32, parallel.Workers())
	for i := range scratch {
		scratch[i] = make([]float32, geluQuantizeBlock)
	}
	amax := make([]uint32, parallel.Workers()) // float32 bits: NaN sorts above +inf
	c := newPartChunker(len(x), len(x), func(part, lo, hi int) {
		var a uint32
		for s := lo; s < hi; s += geluQuantizeBlock {
			e := min(hi, s+geluQuantizeBlock)
			y := scratch[part][:e-s]
			kernels.GELU(y, x[s:e])
			ra, _ := fp8.Quantize(out[s:e], y, f, scale) // lengths and format checked by Infer
			a = max(a, math.Float32bits(ra))
		}
		amax[part] = a
	})
	return func() error {
		sc.ScaleInv, scale = m.ScaleInv, m.Scale
		c.group.For(c.parts, c.run)
		sc.Amax = partsAmax(amax[:c.parts])
		if record {
			m.Record(sc.Amax)
			m.CountStart(out, 0) // GELU's outputs are zero only where its inputs are
		}
		return nil
	}, nil
}

func (o geluQuantizeOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return unaryOp{kind: kindGELU}.Grad(n, dy, need)
}

// GELUQuantize is GELU (the tanh form) whose output is cast to FP8 per q
// inside the kernel, with no float32 tensor in between; the FP8 compiler
// (passes.ConvertLN) emits it for a GELU read by an FP8 linear layer's
// input cast.
func GELUQuantize(name string, x *graph.Node, q QuantizeConfig) *graph.Node {
	return apply(geluQuantizeOp{q: q}, name, x)
}
