package passes_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// The tests in this file pin behaviours that mutation testing found
// unguarded: each fails when the behaviour it names changes.

// quantizeConfigs lists the cast configuration of every live Quantize
// node of a layer, by node name.
func quantizeConfigs(m *model, outs []*graph.Node, layer string) map[string]ops.QuantizeConfig {
	got := map[string]ops.QuantizeConfig{}
	for _, n := range graph.Live(graph.Options{Training: true}, outs...) {
		if cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n); ok && strings.HasPrefix(n.Name(), layer+"/") {
			got[n.Name()] = cfg
		}
	}
	return got
}

// The AO recipes cast as they say: tensorwise with one current scale per
// tensor, rowwise with axiswise scales along each GEMM's contraction axis
// (so a tensor used by two GEMMs is cast twice), rowwise_with_gw_hp with
// the weight gradient's GEMM in high precision.
func TestAORecipesCastConfigs(t *testing.T) {
	all := func(*graph.Node, string) bool { return true }
	for _, c := range []struct {
		name string
		want map[string]ops.QuantizeConfig
	}{
		{"tensorwise", map[string]ops.QuantizeConfig{
			"mlp.fc2/quantize.input":       {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}, Tensor: fp8.RoleInput},
			"mlp.fc2/quantize.weight":      {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}, Tensor: fp8.RoleWeight},
			"mlp.fc2/quantize.grad_output": {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E5M2}, Tensor: fp8.RoleGradOutput},
		}},
		{"rowwise", map[string]ops.QuantizeConfig{
			"mlp.fc2/quantize.input.axis1":       {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3, Pow2: true}, Axis: 1, Tensor: fp8.RoleInput},
			"mlp.fc2/quantize.input.axis0":       {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3, Pow2: true}, Axis: 0, Tensor: fp8.RoleInput},
			"mlp.fc2/quantize.weight.axis1":      {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3, Pow2: true}, Axis: 1, Tensor: fp8.RoleWeight},
			"mlp.fc2/quantize.weight.axis0":      {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3, Pow2: true}, Axis: 0, Tensor: fp8.RoleWeight},
			"mlp.fc2/quantize.grad_output.axis1": {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3, Pow2: true}, Axis: 1, Tensor: fp8.RoleGradOutput},
			"mlp.fc2/quantize.grad_output.axis0": {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3, Pow2: true}, Axis: 0, Tensor: fp8.RoleGradOutput},
		}},
	} {
		m := mlp(t, 16)
		ao, err := recipe.NewAO(c.name)
		require.NoError(t, err)
		_, err = passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: ao, Filter: all})
		require.NoError(t, err)
		got := quantizeConfigs(m, m.trainOf, "mlp.fc2")
		require.Equal(t, c.want, got, c.name)
	}
	// rowwise_with_gw_hp: the wgrad GEMM reads float32 input and
	// gradient (no axis-0 casts), the dgrad GEMM a tensorwise weight.
	m := mlp(t, 16)
	ao, err := recipe.NewAO("rowwise_with_gw_hp")
	require.NoError(t, err)
	_, err = passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: ao, Filter: all})
	require.NoError(t, err)
	require.Equal(t, map[string]ops.QuantizeConfig{
		"mlp.fc2/quantize.input.axis1":       {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3}, Axis: 1, Tensor: fp8.RoleInput},
		"mlp.fc2/quantize.weight.axis1":      {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3}, Axis: 1, Tensor: fp8.RoleWeight},
		"mlp.fc2/quantize.weight":            {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}, Tensor: fp8.RoleWeight},
		"mlp.fc2/quantize.grad_output.axis1": {Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3}, Axis: 1, Tensor: fp8.RoleGradOutput},
	}, quantizeConfigs(m, m.trainOf, "mlp.fc2"))
}

// A layer's scaling state already in the store (a checkpoint's, or an
// earlier conversion's) is kept: converting an evaluation graph, or
// converting after a load, neither resets nor replaces it.
func TestConversionKeepsExistingLayerState(t *testing.T) {
	m := mlp(t, 16)
	_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	key := fp8.LayerStateKey("mlp.fc1")
	st := m.store.State(key).(*fp8.LayerState)
	st.Input.Scale, st.Input.History[0] = 3, 7

	// An evaluation graph over the same store.
	e := mlp(t, 4)
	_, err = passes.ConvertLinear(e.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	require.Same(t, st, m.store.State(key), "the state object is shared, not replaced")
	require.Equal(t, float32(3), st.Input.Scale)
	require.Equal(t, float32(7), st.Input.History[0])
	for _, n := range e.g.Nodes() {
		if cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n); ok && n.Name() == "mlp.fc1/quantize.input" {
			require.Same(t, st.Input, cfg.Meta, "the eval cast records into the shared meta")
		}
	}
	// A state of another backend is refused, naming the layer.
	ao, _ := recipe.NewAO("tensorwise")
	_, err = passes.ConvertLinear(mlp(t, 4).g, m.store, passes.LinearConfig{Recipe: ao, Filter: func(*graph.Node, string) bool { return true }})
	require.ErrorContains(t, err, `layer "mlp.fc1" already has te scaling state`)
}

func countKinds(outs []*graph.Node) map[string]int {
	k := map[string]int{}
	for _, n := range graph.Live(graph.Options{Training: true}, outs...) {
		k[n.Op().Type()]++
	}
	return k
}

// ConvertModel's LayerNorm fusion: on, the LayerNorm feeding an FP8
// linear writes FP8 itself (LayerNormQuantize); off, the plain LayerNorm
// and its cast are back; on again, the same fused node is restored.
func TestConvertModelLayerNormRoundTrip(t *testing.T) {
	m := lnLinear(t, 16, false)
	_, ref := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
	rep, err := passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: true, Linear: true, LayerNorm: true, Recipe: recipe.TE{}, Outputs: m.trainOf})
	require.NoError(t, err)
	k := countKinds(m.trainOf)
	require.Equal(t, 1, k["LayerNormQuantize"])
	require.Zero(t, k["LayerNorm"])
	require.NotEmpty(t, rep.Notes)

	rep, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, LayerNorm: true})
	require.NoError(t, err)
	require.Equal(t, []string{"block.ln: LayerNorm fusion undone", "block.fc1/gelu: GELU fusion undone"}, rep.Notes)
	k = countKinds(m.trainOf)
	require.Zero(t, k["LayerNormQuantize"])
	require.Equal(t, 1, k["LayerNorm"])
	require.True(t, passes.HasFP8Layers(m.g), "the linears stay FP8")

	rep, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: true, LayerNorm: true, Outputs: m.trainOf})
	require.NoError(t, err)
	require.Equal(t, []string{"2 fusion(s) into FP8 casts restored"}, rep.Notes)
	require.Equal(t, 1, countKinds(m.trainOf)["LayerNormQuantize"])

	_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, Linear: true, LayerNorm: true})
	require.NoError(t, err)
	_, back := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
	require.Equal(t, ref, back)
}

// A model prepared (converted and autowrapped) converts back to float32:
// the training program computes the float32 model's outputs again.
func TestAutowrappedModelConvertsBack(t *testing.T) {
	m := mlp(t, 16)
	_, ref := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
	_, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf, EvalOutputs: []*graph.Node{m.logits}})
	require.NoError(t, err)
	require.True(t, passes.HasFP8Layers(m.g))
	rep, err := passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, Linear: true, LayerNorm: true})
	require.NoError(t, err)
	require.Equal(t, "float32", rep.Backend)
	require.False(t, passes.HasFP8Layers(m.g))
	k := countKinds(m.trainOf)
	require.Zero(t, k["ScaledMatMul"]+k["Quantize"])
	_, back := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
	require.Equal(t, ref, back)
}

// Prepare with evaluation outputs only compiles no training program, and
// the evaluation program runs.
func TestPrepareEvalOnly(t *testing.T) {
	m := mlp(t, 16)
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{UseAutocastDuringEval: true}, EvalOutputs: []*graph.Node{m.logits}})
	require.NoError(t, err)
	require.Nil(t, prep.Train)
	require.NotNil(t, prep.Eval)
	require.NotEmpty(t, prep.Report.Converted())
	m.run(t, prep.Eval)
	require.Len(t, prep.Eval.Float32(m.logits), 16*10)
	_, err = passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}})
	require.ErrorContains(t, err, "no outputs")
}

// A pipeline stops at a pass that fails and at a check that fails, naming
// the pass, and runs no later pass.
func TestPipelineStopsAtFailures(t *testing.T) {
	m := mlp(t, 4)
	later := false
	laterPass := passes.Pass{Name: "Later", Run: func(*graph.Graph) (string, error) { later = true; return "", nil }}
	pl := passes.Pipeline{Outputs: m.trainOf, Passes: []passes.Pass{
		{Name: "Broken", Run: func(*graph.Graph) (string, error) { return "", errors.New("boom") }}, laterPass}}
	require.EqualError(t, pl.Run(m.g), "passes: Broken: boom")
	require.False(t, later)
	pl.Passes[0] = passes.Pass{Name: "Illegal", Run: func(*graph.Graph) (string, error) { return "ok", nil },
		Check: func(*graph.Graph) error { return errors.New("not legal here") }}
	require.EqualError(t, pl.Run(m.g), "passes: after Illegal: not legal here")
	require.False(t, later)
	pl.Passes[0].Check = nil
	require.NoError(t, pl.Run(m.g))
	require.True(t, later)
}

// Rewrite returns how many replacements each rule made; a rule whose
// Apply returns nil or the root itself replaces nothing.
func TestRewriteCounts(t *testing.T) {
	m := mlp(t, 4)
	nodes := m.g.Nodes()
	counts, err := passes.Rewrite(m.g, nodes,
		passes.Rule{Name: "relu", Pattern: &passes.Pattern{Kind: ops.KindReLU}, Apply: func(n *graph.Node, _ passes.Match) (*graph.Node, error) {
			return ops.ReLU(n.Input(0)), nil
		}},
		passes.Rule{Name: "none", Pattern: &passes.Pattern{Kind: ops.KindLinear}, Apply: func(n *graph.Node, _ passes.Match) (*graph.Node, error) { return nil, nil }},
		passes.Rule{Name: "self", Pattern: &passes.Pattern{Kind: ops.KindLinear}, Apply: func(n *graph.Node, _ passes.Match) (*graph.Node, error) { return n, nil }},
	)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"relu": 2}, counts)
	_, err = passes.Rewrite(m.g, nodes, passes.Rule{Name: "fails", Pattern: &passes.Pattern{Kind: ops.KindReLU},
		Apply: func(*graph.Node, passes.Match) (*graph.Node, error) { return nil, errors.New("no") }})
	require.EqualError(t, err, "no")
}

// A layer converted, reverted and converted again reuses its FP8 nodes,
// whichever of its three GEMMs were FP8 (the others overridden to
// float32); the report says why each GEMM stayed float32.
func TestReconversionReusesEachGEMM(t *testing.T) {
	for _, c := range []struct {
		ov   recipe.Override
		kept string
	}{
		{recipe.Override{Dgrad: true, Wgrad: true}, "dgrad kept in float32 by the recipe; wgrad kept in float32 by the recipe"},
		{recipe.Override{Fprop: true, Wgrad: true}, "fprop kept in float32 by the recipe; wgrad kept in float32 by the recipe"},
		{recipe.Override{Fprop: true, Dgrad: true}, "fprop kept in float32 by the recipe; dgrad kept in float32 by the recipe"},
		{recipe.Override{Fprop: true}, "fprop kept in float32 by the recipe"},
	} {
		m := mlp(t, 16)
		r := recipe.TE{OverrideLinearPrecision: c.ov}
		rep, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: r})
		require.NoError(t, err)
		require.Equal(t, c.kept, mustLayer(t, rep, "mlp.fc2").Reason, "%+v", c.ov) // fc1 has no dgrad
		nodes := len(m.g.Nodes())
		_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, Linear: true})
		require.NoError(t, err)
		require.False(t, passes.HasFP8Layers(m.g))
		rep, err = passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: r})
		require.NoError(t, err)
		require.True(t, passes.HasFP8Layers(m.g))
		require.Equal(t, "converted again (earlier FP8 nodes reused)", mustLayer(t, rep, "mlp.fc2").Reason, "%+v", c.ov)
		require.Equal(t, nodes, len(m.g.Nodes()), "no new nodes")
	}
}

// Autowrap's note counts the layers it wrapped and says how evaluation
// runs.
func TestAutowrapNote(t *testing.T) {
	m := mlp(t, 16)
	_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	rep, err := passes.Autowrap(m.g, passes.AutowrapConfig{})
	require.NoError(t, err)
	require.Equal(t, []string{"2 layer(s) wrapped; evaluation runs float32"}, rep.Notes)
	m2 := mlp(t, 16)
	_, err = passes.ConvertLinear(m2.g, m2.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	rep, err = passes.Autowrap(m2.g, passes.AutowrapConfig{EvalFP8: true})
	require.NoError(t, err)
	require.Equal(t, []string{"2 layer(s) wrapped; evaluation runs FP8"}, rep.Notes)
}

// ConvertLN's notes say which
// cast took the LayerNorm's place and how many float32 readers remain.
func TestConvertLNNotes(t *testing.T) {
	for _, c := range []struct {
		residual bool
		note     string
	}{
		{false, "block.ln: LayerNorm fused into its input cast (block.fc1/quantize.input)"},
		{true, "block.ln: LayerNorm fused into its input cast (block.fc1/quantize.input); float32 output kept for 1 other consumer(s)"},
	} {
		m := lnLinear(t, 16, c.residual)
		_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
		require.NoError(t, err)
		rep, err := passes.ConvertLN(m.g, m.trainOf...)
		require.NoError(t, err)
		require.Equal(t, []string{c.note, "block.fc1/gelu: GELU fused into its input cast (block.fc2/quantize.input)"}, rep.Notes)
		require.Len(t, rep.Fusions, 2)
		require.Equal(t, passes.Fusion{Kind: passes.FusedLayerNorm, Node: "block.ln", Fused: "block.ln/fp8"}, rep.Fusions[0])
		require.Equal(t, passes.FusedGELU, rep.Fusions[1].Kind)
		require.Equal(t, "block.fc1/gelu", rep.Fusions[1].Node)
		require.Equal(t, "cross-entropy gradient", passes.FusedCrossEntropyGrad.String())
	}
	// Without outputs every node counts (the replaced float32 GEMMs
	// too), and the LayerNorm still fuses.
	m := lnLinear(t, 16, false)
	_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	rep, err := passes.ConvertLN(m.g)
	require.NoError(t, err)
	require.Len(t, rep.Notes, 2, "the LayerNorm and the GELU")
	require.Equal(t, 1, countKinds(m.trainOf)["LayerNormQuantize"])
	require.Equal(t, 1, countKinds(m.trainOf)["GELUQuantize"])
}

// Converting an autowrapped layer back and forth leaves its autocast
// switch reading the FP8 and float32 branches it was built with.
func TestAutocastSwitchSurvivesRoundTrips(t *testing.T) {
	m := mlp(t, 16)
	_, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf})
	require.NoError(t, err)
	var sw *graph.Node
	for _, n := range m.g.Nodes() {
		if n.Name() == "mlp.fc2.autocast" {
			sw = n
		}
	}
	require.NotNil(t, sw)
	before := sw.Inputs()
	require.NotSame(t, before[0], before[1], "two branches")
	for i := 0; i < 2; i++ {
		_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, Linear: true})
		require.NoError(t, err)
		require.Equal(t, before, sw.Inputs(), "after converting back")
		_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: true, Linear: true, Recipe: recipe.TE{}})
		require.NoError(t, err)
		require.Equal(t, before, sw.Inputs(), "after converting again")
	}
}

// Prepare's pipeline dumps the training graph (backward GEMMs included)
// when both programs are asked for, and numbers the DOT files by stage.
func TestPrepareDumpsTheTrainingGraph(t *testing.T) {
	m := lnLinear(t, 8, false)
	var dump, log bytes.Buffer
	dir := t.TempDir()
	_, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf,
		EvalOutputs: []*graph.Node{m.logits}, Dump: &dump, DOTDir: dir, Log: &log})
	require.NoError(t, err)
	require.Equal(t, "ConvertLinear: 2 of 2 linear layers converted (te)\nConvertLN: 1 LayerNorm fusion(s), 1 GELU fusion(s)\nAutowrap: 2 layer(s) wrapped; evaluation runs float32\nFuse: 2 elementwise node(s) fused: 1 into GEMM epilogues, 0 chain(s) into single loops\n", log.String())
	after := dump.String()[strings.Index(dump.String(), "== after Autowrap =="):]
	require.Contains(t, after, `"block.fc1.wgrad.fp8"`)
	require.Contains(t, after, `"block.fc2.dgrad.fp8"`)
	files, _ := filepath.Glob(filepath.Join(dir, "*.dot"))
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	require.Equal(t, []string{"00-input.dot", "01-after_ConvertLinear.dot", "02-after_ConvertLN.dot", "03-after_Autowrap.dot", "04-after_Fuse.dot"}, files)
}

// A classifier's cross-entropy gradient read only by its delayed-scaling
// grad_output cast is fused into it; with current scaling (torchao) it
// is not, and neither is one that a bias gradient also reads.
func TestConvertLNFusesTheCrossEntropyGradient(t *testing.T) {
	var log bytes.Buffer
	build := func(rec recipe.Recipe, bias bool) (passes.Report, map[string]int) {
		log.Reset()
		g := graph.New()
		x := g.Input("x", graph.Float32, 16, 32)
		y := g.Input("labels", graph.Int32, 16)
		w1, w2 := g.Param("fc1.weight", 32, 32), g.Param("fc2.weight", 16, 32)
		params := []*graph.Node{w1, w2}
		var b2 *graph.Node
		if bias {
			b2 = g.Param("fc2.bias", 16)
			params = append(params, b2)
		}
		loss := ops.CrossEntropy(ops.Linear("fc2", ops.ReLU(ops.Linear("fc1", x, w1, nil)), w2, b2), y)
		grads, err := graph.Grad(loss, params...)
		require.NoError(t, err)
		store := graph.NewStore()
		require.NoError(t, store.Init(g, func(_ *graph.Node, v []float32) {}))
		outs := append([]*graph.Node{loss}, grads...)
		all := func(*graph.Node, string) bool { return true } // fc2 converts under every recipe
		prep, err := passes.Prepare(g, store, passes.Config{Recipe: rec, TrainOutputs: outs, Filter: all, Log: &log})
		require.NoError(t, err)
		kinds := map[string]int{}
		for _, n := range graph.Live(graph.Options{Training: true}, outs...) {
			kinds[n.Op().Type()]++
		}
		return prep.Report, kinds
	}
	rep, kinds := build(recipe.TE{}, false)
	require.Contains(t, rep.Notes, "fc2/crossentropygrad: cross-entropy gradient fused into its grad_output cast (fc2/quantize.grad_output)")
	// Its logits read by nothing else, the classifier is then fused with
	// its loss and the FP8 gradient: no float32 logits in training.
	require.Contains(t, rep.Notes, "fc2.fp8: classifier fused with its cross-entropy and gradient cast (fc2/crossentropygrad/fp8/classifier): logits computed 16 rows at a time, never whole")
	require.Equal(t, 1, kinds["ClassifierCrossEntropy"])
	require.Equal(t, 1, kinds["ClassifierLoss"])
	require.Zero(t, kinds["CrossEntropyGradQuantize"])
	require.Zero(t, kinds["CrossEntropy"])
	require.Equal(t, 3, kinds["ScaledMatMul"], "fc1's fprop and wgrad, fc2's wgrad (its dgrad carries ReLU's gradient); not fc2's fprop")
	require.Equal(t, 1, kinds["ScaledMatMul+ReLUGrad"])
	require.Zero(t, kinds["CrossEntropyGrad"], "the float32 gradient is gone")
	require.Contains(t, log.String(), "ConvertLN: 0 LayerNorm fusion(s), 1 cross-entropy gradient fusion(s), 1 classifier fusion(s)\n")
	for _, c := range []struct {
		rec  recipe.Recipe
		bias bool
	}{{recipe.AO{}, false}, {recipe.TE{}, true}} {
		rep, kinds = build(c.rec, c.bias)
		require.Contains(t, rep.Converted(), "fc2")
		require.Zero(t, kinds["CrossEntropyGradQuantize"], "%T bias %v", c.rec, c.bias)
		require.Equal(t, 1, kinds["CrossEntropyGrad"])
		for _, n := range rep.Notes {
			require.NotContains(t, n, "cross-entropy")
		}
		if _, te := c.rec.(recipe.TE); te {
			require.Contains(t, log.String(), "ConvertLN: 0 LayerNorm fusion(s)\n")
		}
	}
}
