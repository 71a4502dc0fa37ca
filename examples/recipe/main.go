// Command recipe defines an FP8 recipe of its own through the public
// recipe.Recipe interface alone, as a program outside Octet would, and
// trains the MNIST MLP with it beside float32: the layers whose names
// contain -family (the hidden layer, "fc2", by default) cast E4M3 forward
// and E5M2 backward with a current scale per row (per slice along each
// GEMM's contraction axis); every other layer casts MXFP8 blocks. It
// prints the conversion report and both runs' test accuracy.
//
//	go run ./examples/recipe
//	go run ./examples/recipe -family fc1 -epochs 2
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/recipe"
	"github.com/octetml/octet/train"
)

// familyRecipe is the recipe: rowwise current scaling for one family of
// layers, MXFP8 for the rest. It keeps no scaling state and draws
// nothing.
type familyRecipe struct{ family string }

// Backend says which scaling state a layer keeps (Transformer Engine's
// kind: none beyond its casts here).
func (familyRecipe) Backend() fp8.Backend { return fp8.BackendTE }

// Validate refuses an empty family.
func (r familyRecipe) Validate() error {
	if r.family == "" {
		return errors.New("family recipe: no layer family")
	}
	return nil
}

// Label names the recipe in summaries and checkpoints.
func (r familyRecipe) Label() string { return "family/" + r.family }

// EvalQuantized keeps evaluation in float32, as Transformer Engine does
// by default.
func (familyRecipe) EvalQuantized() bool { return false }

// Seeded returns r: the recipe has no stochastic rounding.
func (r familyRecipe) Seeded(uint64) recipe.Recipe { return r }

// Float8AllGather: FSDP gathers the weights in float32.
func (familyRecipe) Float8AllGather() bool { return false }

// LowBitOptimizer: the trainer's optimizer, not MS-AMP's.
func (familyRecipe) LowBitOptimizer() (recipe.MSAMP, bool) { return recipe.MSAMP{}, false }

// NewLayerState keeps no amax history.
func (r familyRecipe) NewLayerState(fqn string) *fp8.LayerState {
	return &fp8.LayerState{FQN: fqn, Backend: r.Backend()}
}

// Lower converts a layer the caller's filter accepts whose dims are
// multiples of 16, choosing each operand's quantizer by its layer and
// tensor role.
func (r familyRecipe) Lower(l recipe.Layer) (recipe.LayerPlan, error) {
	if l.Out%16 != 0 || l.In%16 != 0 {
		return recipe.LayerPlan{Skip: fmt.Sprintf("weight dims [%d %d] are not multiples of 16", l.Out, l.In)}, nil
	}
	if l.Accept != nil && !l.Accept() {
		return recipe.LayerPlan{Skip: "excluded by the filter"}, nil
	}
	var p recipe.LayerPlan
	for _, g := range []fp8.GEMM{fp8.Fprop, fp8.Dgrad, fp8.Wgrad} {
		for i, t := range g.Operands() {
			f := fp8.E4M3
			if t == fp8.RoleGradOutput {
				f = fp8.E5M2
			}
			q := fp8.Quantizer{Kind: fp8.MXFP8Blocks, Format: f}
			if strings.Contains(l.FQN, r.family) {
				q = fp8.Quantizer{Kind: fp8.CurrentScaling, Format: f, Axiswise: true}
			}
			p.GEMMs[g][i] = q
		}
	}
	return p, nil
}

func main() {
	family := flag.String("family", "fc2", "layers whose names contain this get rowwise current scaling; the others MXFP8")
	epochs := flag.Int("epochs", 1, "passes over the training images")
	limit := flag.Int("limit", 12000, "train on the first N images (0: all 60,000)")
	flag.Parse()
	set, test, err := mnist.Load("")
	check(err)
	if *limit > 0 {
		set = set.Subset(*limit)
	}
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x, y := g.Input("x", graph.Float32, rows, mnist.Pixels), g.Input("label", graph.Int32, rows)
		mlp, err := nn.NewMLP(b, "mlp", []int{mnist.Pixels, 256, 256, 10}, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		logits := mlp.Forward(x)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(logits, y), Logits: logits}, g.Err()
	}
	for _, p := range []precision.Config{{}, {MixedPrecision: "fp8", Use: familyRecipe{*family}}} {
		tr, err := train.New(train.Config{Model: model, Precision: p, BatchSize: 128, EvalBatchSize: 1000, LR: 1e-3, Seed: 1})
		check(err)
		res, err := tr.Fit(set, train.Run{Epochs: *epochs, Eval: test})
		check(err)
		if p.Use != nil {
			fmt.Print(tr.Report())
		}
		fmt.Printf("%s %s: test accuracy %.2f%%, %.2f ms/step\n", precision.DisplayName(res.Precision), res.Recipe, 100*res.Eval.Accuracy, res.MsPerStep())
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "recipe:", err)
		os.Exit(1)
	}
}
