package ops

import (
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
)

// RouterConfig says how TopK chooses each token's experts from its
// router scores [T, E] (a Mixture-of-Experts layer's routing).
type RouterConfig struct {
	// K is the number of experts each token goes to: 1 ≤ K ≤ E
	// (num_experts_per_tok).
	K int
	// Groups, when above 0, limits the choice to the TopKGroups groups of
	// E/Groups consecutive experts whose group scores are highest, a
	// group's score being the sum of its two highest scores
	// (DeepSeek-V3's n_group and topk_group). The experts of the other
	// groups score 0 for the choice, as in transformers'
	// DeepseekV3TopkRouter.
	Groups, TopKGroups int
	// BiasUpdateSpeed, when above 0, is DeepSeek-V3's auxiliary-loss-free
	// balancing (its bias_update_speed γ): at the end of each training
	// step the selection bias (TopK's second input, a parameter the
	// optimizer does not train) moves by γ toward an even load — expert
	// e's bias rises by γ when it got fewer of the step's choices than
	// the mean, falls by γ when it got more (sign(mean − load_e)). The
	// bias is updated in the parameter store, so checkpoints keep it.
	BiasUpdateSpeed float64
}

// Check reports a configuration that cannot choose from e experts,
// naming the Hugging Face key.
func (c RouterConfig) Check(e int) error {
	switch {
	case c.K < 1 || c.K > e:
		return fmt.Errorf("top-k %d (num_experts_per_tok), want 1 to the %d experts", c.K, e)
	case c.Groups < 0:
		return fmt.Errorf("%d expert groups (n_group), want ≥ 0", c.Groups)
	case c.Groups == 0 && c.TopKGroups != 0:
		return fmt.Errorf("topk_group %d without expert groups (n_group 0)", c.TopKGroups)
	case !(c.BiasUpdateSpeed >= 0) || math.IsInf(c.BiasUpdateSpeed, 0):
		return fmt.Errorf("bias update speed %v (bias_update_speed), want a finite number ≥ 0", c.BiasUpdateSpeed)
	case c.Groups == 0:
		return nil
	case e%c.Groups != 0 || e/c.Groups < 2:
		return fmt.Errorf("%d expert groups (n_group) for %d experts, want a divisor of the experts leaving ≥ 2 in each group", c.Groups, e)
	case c.TopKGroups < 1 || c.TopKGroups > c.Groups:
		return fmt.Errorf("topk_group %d, want 1 to the %d groups (n_group)", c.TopKGroups, c.Groups)
	case c.K > c.TopKGroups*(e/c.Groups):
		return fmt.Errorf("top-k %d exceeds the %d experts of the topk_group %d groups", c.K, c.TopKGroups*(e/c.Groups), c.TopKGroups)
	}
	return nil
}

// topKOp chooses each row's K experts: int32 indices [T, K] by
// descending score, ties to the lower expert index.
type topKOp struct{ cfg RouterConfig }

func (topKOp) Type() string     { return KindTopK.String() }
func (topKOp) Kind() graph.Kind { return KindTopK }
func (o topKOp) Attrs() string {
	s := fmt.Sprintf("k=%d", o.cfg.K)
	if o.cfg.Groups > 0 {
		s += fmt.Sprintf(",groups=%d/%d", o.cfg.TopKGroups, o.cfg.Groups)
	}
	if o.cfg.BiasUpdateSpeed > 0 {
		s += fmt.Sprintf(",bias_update_speed=%g", o.cfg.BiasUpdateSpeed)
	}
	return s
}

func (o topKOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 1 && len(in) != 2 {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want scores and an optional bias", len(in))
	}
	for i, x := range in {
		if x.DType() != graph.Float32 {
			return nil, graph.Invalid, fmt.Errorf("input %d %q is %v, want float32", i, x.Name(), x.DType())
		}
	}
	s := in[0].Shape()
	if len(s) != 2 {
		return nil, graph.Invalid, fmt.Errorf("scores %q have shape %v, want [tokens experts]", in[0].Name(), s)
	}
	if len(in) == 2 && !in[1].Shape().Equal(graph.Shape{s[1]}) {
		return nil, graph.Invalid, fmt.Errorf("bias %q has shape %v, want [%d] (one per expert)", in[1].Name(), in[1].Shape(), s[1])
	}
	if err := o.cfg.Check(s[1]); err != nil {
		return nil, graph.Invalid, err
	}
	return graph.Shape{s[0], o.cfg.K}, graph.Int32, nil
}

func (o topKOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	scores, out := b.In[0].F32, b.Out.I32
	var bias []float32
	if len(b.In) == 2 {
		bias = b.In[1].F32
	}
	t, e := b.In[0].Shape[0], b.In[0].Shape[1]
	cfg := o.cfg
	name := b.Node.Name()
	work := make([][]float32, 0)
	chunks := newPartChunker(t, t*e*cfg.K, func(part, lo, hi int) {
		choice := work[part]
		for r := lo; r < hi; r++ {
			topKRow(out[r*cfg.K:(r+1)*cfg.K], choice, scores[r*e:(r+1)*e], bias, cfg)
		}
	})
	for range chunks.parts {
		work = append(work, make([]float32, e+max(cfg.Groups, 0)))
	}
	var load []int
	if cfg.BiasUpdateSpeed > 0 && bias != nil && b.Training {
		// The step's load, counted as the choices are made (the output's
		// buffer may serve another node by the step's end).
		load = make([]int, e)
		gamma := float32(cfg.BiasUpdateSpeed)
		b.AtStepEnd(func() error {
			total := 0
			for _, n := range load {
				total += n
			}
			if total == 0 {
				return nil
			}
			mean := float64(total) / float64(e)
			for i, n := range load {
				switch {
				case float64(n) < mean:
					bias[i] += gamma
				case float64(n) > mean:
					bias[i] -= gamma
				}
			}
			clear(load)
			return nil
		})
	}
	return func() error {
		for i, v := range scores {
			if v != v || math.IsInf(float64(v), 0) {
				return fmt.Errorf("router scores %q: %v at token %d, expert %d", name, v, i/e, i%e)
			}
		}
		for i, v := range bias {
			if v != v || math.IsInf(float64(v), 0) {
				return fmt.Errorf("router bias of %q: %v at expert %d", name, v, i)
			}
		}
		chunks.group.For(chunks.parts, chunks.run)
		if load != nil {
			for _, x := range out[:t*cfg.K] {
				load[x]++
			}
		}
		return nil
	}, nil
}

// topKRow chooses one token's experts into out. work holds E + Groups
// values.
func topKRow(out []int32, work, scores, bias []float32, cfg RouterConfig) {
	e := len(scores)
	choice, groups := work[:e], work[e:]
	copy(choice, scores)
	if bias != nil {
		for j := range choice {
			choice[j] += bias[j]
		}
	}
	if cfg.Groups > 0 {
		size := e / cfg.Groups
		for g := range groups {
			var a, b float32 = float32(math.Inf(-1)), float32(math.Inf(-1)) // the two highest
			for _, v := range choice[g*size : (g+1)*size] {
				if v > a {
					a, b = v, a
				} else if v > b {
					b = v
				}
			}
			groups[g] = a + b
		}
		// Keep the TopKGroups highest groups (ties to the lower group);
		// the others' experts score 0 for the choice.
		for range cfg.TopKGroups {
			best := -1
			for g, v := range groups {
				if !math.IsNaN(float64(v)) && (best < 0 || v > groups[best]) {
					best = g
				}
			}
			groups[best] = float32(math.NaN()) // chosen
		}
		for g, v := range groups {
			if v == v { // not chosen
				clear(choice[g*size : (g+1)*size])
			}
		}
	}
	// K passes, each taking the highest score left, ties to the lower
	// index; a taken expert is marked NaN (the scores were checked
	// finite).
	for k := range out {
		best := -1
		for j, v := range choice {
			if v == v && (best < 0 || v > choice[best]) {
				best = j
			}
		}
		out[k] = int32(best)
		choice[best] = float32(math.NaN())
	}
}

// TopK returns, for each token of scores [T, E], the indices of its
// cfg.K experts [T, K] (int32), by descending score with ties to the
// lower expert index; bias [E] (nil: none) is added to the scores for
// the choice only (DeepSeek-V3's e_score_correction_bias). No gradient
// flows through the choice: gather the weights with GatherLast. A NaN
// or infinite score or bias fails the run, naming the token and expert.
func TopK(scores, bias *graph.Node, cfg RouterConfig) *graph.Node {
	if bias == nil {
		return apply(topKOp{cfg}, scopedName(scores, "topk"), scores)
	}
	return apply(topKOp{cfg}, scopedName(scores, "topk"), scores, bias)
}

// gatherLastOp picks x[t, idx[t, k]]: [T, E] and [T, K] give [T, K].
type gatherLastOp struct{}

func (gatherLastOp) Type() string     { return KindGatherLast.String() }
func (gatherLastOp) Kind() graph.Kind { return KindGatherLast }

func (gatherLastOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := wantDType(in, graph.Float32, graph.Int32); err != nil {
		return nil, graph.Invalid, err
	}
	xs, is := in[0].Shape(), in[1].Shape()
	if len(xs) != 2 || len(is) != 2 || xs[0] != is[0] {
		return nil, graph.Invalid, fmt.Errorf("x %q %v and indices %q %v, want [T E] and [T K]", in[0].Name(), xs, in[1].Name(), is)
	}
	return is.Clone(), graph.Float32, nil
}

func checkIndices(idx []int32, k, e int, name string) error {
	for i, j := range idx {
		if j < 0 || int(j) >= e {
			return fmt.Errorf("%q: index %d at token %d, choice %d is outside [0, %d)", name, j, i/k, i%k, e)
		}
	}
	return nil
}

func (gatherLastOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, idx, out := b.In[0].F32, b.In[1].I32, b.Out.F32
	e, k := b.In[0].Shape[1], b.In[1].Shape[1]
	name := b.Node.Input(1).Name()
	return func() error {
		if err := checkIndices(idx, k, e, name); err != nil {
			return err
		}
		for i, j := range idx {
			out[i] = x[(i/k)*e+int(j)]
		}
		return nil
	}, nil
}

func (gatherLastOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	e := n.Input(0).Shape()[1]
	return []*graph.Node{apply(gatherLastGradOp{e: e}, n.Name()+".dx", n.Input(1), dy), nil}
}

// gatherLastGradOp scatters dy [T, K] into a zeroed [T, E] by the
// indices, adding in k order.
type gatherLastGradOp struct{ e int }

func (gatherLastGradOp) Type() string     { return KindGatherLastGrad.String() }
func (gatherLastGradOp) Kind() graph.Kind { return KindGatherLastGrad }
func (o gatherLastGradOp) Attrs() string  { return fmt.Sprintf("experts=%d", o.e) }

func (o gatherLastGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := wantDType(in, graph.Int32, graph.Float32); err != nil {
		return nil, graph.Invalid, err
	}
	if is, gs := in[0].Shape(), in[1].Shape(); !is.Equal(gs) || len(is) != 2 {
		return nil, graph.Invalid, fmt.Errorf("gradient %q %v does not match indices %q %v", in[1].Name(), gs, in[0].Name(), is)
	}
	return graph.Shape{in[0].Shape()[0], o.e}, graph.Float32, nil
}

func (o gatherLastGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	idx, dy, out := b.In[0].I32, b.In[1].F32, b.Out.F32
	k, e := b.In[0].Shape[1], o.e
	name := b.Node.Input(0).Name()
	return func() error {
		if err := checkIndices(idx, k, e, name); err != nil {
			return err
		}
		clear(out)
		for i, j := range idx {
			out[(i/k)*e+int(j)] += dy[i]
		}
		return nil
	}, nil
}

// GatherLast returns x[t, idx[t, k]] for x [T, E] and int32 idx [T, K]:
// a router's weights of the experts TopK chose. The gradient flows to x
// (scattered back to the chosen experts), none to idx. An index outside
// [0, E) fails the run, naming the token.
func GatherLast(x, idx *graph.Node) *graph.Node {
	return apply(gatherLastOp{}, scopedName(x, "gather"), x, idx)
}
