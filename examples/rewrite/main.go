// Command rewrite walks through Octet's FP8 graph compiler on a small
// model: it builds LayerNorm → Linear → GELU → Linear → Linear with a
// cross-entropy loss, appends the backward graph, runs the FP8 pipeline
// (ConvertLinear, ConvertLN, Autowrap) and prints the graph before and
// after each pass, the conversion report, and one training step.
//
//	go run ./examples/rewrite                       # TE recipe, HYBRID
//	go run ./examples/rewrite -recipe ao -ao rowwise
//	go run ./examples/rewrite -mxfp8 -dot /tmp/dots # also write DOT files
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/recipe"
)

func main() {
	recipeName := flag.String("recipe", "te", "backend: te, ao or msamp")
	aoName := flag.String("ao", "tensorwise", "AO recipe: tensorwise, rowwise or rowwise_with_gw_hp")
	format := flag.String("format", "HYBRID", "TE fp8_format: HYBRID, E4M3 or E5M2")
	mxfp8 := flag.Bool("mxfp8", false, "TE: MXFP8 block scaling")
	dotDir := flag.String("dot", "", "write Graphviz DOT files of every stage to this directory")
	quiet := flag.Bool("quiet", false, "skip the graph dumps")
	flag.Parse()
	rec, err := makeRecipe(*recipeName, *aoName, *format, *mxfp8)
	if err == nil {
		err = run(rec, *dotDir, !*quiet)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rewrite:", err)
		os.Exit(1)
	}
}

// makeRecipe builds the recipe as training programs do (package
// precision): the flags' settings, then the OCTET_FP8_* and
// ACCELERATE_FP8_* variables over them.
func makeRecipe(name, aoName, format string, mxfp8 bool) (recipe.Recipe, error) {
	switch name {
	case "te", "ao", "msamp":
	default:
		return nil, fmt.Errorf("unknown recipe %q (want te, ao or msamp)", name)
	}
	p := precision.Config{MixedPrecision: "fp8", Backend: name}
	switch name {
	case "te":
		p.FP8Format, p.UseMXFP8BlockScaling = format, mxfp8
	case "ao":
		p.AORecipe = aoName
	}
	if err := p.Resolve(); err != nil {
		return nil, err
	}
	return p.Recipe()
}

func run(rec recipe.Recipe, dotDir string, dump bool) error {
	const batch = 8
	g := graph.New()
	x := g.Input("x", graph.Float32, batch, 64)
	labels := g.Input("labels", graph.Int32, batch)
	p := func(name string, shape ...int) *graph.Node { return g.Param(name, shape...) }
	ln := ops.LayerNorm("block.ln", x, p("block.ln.weight", 64), p("block.ln.bias", 64), ops.LayerNormConfig{})
	h := ops.GELU(ops.Linear("block.fc1", ln, p("block.fc1.weight", 128, 64), p("block.fc1.bias", 128)))
	h = ops.Linear("block.fc2", h, p("block.fc2.weight", 64, 128), p("block.fc2.bias", 64))
	logits := ops.Linear("head", h, p("head.weight", 10, 64), p("head.bias", 10))
	loss := ops.CrossEntropy(logits, labels)
	var params []*graph.Node
	for _, n := range g.Nodes() {
		if n.IsParam() {
			params = append(params, n)
		}
	}
	grads, err := graph.Grad(loss, params...)
	if err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(1, 2))
	store := graph.NewStore()
	if err := store.Init(g, func(n *graph.Node, v []float32) {
		for i := range v {
			if n.Shape().Rank() == 2 {
				v[i] = float32(rng.NormFloat64() * 0.1)
			} else if n.Name() == "block.ln.weight" {
				v[i] = 1
			}
		}
	}); err != nil {
		return err
	}

	cfg := passes.Config{Recipe: rec, TrainOutputs: append([]*graph.Node{loss}, grads...),
		EvalOutputs: []*graph.Node{logits}, DOTDir: dotDir, Log: os.Stdout}
	if dump {
		cfg.Dump = os.Stdout
	}
	prep, err := passes.Prepare(g, store, cfg)
	if err != nil {
		return err
	}
	fmt.Print(prep.Report)
	fmt.Println("has FP8 layers:", passes.HasFP8Layers(g))

	xs := make([]float32, batch*64)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	ys := make([]int32, batch)
	for i := range ys {
		ys[i] = int32(i % 10)
	}
	for _, prog := range []*graph.Program{prep.Train, prep.Eval} {
		if err := prog.FeedFloat32(x, xs); err != nil {
			return err
		}
		_ = prog.FeedInt32(labels, ys) // the evaluation program has no labels
	}
	for step := 0; step < 3; step++ {
		if err := prep.Train.Run(); err != nil {
			return err
		}
		l, _ := prep.Train.Scalar(loss)
		fmt.Printf("training step %d: loss %.4f", step, l)
		if st, ok := store.State(fp8.LayerStateKey("block.fc1")).(*fp8.LayerState); ok && st.Input != nil {
			fmt.Printf("  block.fc1 scales: input %.4g weight %.4g grad_output %.4g", st.Input.Scale, st.Weight.Scale, st.GradOutput.Scale)
		}
		fmt.Println()
	}
	if err := prep.Eval.Run(); err != nil {
		return err
	}
	fmt.Printf("evaluation logits[0]: %.4f\n", prep.Eval.Float32(logits)[:10])
	return nil
}
