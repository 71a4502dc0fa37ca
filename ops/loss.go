package ops

import (
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// lossFn is the per-element function of a loss.
type lossFn uint8

const (
	lossMean lossFn = iota // x itself: MaskedMean
	lossMSE
	lossL1
	lossHuber
	lossBCE
)

var (
	lossKinds     = [...]graph.Kind{KindMaskedMean, KindMSELoss, KindL1Loss, KindHuberLoss, KindBCEWithLogits}
	lossGradKinds = [...]graph.Kind{KindMaskedMeanGrad, KindMSELossGrad, KindL1LossGrad, KindHuberLossGrad, KindBCEWithLogitsGrad}
)

// lossOp is the mean of a per-element function of x (and a target of x's
// shape) over the rows a mask keeps: inputs x, then the target (every
// function but lossMean), then the mask [rows] when masked.
type lossOp struct {
	fn     lossFn
	delta  float32 // Huber's
	masked bool
}

func (o lossOp) Type() string     { return o.Kind().String() }
func (o lossOp) Kind() graph.Kind { return lossKinds[o.fn] }
func (o lossOp) Attrs() string {
	s := ""
	if o.fn == lossHuber {
		s = fmt.Sprintf("delta=%g", o.delta)
	}
	if o.masked {
		if s != "" {
			s += " "
		}
		s += "masked"
	}
	return s
}

// inputs is the number of inputs: x, the target, the mask.
func (o lossOp) inputs() int {
	n := 1
	if o.fn != lossMean {
		n++
	}
	if o.masked {
		n++
	}
	return n
}

// checkLossInputs checks x, its target and its mask (the first o.inputs()
// of in): a target of exactly x's shape (never broadcast), a mask of one
// weight per row of x.
func (o lossOp) checkLossInputs(in []*graph.Node) error {
	k := o.inputs()
	if len(in) < k {
		return fmt.Errorf("got %d inputs, want %d", len(in), k)
	}
	if err := float32In(in[:k], k); err != nil {
		return err
	}
	x := in[0]
	if o.fn == lossHuber && (!(o.delta > 0) || math.IsInf(float64(o.delta), 0)) {
		return fmt.Errorf("Huber delta %v: want a finite value above 0", o.delta)
	}
	if o.fn != lossMean && !in[1].Shape().Equal(x.Shape()) {
		return fmt.Errorf("target %q %v does not have the shape of prediction %q %v (losses never broadcast: reshape one of them)",
			in[1].Name(), in[1].Shape(), x.Name(), x.Shape())
	}
	if o.masked {
		m := in[k-1]
		if len(x.Shape()) < 1 {
			return fmt.Errorf("prediction %q is a scalar: a row mask needs rows", x.Name())
		}
		if len(m.Shape()) != 1 || m.Shape()[0] != x.Shape()[0] {
			return fmt.Errorf("mask %q %v is not one weight per row of %q %v (want [%d])", m.Name(), m.Shape(), x.Name(), x.Shape(), x.Shape()[0])
		}
	}
	return nil
}

func (o lossOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, o.inputs()); err != nil {
		return nil, graph.Invalid, err
	}
	if err := o.checkLossInputs(in); err != nil {
		return nil, graph.Invalid, err
	}
	return graph.Shape{}, graph.Float32, nil
}

// lossValue is the loss of one element, in float64, every product
// rounded before it is added (the compiler would fuse it on arm64 and
// not on amd64) and exp/log1p from kernels (package math's differ between
// the two in the last bit), so the loss has the same bits on every
// machine.
func (o lossOp) value(x, t float64) float64 {
	switch o.fn {
	case lossMSE:
		d := x - t
		return d * d
	case lossL1:
		return math.Abs(x - t)
	case lossHuber:
		d, delta := math.Abs(x-t), float64(o.delta)
		if d < delta {
			return 0.5 * d * d
		}
		return delta * (d - float64(0.5*delta))
	case lossBCE:
		// max(x, 0) − x·t + log(1 + e^−|x|): no overflow for any x.
		return math.Max(x, 0) - float64(x*t) + kernels.Log1p64(kernels.Exp64(-math.Abs(x)))
	}
	return x
}

// deriv is the derivative of the element's loss with respect to x
// (wrt 0) or to the target (wrt 1), in float64.
func (o lossOp) deriv(x, t float64, wrt int) float64 {
	var g float64
	switch o.fn {
	case lossMSE:
		g = 2 * (x - t)
	case lossL1:
		switch d := x - t; {
		case d > 0:
			g = 1
		case d < 0:
			g = -1
		}
	case lossHuber:
		d, delta := x-t, float64(o.delta)
		switch {
		case math.Abs(d) < delta:
			g = d
		case d > 0:
			g = delta
		default:
			g = -delta
		}
	case lossBCE:
		if wrt == 1 {
			return -x
		}
		return 1/(1+kernels.Exp64(-x)) - t
	default:
		return 1
	}
	if wrt == 1 {
		return -g
	}
	return g
}

// lossWeights returns the rows' weights (the mask, or nil for every row 1)
// and their sum, refusing a weight that is negative or not finite.
func lossWeights(n *graph.Node, mask []float32, rows int) (float64, error) {
	if mask == nil {
		return float64(rows), nil
	}
	var w float64
	for r, m := range mask {
		if !(m >= 0) || math.IsInf(float64(m), 0) {
			return 0, fmt.Errorf("ops: %s: mask %q row %d is %v, want a finite weight ≥ 0 (1 keeps the row, 0 leaves it out)",
				n.Name(), n.Input(n.NumInputs()-1).Name(), r, m)
		}
		w += float64(m)
	}
	return w, nil
}

// shape returns x's rows (its first axis, or 1 for a scalar) and the
// values per row.
func lossRows(s graph.Shape) (rows, cols int) {
	if len(s) == 0 {
		return 1, 1
	}
	return s[0], s.Numel() / max(s[0], 1)
}

func (o lossOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, out := b.In[0].F32, b.Out.F32
	var t, mask []float32
	if o.fn != lossMean {
		t = b.In[1].F32
	}
	if o.masked {
		mask = b.In[len(b.In)-1].F32
	}
	rows, cols := lossRows(b.In[0].Shape)
	// Each piece of rows sums into its own total; the totals are added
	// in piece order, so the result does not depend on scheduling.
	var totals []float64
	chunks := newPartChunker(rows, len(x), func(part, lo, hi int) {
		var total float64
		for r := lo; r < hi; r++ {
			w := 1.0
			if mask != nil {
				if mask[r] == 0 {
					continue // a padded row's values never count, NaN included
				}
				w = float64(mask[r])
			}
			var s float64
			for j := r * cols; j < (r+1)*cols; j++ {
				tv := 0.0
				if t != nil {
					tv = float64(t[j])
				}
				s += o.value(float64(x[j]), tv)
			}
			total += float64(w * s)
		}
		totals[part] = total
	})
	totals = make([]float64, chunks.parts)
	run := chunks.kernel()
	node := b.Node
	return func() error {
		w, err := lossWeights(node, mask, rows)
		if err != nil {
			return err
		}
		if err := run(); err != nil {
			return err
		}
		var total float64
		for _, v := range totals {
			total += v
		}
		out[0] = 0
		if w > 0 {
			out[0] = float32(total / (w * float64(cols)))
		}
		return nil
	}, nil
}

func (o lossOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	gs := make([]*graph.Node, n.NumInputs())
	in := append(n.Inputs(), dy)
	gs[0] = apply(lossGradOp{o, 0}, "", in...)
	if o.fn != lossMean && need[1] {
		gs[1] = apply(lossGradOp{o, 1}, "", in...)
	}
	return gs
}

// lossGradOp is a loss's gradient with respect to x (wrt 0) or its
// target (wrt 1): inputs those of the loss, then dloss.
type lossGradOp struct {
	loss lossOp
	wrt  int
}

func (o lossGradOp) Type() string     { return o.Kind().String() }
func (o lossGradOp) Kind() graph.Kind { return lossGradKinds[o.loss.fn] }
func (o lossGradOp) Attrs() string {
	a := o.loss.Attrs()
	if o.wrt == 1 {
		if a != "" {
			a += " "
		}
		a += "wrt=target"
	}
	return a
}

func (o lossGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	k := o.loss.inputs()
	if err := wantInputs(in, k+1); err != nil {
		return nil, graph.Invalid, err
	}
	if err := o.loss.checkLossInputs(in); err != nil {
		return nil, graph.Invalid, err
	}
	if dy := in[k]; dy.DType() != graph.Float32 || dy.Shape().Numel() != 1 {
		return nil, graph.Invalid, fmt.Errorf("dloss %q %v %v is not a float32 scalar", dy.Name(), dy.DType(), dy.Shape())
	}
	return in[o.wrt].Shape(), graph.Float32, nil
}

func (o lossGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	l := o.loss
	k := l.inputs()
	x, dl, dx := b.In[0].F32, b.In[k].F32, b.Out.F32
	var t, mask []float32
	if l.fn != lossMean {
		t = b.In[1].F32
	}
	if l.masked {
		mask = b.In[k-1].F32
	}
	rows, cols := lossRows(b.In[0].Shape)
	var scale float64
	wrt := o.wrt
	run := newChunkerCost(rows, len(x), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := dx[r*cols : (r+1)*cols]
			w := 1.0
			if mask != nil {
				if mask[r] == 0 {
					clear(row) // exactly no gradient from a padded row
					continue
				}
				w = float64(mask[r])
			}
			s := w * scale
			for j := range row {
				i := r*cols + j
				tv := 0.0
				if t != nil {
					tv = float64(t[i])
				}
				row[j] = float32(s * l.deriv(float64(x[i]), tv, wrt))
			}
		}
	}).kernel()
	node := b.Node
	return func() error {
		w, err := lossWeights(node, mask, rows)
		if err != nil {
			return err
		}
		scale = 0
		if w > 0 {
			scale = float64(dl[0]) / (w * float64(cols))
		}
		return run()
	}, nil
}

// lossNode applies a loss op to x, its target (nil for MaskedMean) and
// an optional mask.
func lossNode(o lossOp, x, target, mask *graph.Node) *graph.Node {
	in := []*graph.Node{x}
	if o.fn != lossMean {
		in = append(in, target)
	}
	if mask != nil {
		o.masked = true
		in = append(in, mask)
	}
	return apply(o, "", in...)
}

// MaskedMean returns the mean of x [rows, ...] over the rows mask [rows]
// keeps: Σ_r mask[r]·Σ x[r, …] / (Σ_r mask[r] · values per row). A mask of
// ones and zeros (data.Batch.Mask, train.Model.Mask) averages the real
// rows of a padded batch; rows whose mask is 0 are skipped (a NaN there
// does not count) and get exactly zero gradient; other weights ≥ 0 weight
// their rows. A nil mask gives the plain mean; a mask of zeros gives 0.
// A negative or non-finite weight makes Program.Run fail naming the mask.
func MaskedMean(x, mask *graph.Node) *graph.Node { return lossNode(lossOp{fn: lossMean}, x, nil, mask) }

// MSELoss returns the mean squared error between pred and target, which
// must have the same shape (it never broadcasts): PyTorch's
// mse_loss(reduction="mean"), the mean of (pred − target)² over every
// value of the rows mask keeps (see MaskedMean; nil keeps every row).
func MSELoss(pred, target, mask *graph.Node) *graph.Node {
	return lossNode(lossOp{fn: lossMSE}, pred, target, mask)
}

// L1Loss returns the mean absolute error |pred − target| (PyTorch's
// l1_loss, reduction "mean"), over the rows mask keeps as MSELoss. Its
// gradient at pred = target is 0.
func L1Loss(pred, target, mask *graph.Node) *graph.Node {
	return lossNode(lossOp{fn: lossL1}, pred, target, mask)
}

// HuberLoss returns PyTorch's huber_loss (reduction "mean") with the
// given delta > 0: ½d² where |d| = |pred − target| < delta, else
// delta·(|d| − ½delta), over the rows mask keeps as MSELoss. (PyTorch's
// smooth_l1_loss with beta is HuberLoss / beta.)
func HuberLoss(pred, target, mask *graph.Node, delta float32) *graph.Node {
	return lossNode(lossOp{fn: lossHuber, delta: delta}, pred, target, mask)
}

// BCEWithLogits returns the binary cross-entropy of sigmoid(logits)
// against targets in [0, 1] of the same shape (PyTorch's
// binary_cross_entropy_with_logits, reduction "mean"), computed as
// max(x, 0) − x·t + log(1 + e^−|x|) so that no logit overflows, over the
// rows mask keeps as MSELoss.
func BCEWithLogits(logits, target, mask *graph.Node) *graph.Node {
	return lossNode(lossOp{fn: lossBCE}, logits, target, mask)
}
