package passes_test

import (
	"math"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestBF16RecipeMLP converts the MLP to bf16 mixed precision: every
// layer (the 10-wide head too: bf16 has no size condition), all three
// GEMMs BF16MatMul, no casts; the forward output equals a float64
// reference on bf16-rounded operands within the accumulation bound; the
// gradients are close to float32's; converting back is bit-identical
// to float32.
func TestBF16RecipeMLP(t *testing.T) {
	m := mlp(t, 16)
	_, ref := compileRun(t, m, graph.Options{Training: true}, append([]*graph.Node{m.logits}, m.trainOf...)...)

	rep, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.BF16{}})
	require.NoError(t, err)
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2", "mlp.fc3"}, rep.Converted())
	for _, l := range rep.Layers {
		want := []string{"fprop", "dgrad", "wgrad"}
		if l.FQN == "mlp.fc1" {
			want = []string{"fprop", "wgrad"} // the input needs no gradient
		}
		require.Equal(t, want, l.FP8, l.FQN)
	}
	require.Contains(t, rep.String(), "bf16 conversion (bf16 backend)")
	require.False(t, passes.HasFP8Layers(m.g), "bf16 layers are not FP8 layers")
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2", "mlp.fc3"}, passes.BF16Layers(m.g))
	kinds, roles := live(m)
	require.Equal(t, 8, kinds["BF16MatMul"])
	require.Zero(t, kinds["Quantize"]+kinds["ScaledMatMul"]+kinds["Linear"]+kinds["MatMul"])
	require.Equal(t, map[graph.Role]int{graph.Fprop: 3, graph.Dgrad: 2, graph.Wgrad: 3}, roles)

	_, got := compileRun(t, m, graph.Options{Training: true}, append([]*graph.Node{m.logits}, m.trainOf...)...)
	// fc1's output against float64 on bf16-rounded x and W.
	x, w, b := m.xs, m.store.Float32("mlp.fc1.weight"), m.store.Float32("mlp.fc1.bias")
	var fc1 *graph.Node
	for _, n := range m.g.Nodes() {
		if n.Name() == "mlp.fc1" {
			fc1 = m.g.Resolve(n)
		}
	}
	require.Equal(t, "BF16MatMul", fc1.Op().Type())
	p, err := graph.Compile(m.g, m.store, graph.Options{Training: true}, fc1)
	require.NoError(t, err)
	m.run(t, p)
	h := p.Float32(fc1)
	bf := func(v float32) float64 { return float64(kernels.BF16ToFloat32(kernels.BF16FromFloat32(v))) }
	for i := 0; i < 16; i++ {
		for j := 0; j < 512; j++ {
			var s, abs float64
			for k := 0; k < 784; k++ {
				v := bf(x[i*784+k]) * bf(w[j*784+k])
				s, abs = s+v, abs+math.Abs(v)
			}
			want := s + float64(b[j])
			require.InDelta(t, want, float64(h[i*512+j]), 784*0x1p-24*abs+0x1p-24*math.Abs(want)+1e-30, "h[%d,%d]", i, j)
		}
	}
	// Logits, loss and gradients: bf16 rounding, not garbage (the
	// gradients also see ReLU masks flip, hence a lower bar, still above
	// torchao's FP8 bars of 18 and 17 dB).
	for i := range ref {
		bar := 35.0
		if i >= 2 {
			bar = 20
		}
		require.Greater(t, sqnr(ref[i], got[i]), bar, "output %d", i)
		require.NotEqual(t, ref[i], got[i], "output %d changed", i)
	}

	_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, Linear: true})
	require.NoError(t, err)
	require.Empty(t, passes.BF16Layers(m.g))
	_, back := compileRun(t, m, graph.Options{Training: true}, append([]*graph.Node{m.logits}, m.trainOf...)...)
	require.Equal(t, ref, back, "converted back: float32 bit for bit")

	_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: true, Linear: true, Recipe: recipe.BF16{}, Outputs: m.trainOf})
	require.NoError(t, err)
	_, again := compileRun(t, m, graph.Options{Training: true}, append([]*graph.Node{m.logits}, m.trainOf...)...)
	require.Equal(t, got, again, "converted again: the same bf16 results")
}

// TestBF16Prepare runs bf16 through Prepare: the evaluation program is
// bf16 too, the training step allocates nothing, a filter keeps a layer
// float32, and an FP8 conversion on top of bf16 state is refused.
func TestBF16Prepare(t *testing.T) {
	m := mlp(t, 16)
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.BF16{}, TrainOutputs: m.trainOf, EvalOutputs: []*graph.Node{m.logits},
		Filter: func(_ *graph.Node, fqn string) bool { return fqn != "mlp.fc3" }})
	require.NoError(t, err)
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2"}, prep.Report.Converted())
	l, _ := prep.Report.Layer("mlp.fc3")
	require.Equal(t, "excluded by the filter", l.Reason)
	m.run(t, prep.Train)
	m.run(t, prep.Eval)
	evalOut := append([]float32(nil), prep.Eval.Float32(m.logits)...)
	// The eval logits come from bf16 GEMMs: equal to a training-graph
	// forward of the same batch (no dropout here).
	pf, err := graph.Compile(m.g, m.store, graph.Options{Training: true}, m.logits)
	require.NoError(t, err)
	m.run(t, pf)
	require.Equal(t, pf.Float32(m.logits), evalOut)
	allocs := testing.AllocsPerRun(5, func() { require.NoError(t, prep.Train.Run()) })
	require.Zero(t, allocs, "training step allocations")

	_, err = passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.ErrorContains(t, err, "bf16")
}
