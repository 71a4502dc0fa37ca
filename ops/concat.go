package ops

import (
	"fmt"
	"strconv"

	"github.com/octetml/octet/graph"
)

// concatOp joins float32 tensors along one axis; their other extents
// agree.
type concatOp struct{ axis int }

func (o concatOp) Type() string     { return KindConcat.String() }
func (o concatOp) Kind() graph.Kind { return KindConcat }
func (o concatOp) Attrs() string    { return "axis=" + strconv.Itoa(o.axis) }

func (o concatOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) == 0 {
		return nil, graph.Invalid, fmt.Errorf("Concat of no tensors")
	}
	if err := float32In(in, len(in)); err != nil {
		return nil, graph.Invalid, err
	}
	first := in[0].Shape()
	ax, err := normAxis(o.axis, len(first))
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("input %q %v: %w", in[0].Name(), first, err)
	}
	out := first.Clone()
	for _, x := range in[1:] {
		s := x.Shape()
		ok := len(s) == len(first)
		for d := 0; ok && d < len(s); d++ {
			ok = d == ax || s[d] == first[d]
		}
		if !ok {
			return nil, graph.Invalid, fmt.Errorf("%q %v and %q %v differ outside axis %d", in[0].Name(), first, x.Name(), s, ax)
		}
		out[ax] += s[ax]
	}
	return out, graph.Float32, nil
}

func (o concatOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	s := b.Out.Shape
	ax, err := normAxis(o.axis, len(s))
	if err != nil {
		return nil, err
	}
	type part struct {
		x        []float32
		off, run int
	}
	// Each input is outer runs of run values; in the output a run of all
	// inputs' runs side by side.
	var parts []part
	outer, total := 1, 0
	for _, d := range s[:ax] {
		outer *= d
	}
	for _, in := range b.In {
		n := len(in.F32) / max(outer, 1)
		parts = append(parts, part{x: in.F32, off: total, run: n})
		total += n
	}
	y := b.Out.F32
	return newChunkerCost(outer, len(y), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			for _, p := range parts {
				copy(y[r*total+p.off:r*total+p.off+p.run], p.x[r*p.run:(r+1)*p.run])
			}
		}
	}).kernel(), nil
}

func (o concatOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	ax, _ := normAxis(o.axis, len(n.Shape()))
	gs := make([]*graph.Node, len(need))
	start := 0
	for i, x := range n.Inputs() {
		end := start + x.Shape()[ax]
		if need[i] {
			gs[i] = Slice(dy, ax, start, end)
		}
		start = end
	}
	return gs
}

// Concat joins float32 tensors along axis (negative axes count from the
// end): their other extents must agree. Its gradient slices the incoming
// gradient back apart.
func Concat(axis int, xs ...*graph.Node) *graph.Node {
	return apply(concatOp{axis: axis}, "", xs...)
}
