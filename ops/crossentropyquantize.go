package ops

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/parallel"
)

// crossEntropyGradQuantizeOp is the cross-entropy gradient written
// straight as FP8 with delayed tensorwise scaling: each row of
// (softmax(logits) − onehot(labels))·dloss/N is computed into a float32
// row and cast at once, so the classifier's float32 output gradient
// (as large as its logits) never exists. Codes, scales and the recorded
// amax are those of CrossEntropyGrad followed by Quantize, bit for bit.
type crossEntropyGradQuantizeOp struct {
	q QuantizeConfig
}

func (o crossEntropyGradQuantizeOp) Type() string { return KindCrossEntropyGradQuantize.String() }
func (o crossEntropyGradQuantizeOp) Kind() graph.Kind {
	return KindCrossEntropyGradQuantize
}
func (o crossEntropyGradQuantizeOp) Attrs() string { return quantizeOp{o.q}.Attrs() }

func (o crossEntropyGradQuantizeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	s, _, err := crossEntropyGradOp{}.Infer(in)
	if err != nil {
		return nil, graph.Invalid, err
	}
	rows, classes := view2D(s)
	if err := validateQuantize(o.q); err != nil {
		return nil, graph.Invalid, err
	}
	if o.q.Kind != fp8.DelayedScaling {
		return nil, graph.Invalid, fmt.Errorf("CrossEntropyGradQuantize casts with delayed tensorwise scaling, got %v", o.q.Scaling())
	}
	return graph.Shape{rows, classes}, formatDType(o.q.Format), nil
}

// InPlace lets the FP8 gradient take the start of the logits' buffer
// when nothing else reads them later: then the float32 logits and their
// FP8 gradient are never both whole. The rows are then computed one at a
// time in order, each read into a float32 row before its codes are
// written, and codes of row r lie in the bytes of logits rows ≤ r.
func (crossEntropyGradQuantizeOp) InPlace() int { return 0 }

func (o crossEntropyGradQuantizeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, labels, dl, out := b.In[0].F32, b.In[1].I32, b.In[2].F32, b.Out.U8
	s := b.In[0].Shape
	c := s[len(s)-1]
	sc, err := newScales(o.q, s)
	if err != nil {
		return nil, err
	}
	graph.SetMeta(b.Out, scalesKey, sc)
	record := b.Training
	m, f := o.q.Meta, o.q.Format
	if record {
		b.AtStepEnd(func() error { m.Update(); return nil })
	}
	rows := make([][]float32, parallel.Workers())
	for i := range rows {
		rows[i] = make([]float32, c)
	}
	amax := make([]uint32, parallel.Workers()) // float32 bits: NaN sorts above +inf
	var scale, lossScale float32
	var castErr error
	elems := len(x)
	if overlaps(out, x) {
		elems = 0 // in place: one piece, rows in order
	}
	run := newPartChunker(len(labels), elems, func(part, lo, hi int) {
		row := rows[part]
		var a uint32
		for r := lo; r < hi; r++ {
			if labels[r] != IgnoreLabel {
				softmaxRow(row, x[r*c:r*c+c], false)
			}
			ra, err := gradRowQuantize(out[r*c:r*c+c], row, labels[r], lossScale, f, scale)
			if err != nil {
				castErr = err // the format, checked by Infer: never
			}
			a = max(a, ra)
		}
		amax[part] = a
	})
	return func() error {
		count, err := checkLabels(labels, c)
		if err != nil {
			return err
		}
		lossScale = dl[0] / float32(max(count, 1))
		sc.ScaleInv, scale = m.ScaleInv, m.Scale
		run.group.For(run.parts, run.run)
		if castErr != nil {
			return castErr
		}
		sc.Amax = partsAmax(amax[:run.parts])
		if record {
			m.Record(sc.Amax)
			// An ignored row's gradient is zero.
			m.CountStart(out, (len(labels)-count)*c)
		}
		return nil
	}, nil
}

// gradRowQuantize turns row, holding the softmax of a row of logits,
// into that row's cross-entropy gradient (softmax − onehot(label))·
// lossScale (zeros for an ignored row, whatever row held), writes its
// FP8 codes into dst and returns the float32 bits of its amax.
func gradRowQuantize(dst []uint8, row []float32, label int32, lossScale float32, f fp8.Format, scale float32) (uint32, error) {
	if label == IgnoreLabel {
		clear(row)
	} else {
		row[label] -= 1
		for i := range row {
			row[i] *= lossScale
		}
	}
	a, err := fp8.Quantize(dst, row, f, scale)
	return math.Float32bits(a), err
}

// CrossEntropyGradQuantize returns the gradient of CrossEntropy(logits,
// labels) given dloss, cast to FP8 per q (delayed tensorwise scaling
// only), as the 2-D matrix [rows, classes] a GEMM reads: CrossEntropyGrad
// followed by Quantize in one kernel, without the float32 gradient in
// between. The FP8 compiler emits it for a
// classifier whose output gradient feeds only its FP8 GEMMs.
func CrossEntropyGradQuantize(name string, logits, labels, dloss *graph.Node, q QuantizeConfig) *graph.Node {
	return apply(crossEntropyGradQuantizeOp{q: q}, name, logits, labels, dloss)
}

// overlaps reports whether the bytes of b lie within those of x.
func overlaps(b []uint8, x []float32) bool {
	if len(b) == 0 || len(x) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p < lo+4*uintptr(len(x))
}
