package passes_test

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

const debugYAML = `
stats:
  enabled: True
  layers:
    layer_name_regex_pattern: mlp\.fc2$
  transformer_engine:
    LogTensorStats:
      enabled: True
      tensors: [activation, weight, output, gradient, dgrad, wgrad]
      stats: [min, max, cur_amax, l2_norm]
      freq: 2
    LogFp8TensorStats:
      enabled: True
      tensors: [activation, weight, gradient]
      stats: [underflows%, overflows%, scale_inv_min, scale_inv_max, mse]
      freq: 2
switches:
  enabled: True
  layers:
    layer_types: [fc1, fc3]
  transformer_engine:
    DisableFP8GEMM:
      enabled: True
      gemms: [wgrad]
    LogFp8TensorStats:
      enabled: True
      tensors: [gradient]
      stats: [mse]
`

// The debug config through Prepare: statistics of mlp.fc2 on even steps
// (written as the program computes them, checked against the tensors
// the program holds), the switches applied and reported, nothing
// allocated per step, and the statistics nodes visible in the dump.
func TestDebugThroughPrepare(t *testing.T) {
	cfg, err := inspect.ParseConfig(strings.NewReader(debugYAML), "debug.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	log, err := inspect.OpenLog(dir, 0)
	require.NoError(t, err)
	m := mlp(t, 16)
	var dump bytes.Buffer
	r := recipe.TE{}
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: r, TrainOutputs: m.trainOf, Debug: cfg, DebugLog: log, Dump: &dump,
		Filter: func(*graph.Node, string) bool { return true }})
	require.NoError(t, err)
	require.Contains(t, mustLayer(t, prep.Report, "mlp.fc1").Reason, `wgrad kept in float32 by DisableFP8GEMM (debug config section "switches")`)
	require.Contains(t, dump.String(), "TensorStats{mlp.fc2 activation}")
	require.Contains(t, dump.String(), "FP8TensorStats{mlp.fc2 gradient}")
	found := false
	for _, n := range prep.Report.Notes {
		if strings.HasPrefix(n, `mlp.fc1: statistics by debug section "switches"`) {
			found = true
			require.Contains(t, n, "not in this layer: FP8 gradient", "fc1's dgrad does not exist and its wgrad is float32")
		}
	}
	require.True(t, found, "%v", prep.Report.Notes)

	for step := 0; step < 3; step++ {
		m.run(t, prep.Train)
	}
	allocs := testing.AllocsPerRun(4, func() { _ = prep.Train.Run() })
	require.Zero(t, allocs, "statistics steps and the others")
	require.NoError(t, log.Close())
	stats, err := inspect.ReadStats(dir)
	require.NoError(t, err)
	steps := map[int64]int{}
	got := map[string]float64{}
	for _, s := range stats {
		steps[s.Step]++
		if s.Step == 2 {
			got[s.Layer+" "+string(s.Tensor)+" "+s.Stat] = s.Value
		}
	}
	// Steps 0, 2 and the AllocsPerRun runs 3..7 at 4 and 6.
	for _, st := range []int64{1, 3, 5, 7} {
		require.Zero(t, steps[st], "step %d has no statistics (freq 2)", st)
	}
	require.NotZero(t, steps[0])
	require.Equal(t, steps[0], steps[2])
	require.NotContains(t, got, "mlp.fc3 gradient mse", "fc3 (10 outputs) stays float32: no cast")
	require.Len(t, got, 6*4+3*5)
	for k, v := range got {
		require.False(t, math.IsNaN(v), k)
	}
	require.GreaterOrEqual(t, got["mlp.fc2 activation min"], 0.0, "a ReLU output")
	require.Equal(t, got["mlp.fc2 activation max"], got["mlp.fc2 activation cur_amax"])
	require.Greater(t, got["mlp.fc2 weight l2_norm"], 0.0)
	require.Equal(t, got["mlp.fc2 weight scale_inv_min"], got["mlp.fc2 weight scale_inv_max"], "tensorwise: one scale")
	require.Less(t, got["mlp.fc2 weight mse"], 1e-3)
	require.Zero(t, got["mlp.fc2 weight overflows%"])
}

// The statistics are the tensors' own: a one-layer model whose input
// and weight are known, at step 0.
func TestDebugStatisticsValues(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 16, 32)
	w := g.Param("fc.weight", 16, 32)
	cfg, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc]}
  transformer_engine:
    LogTensorStats: {enabled: True, tensors: [activation, weight], stats: [min, max, mean, l1_norm, dynamic_range]}
    LogFp8TensorStats: {enabled: True, tensors: [activation], stats: [underflows%, flushed%, overflows%, scale_inv_min, mse]}
`), "s.yaml")
	require.NoError(t, err)
	m := linearModel(t, g, x, w)
	dir := t.TempDir()
	log, err := inspect.OpenLog(dir, 0)
	require.NoError(t, err)
	// Delayed scaling with scale 1 at step 0: 1e-4 underflows, 500 saturates.
	xs := make([]float32, 16*32)
	for i := range xs {
		xs[i] = float32(i%7) - 3
	}
	xs[5], xs[6] = 1e-4, 500
	prep, err := passes.Prepare(g, m.store, passes.Config{Recipe: recipe.TE{Format: recipe.AllE4M3}, TrainOutputs: m.outs, Debug: cfg, DebugLog: log})
	require.NoError(t, err)
	require.NoError(t, prep.Train.FeedFloat32(x, xs))
	require.NoError(t, prep.Train.Run())
	require.NoError(t, log.Close())
	stats, err := inspect.ReadStats(dir)
	require.NoError(t, err)
	got := map[string]float64{}
	for _, s := range stats {
		got[string(s.Tensor)+" "+s.Stat] = s.Value
	}
	var l1 float64
	mn, mx := math.Inf(1), math.Inf(-1)
	amin := math.Inf(1)
	for _, v := range xs {
		l1 += math.Abs(float64(v))
		mn, mx = math.Min(mn, float64(v)), math.Max(mx, float64(v))
		if v != 0 {
			amin = math.Min(amin, math.Abs(float64(v)))
		}
	}
	require.Equal(t, mn, got["activation min"])
	require.Equal(t, mx, got["activation max"])
	require.InDelta(t, l1, got["activation l1_norm"], 1e-9)
	require.InDelta(t, math.Log2(500/amin), got["activation dynamic_range"], 1e-12)
	// Transformer Engine's underflows%: every code 0x00, the 73 exact
	// zeros of the input (i%7 == 3) and 1e-4, below E4M3's smallest
	// subnormal; Octet's flushed%: the non-zero 1e-4 alone.
	require.InDelta(t, 100*74.0/float64(len(xs)), got["activation underflows%"], 1e-12, "exact zeros and 1e-4")
	require.InDelta(t, 100.0/float64(len(xs)), got["activation flushed%"], 1e-12, "1e-4 is below E4M3's smallest subnormal")
	require.InDelta(t, 100.0/float64(len(xs)), got["activation overflows%"], 1e-12, "500 saturates to 448")
	require.Equal(t, 1.0, got["activation scale_inv_min"])
	require.InDelta(t, (52.0*52+1e-8)/float64(len(xs)), got["activation mse"], 1e-6)
	require.Contains(t, got, "weight mean")
}

type linear struct {
	store *graph.Store
	outs  []*graph.Node
}

// linearModel is y = x·wᵀ summed into a loss, with its gradient.
func linearModel(t *testing.T, g *graph.Graph, x, w *graph.Node) linear {
	out := ops.Linear("fc", x, w, nil)
	loss := ops.Sum(ops.Mul(out, out))
	grads, err := graph.Grad(loss, w)
	require.NoError(t, err)
	store := initStore(t, g, 3)
	return linear{store: store, outs: append([]*graph.Node{loss}, grads...)}
}

// PerTensorScaling casts the chosen GEMM operands with one current scale
// per tensor; the other casts keep the recipe's delayed scaling; the
// report and the dump say so; the step trains.
func TestPerTensorScaling(t *testing.T) {
	cfg, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc2]}
  transformer_engine:
    PerTensorScaling:
      enabled: True
      gemms_struct:
        - gemm: wgrad
          tensors: [gradient]
        - gemm: fprop
`), "s.yaml")
	require.NoError(t, err)
	m := mlp(t, 16)
	var dump bytes.Buffer
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf, Debug: cfg, Dump: &dump})
	require.NoError(t, err)
	got := quantizeConfigs(m, m.trainOf, "mlp.fc2")
	require.Equal(t, fp8.CurrentScaling, got["mlp.fc2/quantize.grad_output.current"].Kind, "wgrad's gradient")
	require.Equal(t, fp8.DelayedScaling, got["mlp.fc2/quantize.grad_output"].Kind, "dgrad's gradient keeps delayed scaling")
	require.Equal(t, fp8.CurrentScaling, got["mlp.fc2/quantize.input.current"].Kind)
	require.Equal(t, fp8.CurrentScaling, got["mlp.fc2/quantize.weight.current"].Kind)
	require.Equal(t, fp8.DelayedScaling, got["mlp.fc2/quantize.weight"].Kind, "dgrad's weight")
	require.Equal(t, fp8.DelayedScaling, got["mlp.fc2/quantize.input"].Kind, "wgrad's activation")
	require.Contains(t, strings.Join(prep.Report.Notes, "\n"), `mlp.fc2: wgrad gradient cast with per-tensor current scaling (PerTensorScaling, debug config section "s")`)
	require.Contains(t, dump.String(), "Quantize{E5M2,current,grad_output}")
	m.run(t, prep.Train)
	l, err := prep.Train.Scalar(m.loss)
	require.NoError(t, err)
	require.False(t, math.IsNaN(float64(l)))
	for _, bad := range []string{
		"s:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    PerTensorScaling: {enabled: True, tensors: [activation]}\n",
		"s:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    PerTensorScaling: {enabled: True, gemms: [fprop], tensors: [output]}\n",
		"s:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    PerTensorScaling: {enabled: True}\n",
	} {
		_, err := inspect.ParseConfig(strings.NewReader(bad), "b.yaml")
		require.Error(t, err, bad)
	}
}

// FakeQuant: the chosen operands are rounded through FP8 and back, and
// their GEMM runs in float32 on them; the report says which, the layer's
// FP8 GEMM list leaves it out, and the forward equals a float32 product
// of the fake-quantized operands.
func TestFakeQuant(t *testing.T) {
	cfg, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc2]}
  transformer_engine:
    FakeQuant:
      enabled: True
      gemms: [fprop]
      tensors: [activation, weight]
      quant_format: FP8E5M2
`), "s.yaml")
	require.NoError(t, err)
	m := mlp(t, 16)
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf, Debug: cfg})
	require.NoError(t, err)
	require.Equal(t, []string{"dgrad", "wgrad"}, mustLayer(t, prep.Report, "mlp.fc2").FP8)
	require.Contains(t, strings.Join(prep.Report.Notes, "\n"), `mlp.fc2: fprop computed in high precision on fake-quantized activation and weight (FakeQuant FP8E5M2, debug config section "s")`)
	k := countKinds(m.trainOf)
	require.Equal(t, 2, k["FakeQuant"])
	var dump bytes.Buffer
	require.NoError(t, m.g.WriteText(&dump, m.trainOf...))
	require.Contains(t, dump.String(), "FakeQuant{E5M2}")
	m.run(t, prep.Train)
	l, err := prep.Train.Scalar(m.loss)
	require.NoError(t, err)
	require.False(t, math.IsNaN(float64(l)))
	for _, bad := range []string{
		"s:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    FakeQuant: {enabled: True, gemms: [fprop]}\n",
		"s:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    FakeQuant: {enabled: True, gemms: [fprop], quant_format: FP4}\n",
	} {
		_, err := inspect.ParseConfig(strings.NewReader(bad), "b.yaml")
		require.Error(t, err, bad)
	}
}

// The diagnosis the debug tools are for: a margin large enough to push
// activations below E4M3's range shows as more than half of the first
// layer's activation flushed to zero in the log; keeping the forward
// GEMMs in high precision (DisableFP8GEMM fprop) brings the loss back to
// within 1% of float32 over the same steps.
func TestDebugDiagnosesAMarginTooLarge(t *testing.T) {
	const steps = 30
	train := func(r recipe.Recipe, cfgYAML string) ([]float32, []inspect.Stat) {
		m := mlp(t, 16)
		var cfg *inspect.Config
		var log *inspect.Log
		dir := t.TempDir()
		if cfgYAML != "" {
			var err error
			cfg, err = inspect.ParseConfig(strings.NewReader(cfgYAML), "d.yaml")
			require.NoError(t, err)
			log, err = inspect.OpenLog(dir, 0)
			require.NoError(t, err)
		}
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: r, TrainOutputs: m.trainOf, Debug: cfg, DebugLog: log,
			Filter: func(*graph.Node, string) bool { return true }})
		require.NoError(t, err)
		params, err := optim.Bind(m.store, prep.Train, m.params, m.grads)
		require.NoError(t, err)
		opt := optim.NewAdamW(params, 0)
		var losses []float32
		for s := 0; s < steps; s++ {
			m.run(t, prep.Train)
			opt.Step(1e-3)
			l, _ := prep.Train.Scalar(m.loss)
			losses = append(losses, l)
		}
		if log == nil {
			return losses, nil
		}
		require.NoError(t, log.Close())
		stats, err := inspect.ReadStats(dir)
		require.NoError(t, err)
		return losses, stats
	}
	mean := func(l []float32) float64 {
		var s float64
		for _, v := range l {
			s += float64(v)
		}
		return s / float64(len(l))
	}
	ref, _ := train(nil, "")
	big := recipe.TE{Margin: 17}
	look := `
look:
  enabled: True
  layers: {layer_types: [fc1]}
  transformer_engine:
    LogFp8TensorStats: {enabled: True, tensors: [activation], stats: [flushed%], start_step: 1}
`
	bad, stats := train(big, look)
	require.NotEmpty(t, stats)
	for _, s := range stats {
		require.Greater(t, s.Value, 50.0, "step %d: %s %s flushed%%", s.Step, s.Layer, s.Tensor)
	}
	fixed, _ := train(big, look+`
    DisableFP8GEMM: {enabled: True, gemms: [fprop]}
fc_rest:
  enabled: True
  layers: {layer_types: [fc]}
  transformer_engine:
    DisableFP8GEMM: {enabled: True, gemms: [fprop]}
`)
	gap := func(l []float32) float64 { return math.Abs(mean(l)/mean(ref) - 1) }
	require.Less(t, gap(fixed), 0.01, "float32 %.4f, fprop in high precision %.4f", mean(ref), mean(fixed))
	require.Greater(t, gap(bad), gap(fixed), "the margin hurt: %.4f vs %.4f", mean(bad), mean(ref))
}

// Debugging off — no config, or one whose sections are all disabled —
// compiles the program of today: the same dump, the same schedule.
func TestDebugOffChangesNothing(t *testing.T) {
	off, err := inspect.ParseConfig(strings.NewReader("s:\n  enabled: False\n  layers: {layer_types: [fc]}\n  transformer_engine:\n    LogTensorStats: {enabled: True, tensors: [weight], stats: [max]}\n"), "off.yaml")
	require.NoError(t, err)
	var dumps [2]bytes.Buffer
	var sched [2]int
	for i, cfg := range []*inspect.Config{nil, off} {
		m := mlp(t, 16)
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf, Debug: cfg, Dump: &dumps[i]})
		require.NoError(t, err)
		sched[i] = len(prep.Train.Schedule())
	}
	require.Equal(t, dumps[0].String(), dumps[1].String())
	require.Equal(t, sched[0], sched[1])
	require.NotContains(t, dumps[1].String(), "Stats")
}

// Debug called directly: without outputs it looks at every node (a
// float32 model's layers included); each backward tensor reads its own
// GEMM; a layer with every tensor present has a plain note; a missing
// log is refused unless another rank writes.
func TestDebugDirect(t *testing.T) {
	cfg, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc3]}
  transformer_engine:
    LogTensorStats: {enabled: True, tensors: [activation, weight, output, gradient, dgrad, wgrad], stats: [max]}
`), "s.yaml")
	require.NoError(t, err)
	m := mlp(t, 16)
	log, err := inspect.OpenLog(t.TempDir(), 0)
	require.NoError(t, err)
	defer log.Close()
	rep, nodes, err := passes.Debug(m.g, passes.DebugConfig{Config: cfg, Log: log})
	require.NoError(t, err)
	require.Equal(t, []string{`mlp.fc3: statistics by debug section "s"`}, rep.Notes)
	shapes := map[string]graph.Shape{}
	for _, n := range nodes {
		shapes[n.Name()] = n.Input(0).Shape()
	}
	require.Equal(t, graph.Shape{16, 512}, shapes["mlp.fc3/stats.dgrad"], "dx: batch × in")
	require.Equal(t, graph.Shape{10, 512}, shapes["mlp.fc3/stats.wgrad"], "dW: out × in")
	require.Equal(t, graph.Shape{16, 10}, shapes["mlp.fc3/stats.gradient"])
	require.Equal(t, graph.Shape{10, 512}, shapes["mlp.fc3/stats.weight"])
	// Outputs of another graph: nothing of this one is live, so the
	// section selects no layer, which is an error, not silence.
	_, _, err = passes.Debug(mlp(t, 16).g, passes.DebugConfig{Config: cfg, Log: log}, m.trainOf...)
	require.ErrorContains(t, err, `passes: debug: section "s" (layer_types [fc3]) selects no linear layer of this model`)
	none, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc3]}
  transformer_engine:
    LogTensorStats: {enabled: True, tensors: [activation], stats: [max]}
typo:
  enabled: True
  layers: {layer_name_regex_pattern: 'mlp\.fc[45]'}
  transformer_engine:
    LogTensorStats: {enabled: True, tensors: [activation], stats: [max]}
`), "none.yaml")
	require.NoError(t, err)
	_, _, err = passes.Debug(mlp(t, 16).g, passes.DebugConfig{Config: none, Log: log})
	require.ErrorContains(t, err, `passes: debug: section "typo" (layer_name_regex_pattern mlp\.fc[45]) selects no linear layer of this model (an earlier section may take them first); its linear layers: mlp.fc1, mlp.fc2, mlp.fc3`)

	_, _, err = passes.Debug(mlp(t, 16).g, passes.DebugConfig{Config: cfg})
	require.ErrorContains(t, err, `section "s" asks for statistics of mlp.fc3, and there is no log for them`)
	comms, _ := dist.NewLocal(2)
	_, _, err = passes.Debug(mlp(t, 16).g, passes.DebugConfig{Config: cfg, Comm: comms[1]})
	require.NoError(t, err, "rank 1 writes nothing")
	_, _, err = passes.Debug(mlp(t, 16).g, passes.DebugConfig{Config: cfg, Comm: comms[0]})
	require.Error(t, err, "rank 0 writes")

	// An evaluation-only Prepare has no Debug stage.
	var plog bytes.Buffer
	e := mlp(t, 16)
	_, err = passes.Prepare(e.g, e.store, passes.Config{Recipe: recipe.TE{}, EvalOutputs: []*graph.Node{e.logits}, Debug: cfg, DebugLog: log, Log: &plog})
	require.NoError(t, err)
	require.NotContains(t, plog.String(), "Debug")
}

// Across ranks the activation statistics merge (the global batch), the
// weight's stay each rank's own (every rank holds it whole), and rank 0
// writes.
func TestDebugMergesAcrossRanks(t *testing.T) {
	cfg, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc2]}
  transformer_engine:
    LogTensorStats: {enabled: True, tensors: [activation, weight], stats: [l1_norm]}
    LogFp8TensorStats: {enabled: True, tensors: [activation, weight], stats: [mse]}
`), "s.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	log, err := inspect.OpenLog(dir, 0)
	require.NoError(t, err)
	local := make([]float64, 2) // each rank's activation l1, weight l1
	var weightL1 float64
	require.NoError(t, dist.RunLocal(2, func(c dist.Communicator) error {
		m := mlp(t, 16)
		for i := range m.xs {
			m.xs[i] *= float32(1 + c.Rank()) // different batches
		}
		l := log
		if c.Rank() != 0 {
			l = nil
		}
		relu := m.g.Lookup("mlp.fc1/relu") // fc2's activation, kept as an output to read it
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: append(append([]*graph.Node{}, m.trainOf...), relu),
			Debug: cfg, DebugLog: l, DebugComm: c})
		if err != nil {
			return err
		}
		m.run(t, prep.Train)
		act := prep.Train.Float32(relu)
		var s float64
		for _, v := range act {
			s += math.Abs(float64(v))
		}
		local[c.Rank()] = s
		if c.Rank() == 0 {
			for _, v := range m.store.Float32("mlp.fc2.weight") {
				weightL1 += math.Abs(float64(v))
			}
		}
		return nil
	}))
	require.NoError(t, log.Close())
	stats, err := inspect.ReadStats(dir)
	require.NoError(t, err)
	got := map[inspect.Tensor]float64{}
	fp8mse := map[inspect.Tensor]float64{}
	for _, s := range stats {
		if s.Stat == "mse" {
			fp8mse[s.Tensor] = s.Value
			continue
		}
		got[s.Tensor] = s.Value
	}
	require.Len(t, stats, 4, "rank 0 alone writes")
	// Rank 0 alone: its own casts.
	m := mlp(t, 16)
	alone, err := inspect.OpenLog(t.TempDir(), 0)
	require.NoError(t, err)
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf, Debug: cfg, DebugLog: alone})
	require.NoError(t, err)
	m.run(t, prep.Train)
	require.NoError(t, alone.Close())
	own, err := inspect.ReadStats(filepath.Dir(alone.Path()))
	require.NoError(t, err)
	for _, s := range own {
		if s.Stat != "mse" {
			continue
		}
		if s.Tensor == inspect.Weight {
			require.InDelta(t, s.Value, fp8mse[inspect.Weight], 1e-6*s.Value, "the weight's cast is every rank's")
		} else {
			require.Greater(t, math.Abs(s.Value-fp8mse[inspect.Activation]), 1e-3*s.Value, "the activation's casts merged (rank 1's batch is larger)")
		}
	}
	require.InDelta(t, local[0]+local[1], got[inspect.Activation], 1e-4*got[inspect.Activation], "merged")
	require.InDelta(t, weightL1, got[inspect.Weight], 1e-4*weightL1, "the weight's own")
}

// TestDebugStatisticsOfBlockRecipes: LogFp8TensorStats under the
// Float8BlockScaling and NVFP4 recipes reports Transformer Engine's
// statistics of the activation's fprop cast, checked against the cast's
// definition: underflows% (codes 0x00: the 73 exact zeros), overflows%,
// scale_inv_min/max over the blocks, mse of the dequantized values.
func TestDebugStatisticsOfBlockRecipes(t *testing.T) {
	for _, rec := range []recipe.Recipe{recipe.Float8Block{}, recipe.NVFP4{}} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 16, 32)
		w := g.Param("fc.weight", 16, 32)
		cfg, err := inspect.ParseConfig(strings.NewReader(`
s:
  enabled: True
  layers: {layer_types: [fc]}
  transformer_engine:
    LogFp8TensorStats: {enabled: True, tensors: [activation], stats: [underflows%, overflows%, scale_inv_min, scale_inv_max, mse]}
`), "s.yaml")
		require.NoError(t, err)
		m := linearModel(t, g, x, w)
		dir := t.TempDir()
		log, err := inspect.OpenLog(dir, 0)
		require.NoError(t, err)
		xs := make([]float32, 16*32)
		for i := range xs {
			xs[i] = float32(i%7) - 3 // 73 exact zeros
		}
		prep, err := passes.Prepare(g, m.store, passes.Config{Recipe: rec, TrainOutputs: m.outs, Debug: cfg, DebugLog: log})
		require.NoError(t, err)
		require.NoError(t, prep.Train.FeedFloat32(x, xs))
		require.NoError(t, prep.Train.Run())
		require.NoError(t, log.Close())
		stats, err := inspect.ReadStats(dir)
		require.NoError(t, err)
		got := map[string]float64{}
		for _, s := range stats {
			got[string(s.Tensor)+" "+s.Stat] = s.Value
		}
		// The definition: the fprop cast of x (1-D blocks along its rows).
		var mse, lo, hi float64
		lo = math.Inf(1)
		zeros := 0
		if _, ok := rec.(recipe.NVFP4); ok {
			q, err := fp8.QuantizeNVFP4(xs, 16, 32, fp8.Quantizer{Kind: fp8.NVFP4Blocks})
			require.NoError(t, err)
			dq := make([]float32, len(xs))
			require.NoError(t, q.Dequantize(dq))
			for i := range xs {
				if q.Code(i/32, i%32) == 0 {
					zeros++
				}
				mse += math.Pow(float64(dq[i]-xs[i]), 2)
			}
			for _, sf := range q.BlockScales {
				s := float64(fp8.E4M3.Decode(sf) * q.SDec)
				lo, hi = math.Min(lo, s), math.Max(hi, s)
			}
		} else {
			codes, inv := make([]uint8, len(xs)), make([]float32, 16)
			require.NoError(t, fp8.QuantizeFloat8Block(codes, inv, xs, 16, 32, fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}))
			for i, c := range codes {
				if c == 0 {
					zeros++
				}
				mse += math.Pow(float64(fp8.E4M3.Decode(c)*inv[i/32]-xs[i]), 2)
			}
			for _, s := range inv {
				lo, hi = math.Min(lo, float64(s)), math.Max(hi, float64(s))
			}
		}
		n := float64(len(xs))
		require.Equal(t, 73, zeros, "%T", rec)
		require.InDelta(t, 100*float64(zeros)/n, got["activation underflows%"], 1e-12, "%T", rec)
		require.Zero(t, got["activation overflows%"], "%T", rec)
		require.Equal(t, lo, got["activation scale_inv_min"], "%T", rec)
		require.Equal(t, hi, got["activation scale_inv_max"], "%T", rec)
		require.InDelta(t, mse/n, got["activation mse"], 1e-9, "%T", rec)
	}
}
