package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestTrainsWithItsOwnRecipe runs the program as a user would: the recipe
// of its own converts the two hidden-size layers and trains as well as
// float32.
func TestTrainsWithItsOwnRecipe(t *testing.T) {
	r := clitest.Run(t, nil, "-limit", "3000")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Regexp(t, `mlp.fc1 +\[256 784\] +FP8 fprop\+wgrad`, r.Stdout)
	require.Regexp(t, `mlp.fc2 +\[256 256\] +FP8 fprop\+dgrad\+wgrad`, r.Stdout)
	require.Regexp(t, `mlp.fc3 +\[10 256\] +kept float32 +weight dims \[10 256\] are not multiples of 16`, r.Stdout)
	acc := map[string]float64{}
	for _, m := range regexp.MustCompile(`(float32 -|FP8 family/fc2): test accuracy ([0-9.]+)%`).FindAllStringSubmatch(r.Stdout, -1) {
		a, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		acc[m[1]] = a
	}
	require.Len(t, acc, 2, r.Stdout)
	require.Greater(t, acc["FP8 family/fc2"], 80.0)
	require.InDelta(t, acc["float32 -"], acc["FP8 family/fc2"], 2.0)
}

// TestRecipeLowersAsDefined: the compiler casts the family's operands
// with a current scale per row and the others in MXFP8 blocks, as the
// recipe's plan says; an empty family is refused.
func TestRecipeLowersAsDefined(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 32, 64)
	y := g.Input("y", graph.Int32, 32)
	w1, w2 := g.Param("net.fc1.weight", 64, 64), g.Param("net.fc2.weight", 16, 64)
	loss := ops.CrossEntropy(ops.Linear("net.fc2", ops.ReLU(ops.Linear("net.fc1", x, w1, nil)), w2, nil), y)
	grads, err := graph.Grad(loss, w1, w2)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, store.Init(g, func(_ *graph.Node, v []float32) {}))
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: familyRecipe{"fc2"}, TrainOutputs: append([]*graph.Node{loss}, grads...)})
	require.NoError(t, err)
	require.Equal(t, []string{"net.fc1", "net.fc2"}, prep.Report.Converted())
	casts := map[string]ops.QuantizeConfig{}
	for _, n := range prep.Train.Schedule() {
		if q, ok := graph.SettingsOf[ops.QuantizeConfig](n); ok {
			casts[n.Name()] = q
		}
	}
	in, ok := casts["net.fc2/quantize.input.axis1"]
	require.True(t, ok, "%v", casts)
	require.True(t, in.Kind == fp8.CurrentScaling && in.Axiswise, "%v", in.Quantizer)
	grad, ok := casts["net.fc2/quantize.grad_output.axis1"]
	require.True(t, ok, "%v", casts)
	require.Equal(t, fp8.E5M2, grad.Format)
	mx, ok := casts["net.fc1/quantize.weight.axis1"]
	require.True(t, ok, "%v", casts)
	require.Equal(t, fp8.MXFP8Blocks, mx.Kind)
	_, err = train.New(train.Config{Model: func(int, bool) (*train.Model, error) { return nil, nil }, BatchSize: 1,
		Precision: precision.Config{MixedPrecision: "fp8", Use: familyRecipe{}}})
	require.ErrorIs(t, err, precision.ErrInvalid)
	require.ErrorContains(t, err, "no layer family")
}
