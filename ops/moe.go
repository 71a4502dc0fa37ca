package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
)

// A Mixture-of-Experts layer sends each token to the K experts TopK
// chose for it: Dispatch gathers the tokens' rows into expert order
// (expert 0's tokens first, each expert's in token order), the experts
// run on their row groups (ExpertCounts gives the group sizes), and
// Combine adds each token's K expert outputs back, weighted, in the
// order of its K choices. The order is fixed, so a run's bits do not
// depend on how the work is split.

// routePlan fills counts [E] with the tokens each expert received and
// pos [T·K] with the row each (token, choice) has in expert order; idx
// must be in range.
func routePlan(idx []int32, experts int, counts, pos []int32, next []int32) {
	clear(counts)
	for _, e := range idx {
		counts[e]++
	}
	var off int32
	for e, c := range counts {
		next[e] = off
		off += c
	}
	for i, e := range idx {
		pos[i] = next[e]
		next[e]++
	}
}

// routeState is the plan a routing op binds: scratch for routePlan.
type routeState struct {
	experts, k      int
	counts, pos, nx []int32
	name            string
}

func newRouteState(b *graph.Binding, idxInput, experts int) *routeState {
	is := b.In[idxInput].Shape
	return &routeState{experts: experts, k: is[1], counts: make([]int32, experts), pos: make([]int32, is.Numel()),
		nx: make([]int32, experts), name: b.Node.Input(idxInput).Name()}
}

func (r *routeState) plan(idx []int32) error {
	if err := checkIndices(idx, r.k, r.experts, r.name); err != nil {
		return err
	}
	routePlan(idx, r.experts, r.counts, r.pos, r.nx)
	return nil
}

func checkRoute(x, idx *graph.Node, experts int) error {
	xs, is := x.Shape(), idx.Shape()
	switch {
	case experts < 1:
		return fmt.Errorf("%d experts, want ≥ 1", experts)
	case idx.DType() != graph.Int32 || len(is) != 2:
		return fmt.Errorf("expert indices %q are %v %v, want int32 [tokens k]", idx.Name(), idx.DType(), is)
	case x.DType() != graph.Float32 || len(xs) != 2:
		return fmt.Errorf("%q is %v %v, want float32 [rows width]", x.Name(), x.DType(), xs)
	}
	return nil
}

// expertCountsOp counts the tokens each expert received: int32 [E].
type expertCountsOp struct{ experts int }

func (expertCountsOp) Type() string     { return KindExpertCounts.String() }
func (expertCountsOp) Kind() graph.Kind { return KindExpertCounts }
func (o expertCountsOp) Attrs() string  { return fmt.Sprintf("experts=%d", o.experts) }

func (o expertCountsOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if o.experts < 1 {
		return nil, graph.Invalid, fmt.Errorf("%d experts, want ≥ 1", o.experts)
	}
	if in[0].DType() != graph.Int32 || in[0].Shape().Rank() != 2 {
		return nil, graph.Invalid, fmt.Errorf("expert indices %q are %v %v, want int32 [tokens k]", in[0].Name(), in[0].DType(), in[0].Shape())
	}
	return graph.Shape{o.experts}, graph.Int32, nil
}

func (o expertCountsOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 0, o.experts)
	idx, out := b.In[0].I32, b.Out.I32
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		copy(out, r.counts)
		return nil
	}, nil
}

// ExpertCounts returns how many of the tokens' choices idx [T, K] went
// to each of the experts: int32 [experts], the row groups of Dispatch's
// output.
func ExpertCounts(idx *graph.Node, experts int) *graph.Node {
	return apply(expertCountsOp{experts}, scopedName(idx, "counts"), idx)
}

// dispatchOp gathers x [T, H] into expert order: [T·K, H].
type dispatchOp struct{ experts int }

func (dispatchOp) Type() string     { return KindDispatch.String() }
func (dispatchOp) Kind() graph.Kind { return KindDispatch }
func (o dispatchOp) Attrs() string  { return fmt.Sprintf("experts=%d", o.experts) }

func (o dispatchOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkRoute(in[0], in[1], o.experts); err != nil {
		return nil, graph.Invalid, err
	}
	if in[0].Shape()[0] != in[1].Shape()[0] {
		return nil, graph.Invalid, fmt.Errorf("%q has %d tokens, the indices %q %d", in[0].Name(), in[0].Shape()[0], in[1].Name(), in[1].Shape()[0])
	}
	return graph.Shape{in[1].Shape().Numel(), in[0].Shape()[1]}, graph.Float32, nil
}

func (o dispatchOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 1, o.experts)
	x, idx, out := b.In[0].F32, b.In[1].I32, b.Out.F32
	h := b.In[0].Shape[1]
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for i, p := range r.pos {
			t := i / r.k
			copy(out[int(p)*h:int(p)*h+h], x[t*h:t*h+h])
		}
		return nil
	}, nil
}

func (o dispatchOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{apply(dispatchGradOp{o.experts}, n.Name()+".dx", dy, n.Input(1)), nil}
}

// dispatchGradOp adds each token's K rows back: [T·K, H] → [T, H], in
// the order of the token's choices.
type dispatchGradOp struct{ experts int }

func (dispatchGradOp) Type() string     { return KindDispatchGrad.String() }
func (dispatchGradOp) Kind() graph.Kind { return KindDispatchGrad }

func (o dispatchGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkRoute(in[0], in[1], o.experts); err != nil {
		return nil, graph.Invalid, err
	}
	if in[0].Shape()[0] != in[1].Shape().Numel() {
		return nil, graph.Invalid, fmt.Errorf("%q has %d rows, the indices %q %d choices", in[0].Name(), in[0].Shape()[0], in[1].Name(), in[1].Shape().Numel())
	}
	return graph.Shape{in[1].Shape()[0], in[0].Shape()[1]}, graph.Float32, nil
}

func (o dispatchGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 1, o.experts)
	dys, idx, out := b.In[0].F32, b.In[1].I32, b.Out.F32
	h := b.In[0].Shape[1]
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for i, p := range r.pos {
			t, src := i/r.k, dys[int(p)*h:int(p)*h+h]
			dst := out[t*h : t*h+h]
			if i%r.k == 0 {
				copy(dst, src)
				continue
			}
			for j, v := range src {
				dst[j] += v
			}
		}
		return nil
	}, nil
}

// Dispatch returns the rows of x [T, H] in expert order for the choices
// idx [T, K] of experts experts: [T·K, H], expert 0's tokens first, each
// expert's in token order. Its gradient adds a token's K rows in the
// order of its choices; none flows to idx. An index outside [0,
// experts) fails the run, naming the token.
func Dispatch(x, idx *graph.Node, experts int) *graph.Node {
	return apply(dispatchOp{experts}, scopedName(x, "dispatch"), x, idx)
}

// combineOp weights and adds each token's K expert rows: ys [T·K, H]
// in expert order, idx [T, K], w [T, K] → [T, H].
type combineOp struct{ experts int }

func (combineOp) Type() string     { return KindCombine.String() }
func (combineOp) Kind() graph.Kind { return KindCombine }
func (o combineOp) Attrs() string  { return fmt.Sprintf("experts=%d", o.experts) }

func checkCombine(ys, idx, w *graph.Node, experts int) error {
	if err := checkRoute(ys, idx, experts); err != nil {
		return err
	}
	if ys.Shape()[0] != idx.Shape().Numel() {
		return fmt.Errorf("%q has %d rows, the indices %q %d choices", ys.Name(), ys.Shape()[0], idx.Name(), idx.Shape().Numel())
	}
	if w.DType() != graph.Float32 || !w.Shape().Equal(idx.Shape()) {
		return fmt.Errorf("weights %q are %v %v, want float32 %v (the indices' shape)", w.Name(), w.DType(), w.Shape(), idx.Shape())
	}
	return nil
}

func (o combineOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkCombine(in[0], in[1], in[2], o.experts); err != nil {
		return nil, graph.Invalid, err
	}
	return graph.Shape{in[1].Shape()[0], in[0].Shape()[1]}, graph.Float32, nil
}

func (o combineOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 1, o.experts)
	ys, idx, w, out := b.In[0].F32, b.In[1].I32, b.In[2].F32, b.Out.F32
	h := b.In[0].Shape[1]
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for i, p := range r.pos {
			t, src, wt := i/r.k, ys[int(p)*h:int(p)*h+h], w[i]
			dst := out[t*h : t*h+h]
			if i%r.k == 0 {
				for j, v := range src {
					dst[j] = wt * v
				}
				continue
			}
			for j, v := range src {
				dst[j] += float32(wt * v) // rounded: no fused multiply-add on any machine
			}
		}
		return nil
	}, nil
}

func (o combineOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	ys, idx, w := n.Input(0), n.Input(1), n.Input(2)
	out := make([]*graph.Node, 3)
	if need[0] {
		out[0] = apply(combineGradRowsOp{o.experts}, n.Name()+".dys", dy, idx, w)
	}
	if need[2] {
		out[2] = apply(combineGradWeightsOp{o.experts}, n.Name()+".dw", dy, ys, idx)
	}
	return out
}

// combineGradRowsOp is Combine's gradient for its rows: the row of
// (token, choice) gets w·dy[token].
type combineGradRowsOp struct{ experts int }

func (combineGradRowsOp) Type() string     { return KindCombineGradRows.String() }
func (combineGradRowsOp) Kind() graph.Kind { return KindCombineGradRows }

func (o combineGradRowsOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkRoute(in[0], in[1], o.experts); err != nil {
		return nil, graph.Invalid, err
	}
	if in[0].Shape()[0] != in[1].Shape()[0] || !in[2].Shape().Equal(in[1].Shape()) {
		return nil, graph.Invalid, fmt.Errorf("gradient %q %v, indices %q %v and weights %q %v do not agree", in[0].Name(), in[0].Shape(), in[1].Name(), in[1].Shape(), in[2].Name(), in[2].Shape())
	}
	return graph.Shape{in[1].Shape().Numel(), in[0].Shape()[1]}, graph.Float32, nil
}

func (o combineGradRowsOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 1, o.experts)
	dy, idx, w, out := b.In[0].F32, b.In[1].I32, b.In[2].F32, b.Out.F32
	h := b.In[0].Shape[1]
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for i, p := range r.pos {
			t, wt := i/r.k, w[i]
			dst, src := out[int(p)*h:int(p)*h+h], dy[t*h:t*h+h]
			for j, v := range src {
				dst[j] = wt * v
			}
		}
		return nil
	}, nil
}

// combineGradWeightsOp is Combine's gradient for its weights: the
// weight of (token, choice) gets dy[token]·ys[row], summed in order.
type combineGradWeightsOp struct{ experts int }

func (combineGradWeightsOp) Type() string     { return KindCombineGradWeights.String() }
func (combineGradWeightsOp) Kind() graph.Kind { return KindCombineGradWeights }

func (o combineGradWeightsOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 3); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkRoute(in[1], in[2], o.experts); err != nil {
		return nil, graph.Invalid, err
	}
	if in[0].Shape()[0] != in[2].Shape()[0] || in[1].Shape()[0] != in[2].Shape().Numel() || in[0].Shape()[1] != in[1].Shape()[1] {
		return nil, graph.Invalid, fmt.Errorf("gradient %q %v, rows %q %v and indices %q %v do not agree", in[0].Name(), in[0].Shape(), in[1].Name(), in[1].Shape(), in[2].Name(), in[2].Shape())
	}
	return in[2].Shape().Clone(), graph.Float32, nil
}

func (o combineGradWeightsOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	r := newRouteState(b, 2, o.experts)
	dy, ys, idx, out := b.In[0].F32, b.In[1].F32, b.In[2].I32, b.Out.F32
	h := b.In[0].Shape[1]
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for i, p := range r.pos {
			t := i / r.k
			a, c := dy[t*h:t*h+h], ys[int(p)*h:int(p)*h+h]
			var s float32
			for j, v := range a {
				s += float32(v * c[j]) // rounded: the same bits on every machine
			}
			out[i] = s
		}
		return nil
	}, nil
}

// Combine returns each token's K expert outputs added, weighted:
// y[t] = Σ_k w[t, k]·ys[row(t, k)] for ys [T·K, H] in Dispatch's order,
// idx [T, K] and w [T, K], added in the order of the token's choices.
// Gradients flow to ys and w, none to idx.
func Combine(ys, idx, w *graph.Node, experts int) *graph.Node {
	return apply(combineOp{experts}, scopedName(ys, "combine"), ys, idx, w)
}
