package ops

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// ClassifierRows is how many rows of logits the fused classifier holds
// at once: enough that its GEMM runs at full rate (op(B), the whole
// classifier weight, is packed once per band), few enough that a band of
// a large vocabulary (50,304 classes: 51 MB) is a fraction of the
// logits of a long context.
const ClassifierRows = 256

// classifierCrossEntropyOp is a classifier's FP8 GEMM, its cross-entropy
// and the cross-entropy's gradient cast to FP8, computed a band of rows
// at a time: see ClassifierCrossEntropy.
type classifierCrossEntropyOp struct {
	q QuantizeConfig
}

// rowLossKey is the metadata the fused classifier leaves for its loss:
// each row's cross-entropy term.
var rowLossKey = graph.NewValueKey[[]float32]("classifier row losses")

func (o classifierCrossEntropyOp) Type() string     { return KindClassifierCrossEntropy.String() }
func (o classifierCrossEntropyOp) Kind() graph.Kind { return KindClassifierCrossEntropy }
func (o classifierCrossEntropyOp) Attrs() string    { return quantizeOp{o.q}.Attrs() }

// dims returns the rows, classes and inner size of the classifier.
func (classifierCrossEntropyOp) dims(xs, ws graph.Shape) (rows, classes, k int) {
	rows, k = view2D(xs)
	return rows, ws[0], k
}

func (o classifierCrossEntropyOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 4 && len(in) != 5 {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want x, w, labels, dloss and an optional bias", len(in))
	}
	x, w, labels, dl := in[0], in[1], in[2], in[3]
	for _, op := range []*graph.Node{x, w} {
		if !op.DType().IsQuantized() || op.DType() == graph.Float4E2M1 {
			return nil, graph.Invalid, fmt.Errorf("operand %q is %v, want an FP8 dtype", op.Name(), op.DType())
		}
	}
	xs, ws := x.Shape(), w.Shape()
	if len(xs) < 2 || len(ws) != 2 || xs[len(xs)-1] != ws[1] {
		return nil, graph.Invalid, fmt.Errorf("x %q %v and w %q %v: want x [..., k] and w [classes, k]", x.Name(), xs, w.Name(), ws)
	}
	if labels.DType() != graph.Int32 || !labels.Shape().Equal(xs[:len(xs)-1]) {
		return nil, graph.Invalid, fmt.Errorf("labels %q %v %v do not match x %q %v (want int32, x's shape without its last axis)", labels.Name(), labels.Shape(), labels.DType(), x.Name(), xs)
	}
	if dl.DType() != graph.Float32 || dl.Shape().Numel() != 1 {
		return nil, graph.Invalid, fmt.Errorf("dloss %q is %v %v, want one float32", dl.Name(), dl.Shape(), dl.DType())
	}
	rows, classes, _ := o.dims(xs, ws)
	if len(in) == 5 && (in[4].DType() != graph.Float32 || !in[4].Shape().Equal(graph.Shape{classes})) {
		return nil, graph.Invalid, fmt.Errorf("bias %q is %v %v, want float32 [%d]", in[4].Name(), in[4].Shape(), in[4].DType(), classes)
	}
	if err := validateQuantize(o.q); err != nil {
		return nil, graph.Invalid, err
	}
	if o.q.Kind != fp8.DelayedScaling {
		return nil, graph.Invalid, fmt.Errorf("ClassifierCrossEntropy casts its gradient with delayed tensorwise scaling, got %v", o.q.Scaling())
	}
	return graph.Shape{rows, classes}, formatDType(o.q.Format), nil
}

// tensorwise reports whether an operand has one scale for the whole
// tensor, so that a band of its rows is a GEMM operand as it stands.
func (s *fp8Scales) tensorwise() bool {
	return s.Config.Tensorwise()
}

func (o classifierCrossEntropyOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	sa, okA := graph.Meta(b.In[0], scalesKey)
	sb, okB := graph.Meta(b.In[1], scalesKey)
	if !okA || !okB {
		return nil, fmt.Errorf("operands must come from casts (they carry the scales)")
	}
	if !sa.tensorwise() || !sb.tensorwise() {
		return nil, fmt.Errorf("the fused classifier multiplies tensorwise-scaled operands (x is %v, w is %v)", sa.Config.Scaling(), sb.Config.Scaling())
	}
	if err := kernels.CheckEnv(); err != nil {
		return nil, err
	}
	n, c, k := o.dims(b.In[0].Shape, b.In[1].Shape)
	x, w, labels, dl, out := b.In[0].U8, b.In[1].U8, b.In[2].I32, b.In[3].F32, b.Out.U8
	var bias []float32
	if len(b.In) == 5 {
		bias = b.In[4].F32
	}
	sc, err := newScales(o.q, graph.Shape{n, c})
	if err != nil {
		return nil, err
	}
	graph.SetMeta(b.Out, scalesKey, sc)
	terms := make([]float32, n)
	graph.SetMeta(b.Out, rowLossKey, terms)
	record := b.Training
	m, f := o.q.Meta, o.q.Format
	if record {
		b.AtStepEnd(func() error { m.Update(); return nil })
	}

	band := min(n, ClassifierRows)
	logits := make([]float32, band*c)
	g := fp8.NewScaledGEMM()
	g.Block = blockEpilogue(logits, c, bias, nil)
	workers := parallel.Workers()
	amax := make([]uint32, workers) // float32 bits: NaN sorts above +inf
	var scale, lossScale float32
	var castErr error
	var r0 int // the band's first row
	var group parallel.Group
	parts := 1
	body := func(part int) {
		rows := min(band, n-r0)
		a := amax[part]
		for i := rows * part / parts; i < rows*(part+1)/parts; i++ {
			r := r0 + i
			row := logits[i*c : i*c+c]
			if label := labels[r]; label != IgnoreLabel {
				// The row's softmax in place, with CrossEntropy's
				// term from the same max and sum; then
				// CrossEntropyGrad's row, cast.
				logit := row[label]
				mx, sum := softmaxSum(row, row)
				terms[r] = mx + kernels.Log32(sum) - logit
			}
			ra, err := gradRowQuantize(out[r*c:r*c+c], row, labels[r], lossScale, f, scale)
			if err != nil {
				castErr = err // the format, checked by Infer: never
			}
			a = max(a, ra)
		}
		amax[part] = a
	}
	if band*c >= parallelMin && band >= workers {
		parts = workers
	}
	return func() error {
		count, err := checkLabels(labels, c)
		if err != nil {
			return err
		}
		lossScale = dl[0] / float32(max(count, 1))
		sc.ScaleInv, scale = m.ScaleInv, m.Scale
		clear(amax)
		for r0 = 0; r0 < n; r0 += band {
			rows := min(band, n-r0)
			opA := sa.Operand(x[r0*k:(r0+rows)*k], false, false)
			if err := g.Run(rows, c, k, opA, sb.Operand(w, true, false), logits[:rows*c]); err != nil {
				return err
			}
			group.For(parts, body)
		}
		if castErr != nil {
			return castErr
		}
		sc.Amax = partsAmax(amax)
		if record {
			m.Record(sc.Amax)
			// An ignored row's gradient is zero.
			m.CountStart(out, (len(labels)-count)*c)
		}
		return nil
	}, nil
}

// ClassifierCrossEntropy fuses a classifier's FP8 GEMM with its
// cross-entropy loss and the loss's gradient: for each band of rows it
// computes the logits x·wᵀ (+ bias; x and w cast with tensorwise scales),
// each row's cross-entropy term against labels, and the row's gradient
// (softmax − onehot)·dloss/N cast to FP8 per q (delayed tensorwise
// scaling), so the classifier's float32 logits — as large as rows ×
// classes — never exist whole. Its value is the FP8 gradient [rows,
// classes] that the classifier's dgrad and wgrad GEMMs read; its loss is
// ClassifierLoss of it. Codes, scales, the recorded amax and the loss
// are those of ScaledMatMul, CrossEntropy, CrossEntropyGrad and Quantize
// computed separately, bit for bit. The FP8 compiler emits it for a
// classifier whose logits feed only its loss (ConvertLN).
func ClassifierCrossEntropy(name string, x, w, bias, labels, dloss *graph.Node, q QuantizeConfig) *graph.Node {
	if bias == nil {
		return apply(classifierCrossEntropyOp{q: q}, name, x, w, labels, dloss)
	}
	return apply(classifierCrossEntropyOp{q: q}, name, x, w, labels, dloss, bias)
}

// classifierLossOp is the mean of the row terms a fused classifier left.
type classifierLossOp struct{}

func (classifierLossOp) Type() string     { return KindClassifierLoss.String() }
func (classifierLossOp) Kind() graph.Kind { return KindClassifierLoss }

func (classifierLossOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if !in[0].Is(KindClassifierCrossEntropy) {
		return nil, graph.Invalid, fmt.Errorf("%q is a %s, want a ClassifierCrossEntropy", in[0].Name(), in[0].Op().Type())
	}
	if rows, _ := view2D(in[0].Shape()); in[1].DType() != graph.Int32 || in[1].Shape().Numel() != rows {
		return nil, graph.Invalid, fmt.Errorf("labels %q %v %v for %d rows", in[1].Name(), in[1].Shape(), in[1].DType(), rows)
	}
	return graph.Shape{}, graph.Float32, nil
}

func (classifierLossOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	terms, ok := graph.Meta(b.In[0], rowLossKey)
	if !ok {
		return nil, fmt.Errorf("%s carries no row losses", b.In[0].Shape)
	}
	labels, out := b.In[1].I32, b.Out.F32
	n, c := view2D(b.In[0].Shape)
	// CrossEntropy's pieces of rows over the same logits, each summed
	// in float64, the pieces added in order: the same value.
	parts := newPartChunker(n, n*c, func(int, int, int) {}).parts
	return func() error {
		count, err := checkLabels(labels, c)
		if err != nil {
			return err
		}
		var total float64
		for p := 0; p < parts; p++ {
			var t float64
			for r := p * n / parts; r < (p+1)*n/parts; r++ {
				if labels[r] != IgnoreLabel {
					t += float64(terms[r])
				}
			}
			total += t
		}
		out[0] = 0
		if count > 0 {
			out[0] = float32(total / float64(count))
		}
		return nil
	}, nil
}

// ClassifierLoss returns the mean cross-entropy over the rows of a
// ClassifierCrossEntropy node (rows labelled IgnoreLabel left out):
// CrossEntropy of the classifier's logits, bit for bit, from the terms
// the fused node computed.
func ClassifierLoss(name string, fused, labels *graph.Node) *graph.Node {
	return apply(classifierLossOp{}, name, fused, labels)
}
