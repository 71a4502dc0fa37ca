package ops

import (
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// layerNormQuantizeOp is LayerNorm (or, with rms set, RMSNorm) computed
// in float32 with its output cast to FP8 in the same kernel (Transformer
// Engine's LayerNormLinear front half, normalization "LayerNorm" or
// "RMSNorm").
type layerNormQuantizeOp struct {
	ln     layerNormOp
	rmsCfg RMSNormConfig
	rms    bool
	q      QuantizeConfig
}

func (o layerNormQuantizeOp) Type() string { return o.Kind().String() }
func (o layerNormQuantizeOp) Kind() graph.Kind {
	if o.rms {
		return KindRMSNormQuantize
	}
	return KindLayerNormQuantize
}
func (o layerNormQuantizeOp) Attrs() string {
	if o.rms {
		return rmsNormOp{o.rmsCfg}.Attrs() + "," + quantizeOp{o.q}.Attrs()
	}
	return o.ln.Attrs() + "," + quantizeOp{o.q}.Attrs()
}

// norm returns the op's normalisation.
func (o layerNormQuantizeOp) norm() graph.Op {
	if o.rms {
		return rmsNormOp{o.rmsCfg}
	}
	return o.ln
}

func (o layerNormQuantizeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	s, _, err := o.norm().Infer(in)
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

func (o layerNormQuantizeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma := b.In[0].F32, b.In[1].F32
	d := len(gamma)
	normRow := func(y, x []float32) {
		kernels.RMSNormRow(y, x, gamma, o.rmsCfg.eps(), o.rmsCfg.g0())
	}
	if !o.rms {
		beta := b.In[2].F32
		eps, zc := o.ln.cfg.eps(), o.ln.cfg.ZeroCenteredGamma
		normRow = func(y, x []float32) { layerNormRow(y, x, gamma, beta, eps, zc) }
	}
	sc, err := bindScales(b, o.q, b.In[0].Shape)
	if err != nil {
		return nil, err
	}
	graph.SetMeta(b.Out, scalesKey, sc)
	record := b.Training && o.q.Kind == fp8.DelayedScaling
	if record {
		b.AtStepEnd(func() error { o.q.Meta.Update(); return nil })
	}
	// The float32 rows live in scratch: one row at a time for tensorwise
	// delayed scaling (cast as soon as normalised, each worker on its
	// share of the rows with a row and an amax of its own), the whole
	// tensor when the scale depends on all of it.
	if o.q.Kind == fp8.DelayedScaling {
		rows := len(x) / max(d, 1)
		out := b.Out.U8
		m := o.q.Meta
		f := o.q.Format
		var scratch [][]float32
		var amax []float32
		var failed []error
		c := newPartChunker(rows, rows*d, func(part, lo, hi int) {
			row, a := scratch[part], float32(0)
			for r := lo * d; r < hi*d; r += d {
				normRow(row, x[r:r+d])
				ra, err := fp8.Quantize(out[r:r+d], row, f, m.Scale)
				if err != nil {
					failed[part] = err
					return
				}
				if ra > a || ra != ra {
					a = ra
				}
			}
			amax[part] = a
		})
		for i := 0; i < c.parts; i++ {
			scratch = append(scratch, make([]float32, d))
		}
		amax, failed = make([]float32, c.parts), make([]error, c.parts)
		run := c.kernel()
		return func() error {
			sc.ScaleInv = m.ScaleInv
			if err := run(); err != nil {
				return err
			}
			// Parts in order, as one loop over the rows would take them:
			// a NaN row makes the amax NaN.
			sc.Amax = 0
			for i, a := range amax {
				if err := failed[i]; err != nil {
					return err
				}
				if a > sc.Amax || a != a {
					sc.Amax = a
				}
			}
			if record {
				m.Record(sc.Amax)
				m.CountStart(out, 0) // a normalised row is not exactly zero
			}
			return nil
		}, nil
	}
	tmp := make([]float32, len(x))
	cast := castKernel(o.q, sc, b.Out.U8, tmp, record)
	return func() error {
		for r := 0; r+d <= len(x); r += d {
			normRow(tmp[r:r+d], x[r:r+d])
		}
		return cast()
	}, nil
}

func (o layerNormQuantizeOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	if o.rms {
		return rmsNormOp{o.rmsCfg}.Grad(n, dy, need)
	}
	return o.ln.Grad(n, dy, need)
}

// LayerNormQuantize is LayerNorm (float32 statistics and arithmetic)
// whose output is cast to FP8 per q inside the kernel, with no float32
// tensor in between.
func LayerNormQuantize(name string, x, gamma, beta *graph.Node, cfg LayerNormConfig, q QuantizeConfig) *graph.Node {
	return apply(layerNormQuantizeOp{ln: layerNormOp{cfg}, q: q}, name, x, gamma, beta)
}
