package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
)

// groupedMode is which product a grouped GEMM node computes.
type groupedMode uint8

const (
	groupedForward groupedMode = iota // y_e = x_e · W_eᵀ
	groupedGradX                      // dx_e = dy_e · W_e
	groupedGradW                      // dW_e = dy_eᵀ · x_e
)

// groupedOp is one GEMM per expert over the experts' row groups: the
// rows of a [N, ·] operand split by counts [E] (int32, summing to N), W
// [E, out, in]. Each expert's product is the one GEMM of its rows that
// MatMul would run, bit for bit; an expert with no rows gives none (its
// weight gradient is zero).
type groupedOp struct {
	mode groupedMode
	// first is the layer's index of w's first expert (an
	// expert-parallel rank holds experts first, first+1, …).
	first int
}

// GroupedFirstExpert returns the layer's index of the first expert whose
// weight a grouped GEMM node (GroupedLinear or its gradients) holds: 0,
// or an expert-parallel rank's first (GroupedLinearExperts).
func GroupedFirstExpert(n *graph.Node) int {
	if o, ok := n.Op().(groupedOp); ok {
		return o.first
	}
	return 0
}

// paddedRows reports whether a grouped GEMM's group sizes (its input
// counts) come from an expert-parallel receive (EPLocalCounts): the
// groups may then end before the operand's last row, the rest being
// padding the GEMM leaves out (its output rows there are zero).
func paddedRows(counts *graph.Node) bool { return counts != nil && counts.Is(KindEPLocalCounts) }

func (o groupedOp) Type() string { return o.Kind().String() }
func (o groupedOp) Kind() graph.Kind {
	switch o.mode {
	case groupedGradX:
		return KindGroupedLinearGradX
	case groupedGradW:
		return KindGroupedLinearGradW
	}
	return KindGroupedLinear
}

// Inputs: forward (x [N in], counts, w [E out in]); gradX (dy [N out],
// counts, w); gradW (dy [N out], counts, x [N in]) with the weight's
// shape from the op.
func (o groupedOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	rows, counts, third := in[0], in[1], in[2]
	if rows.DType() != graph.Float32 || rows.Shape().Rank() != 2 {
		return nil, graph.Invalid, fmt.Errorf("rows %q are %v %v, want float32 [rows width]", rows.Name(), rows.DType(), rows.Shape())
	}
	if counts.DType() != graph.Int32 || counts.Shape().Rank() != 1 {
		return nil, graph.Invalid, fmt.Errorf("group sizes %q are %v %v, want int32 [experts]", counts.Name(), counts.DType(), counts.Shape())
	}
	e := counts.Shape()[0]
	if third.DType() != graph.Float32 {
		return nil, graph.Invalid, fmt.Errorf("%q is %v, want float32", third.Name(), third.DType())
	}
	n, width := rows.Shape()[0], rows.Shape()[1]
	ts := third.Shape()
	switch o.mode {
	case groupedGradW:
		if ts.Rank() != 2 || ts[0] != n {
			return nil, graph.Invalid, fmt.Errorf("x %q has shape %v, want [%d in]", third.Name(), ts, n)
		}
		return graph.Shape{e, width, ts[1]}, graph.Float32, nil
	default:
		if ts.Rank() != 3 || ts[0] != e {
			return nil, graph.Invalid, fmt.Errorf("expert weights %q have shape %v, want [%d out in] (one per expert)", third.Name(), ts, e)
		}
		if o.mode == groupedForward {
			if ts[2] != width {
				return nil, graph.Invalid, fmt.Errorf("x %q has width %d, the expert weights %q take %d", rows.Name(), width, third.Name(), ts[2])
			}
			return graph.Shape{n, ts[1]}, graph.Float32, nil
		}
		if ts[1] != width {
			return nil, graph.Invalid, fmt.Errorf("gradient %q has width %d, the expert weights %q give %d", rows.Name(), width, third.Name(), ts[1])
		}
		return graph.Shape{n, ts[2]}, graph.Float32, nil
	}
}

// checkCounts checks group sizes against an operand of n rows (at most
// n when padded) and returns their total.
func checkCounts(counts []int32, n int, name string, padded bool) (int, error) {
	total := 0
	for e, c := range counts {
		if c < 0 {
			return 0, fmt.Errorf("group sizes %q: expert %d has %d rows", name, e, c)
		}
		total += int(c)
	}
	if total != n && !(padded && total < n) {
		return 0, fmt.Errorf("group sizes %q add up to %d rows, the operand has %d", name, total, n)
	}
	return total, nil
}

func (o groupedOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	g, err := newGemm()
	if err != nil {
		return nil, err
	}
	rows, counts, third, out := b.In[0].F32, b.In[1].I32, b.In[2].F32, b.Out.F32
	n, width := b.In[0].Shape[0], b.In[0].Shape[1]
	name, padded := b.Node.Input(1).Name(), paddedRows(b.Node.Input(1))
	outWidth := 0 // the output's row width (forward and gradX)
	var run func(e, r0, c int)
	switch o.mode {
	case groupedForward: // y [N out] = x [c in] · W_eᵀ
		nOut, in := b.In[2].Shape[1], b.In[2].Shape[2]
		outWidth = nOut
		run = func(e, r0, c int) {
			g.Run(false, true, c, nOut, in, 1, rows[r0*in:], in, third[e*nOut*in:], in, 0, out[r0*nOut:], nOut)
		}
	case groupedGradX: // dx [N in] = dy [c out] · W_e
		nOut, in := b.In[2].Shape[1], b.In[2].Shape[2]
		outWidth = in
		run = func(e, r0, c int) {
			g.Run(false, false, c, in, nOut, 1, rows[r0*nOut:], nOut, third[e*nOut*in:], in, 0, out[r0*in:], in)
		}
	default: // dW_e [out in] = dy_eᵀ [out c] · x_e [c in]
		nOut, in := width, b.In[2].Shape[1]
		run = func(e, r0, c int) {
			w := out[e*nOut*in : (e+1)*nOut*in]
			if c == 0 {
				clear(w)
				return
			}
			g.Run(true, false, nOut, in, c, 1, rows[r0*nOut:], nOut, third[r0*in:], in, 0, w, in)
		}
	}
	return func() error {
		total, err := checkCounts(counts, n, name, padded)
		if err != nil {
			return err
		}
		r0 := 0
		for e, c := range counts {
			if c > 0 || o.mode == groupedGradW {
				run(e, r0, int(c))
			}
			r0 += int(c)
		}
		if total < n && outWidth > 0 {
			clear(out[total*outWidth:])
		}
		return nil
	}, nil
}

func (o groupedOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	if o.mode != groupedForward {
		return nil
	}
	x, counts, w := n.Input(0), n.Input(1), n.Input(2)
	out := make([]*graph.Node, 3)
	if need[0] {
		out[0] = apply(groupedOp{groupedGradX, o.first}, n.Name()+".dx", dy, counts, w)
		out[0].SetRole(graph.Dgrad, n)
	}
	if need[2] {
		out[2] = apply(groupedOp{groupedGradW, o.first}, n.Name()+".dw", dy, counts, x)
		out[2].SetRole(graph.Wgrad, n)
	}
	return out
}

// GroupedLinear multiplies each expert's rows by its weight: x [N, in]
// holds the experts' row groups in order (Dispatch's output), counts
// [E] (int32, ExpertCounts) their sizes, w [E, out, in] the experts'
// weights; the result [N, out] has x_e · W_eᵀ in each group's rows.
// Each group's product, and its gradients, are the GEMM MatMul runs on
// those rows, bit for bit; an expert that received no token gets a zero
// weight gradient. Group sizes that are negative or do not add up to N
// fail the run, naming them.
func GroupedLinear(name string, x, counts, w *graph.Node) *graph.Node {
	return GroupedLinearExperts(name, x, counts, w, 0)
}

// GroupedLinearExperts is GroupedLinear for an expert-parallel rank whose
// weights w are the layer's experts first, first+1, … (the FP8 passes
// name each expert's scaling state by its index in the layer). With
// group sizes from EPLocalCounts the row groups may end before x's last
// row (the receive buffer's padding, left out; the output is zero
// there).
func GroupedLinearExperts(name string, x, counts, w *graph.Node, first int) *graph.Node {
	y := apply(groupedOp{mode: groupedForward, first: first}, name, x, counts, w)
	y.SetRole(graph.Fprop, nil)
	return y
}
