package ops

import (
	"fmt"
	"strconv"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// LayerNormConfig holds LayerNorm's settings.
type LayerNormConfig struct {
	// Eps is added to the variance; 0 means 1e-5.
	Eps float32
	// ZeroCenteredGamma computes y = x̂·(1+γ) + β, so γ starts at 0
	// (Transformer Engine's zero_centered_gamma).
	ZeroCenteredGamma bool
}

func (c LayerNormConfig) eps() float32 {
	if c.Eps == 0 {
		return 1e-5
	}
	return c.Eps
}

// layerNormOp normalises x over its last axis and applies γ and β.
type layerNormOp struct{ cfg LayerNormConfig }

func (o layerNormOp) Type() string     { return KindLayerNorm.String() }
func (o layerNormOp) Kind() graph.Kind { return KindLayerNorm }
func (o layerNormOp) Attrs() string {
	s := "eps=" + strconv.FormatFloat(float64(o.cfg.eps()), 'g', -1, 32)
	if o.cfg.ZeroCenteredGamma {
		s += ",zero_centered_gamma"
	}
	return s
}

func checkLayerNorm(x, gamma *graph.Node) (int, error) {
	xs := x.Shape()
	if len(xs) == 0 {
		return 0, fmt.Errorf("input %q is a scalar", x.Name())
	}
	d := xs[len(xs)-1]
	if !gamma.Shape().Equal(graph.Shape{d}) {
		return 0, fmt.Errorf("%q has shape %v, want [%d] to match input %q %v", gamma.Name(), gamma.Shape(), d, x.Name(), xs)
	}
	return d, nil
}

func (o layerNormOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	for _, p := range in[1:] {
		if _, err := checkLayerNorm(in[0], p); err != nil {
			return nil, graph.Invalid, err
		}
	}
	return in[0].Shape(), graph.Float32, nil
}

// layerNormRow normalises one row: y = x̂·γ' + β with γ' = γ or 1+γ. It
// returns the row's mean and reciprocal standard deviation. Fused FP8
// kernels reuse it.
func layerNormRow(y, x, gamma, beta []float32, eps float32, zeroCentered bool) (mean, rstd float32) {
	g0 := float32(0)
	if zeroCentered {
		g0 = 1
	}
	return kernels.LayerNormRow(y, x, gamma, beta, eps, g0)
}

func (o layerNormOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma, beta, y := b.In[0].F32, b.In[1].F32, b.In[2].F32, b.Out.F32
	d := len(gamma)
	eps, zc := o.cfg.eps(), o.cfg.ZeroCenteredGamma
	rows := len(y) / max(d, 1)
	return newChunkerCost(rows, rows*d, func(lo, hi int) {
		for r := lo * d; r < hi*d; r += d {
			layerNormRow(y[r:r+d], x[r:r+d], gamma, beta, eps, zc)
		}
	}).kernel(), nil
}

func (o layerNormOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	x, gamma := n.Input(0), n.Input(1)
	gs := make([]*graph.Node, 3)
	// One node computes dx, dγ and dβ in one pass over the rows; dγ and
	// dβ are read out of it.
	grad := apply(layerNormGradOp{cfg: o.cfg}, n.Name()+".grad", x, gamma, dy)
	if need[0] {
		gs[0] = grad
	}
	if need[1] {
		gs[1] = apply(layerNormParamGradOp{}, n.Name()+".dgamma", grad)
	}
	if need[2] {
		gs[2] = apply(layerNormParamGradOp{beta: true}, n.Name()+".dbeta", grad)
	}
	return gs
}

// layerNormGradOp computes, from (x, γ, dy), dx — and, in the same pass
// over the rows, dγ and dβ, which travel with dx (its graph.Value metadata, paramGradsKey) to
// the layerNormParamGradOp nodes that hand them on. Mean and 1/σ are
// recomputed from x rather than saved by the forward: the passes rewrite
// the forward (ConvertLN fuses it with its FP8 cast, leaving no float32
// output), and a backward that read the forward's statistics would keep
// that float32 LayerNorm alive.
type layerNormGradOp struct{ cfg LayerNormConfig }

func (o layerNormGradOp) Type() string     { return KindLayerNormGrad.String() }
func (o layerNormGradOp) Kind() graph.Kind { return KindLayerNormGrad }

func (o layerNormGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	if _, err := checkLayerNorm(in[0], in[1]); err != nil {
		return nil, graph.Invalid, err
	}
	if !in[2].Shape().Equal(in[0].Shape()) {
		return nil, graph.Invalid, shapeMismatch(in[2], in[0])
	}
	return in[0].Shape(), graph.Float32, nil
}

// layerNormParamGrads holds a LayerNormGrad's dγ and dβ: one partial sum
// per worker while the kernel runs, then their total in the first.
// paramGradsKey is the metadata LayerNormGrad's dx carries.
var paramGradsKey = graph.NewValueKey[*layerNormParamGrads]("layernorm param grads")

type layerNormParamGrads struct {
	dgamma, dbeta [][]float32
}

func (o layerNormGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma, dy, dx := b.In[0].F32, b.In[1].F32, b.In[2].F32, b.Out.F32
	d := len(gamma)
	eps := o.cfg.eps()
	g0 := float32(0)
	if o.cfg.ZeroCenteredGamma {
		g0 = 1
	}
	rows := len(x) / max(d, 1)
	pg := &layerNormParamGrads{}
	c := newPartChunker(rows, rows*d, func(part, lo, hi int) {
		dg, db := pg.dgamma[part], pg.dbeta[part]
		clear(dg)
		clear(db)
		for r := lo * d; r < hi*d; r += d {
			kernels.LayerNormGradRow(dx[r:r+d], dg, db, x[r:r+d], dy[r:r+d], gamma, eps, g0)
		}
	})
	for i := 0; i < c.parts; i++ {
		pg.dgamma = append(pg.dgamma, make([]float32, d))
		pg.dbeta = append(pg.dbeta, make([]float32, d))
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

// total adds the pieces' partial sums into the first.
func (pg *layerNormParamGrads) total() {
	for _, parts := range [][][]float32{pg.dgamma, pg.dbeta} {
		for _, p := range parts[min(1, len(parts)):] {
			for i, v := range p {
				parts[0][i] += v
			}
		}
	}
}

// layerNormParamGradOp hands on the dγ (or dβ) that a LayerNormGrad
// computed, or (rms) the dγ of an RMSNormGrad.
type layerNormParamGradOp struct{ beta, rms bool }

func (o layerNormParamGradOp) Type() string { return o.Kind().String() }
func (o layerNormParamGradOp) Kind() graph.Kind {
	switch {
	case o.rms:
		return KindRMSNormGradGamma
	case o.beta:
		return KindLayerNormGradBeta
	}
	return KindLayerNormGradGamma
}

func (o layerNormParamGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if _, ok := in[0].Op().(rmsNormGradOp); o.rms && !ok {
		return nil, graph.Invalid, fmt.Errorf("input %q is a %s, want an RMSNormGrad", in[0].Name(), in[0].Op().Type())
	}
	if _, ok := in[0].Op().(layerNormGradOp); !o.rms && !ok {
		return nil, graph.Invalid, fmt.Errorf("input %q is a %s, want a LayerNormGrad", in[0].Name(), in[0].Op().Type())
	}
	s := in[0].Shape()
	return graph.Shape{s[len(s)-1]}, graph.Float32, nil
}

func (o layerNormParamGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	pg, ok := graph.Meta(b.In[0], paramGradsKey)
	if !ok {
		return nil, fmt.Errorf("input %q carries no normalisation parameter gradients", b.Node.Input(0).Name())
	}
	src, out := pg.dgamma, b.Out.F32
	if o.beta {
		src = pg.dbeta
	}
	return func() error { copy(out, src[0]); return nil }, nil
}

// LayerNorm normalises x over its last axis, y = x̂·γ + β (x̂·(1+γ) + β
// with ZeroCenteredGamma), computed in float32. name is the layer's fully
// qualified name; gamma and beta have the last axis's extent.
func LayerNorm(name string, x, gamma, beta *graph.Node, cfg LayerNormConfig) *graph.Node {
	return apply(layerNormOp{cfg}, name, x, gamma, beta)
}
