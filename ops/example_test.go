package ops_test

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
)

// Linear builds a layer's forward GEMM (role Fprop); graph.Grad appends
// its Dgrad and Wgrad GEMMs, which the FP8 passes find through the roles.
func ExampleLinear() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	w := g.Param("fc.weight", 1, 3)
	y := ops.Linear("fc", x, w, nil)
	loss := ops.Sum(y)
	grads, _ := graph.Grad(loss, w)

	store := graph.NewStore()
	_ = store.SetFloat32("fc.weight", []float32{1, 2, 3}, 1, 3)
	p, _ := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0])
	_ = p.FeedFloat32(x, []float32{1, 1, 1, 0, 1, 0})
	_ = p.Run()
	l, _ := p.Scalar(loss)
	fmt.Println(y.Role(), l, p.Float32(grads[0]))
	// Output: fprop 8 [1 2 1]
}

// CausalAttention reads q, k and v side by side from a fused QKV
// projection's output and returns the heads concatenated: here one head
// of width 2 over three tokens whose keys are all equal, so each token's
// output is the mean of the values it may see (itself and earlier ones).
func ExampleCausalAttention() {
	g := graph.New()
	qkv := g.Input("qkv", graph.Float32, 1, 3, 6) // [B T 3C], C = 2
	y := ops.CausalAttention(qkv, 1)
	p, _ := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	_ = p.FeedFloat32(qkv, []float32{
		1, 0, 1, 1, 3, 0, // token 0: q, k, v
		1, 0, 1, 1, 0, 3, // token 1
		1, 0, 1, 1, 3, 3, // token 2
	})
	_ = p.Run()
	fmt.Println(y.Shape(), p.Float32(y))
	// Output: [1 3 2] [3 0 1.5 1.5 2 2]
}

// ClassifierCrossEntropy computes a classifier's FP8 logits a band of
// rows at a time with their cross-entropy and the FP8 gradient the
// classifier's backward GEMMs read, so the float32 logits never exist
// whole (the FP8 compiler emits it; here it is built by hand beside the
// separate ops it stands for, which give the same loss).
func ExampleClassifierCrossEntropy() {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 16)
	w := g.Input("w", graph.Float32, 4, 16)
	labels := g.Input("labels", graph.Int32, 2)
	rec := recipe.TE{}
	delayed := func(f fp8.Format, grad bool) ops.QuantizeConfig {
		return ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: f}, Meta: rec.NewMeta(grad)}
	}
	xq := ops.QuantizeNamed("xq", x, delayed(fp8.E4M3, false))
	wq := ops.QuantizeNamed("wq", w, delayed(fp8.E4M3, false))
	dloss := g.Const("dloss", 1)
	grad := ops.ClassifierCrossEntropy("head", xq, wq, nil, labels, dloss, delayed(fp8.E5M2, true))
	loss := ops.ClassifierLoss("head/loss", grad, labels)
	separate := ops.CrossEntropy(ops.ScaledMatMul("logits", xq, wq, false, true, nil), labels)

	p, _ := graph.Compile(g, graph.NewStore(), graph.Options{Training: true}, loss, separate, grad)
	xs, ws := make([]float32, 32), make([]float32, 64)
	xs[0], ws[0] = 1, 1 // logits [1 0 0 0] and [0 0 0 0]
	_ = p.FeedFloat32(x, xs)
	_ = p.FeedFloat32(w, ws)
	_ = p.FeedInt32(labels, []int32{0, 3})
	_ = p.Run()
	l, _ := p.Scalar(loss)
	s, _ := p.Scalar(separate)
	fmt.Printf("loss %.4f, separately %.4f; gradient %v %v\n", l, s, grad.Shape(), grad.DType())
	// Output: loss 1.0650, separately 1.0650; gradient [2 4] float8_e5m2
}

// MSELoss averages over the rows a mask keeps: the last row here is a
// padded one (mask 0), which neither counts in the mean nor gets a
// gradient, whatever it holds.
func ExampleMSELoss() {
	g := graph.New()
	pred := g.Param("pred", 3, 2)
	y := g.Input("y", graph.Float32, 3, 2)
	mask := g.Input("mask", graph.Float32, 3)
	loss := ops.MSELoss(pred, y, mask)
	grads, _ := graph.Grad(loss, pred)
	store := graph.NewStore()
	_ = store.SetFloat32("pred", []float32{1, 2, 3, 4, 99, 99}, 3, 2)
	p, _ := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0])
	_ = p.FeedFloat32(y, []float32{0, 2, 3, 2, 0, 0})
	_ = p.FeedFloat32(mask, []float32{1, 1, 0})
	_ = p.Run()
	l, _ := p.Scalar(loss)
	fmt.Println(l, p.Float32(grads[0])) // ((1−0)² + 0 + 0 + (4−2)²) / 4
	// Output: 1.25 [0.5 0 0 1 0 0]
}

// Operands of different ranks broadcast only as a single value or along
// the larger's trailing axes: a [4 1] prediction against a [4] target is
// refused, naming both, where numpy would make a [4 4] difference.
func ExampleSub_shapes() {
	g := graph.New()
	pred := g.Input("pred", graph.Float32, 4, 1)
	y := g.Input("y", graph.Float32, 4)
	ops.Sub(pred, y)
	fmt.Println(g.Err())
	// Output: graph: node "pred/sub" (Sub): "pred" [4 1] and "y" [4]: shapes [4 1] and [4]: operands of different ranks broadcast only where the smaller is a scalar or the larger's trailing axes (reshape to one rank, or ops.BroadcastTo, to broadcast them)
}

// A Mixtral-style router: softmax scores over 4 experts, each token's
// top 2 (ties to the lower expert), their weights renormalised to sum
// to 1. The gradient reaches the scores through the kept weights only.
func ExampleTopK() {
	g := graph.New()
	logits := g.Input("router_logits", graph.Float32, 2, 4)
	p := ops.Softmax(logits)
	experts := ops.TopK(p, nil, ops.RouterConfig{K: 2})
	w := ops.GatherLast(p, experts)
	w = ops.Div(w, ops.BroadcastTo(ops.SumKeepDims(w, 1), w.Shape()))
	prog, err := graph.Compile(g, graph.NewStore(), graph.Options{}, experts, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = prog.FeedFloat32(logits, []float32{0, 1, 2, 1, 3, 3, 0, 0})
	if err := prog.Run(); err != nil {
		fmt.Println(err)
		return
	}
	idx, _ := prog.Value(experts)
	fmt.Println(idx.I32)
	fmt.Printf("%.4f\n", prog.Float32(w))
	// Output:
	// [2 1 0 1]
	// [0.7311 0.2689 0.5000 0.5000]
}
