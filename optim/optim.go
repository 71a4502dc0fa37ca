// Package optim updates parameters in place from their gradients: SGD
// (momentum, Nesterov), Adam and AdamW with bias correction, global-norm
// gradient clipping and learning-rate schedules. Optimizers allocate
// their state once and nothing per step.
package optim

import (
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// Param is one parameter: its values, its gradient (same length) and
// whether weight decay applies to it.
type Param struct {
	Name  string
	W, G  []float32
	Decay bool
}

// Bind pairs each parameter node with its value in store and the buffer
// of its gradient in prog (an output of the program). Weight decay is on
// for parameters of rank ≥ 2 (weights, not biases or norms).
func Bind(store *graph.Store, prog *graph.Program, params, grads []*graph.Node) ([]Param, error) {
	if len(params) != len(grads) {
		return nil, fmt.Errorf("optim: bind: %d parameters, %d gradients", len(params), len(grads))
	}
	out := make([]Param, len(params))
	for i, p := range params {
		w := store.Float32(p.Name())
		if w == nil {
			return nil, fmt.Errorf("optim: bind: parameter %q has no value in the store", p.Name())
		}
		g := prog.Float32(grads[i])
		if g == nil {
			return nil, fmt.Errorf("optim: bind: the gradient of %q is not an output of the program", p.Name())
		}
		if len(g) != len(w) {
			return nil, fmt.Errorf("optim: bind: %q has %d values, its gradient %d", p.Name(), len(w), len(g))
		}
		out[i] = Param{Name: p.Name(), W: w, G: g, Decay: p.Shape().Rank() >= 2}
	}
	return out, nil
}

// Optimizer updates parameters from their gradients.
type Optimizer interface {
	// Step applies one update with learning rate lr.
	Step(lr float32)
	// Steps returns how many updates were applied.
	Steps() int
}

func state(params []Param) [][]float32 {
	s := make([][]float32, len(params))
	for i, p := range params {
		s[i] = make([]float32, len(p.W))
	}
	return s
}

// SGD is stochastic gradient descent with optional momentum, Nesterov
// momentum and L2 weight decay, in PyTorch's formulation.
type SGD struct {
	Params      []Param
	Momentum    float32
	Dampening   float32
	Nesterov    bool
	WeightDecay float32
	buf         [][]float32
	steps       int
	// The step's settings for update, and the splitter that runs it
	// (made on the first step, so that a zero SGD works).
	split *splitter
	body  func(k, parts int)
	lr    float32
	first bool
}

// NewSGD returns SGD over params.
func NewSGD(params []Param, momentum, weightDecay float32, nesterov bool) *SGD {
	o := &SGD{Params: params, Momentum: momentum, Nesterov: nesterov, WeightDecay: weightDecay}
	if momentum != 0 {
		o.buf = state(params)
	}
	return o
}

// Steps returns the number of updates applied.
func (o *SGD) Steps() int { return o.steps }

// Step applies w -= lr·d, d being the (decayed) gradient or its momentum
// buffer b = μ·b + (1−dampening)·g (b = g on the first step), with
// Nesterov d = g + μ·b. Like Adam's, the update is spread over the
// workers, each taking the same share of every parameter.
func (o *SGD) Step(lr float32) {
	o.first = o.steps == 0
	o.steps++
	o.lr = lr
	if o.split == nil {
		o.split = newSplitter()
		o.body = o.update
	}
	total := 0
	for _, p := range o.Params {
		total += len(p.W)
	}
	o.split.shares(total, o.body)
}

// update applies the step to share k of parts of every parameter.
func (o *SGD) update(k, parts int) {
	lr, mu, damp, wd, first := o.lr, o.Momentum, 1-o.Dampening, o.WeightDecay, o.first
	for pi, p := range o.Params {
		lo, hi := share(len(p.W), k, parts)
		w := p.W[lo:hi]
		g := p.G[lo:hi]
		g = g[:len(w)]
		if o.buf == nil {
			for i := range w {
				d := g[i]
				if p.Decay {
					d += float32(wd * w[i])
				}
				w[i] -= float32(lr * d)
			}
			continue
		}
		b := o.buf[pi][lo:hi]
		b = b[:len(w)]
		for i := range w {
			d := g[i]
			if p.Decay {
				d += float32(wd * w[i])
			}
			if first {
				b[i] = d
			} else {
				b[i] = float32(mu*b[i]) + float32(damp*d)
			}
			if o.Nesterov {
				d += float32(mu * b[i])
			} else {
				d = b[i]
			}
			w[i] -= float32(lr * d)
		}
	}
}

// Adam is Adam (L2 weight decay added to the gradient) or, with
// Decoupled, AdamW (decay applied to the weights directly), with bias
// correction, in PyTorch's formulation.
type Adam struct {
	Params       []Param
	Beta1, Beta2 float32
	Eps          float32
	WeightDecay  float32
	Decoupled    bool
	m, v         [][]float32
	steps        int
	// The update of all parameters, elementwise, is spread over the
	// workers, each taking the same share of every parameter (see
	// splitter.shares); consts holds the step's kernel constants.
	split  *splitter
	body   func(k, parts int)
	consts []kernels.AdamConsts
}

// NewAdam returns Adam with β = (0.9, 0.999), ε = 1e-8.
func NewAdam(params []Param, weightDecay float32) *Adam {
	o := &Adam{Params: params, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay, m: state(params), v: state(params), split: newSplitter()}
	o.body = o.update
	return o
}

// update applies the step to share k of parts of every parameter.
func (o *Adam) update(k, parts int) {
	for pi, p := range o.Params {
		if a, b := share(len(p.W), k, parts); a < b {
			kernels.Adam(p.W[a:b], p.G[a:b], o.m[pi][a:b], o.v[pi][a:b], &o.consts[pi])
		}
	}
}

// NewAdamW returns AdamW with β = (0.9, 0.999), ε = 1e-8.
func NewAdamW(params []Param, weightDecay float32) *Adam {
	o := NewAdam(params, weightDecay)
	o.Decoupled = true
	return o
}

// Steps returns the number of updates applied.
func (o *Adam) Steps() int { return o.steps }

// Moments returns the first and second moment buffers of parameter i.
func (o *Adam) Moments(i int) (m, v []float32) { return o.m[i], o.v[i] }

// Step applies one update:
//
//	m = β1·m + (1−β1)·g,  v = β2·v + (1−β2)·g²
//	w -= lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε)
//
// with g += wd·w first (Adam) or w *= 1 − lr·wd first (AdamW).
func (o *Adam) Step(lr float32) {
	o.steps++
	t := float64(o.steps)
	bc1 := 1 - math.Pow(float64(o.Beta1), t)
	bc2 := 1 - math.Pow(float64(o.Beta2), t)
	step, bc2s := float32(float64(lr)/bc1), float32(math.Sqrt(bc2))
	o.consts = o.consts[:0]
	total := 0
	for _, p := range o.Params {
		total += len(p.W)
		o.consts = append(o.consts, adamConsts(o.Beta1, o.Beta2, o.Eps, step, bc2s, lr, o.WeightDecay, p.Decay, o.Decoupled))
	}
	o.split.shares(total, o.body)
}

// adamConsts returns the kernel constants of one Adam update: step is
// lr/(1−β1ᵗ), bc2s is √(1−β2ᵗ); with decay, wd is an L2 term on the
// gradient, or with decoupled a factor 1 − lr·wd on the weight.
func adamConsts(beta1, beta2, eps, step, bc2s, lr, wd float32, decay, decoupled bool) kernels.AdamConsts {
	c := kernels.AdamConsts{0, 1, beta1, 1 - beta1, beta2, 1 - beta2, step, bc2s, eps}
	if decay && wd != 0 {
		if decoupled {
			c[1] = 1 - float32(lr*wd)
		} else {
			c[0] = wd
		}
	}
	return c
}

// Stateful is an optimizer whose state can be saved and restored
// (checkpoints): named buffers aligned with the parameters, and the step
// count that drives bias correction.
type Stateful interface {
	Optimizer
	// StateBuffers returns the optimizer's buffers by name; loading
	// writes into them.
	StateBuffers() map[string][]float32
	// SetSteps sets the number of updates already applied.
	SetSteps(n int)
}

// StateBuffers returns the moment buffers, "adam.m/<param>" and
// "adam.v/<param>".
func (o *Adam) StateBuffers() map[string][]float32 {
	out := make(map[string][]float32, 2*len(o.Params))
	for i, p := range o.Params {
		out["adam.m/"+p.Name] = o.m[i]
		out["adam.v/"+p.Name] = o.v[i]
	}
	return out
}

// SetSteps sets the number of updates already applied.
func (o *Adam) SetSteps(n int) { o.steps = n }

// StateBuffers returns the momentum buffers, "sgd.momentum/<param>" (none
// without momentum).
func (o *SGD) StateBuffers() map[string][]float32 {
	out := map[string][]float32{}
	for i, p := range o.Params {
		if o.buf != nil {
			out["sgd.momentum/"+p.Name] = o.buf[i]
		}
	}
	return out
}

// SetSteps sets the number of updates already applied.
func (o *SGD) SetSteps(n int) { o.steps = n }
