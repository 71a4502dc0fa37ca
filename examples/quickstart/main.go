// Command quickstart trains a small MLP on a synthetic two-spirals task
// with Octet's graph API: build the forward graph, append its backward
// graph with graph.Grad, compile training and evaluation programs that
// share parameters, and step them with plain SGD.
//
//	go run ./examples/quickstart            # train and report accuracy
//	go run ./examples/quickstart -dump      # also print the graph
//	go run ./examples/quickstart -dot g.dot # write it as Graphviz DOT
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

func main() {
	steps := flag.Int("steps", 2000, "training steps")
	batch := flag.Int("batch", 128, "batch size")
	hidden := flag.Int("hidden", 64, "hidden units per layer")
	lr := flag.Float64("lr", 0.05, "learning rate")
	seed := flag.Uint64("seed", 1, "random seed")
	dump := flag.Bool("dump", false, "print the compiled graph as text")
	dot := flag.String("dot", "", "write the graph in Graphviz DOT to this file")
	flag.Parse()
	if _, err := run(*steps, *batch, *hidden, float32(*lr), *seed, *dump, *dot); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// spirals returns n points of two interleaved spirals and their class.
func spirals(rng *rand.Rand, n int) ([]float32, []int32) {
	x := make([]float32, 2*n)
	y := make([]int32, n)
	for i := 0; i < n; i++ {
		c := int32(rng.IntN(2))
		r := rng.Float64()
		// float64(…) around a product rounds it, so that no machine fuses
		// it into the add that follows (arm64 does, amd64 does not).
		a := float64(2*math.Pi*r) + float64(math.Pi*float64(c))
		x[2*i] = float32(float64(r*math.Cos(a)) + float64(0.02*rng.NormFloat64()))
		x[2*i+1] = float32(float64(r*math.Sin(a)) + float64(0.02*rng.NormFloat64()))
		y[i] = c
	}
	return x, y
}

// run trains and returns the held-out accuracy.
func run(steps, batch, hidden int, lr float32, seed uint64, dump bool, dotFile string) (float64, error) {
	g := graph.New()
	x := g.Input("x", graph.Float32, batch, 2)
	labels := g.Input("labels", graph.Int32, batch)
	dims := []int{2, hidden, hidden, 2}
	h := x
	var params []*graph.Node
	for i := 0; i+1 < len(dims); i++ {
		name := fmt.Sprintf("mlp.fc%d", i+1)
		w := g.Param(name+".weight", dims[i+1], dims[i])
		b := g.Param(name+".bias", dims[i+1])
		params = append(params, w, b)
		h = ops.Linear(name, h, w, b)
		if i+2 < len(dims) {
			h = ops.Tanh(h)
		}
	}
	logits := h
	loss := ops.CrossEntropy(logits, labels)
	grads, err := graph.Grad(loss, params...)
	if err != nil {
		return 0, err
	}

	rng := rand.New(rand.NewPCG(seed, 0))
	store := graph.NewStore()
	if err := store.Init(g, func(n *graph.Node, v []float32) {
		if n.Shape().Rank() == 2 { // Xavier-uniform weights, zero biases
			lim := math.Sqrt(6 / float64(n.Shape()[0]+n.Shape()[1]))
			for i := range v {
				v[i] = float32((2*rng.Float64() - 1) * lim) // fused: exact (k·2⁻⁵³·2 − 1)
			}
		}
	}); err != nil {
		return 0, err
	}
	train, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
	if err != nil {
		return 0, err
	}
	eval, err := graph.Compile(g, store, graph.Options{}, logits)
	if err != nil {
		return 0, err
	}
	if dump {
		if err := g.WriteText(os.Stdout); err != nil {
			return 0, err
		}
	}
	if dotFile != "" {
		f, err := os.Create(dotFile)
		if err != nil {
			return 0, err
		}
		if err := g.WriteDOT(f); err != nil {
			f.Close()
			return 0, err
		}
		if err := f.Close(); err != nil {
			return 0, err
		}
	}

	velocity := make([][]float32, len(params))
	for i, p := range params {
		velocity[i] = make([]float32, p.Shape().Numel())
	}
	for step := 1; step <= steps; step++ {
		xs, ys := spirals(rng, batch)
		if err := train.FeedFloat32(x, xs); err != nil {
			return 0, err
		}
		if err := train.FeedInt32(labels, ys); err != nil {
			return 0, err
		}
		if err := train.Run(); err != nil {
			return 0, err
		}
		for i, p := range params { // SGD with momentum 0.9
			w, dw, v := store.Float32(p.Name()), train.Float32(grads[i]), velocity[i]
			for j := range w { // float32(…): the same bits on every machine (see spirals)
				v[j] = float32(0.9*v[j]) + dw[j]
				w[j] -= float32(lr * v[j])
			}
		}
		if step%(steps/10) == 0 || step == 1 {
			l, _ := train.Scalar(loss)
			fmt.Printf("step %5d  loss %.4f\n", step, l)
		}
	}

	correct, total := 0, 0
	for k := 0; k < 20; k++ {
		xs, ys := spirals(rng, batch)
		if err := eval.FeedFloat32(x, xs); err != nil {
			return 0, err
		}
		if err := eval.Run(); err != nil {
			return 0, err
		}
		out := eval.Float32(logits)
		for i, y := range ys {
			pred := int32(0)
			if out[2*i+1] > out[2*i] {
				pred = 1
			}
			if pred == y {
				correct++
			}
			total++
		}
	}
	st := train.Stats()
	fmt.Printf("held-out accuracy %.1f%% (%d points); %d nodes in the training program, %d KiB of planned buffers (%d KiB without reuse)\n",
		100*float64(correct)/float64(total), total, len(train.Schedule()), st.ArenaBytes/1024, st.NaiveBytes/1024)
	return float64(correct) / float64(total), nil
}
