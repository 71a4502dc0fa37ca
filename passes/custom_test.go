package passes_test

import (
	"math"
	"strings"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestCustomRecipe: a custom recipe with MXFP8 forward and NVFP4
// backward for mlp.fc1 and high precision for mlp.fc2 converts as asked
// (each GEMM's casts of the family chosen, fc2 kept with the reason, a
// note per layer listing its GEMMs) and trains; GEMMs that cannot be
// multiplied are refused naming the layer and the GEMM.
func TestCustomRecipe(t *testing.T) {
	mx := fp8.Quantizer{Kind: fp8.MXFP8Blocks, Format: fp8.E4M3}
	rec := recipe.Custom{Quantizer: func(fqn string, g fp8.GEMM, tensor fp8.TensorRole) fp8.Quantizer {
		switch {
		case fqn == "mlp.fc2":
			return fp8.Quantizer{}
		case g == fp8.Fprop:
			return mx
		case tensor == fp8.RoleWeight:
			return fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2}
		case tensor == fp8.RoleGradOutput:
			return fp8.Quantizer{Kind: fp8.NVFP4Blocks, Stochastic: true, RHT: g == fp8.Wgrad}
		}
		return fp8.Quantizer{Kind: fp8.NVFP4Blocks, RHT: g == fp8.Wgrad}
	}}
	m := mlp(t, 16)
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: rec, TrainOutputs: m.trainOf, NoLayerNormFusion: true})
	require.NoError(t, err)
	require.Equal(t, []string{"mlp.fc1"}, prep.Report.Converted())
	notes := strings.Join(prep.Report.Notes, "\n")
	require.Contains(t, notes, "mlp.fc1: custom recipe: fprop MXFP8 E4M3 × MXFP8 E4M3; dgrad NVFP4 1×16 stochastic × NVFP4 16×16; wgrad NVFP4 1×16 rht stochastic × NVFP4 1×16 rht")
	for _, l := range prep.Report.Layers {
		if l.FQN == "mlp.fc2" {
			require.Contains(t, l.Reason, "custom recipe keeps its three GEMMs in high precision")
		}
	}
	scalings := map[string]fp8.QuantizerKind{}
	for _, n := range prep.Train.Schedule() {
		if cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n); ok {
			scalings[n.Name()] = cfg.Kind
		}
	}
	require.Equal(t, fp8.MXFP8Blocks, scalings["mlp.fc1/quantize.input.axis1"])
	require.Equal(t, fp8.MXFP8Blocks, scalings["mlp.fc1/quantize.weight.axis1"])
	require.Equal(t, fp8.NVFP4Blocks, scalings["mlp.fc1/quantize.grad_output.axis0.rht"])
	require.Equal(t, fp8.NVFP4Blocks, scalings["mlp.fc1/quantize.input.axis0.rht"])
	m.run(t, prep.Train)

	for _, c := range []struct {
		name string
		q    func(fqn string, g fp8.GEMM, tensor fp8.TensorRole) fp8.Quantizer
		says []string
	}{
		{"two 2-D", func(_ string, g fp8.GEMM, _ fp8.TensorRole) fp8.Quantizer {
			return fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 2}
		}, []string{`layer "mlp.fc1"`, "fprop GEMM", "2-D"}},
		{"one high precision", func(_ string, g fp8.GEMM, tensor fp8.TensorRole) fp8.Quantizer {
			if g == fp8.Dgrad && tensor == fp8.RoleWeight {
				return fp8.Quantizer{}
			}
			return fp8.Quantizer{Kind: fp8.CurrentScaling}
		}, []string{"dgrad GEMM", "high precision"}},
		{"two families", func(_ string, g fp8.GEMM, tensor fp8.TensorRole) fp8.Quantizer {
			if tensor == fp8.RoleWeight {
				return fp8.Quantizer{Kind: fp8.MXFP8Blocks}
			}
			return fp8.Quantizer{Kind: fp8.CurrentScaling}
		}, []string{"different families"}},
		{"two E5M2", func(string, fp8.GEMM, fp8.TensorRole) fp8.Quantizer {
			return fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E5M2}
		}, []string{"E5M2"}},
		{"bad block dim", func(string, fp8.GEMM, fp8.TensorRole) fp8.Quantizer {
			return fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 3}
		}, []string{"block dimension 3"}},
	} {
		m := mlp(t, 16)
		_, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.Custom{Quantizer: c.q}, TrainOutputs: m.trainOf})
		require.Error(t, err, c.name)
		for _, s := range c.says {
			require.Contains(t, err.Error(), s, c.name)
		}
	}
	m = mlp(t, 16)
	_, err = passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.Custom{}, TrainOutputs: m.trainOf})
	require.ErrorContains(t, err, "no Quantizer")
}

// TestBackwardOverride: with high_precision the backward GEMMs of every
// recipe (delayed, MXFP8, Float8BlockScaling, NVFP4) are float32 MatMuls
// on the float32 operands; with dequantized they read the forward's
// casts decoded (one Dequantize node per cast, shared); only the fprop
// stays quantized, the report says why, and the step runs.
func TestBackwardOverride(t *testing.T) {
	recipes := []recipe.Recipe{recipe.TE{}, recipe.Float8Block{}, recipe.NVFP4{}, recipe.TE{UseMXFP8BlockScaling: true}}
	for _, r := range recipes {
		for _, ov := range []recipe.BackwardOverride{recipe.BackwardHighPrecision, recipe.BackwardDequantized} {
			m := mlp(t, 16)
			prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.WithBackward(r, ov), TrainOutputs: m.trainOf, NoFusion: true})
			require.NoError(t, err, "%T %v", r, ov)
			kinds := map[string]int{}
			for _, n := range prep.Train.Schedule() {
				kinds[n.Op().Type()]++
				if n.Is(ops.KindScaledMatMul) {
					require.Equal(t, graph.Fprop, n.Role(), "%T %v: %s is a quantized backward GEMM", r, ov, n.Name())
				}
			}
			if ov == recipe.BackwardDequantized {
				require.Equal(t, 3, kinds["Dequantize"], "%T: fc1's input and fc2's weight and input", r) // fc1's dgrad is dead
			} else {
				require.Zero(t, kinds["Dequantize"])
			}
			for _, l := range prep.Report.Layers {
				if l.Converted {
					require.Equal(t, []string{"fprop"}, l.FP8, l.FQN)
					require.Contains(t, l.Reason, "backward override", l.FQN)
				}
			}
			m.run(t, prep.Train)
		}
	}
}

// badBackward is a recipe of one's own whose plans carry an override
// that does not exist.
type badBackward struct{ recipe.TE }

func (r badBackward) Lower(l recipe.Layer) (recipe.LayerPlan, error) {
	p, err := r.TE.Lower(l)
	p.Backward = 5
	return p, err
}

// A plan's backward override must be one of the three; the refusal
// names the layer.
func TestPlanBackwardIsChecked(t *testing.T) {
	m := mlp(t, 16)
	_, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: badBackward{}, TrainOutputs: m.trainOf})
	require.ErrorContains(t, err, `layer "mlp.fc1": the recipe's backward override 5`)
}

// The dequantized backward of a layer whose input is a sequence ([batch,
// time, in]) multiplies the 2-D view of the forward's cast: its weight
// gradient equals, bit for bit, that of the same layer given the input
// already flattened.
func TestBackwardDequantizedOnSequences(t *testing.T) {
	const b, tt, in, out = 2, 8, 32, 16
	xs := make([]float32, b*tt*in)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i)*0.37)) * 2
	}
	grad := func(shape ...int) []float32 {
		g := graph.New()
		x := g.Input("x", graph.Float32, shape...)
		w := g.Param("fc.weight", out, in)
		y := ops.Linear("fc", x, w, nil)
		store := initStore(t, g, 7)
		prep, err := passes.Prepare(g, store, passes.Config{Loss: ops.Mean(ops.Mul(y, y)), Params: []*graph.Node{w},
			Recipe: recipe.WithBackward(recipe.TE{}, recipe.BackwardDequantized)})
		require.NoError(t, err, "%v", shape)
		require.NoError(t, prep.Train.FeedFloat32(x, xs))
		require.NoError(t, prep.Train.Run())
		return append([]float32(nil), prep.Train.Float32(prep.Grads[0])...)
	}
	require.Equal(t, grad(b*tt, in), grad(b, tt, in))
}
