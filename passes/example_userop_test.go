package passes_test

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
)

// squareOp is an op of one's own: x², with its gradient (2x·dy, built
// from the package's ops) and its step of a fused chain (ops.Elementwise),
// so that Fuse takes it into a GEMM's epilogue.
type squareOp struct{}

var kindSquare = graph.NewKind("Square")

func (squareOp) Type() string     { return kindSquare.String() }
func (squareOp) Kind() graph.Kind { return kindSquare }

func (squareOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if len(in) != 1 || in[0].DType() != graph.Float32 {
		return nil, graph.Invalid, fmt.Errorf("want one float32 input")
	}
	return in[0].Shape(), graph.Float32, nil
}

func square(x, y []float32) {
	for i, v := range x {
		y[i] = v * v
	}
}

func (squareOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	x, y := b.In[0].F32, b.Out.F32
	return func() error { square(x, y); return nil }, nil
}

func (squareOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{ops.Mul(dy, ops.Scale(n.Input(0), 2))}
}

func (squareOp) ChainStep(n *graph.Node, vi int) (ops.ChainStep, bool) {
	return ops.ChainStep{Name: "Square", Operand: -1, Apply: func(v, _ []float32, _ bool) { square(v, v) }}, true
}

// A user op with its gradient, trained, and fused into the epilogue of
// the GEMM it follows in an evaluation program.
func ExampleFuse_userOp() {
	build := func() (*graph.Graph, *graph.Node, *graph.Node, *graph.Node) {
		g := graph.New()
		x := g.Input("x", graph.Float32, 2, 3)
		w := g.Param("fc.weight", 2, 3)
		return g, x, w, g.Apply(squareOp{}, "fc/square", ops.Linear("fc", x, w, nil))
	}
	store := graph.NewStore()
	if err := store.SetFloat32("fc.weight", []float32{1, 0, 0, 0, 1, 0}, 2, 3); err != nil {
		fmt.Println(err)
		return
	}
	in := []float32{1, 2, 3, 4, 5, 6}
	g, x, w, y := build()
	train, err := passes.Prepare(g, store, passes.Config{Loss: ops.Sum(y), Params: []*graph.Node{w}})
	if err != nil || train.Train.FeedFloat32(x, in) != nil || train.Train.Run() != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("gradient", train.Train.Float32(train.Grads[0]))
	g, x, _, y = build() // an evaluation graph: nothing but the output reads the GEMM
	eval, err := passes.Prepare(g, store, passes.Config{EvalOutputs: []*graph.Node{y}})
	if err != nil || eval.Eval.FeedFloat32(x, in) != nil || eval.Eval.Run() != nil {
		fmt.Println(err)
		return
	}
	sched := eval.Eval.Schedule()
	fmt.Println(sched[len(sched)-1].Op().Type(), eval.Eval.Float32(g.Resolve(y)))
	// Output:
	// gradient [34 44 54 44 58 72]
	// Linear+Square [1 4 16 25]
}
