package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// crossEntropyOp is the mean softmax cross-entropy of logits [..., C]
// against int32 class labels [...].
type crossEntropyOp struct{}

func (crossEntropyOp) Type() string     { return KindCrossEntropy.String() }
func (crossEntropyOp) Kind() graph.Kind { return KindCrossEntropy }

func checkLogitsLabels(in []*graph.Node) error {
	ls, ys := in[0].Shape(), in[1].Shape()
	if len(ls) < 1 || !ls[:len(ls)-1].Equal(ys) {
		return fmt.Errorf("labels %q %v do not match logits %q %v (want the logits' shape without its last axis)",
			in[1].Name(), ys, in[0].Name(), ls)
	}
	return nil
}

func (crossEntropyOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := wantDType(in, graph.Float32, graph.Int32); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkLogitsLabels(in); err != nil {
		return nil, graph.Invalid, err
	}
	return graph.Shape{}, graph.Float32, nil
}

func labelError(label int32, row, classes int) error {
	return fmt.Errorf("label %d at row %d is outside [0, %d)", label, row, classes)
}

// IgnoreLabel is the label of a row that CrossEntropy leaves out (PyTorch's
// ignore_index default): a padded row of a last batch, a masked token.
const IgnoreLabel = -100

// checkLabels reports the first label outside [0, c) that is not
// IgnoreLabel, and returns how many rows count.
func checkLabels(labels []int32, c int) (int, error) {
	n := len(labels)
	for r, label := range labels {
		if label < 0 || int(label) >= c {
			if label == IgnoreLabel {
				n--
				continue
			}
			return 0, labelError(label, r, c)
		}
	}
	return n, nil
}

func (crossEntropyOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, labels, out := b.In[0].F32, b.In[1].I32, b.Out.F32
	s := b.In[0].Shape
	c := s[len(s)-1]
	// Each piece of rows sums its losses into its own total (and
	// exponentials into its own scratch row); the totals are added in
	// piece order, so the result does not depend on scheduling.
	var totals []float64
	var scratch [][]float32
	chunks := newPartChunker(len(labels), len(x), func(part, lo, hi int) {
		var total float64
		e := scratch[part]
		for r := lo; r < hi; r++ {
			if labels[r] == IgnoreLabel {
				continue
			}
			row := x[r*c : r*c+c]
			m := kernels.RowMax(row)
			sum := kernels.ExpSum(e, row, 1, m)
			total += float64(m + kernels.Log32(sum) - row[labels[r]])
		}
		totals[part] = total
	})
	totals = make([]float64, chunks.parts)
	for range chunks.parts {
		scratch = append(scratch, make([]float32, c))
	}
	run := chunks.kernel()
	return func() error {
		count, err := checkLabels(labels, c)
		if err != nil {
			return err
		}
		if err := run(); err != nil {
			return err
		}
		var total float64
		for _, t := range totals {
			total += t
		}
		out[0] = 0
		if count > 0 {
			out[0] = float32(total / float64(count))
		}
		return nil
	}, nil
}

func (crossEntropyOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(crossEntropyGradOp{}, "", n.Input(0), n.Input(1), dy), nil}
}

// crossEntropyGradOp computes (softmax(logits) − onehot(labels))·dloss/N.
type crossEntropyGradOp struct{}

func (crossEntropyGradOp) Type() string     { return KindCrossEntropyGrad.String() }
func (crossEntropyGradOp) Kind() graph.Kind { return KindCrossEntropyGrad }

func (crossEntropyGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	if err := wantDType(in, graph.Float32, graph.Int32, graph.Float32); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkLogitsLabels(in); err != nil {
		return nil, graph.Invalid, err
	}
	return in[0].Shape(), graph.Float32, nil
}

// InPlace lets the gradient take the logits' buffer when nothing else
// reads them later (a classifier's logits are as large as its
// gradient): each row's softmax reads the whole row before writing it.
func (crossEntropyGradOp) InPlace() int { return 0 }

func (crossEntropyGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, labels, dl, dx := b.In[0].F32, b.In[1].I32, b.In[2].F32, b.Out.F32
	s := b.In[0].Shape
	c := s[len(s)-1]
	var scale float32
	run := newChunkerCost(len(labels), len(x), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := dx[r*c : r*c+c]
			if labels[r] == IgnoreLabel {
				clear(row)
				continue
			}
			softmaxRow(row, x[r*c:r*c+c], false)
			row[labels[r]] -= 1
			kernels.Scale(row, scale)
		}
	}).kernel()
	return func() error {
		count, err := checkLabels(labels, c)
		if err != nil {
			return err
		}
		scale = dl[0] / float32(max(count, 1))
		return run()
	}, nil
}

// CrossEntropy returns the mean over rows of the softmax cross-entropy
// between logits [..., C] and int32 labels [...] in [0, C). Rows labelled
// IgnoreLabel are left out of the mean and get no gradient (a batch of
// only such rows has loss 0). Any other label outside [0, C) makes
// Program.Run fail with an error naming the row.
func CrossEntropy(logits, labels *graph.Node) *graph.Node {
	return apply(crossEntropyOp{}, "", logits, labels)
}
