package ops

import (
	"fmt"
	"math/rand/v2"

	"github.com/octetml/octet/graph"
)

// dropoutMaskOp draws, at every training step, a mask of 0 and 1/(1−p)
// from a seeded generator. It has no inputs.
type dropoutMaskOp struct {
	p     float32
	seed  uint64
	shape graph.Shape
}

func (o dropoutMaskOp) Type() string     { return KindDropoutMask.String() }
func (o dropoutMaskOp) Kind() graph.Kind { return KindDropoutMask }
func (o dropoutMaskOp) Attrs() string    { return fmt.Sprintf("p=%g,seed=%d", o.p, o.seed) }

func (o dropoutMaskOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 0); err != nil {
		return nil, graph.Invalid, err
	}
	if !(o.p >= 0 && o.p < 1) {
		return nil, graph.Invalid, fmt.Errorf("drop probability %v is outside [0, 1)", o.p)
	}
	return o.shape.Clone(), graph.Float32, nil
}

func (o dropoutMaskOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	mask := b.Out.F32
	if !b.Training {
		return func() error { return nil }, nil // unused in evaluation
	}
	src := rand.NewPCG(0, 0)
	rng := rand.New(src)
	keep := 1 / (1 - o.p)
	p := o.p
	step := b.Step()
	id := uint64(b.Node.ID())
	return func() error {
		// The mask of a step depends only on the seed, the node and the
		// step number, so a run resumed from a checkpoint draws the same
		// masks as an uninterrupted one.
		src.Seed(o.seed, id<<40^uint64(*step))
		for i := range mask {
			if rng.Float32() < p {
				mask[i] = 0
			} else {
				mask[i] = keep
			}
		}
		return nil
	}, nil
}

// dropoutOp multiplies x by the mask while training and copies x in
// evaluation.
type dropoutOp struct{}

func (dropoutOp) Type() string     { return KindDropout.String() }
func (dropoutOp) Kind() graph.Kind { return KindDropout }

func (dropoutOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if !in[0].Shape().Equal(in[1].Shape()) {
		return nil, graph.Invalid, shapeMismatch(in[0], in[1])
	}
	return in[0].Shape(), graph.Float32, nil
}

func (dropoutOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, mask, y := b.In[0].F32, b.In[1].F32, b.Out.F32
	if !b.Training {
		return func() error { copy(y, x); return nil }, nil
	}
	mask = mask[:len(y)]
	return func() error {
		for i, m := range mask {
			y[i] = x[i] * m
		}
		return nil
	}, nil
}

// ChainStep makes dropout a step of fused chains: the value times the
// mask (input 1) while training, the value in evaluation.
func (dropoutOp) ChainStep(n *graph.Node, vi int) (ChainStep, bool) {
	return ChainStep{Name: KindDropout.String(), Operand: 1, Apply: func(v, mask []float32, training bool) {
		if training {
			for i, m := range mask {
				v[i] *= m
			}
		}
	}}, vi == 0
}

func (dropoutOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(dropoutOp{}, "", dy, n.Input(1)), nil}
}

// Dropout zeroes each element of x with probability p while training and
// scales the rest by 1/(1−p); in an evaluation program it passes x
// through. The mask comes from a generator seeded with seed, the node's
// id and the program's step, so runs are reproducible and resume exactly.
// p = 0 returns x.
func Dropout(x *graph.Node, p float32, seed uint64) *graph.Node {
	if x == nil || p == 0 {
		return x
	}
	g := x.Graph()
	mask := g.Apply(dropoutMaskOp{p: p, seed: seed, shape: x.Shape().Clone()}, scopeOf(x)+"dropout_mask")
	return apply(dropoutOp{}, "", x, mask)
}
