package ops

import (
	"strconv"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// RMSNormConfig holds RMSNorm's settings.
type RMSNormConfig struct {
	// Eps is added to the mean square; 0 means 1e-6 (Llama's
	// rms_norm_eps).
	Eps float32
	// ZeroCenteredGamma computes y = x̂·(1+γ), so γ starts at 0
	// (Transformer Engine's zero_centered_gamma).
	ZeroCenteredGamma bool
}

func (c RMSNormConfig) eps() float32 {
	if c.Eps == 0 {
		return 1e-6
	}
	return c.Eps
}

func (c RMSNormConfig) g0() float32 {
	if c.ZeroCenteredGamma {
		return 1
	}
	return 0
}

func (c RMSNormConfig) attrs() string {
	s := "eps=" + strconv.FormatFloat(float64(c.eps()), 'g', -1, 32)
	if c.ZeroCenteredGamma {
		s += ",zero_centered_gamma"
	}
	return s
}

// rmsNormOp normalises x by the root mean square over its last axis and
// applies γ: y = x/√(mean(x²) + eps)·γ, statistics in float32 (Llama's
// LlamaRMSNorm, Transformer Engine's RMSNorm).
type rmsNormOp struct{ cfg RMSNormConfig }

func (o rmsNormOp) Type() string     { return KindRMSNorm.String() }
func (o rmsNormOp) Kind() graph.Kind { return KindRMSNorm }
func (o rmsNormOp) Attrs() string    { return o.cfg.attrs() }

func (o rmsNormOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if _, err := checkLayerNorm(in[0], in[1]); err != nil {
		return nil, graph.Invalid, err
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o rmsNormOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma, y := b.In[0].F32, b.In[1].F32, b.Out.F32
	d := len(gamma)
	eps, g0 := o.cfg.eps(), o.cfg.g0()
	rows := len(y) / max(d, 1)
	return newChunkerCost(rows, rows*d, func(lo, hi int) {
		for r := lo * d; r < hi*d; r += d {
			kernels.RMSNormRow(y[r:r+d], x[r:r+d], gamma, eps, g0)
		}
	}).kernel(), nil
}

func (o rmsNormOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	x, gamma := n.Input(0), n.Input(1)
	gs := make([]*graph.Node, 2)
	// One node computes dx and dγ in one pass over the rows; dγ is read
	// out of it.
	grad := apply(rmsNormGradOp{cfg: o.cfg}, n.Name()+".grad", x, gamma, dy)
	if need[0] {
		gs[0] = grad
	}
	if need[1] {
		gs[1] = apply(layerNormParamGradOp{rms: true}, n.Name()+".dgamma", grad)
	}
	return gs
}

// rmsNormGradOp computes, from (x, γ, dy), dx — and, in the same pass
// over the rows, dγ, which travels with dx to the RMSNormGradGamma node
// (as LayerNorm's, see layerNormGradOp). 1/rms is recomputed from x.
type rmsNormGradOp struct{ cfg RMSNormConfig }

func (o rmsNormGradOp) Type() string     { return KindRMSNormGrad.String() }
func (o rmsNormGradOp) Kind() graph.Kind { return KindRMSNormGrad }
func (o rmsNormGradOp) Attrs() string    { return o.cfg.attrs() }

func (o rmsNormGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	return layerNormGradOp{}.Infer(in)
}

func (o rmsNormGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma, dy, dx := b.In[0].F32, b.In[1].F32, b.In[2].F32, b.Out.F32
	d := len(gamma)
	eps, g0 := o.cfg.eps(), o.cfg.g0()
	rows := len(x) / max(d, 1)
	pg := &layerNormParamGrads{}
	c := newPartChunker(rows, rows*d, func(part, lo, hi int) {
		dg := pg.dgamma[part]
		clear(dg)
		for r := lo * d; r < hi*d; r += d {
			kernels.RMSNormGradRow(dx[r:r+d], dg, x[r:r+d], dy[r:r+d], gamma, eps, g0)
		}
	})
	for i := 0; i < c.parts; i++ {
		pg.dgamma = append(pg.dgamma, make([]float32, d))
	}
	graph.SetMeta(b.Out, paramGradsKey, pg)
	run := c.kernel()
	return func() error {
		if err := run(); err != nil {
			return err
		}
		pg.total()
		return nil
	}, nil
}

// RMSNorm normalises x by its root mean square over the last axis, y =
// x/√(mean(x²) + eps)·γ (·(1+γ) with ZeroCenteredGamma), computed in
// float32. name is the layer's fully qualified name; gamma has the last
// axis's extent.
func RMSNorm(name string, x, gamma *graph.Node, cfg RMSNormConfig) *graph.Node {
	return apply(rmsNormOp{cfg}, name, x, gamma)
}

// RMSNormQuantize is RMSNorm (float32 statistics and arithmetic) whose
// output is cast to FP8 per q inside the kernel, with no float32 tensor
// in between (Transformer Engine's LayerNormLinear with
// normalization="RMSNorm").
func RMSNormQuantize(name string, x, gamma *graph.Node, cfg RMSNormConfig, q QuantizeConfig) *graph.Node {
	return apply(layerNormQuantizeOp{rms: true, rmsCfg: cfg, q: q}, name, x, gamma)
}
