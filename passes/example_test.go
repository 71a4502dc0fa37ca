package passes_test

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// Prepare converts a model's eligible linear layers to FP8 and compiles
// its training and evaluation programs, like Accelerate's prepare.
func ExamplePrepare() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 32)
	y := g.Input("labels", graph.Int32, 4)
	w1, w2 := g.Param("mlp.fc1.weight", 64, 32), g.Param("mlp.fc2.weight", 10, 64)
	logits := ops.Linear("mlp.fc2", ops.ReLU(ops.Linear("mlp.fc1", x, w1, nil)), w2, nil)
	loss := ops.CrossEntropy(logits, y)
	grads, _ := graph.Grad(loss, w1, w2)

	store := graph.NewStore()
	_ = store.Init(g, func(_ *graph.Node, v []float32) {
		for i := range v {
			v[i] = float32(i%7-3) * 0.05
		}
	})
	prep, err := passes.Prepare(g, store, passes.Config{
		Recipe:       recipe.TE{Margin: 0}, // Accelerate's TERecipeKwargs defaults
		TrainOutputs: []*graph.Node{loss, grads[0], grads[1]},
		EvalOutputs:  []*graph.Node{logits},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(prep.Report.Converted())
	l, _ := prep.Report.Layer("mlp.fc2")
	fmt.Println(l.Reason)
	// Output:
	// [mlp.fc1]
	// weight dims [10 64] are not both divisible by 16
}

// With recipe.BF16, Prepare is Accelerate's mixed_precision="bf16":
// every linear layer's GEMMs read bf16-rounded operands (no size
// condition, no scaling state), and evaluation runs in bf16 too.
func ExamplePrepare_bf16() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 32)
	y := g.Input("labels", graph.Int32, 4)
	w1, w2 := g.Param("mlp.fc1.weight", 64, 32), g.Param("mlp.fc2.weight", 10, 64)
	logits := ops.Linear("mlp.fc2", ops.ReLU(ops.Linear("mlp.fc1", x, w1, nil)), w2, nil)
	loss := ops.CrossEntropy(logits, y)
	grads, _ := graph.Grad(loss, w1, w2)
	store := graph.NewStore()
	_ = store.Init(g, func(_ *graph.Node, v []float32) {
		for i := range v {
			v[i] = float32(i%7-3) * 0.05
		}
	})
	prep, err := passes.Prepare(g, store, passes.Config{
		Recipe:       recipe.BF16{},
		TrainOutputs: []*graph.Node{loss, grads[0], grads[1]},
		EvalOutputs:  []*graph.Node{logits},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(prep.Report.Converted(), passes.BF16Layers(g), passes.HasFP8Layers(g))
	fmt.Println(prep.Report.Notes[len(prep.Report.Notes)-1])
	// Output:
	// [mlp.fc1 mlp.fc2] [mlp.fc1 mlp.fc2] false
	// 2 layer(s) wrapped; evaluation runs bf16
}

// Fuse replaces a chain of elementwise ops by one node: here a Linear
// whose only reader is a residual add, which becomes the Linear's
// epilogue (Prepare runs Fuse as its last stage).
func ExampleFuse() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 8)
	w := g.Param("proj.weight", 8, 8)
	out := ops.Add(x, ops.Linear("proj", x, w, nil))
	rep, _ := passes.Fuse(g, out)
	fmt.Println(rep)
	fmt.Println(g.Resolve(out).Op().Type())
	// Output:
	// 1 elementwise node(s) fused: 1 into GEMM epilogues, 0 chain(s) into single loops
	// Linear+Add
}

// A rule of one's own: fold a Scale of a Scale into one Scale, reading
// the factors with graph.SettingsOf[ops.ScaleConfig] and matching kinds
// as typed values.
func ExampleRewrite_userRule() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4)
	y := ops.Scale(ops.Scale(x, 0.5), 3)
	fold := passes.Rule{
		Name:    "fold-scales",
		Pattern: &passes.Pattern{Kind: ops.KindScale, Bind: "outer", Inputs: []*passes.Pattern{{Kind: ops.KindScale, Bind: "inner"}}},
		Apply: func(root *graph.Node, m passes.Match) (*graph.Node, error) {
			a, _ := graph.SettingsOf[ops.ScaleConfig](m["inner"])
			b, _ := graph.SettingsOf[ops.ScaleConfig](m["outer"])
			return ops.Scale(m["inner"].Input(0), a.Factor*b.Factor), nil
		},
	}
	counts, err := passes.Rewrite(g, graph.Live(graph.Options{}, y), fold)
	if err != nil {
		fmt.Println(err)
		return
	}
	out := g.Resolve(y)
	c, _ := graph.SettingsOf[ops.ScaleConfig](out)
	fmt.Println(counts["fold-scales"], out.Op().Type(), c.Factor, out.Input(0) == x)
	// Output: 1 Scale 1.5 true
}

// A forward rewrite before autodiff: Prepare runs ForwardPasses on the
// forward graph, then differentiates the result, so the backward follows
// the rewrite (here x·x becomes x², whose gradient 2x comes from the new
// node).
func ExamplePrepare_forwardPasses() {
	g := graph.New()
	p := g.Param("p", 3)
	loss := ops.Sum(ops.Mul(p, p))
	square := passes.Pass{Name: "Square", Run: func(g *graph.Graph) (string, error) {
		rule := passes.Rule{Name: "x*x", Pattern: &passes.Pattern{Kind: ops.KindMul, Inputs: []*passes.Pattern{{Bind: "a"}, {Bind: "b"}}},
			Apply: func(_ *graph.Node, m passes.Match) (*graph.Node, error) {
				if m["a"] != m["b"] {
					return nil, nil
				}
				return ops.Exp(ops.Scale(ops.Log(m["a"]), 2)), nil // x² for x > 0
			}}
		counts, err := passes.Rewrite(g, g.Nodes(), rule)
		return fmt.Sprint(counts["x*x"], " rewritten"), err
	}}
	store := graph.NewStore()
	if err := store.SetFloat32("p", []float32{1, 2, 3}, 3); err != nil {
		fmt.Println(err)
		return
	}
	prep, err := passes.Prepare(g, store, passes.Config{Loss: loss, Params: []*graph.Node{p}, ForwardPasses: []passes.Pass{square}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := prep.Train.Run(); err != nil {
		fmt.Println(err)
		return
	}
	l, _ := prep.Train.Scalar(prep.Loss)
	grad := prep.Train.Float32(prep.Grads[0])
	fmt.Printf("loss %.3f, gradient %.3f %.3f %.3f\n", l, grad[0], grad[1], grad[2])
	// Output: loss 14.000, gradient 2.000 4.000 6.000
}

// With recipe.Custom a function chooses each operand's cast per layer
// and GEMM: here MXFP8 for the forward, NVFP4 for the backward (16×16
// weight tiles, the transform on the weight gradient's operands,
// stochastic gradients), and one layer in high precision. Prepare checks
// every GEMM's pair and notes what each layer runs.
func ExamplePrepare_customRecipe() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 16, 32)
	y := g.Input("labels", graph.Int32, 16)
	w1, w2 := g.Param("mlp.fc1.weight", 64, 32), g.Param("mlp.fc2.weight", 16, 64)
	logits := ops.Linear("mlp.fc2", ops.ReLU(ops.Linear("mlp.fc1", x, w1, nil)), w2, nil)
	loss := ops.CrossEntropy(logits, y)
	grads, _ := graph.Grad(loss, w1, w2)
	store := graph.NewStore()
	_ = store.Init(g, func(_ *graph.Node, v []float32) {
		for i := range v {
			v[i] = float32(i%7-3) * 0.05
		}
	})
	rec := recipe.Custom{Seed: 1, Quantizer: func(fqn string, gemm fp8.GEMM, t fp8.TensorRole) fp8.Quantizer {
		switch {
		case fqn == "mlp.fc2":
			return fp8.Quantizer{} // high precision
		case gemm == fp8.Fprop:
			return fp8.Quantizer{Kind: fp8.MXFP8Blocks}
		case t == fp8.RoleWeight:
			return fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2}
		}
		return fp8.Quantizer{Kind: fp8.NVFP4Blocks, RHT: gemm == fp8.Wgrad, Stochastic: t == fp8.RoleGradOutput}
	}}
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: rec, TrainOutputs: []*graph.Node{loss, grads[0], grads[1]}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(prep.Report.Converted())
	for _, n := range prep.Report.Notes {
		if strings.Contains(n, "custom recipe") {
			fmt.Println(n)
		}
	}
	xs, labels := make([]float32, 16*32), make([]int32, 16)
	for i := range xs {
		xs[i] = float32(i%5) - 2
	}
	_ = prep.Train.FeedFloat32(x, xs)
	_ = prep.Train.FeedInt32(y, labels)
	fmt.Println(prep.Train.Run())
	// Output:
	// [mlp.fc1]
	// mlp.fc1: custom recipe: fprop MXFP8 E4M3 × MXFP8 E4M3; dgrad NVFP4 1×16 stochastic × NVFP4 16×16; wgrad NVFP4 1×16 rht stochastic × NVFP4 1×16 rht
	// <nil>
}
