package ops

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
)

// AmaxRecord adds a node that records max|x| of a float32 tensor into a
// delayed-scaling meta on every training step, and updates the meta's
// scale at the step's end, without casting anything: Transformer
// Engine's calibration (fp8_autocast(calibrating=True)), where a
// high-precision program records the amaxes from which FP8 training then
// starts. The node's value is the amax (a scalar); list it among the
// program's outputs so that it runs. It has no gradient.
func AmaxRecord(name string, x *graph.Node, m *fp8.Meta) *graph.Node {
	return x.Graph().Apply(amaxRecordOp{m: m}, name, x)
}

type amaxRecordOp struct{ m *fp8.Meta }

func (amaxRecordOp) Type() string { return "AmaxRecord" }

func (o amaxRecordOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 1 {
		return nil, 0, fmt.Errorf("AmaxRecord takes 1 input, got %d", len(in))
	}
	if in[0].DType() != graph.Float32 {
		return nil, 0, fmt.Errorf("AmaxRecord of %v: want float32", in[0].DType())
	}
	if o.m == nil {
		return nil, 0, fmt.Errorf("AmaxRecord: no meta to record into")
	}
	return graph.Shape{}, graph.Float32, nil
}

func (o amaxRecordOp) Attrs() string { return o.m.Format.String() }

func (o amaxRecordOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, out, m := b.In[0].F32, b.Out.F32, o.m
	if b.Training {
		b.AtStepEnd(func() error { m.Update(); return nil })
	}
	return func() error {
		a := fp8.Amax(x)
		out[0] = a
		if b.Training {
			m.Record(a)
		}
		return nil
	}, nil
}
