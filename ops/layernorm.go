package ops

import (
	"fmt"
	"strconv"

	"github.com/chewxy/math32"
	"github.com/octetml/octet/graph"
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

func (o layerNormOp) Type() string { return "LayerNorm" }
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
	mu, r := rowStats(x, eps)
	g0 := float32(0)
	if zeroCentered {
		g0 = 1
	}
	y, gamma, beta = y[:len(x)], gamma[:len(x)], beta[:len(x)]
	for i, v := range x {
		y[i] = (v-mu)*r*(gamma[i]+g0) + beta[i]
	}
	return mu, r
}

func rowStats(x []float32, eps float32) (mu, r float32) {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	mu = float32(s / float64(len(x)))
	var q float64
	for _, v := range x {
		d := v - mu
		q += float64(d * d)
	}
	return mu, 1 / math32.Sqrt(float32(q/float64(len(x)))+eps)
}

func (o layerNormOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma, beta, y := b.In[0].F32, b.In[1].F32, b.In[2].F32, b.Out.F32
	d := len(gamma)
	eps, zc := o.cfg.eps(), o.cfg.ZeroCenteredGamma
	return func() error {
		for r := 0; r+d <= len(y); r += d {
			layerNormRow(y[r:r+d], x[r:r+d], gamma, beta, eps, zc)
		}
		return nil
	}, nil
}

func (o layerNormOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	x, gamma, beta := n.Input(0), n.Input(1), n.Input(2)
	gs := make([]*graph.Node, 3)
	if need[0] {
		gs[0] = apply(layerNormGradOp{cfg: o.cfg}, n.Name()+".dx", x, gamma, dy)
	}
	if need[1] {
		gs[1] = apply(layerNormGradOp{cfg: o.cfg, gamma: true}, n.Name()+".dgamma", x, gamma, dy)
	}
	if need[2] {
		gs[2] = SumTo(dy, beta.Shape())
	}
	return gs
}

// layerNormGradOp computes, from (x, γ, dy), either dx or dγ. Mean and
// standard deviation are recomputed from x rather than saved, so the
// backward graph needs nothing hidden from the forward kernel.
type layerNormGradOp struct {
	cfg   LayerNormConfig
	gamma bool // compute dγ [D] rather than dx
}

func (o layerNormGradOp) Type() string {
	if o.gamma {
		return "LayerNormGradGamma"
	}
	return "LayerNormGradX"
}

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
	if o.gamma {
		return in[1].Shape(), graph.Float32, nil
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o layerNormGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, gamma, dy, out := b.In[0].F32, b.In[1].F32, b.In[2].F32, b.Out.F32
	d := len(gamma)
	eps := o.cfg.eps()
	g0 := float32(0)
	if o.cfg.ZeroCenteredGamma {
		g0 = 1
	}
	if o.gamma {
		return func() error {
			clear(out)
			for r := 0; r+d <= len(x); r += d {
				xr, gr := x[r:r+d], dy[r:r+d]
				mu, rs := rowStats(xr, eps)
				for i, v := range xr {
					out[i] += gr[i] * (v - mu) * rs
				}
			}
			return nil
		}, nil
	}
	return func() error {
		for r := 0; r+d <= len(x); r += d {
			xr, gr, dx := x[r:r+d], dy[r:r+d], out[r:r+d]
			mu, rs := rowStats(xr, eps)
			// g = dy·γ'; dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
			var mg, mgx float64
			for i, v := range xr {
				g := gr[i] * (gamma[i] + g0)
				mg += float64(g)
				mgx += float64(g * (v - mu) * rs)
			}
			fm, fmx := float32(mg/float64(d)), float32(mgx/float64(d))
			for i, v := range xr {
				g := gr[i] * (gamma[i] + g0)
				dx[i] = rs * (g - fm - (v-mu)*rs*fmx)
			}
		}
		return nil
	}, nil
}

// LayerNorm normalises x over its last axis, y = x̂·γ + β (x̂·(1+γ) + β
// with ZeroCenteredGamma), computed in float32. name is the layer's fully
// qualified name; gamma and beta have the last axis's extent.
func LayerNorm(name string, x, gamma, beta *graph.Node, cfg LayerNormConfig) *graph.Node {
	return apply(layerNormOp{cfg}, name, x, gamma, beta)
}
