package ops

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// Fused elementwise chains. The compiler's fusion pass (passes.Fuse)
// finds chains of elementwise ops — bias and residual adds, scales,
// activations and their gradients, dropout masks, gradient sums — whose
// intermediate values nothing else reads, and replaces each by one node
// that runs the whole chain over one block of rows at a time, or, when
// the chain starts at a GEMM (see FusedGEMM) read by nothing else, by
// that GEMM applying the chain to each block of C as soon as the block
// is final (its epilogue). Every step computes exactly what
// the op it replaces computes, in the same order, so a fused program
// gives the same bits as the unfused one; graph.Options.Unfused runs
// each step over the whole tensor instead, for comparison.

// Elementwise is implemented by ops that fusion may take into a chain
// (passes.Fuse): for a node n whose running value is its input vi, the op
// says what one step of a chain does. An op of one's own that implements
// it fuses into chains and GEMM epilogues like this package's.
type Elementwise interface {
	ChainStep(n *graph.Node, vi int) (ChainStep, bool)
}

// ChainStep is one step of a fused chain. Apply computes, in place on a
// stretch v of the running value, what the op computes from it and from
// the same stretch a of its operand (input Operand of the node, of the
// node's shape or one row broadcast over the rows; a is nil when Operand
// is −1), while training or not. It must compute exactly what the op's
// own kernel computes, element by element, so that fused and unfused
// programs agree to the bit. Name is shown in the fused node's type.
type ChainStep struct {
	Name    string
	Operand int
	Apply   func(v, a []float32, training bool)
}

// fusedStep is one step of a chain: its operand (an index into the fused
// node's chain operands, −1 for none; broadcast along rows when row is
// set) and what it computes.
type fusedStep struct {
	name string
	arg  int
	row  bool
	fn   func(v, a []float32, training bool)
}

// fusedChain is a chain of steps over a value of shape shape, seen as
// rows of its last axis.
type fusedChain struct {
	steps []fusedStep
	shape graph.Shape
}

func (c fusedChain) String() string {
	names := make([]string, len(c.steps))
	for i, s := range c.steps {
		names[i] = s.name
	}
	return strings.Join(names, "+")
}

// cols is the length of a row.
func (c fusedChain) cols() int {
	if len(c.shape) == 0 {
		return 1
	}
	return c.shape[len(c.shape)-1]
}

// Chainable reports whether n can take part in a fused chain whose
// running value is n's input vi, and how many steps it adds (0 for a
// reshape that keeps the rows): not when n is another op, broadcasts in
// a way the steps cannot express, reads the value twice, or is a sum
// whose order would change.
func Chainable(n *graph.Node, vi int) (steps int, ok bool) {
	ss, _, ok := chainStep(n, vi)
	return len(ss), ok
}

// sameRows reports whether shapes a and b hold the same rows: the same
// number of elements and the same last axis.
func sameRows(a, b graph.Shape) bool {
	if a.Numel() != b.Numel() {
		return false
	}
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || a.Numel() == 1
	}
	return a[len(a)-1] == b[len(b)-1]
}

// chainStep describes n as steps of a chain whose running value is n's
// input vi (AddN gives one per other input) and returns the operands the
// steps' arg fields index.
func chainStep(n *graph.Node, vi int) ([]fusedStep, []*graph.Node, bool) {
	if n == nil || n.DType() != graph.Float32 || vi < 0 || vi >= n.NumInputs() {
		return nil, nil, false
	}
	v := n.Input(vi)
	if _, ok := n.Op().(reshapeOp); ok && v.DType() == graph.Float32 && sameRows(v.Shape(), n.Shape()) {
		return nil, nil, true // the same rows under another shape
	}
	if !v.Shape().Equal(n.Shape()) || v.DType() != graph.Float32 {
		return nil, nil, false
	}
	for i := 0; i < n.NumInputs(); i++ {
		if i != vi && n.Input(i) == v {
			return nil, nil, false // the value read twice
		}
	}
	if e, ok := n.Op().(Elementwise); ok {
		st, ok := e.ChainStep(n, vi)
		switch {
		case !ok || st.Apply == nil:
			return nil, nil, false
		case st.Operand < 0:
			return []fusedStep{{name: st.Name, arg: -1, fn: st.Apply}}, nil, true
		case st.Operand == vi || st.Operand >= n.NumInputs():
			return nil, nil, false
		}
		a := n.Input(st.Operand)
		row := false
		switch as := a.Shape(); {
		case a.DType() != graph.Float32:
			return nil, nil, false
		case as.Equal(n.Shape()):
		case len(n.Shape()) > 0 && as.Numel() == n.Shape()[len(n.Shape())-1] && len(as) >= 1 && as[len(as)-1] == as.Numel():
			row = true // [C] or [1 … 1 C] applied to every row
		default:
			return nil, nil, false
		}
		return []fusedStep{{name: st.Name, arg: 0, row: row, fn: st.Apply}}, []*graph.Node{a}, true
	}
	if n.Is(graph.KindAddN) && vi <= 1 {
		// in0 + in1 + … in order: with the value first or second the
		// first sum is the same either way round.
		var steps []fusedStep
		var args []*graph.Node
		for i := 0; i < n.NumInputs(); i++ {
			if i == vi {
				continue
			}
			if !n.Input(i).Shape().Equal(n.Shape()) {
				return nil, nil, false
			}
			steps = append(steps, fusedStep{name: "Add", arg: len(args), fn: addInPlace})
			args = append(args, n.Input(i))
		}
		return steps, args, true
	}
	return nil, nil, false
}

// FusedGEMM reports whether n is a GEMM that can apply a chain in its
// epilogue: a float32 Linear or (unbatched) MatMul, a ScaledMatMul (FP8)
// or a BF16MatMul.
func FusedGEMM(n *graph.Node) bool {
	switch op := n.Op().(type) {
	case linearOp, scaledMatMulOp, bf16MatMulOp:
		return n.DType() == graph.Float32
	case matMulOp:
		return !op.batched && n.DType() == graph.Float32
	}
	return false
}

// Chain is a chain of elementwise nodes for Fuse: Head is the value the
// chain starts from, Nodes the chain's nodes in order, each reading the
// previous one (Head for the first) as its input Value[i].
type Chain struct {
	Head  *graph.Node
	Nodes []*graph.Node
	Value []int
}

// Fuse builds the node that replaces c's last node: the chain as one
// FusedElementwise node, or, when c.Head is a GEMM (see FusedGEMM) and
// epilogue is set, the GEMM with the chain in its epilogue. The node is
// named after the chain's last node.
func Fuse(c Chain, epilogue bool) (*graph.Node, error) {
	if len(c.Nodes) == 0 || len(c.Value) != len(c.Nodes) {
		return nil, fmt.Errorf("ops: fuse: empty or malformed chain")
	}
	tail := c.Nodes[len(c.Nodes)-1]
	chain := fusedChain{shape: tail.Shape().Clone()}
	var operands []*graph.Node
	for i, n := range c.Nodes {
		steps, args, ok := chainStep(n, c.Value[i])
		if !ok {
			return nil, fmt.Errorf("ops: fuse: %q cannot take part in a chain", n.Name())
		}
		for _, s := range steps {
			if s.arg >= 0 {
				s.arg += len(operands)
			}
			chain.steps = append(chain.steps, s)
		}
		operands = append(operands, args...)
	}
	g := tail.Graph()
	if epilogue && FusedGEMM(c.Head) {
		gemm := c.Head
		ins := append(gemm.Inputs(), operands...)
		n := g.Apply(fusedGEMMOp{gemm: gemm.Op(), gemmInputs: gemm.NumInputs(), chain: chain}, tail.Name()+"#fused", ins...)
		if n != nil && n.DType() != graph.Invalid {
			n.SetRole(gemm.Role(), gemm.Forward())
		}
		return n, g.Err()
	}
	n := g.Apply(fusedOp{chain: chain}, tail.Name()+"#fused", append([]*graph.Node{c.Head}, operands...)...)
	return n, g.Err()
}

// fusedOp runs a chain over its first input: inputs are the head value
// and the chain's operands.
type fusedOp struct{ chain fusedChain }

func (o fusedOp) Type() string     { return KindFusedElementwise.String() }
func (o fusedOp) Kind() graph.Kind { return KindFusedElementwise }
func (o fusedOp) Attrs() string    { return o.chain.String() }

func (o fusedOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) == 0 || !sameRows(in[0].Shape(), o.chain.shape) || in[0].DType() != graph.Float32 {
		return nil, graph.Invalid, fmt.Errorf("fused chain %s: head does not match %v", o.chain, o.chain.shape)
	}
	return o.chain.shape.Clone(), graph.Float32, nil
}

func (o fusedOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	head, out := b.In[0].F32, b.Out.F32
	run, err := o.chain.bind(b, b.In[1:])
	if err != nil {
		return nil, err
	}
	cols := o.chain.cols()
	rows := len(out) / max(cols, 1)
	if b.Options.Unfused {
		return func() error {
			copy(out, head)
			run.unfused(out)
			return nil
		}, nil
	}
	return newChunkerCost(rows, len(out), func(lo, hi int) {
		copy(out[lo*cols:hi*cols], head[lo*cols:hi*cols])
		run.block(out, lo, hi, 0, cols)
	}).kernel(), nil
}

// boundChain is a chain bound to its operands' buffers.
type boundChain struct {
	steps    []fusedStep
	operands [][]float32
	cols     int
	training bool
}

func (c fusedChain) bind(b *graph.Binding, operands []*graph.Value) (*boundChain, error) {
	bc := &boundChain{steps: c.steps, cols: c.cols(), training: b.Training}
	for _, v := range operands {
		if v.DType != graph.Float32 {
			return nil, fmt.Errorf("fused chain %s: an operand is %v", c, v.DType)
		}
		bc.operands = append(bc.operands, v.F32)
	}
	return bc, nil
}

// block applies the chain in place to rows [r0, r1), columns [c0, c1) of
// v (rows cols long), one row at a time.
func (c *boundChain) block(v []float32, r0, r1, c0, c1 int) {
	for r := r0; r < r1; r++ {
		seg := v[r*c.cols+c0 : r*c.cols+c1]
		for _, s := range c.steps {
			var a []float32
			if s.arg >= 0 {
				a = c.operands[s.arg]
				if s.row {
					a = a[c0:c1]
				} else {
					a = a[r*c.cols+c0 : r*c.cols+c1]
				}
			}
			c.apply(s, seg, a)
		}
	}
}

// unfused applies the chain one step at a time over all of v.
func (c *boundChain) unfused(v []float32) {
	rows := len(v) / max(c.cols, 1)
	for _, s := range c.steps {
		if s.arg >= 0 && s.row {
			for r := 0; r < rows; r++ {
				c.apply(s, v[r*c.cols:(r+1)*c.cols], c.operands[s.arg][:c.cols])
			}
			continue
		}
		var a []float32
		if s.arg >= 0 {
			a = c.operands[s.arg]
		}
		c.apply(s, v, a)
	}
}

// apply runs one step on v with operand a (as long as v, or nil).
func (c *boundChain) apply(s fusedStep, v, a []float32) {
	if a != nil {
		a = a[:len(v)]
	}
	s.fn(v, a, c.training)
}

// addInPlace is AddN's step: v + a, in AddN's order.
func addInPlace(v, a []float32, _ bool) { binaryRow(kindAdd, v, v, a, 1, 1) }

// fusedGEMMOp is a float32 GEMM (Linear or MatMul) that applies a chain
// to each block of C as the block is finished: inputs are the GEMM's
// followed by the chain's operands.
type fusedGEMMOp struct {
	gemm       graph.Op
	gemmInputs int
	chain      fusedChain
}

func (o fusedGEMMOp) Type() string     { return o.gemm.Type() + "+" + o.chain.String() }
func (o fusedGEMMOp) Kind() graph.Kind { return KindFusedGEMM }
func (o fusedGEMMOp) Attrs() string {
	if a, ok := o.gemm.(graph.Attributer); ok {
		return a.Attrs()
	}
	return ""
}

func (o fusedGEMMOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) < o.gemmInputs {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want the GEMM's %d and the chain's operands", len(in), o.gemmInputs)
	}
	s, dt, err := o.gemm.Infer(in[:o.gemmInputs])
	if err != nil {
		return nil, graph.Invalid, err
	}
	if !sameRows(s, o.chain.shape) {
		return nil, graph.Invalid, fmt.Errorf("GEMM output %v does not match its chain %v", s, o.chain.shape)
	}
	return o.chain.shape.Clone(), dt, nil
}

func (o fusedGEMMOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	run, err := o.chain.bind(b, b.In[o.gemmInputs:])
	if err != nil {
		return nil, err
	}
	inner := *b
	inner.In = b.In[:o.gemmInputs]
	out := b.Out.F32
	var epi func(r0, r1, c0, c1 int)
	if !b.Options.Unfused {
		epi = func(r0, r1, c0, c1 int) { run.block(out, r0, r1, c0, c1) }
	}
	var k graph.Kernel
	switch op := o.gemm.(type) {
	case linearOp, matMulOp:
		var g *kernels.Gemm
		if lo, ok := op.(linearOp); ok {
			k, g, err = lo.bind(&inner)
		} else {
			k, g, err = op.(matMulOp).bind(&inner)
		}
		if err == nil {
			g.Block = epi
		}
	case scaledMatMulOp:
		k, err = op.bind(&inner, epi)
	case bf16MatMulOp:
		k, err = op.bind(&inner, epi)
	default:
		return nil, fmt.Errorf("no epilogue for a %s", o.gemm.Type())
	}
	if err != nil {
		return nil, err
	}
	if b.Options.Unfused {
		return func() error {
			if err := k(); err != nil {
				return err
			}
			run.unfused(out)
			return nil
		}, nil
	}
	return k, nil
}
