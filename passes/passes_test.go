package passes_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
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

// model is a built graph with its training outputs and feeds.
type model struct {
	g       *graph.Graph
	store   *graph.Store
	x, y    *graph.Node
	logits  *graph.Node
	loss    *graph.Node
	params  []*graph.Node
	grads   []*graph.Node
	xs      []float32
	ys      []int32
	trainOf []*graph.Node
}

func initStore(t testing.TB, g *graph.Graph, seed uint64) *graph.Store {
	rng := rand.New(rand.NewPCG(seed, 3))
	store := graph.NewStore()
	require.NoError(t, store.Init(g, func(n *graph.Node, v []float32) {
		if n.Shape().Rank() == 2 {
			std := math.Sqrt(2 / float64(n.Shape()[1]))
			for i := range v {
				v[i] = float32(rng.NormFloat64() * std)
			}
		} else if strings.HasSuffix(n.Name(), ".weight") { // LayerNorm γ
			for i := range v {
				v[i] = 1 + 0.1*float32(rng.NormFloat64())
			}
		}
	}))
	return store
}

// mlp builds the 784-512-512-10 ReLU MLP with a cross-entropy loss and
// its backward graph.
func mlp(t testing.TB, batch int) *model {
	m := &model{g: graph.New()}
	g := m.g
	m.x = g.Input("x", graph.Float32, batch, 784)
	m.y = g.Input("labels", graph.Int32, batch)
	dims := []int{784, 512, 512, 10}
	h := m.x
	for i := 0; i+1 < len(dims); i++ {
		name := fmt.Sprintf("mlp.fc%d", i+1)
		w, b := g.Param(name+".weight", dims[i+1], dims[i]), g.Param(name+".bias", dims[i+1])
		m.params = append(m.params, w, b)
		h = ops.Linear(name, h, w, b)
		if i < 2 {
			h = ops.ReLU(h)
		}
	}
	m.logits = h
	m.finish(t, batch, 784, 10)
	return m
}

// lnLinear builds x → LayerNorm → Linear(64→32) → GELU → Linear(32→16)
// with a cross-entropy loss; residual adds a float32 consumer of the
// LayerNorm output.
func lnLinear(t testing.TB, batch int, residual bool) *model {
	m := &model{g: graph.New()}
	g := m.g
	m.x = g.Input("x", graph.Float32, batch, 64)
	m.y = g.Input("labels", graph.Int32, batch)
	gamma, beta := g.Param("block.ln.weight", 64), g.Param("block.ln.bias", 64)
	w1, b1 := g.Param("block.fc1.weight", 32, 64), g.Param("block.fc1.bias", 32)
	w2, b2 := g.Param("block.fc2.weight", 16, 32), g.Param("block.fc2.bias", 16)
	m.params = []*graph.Node{gamma, beta, w1, b1, w2, b2}
	ln := ops.LayerNorm("block.ln", m.x, gamma, beta, ops.LayerNormConfig{})
	h := ops.GELU(ops.Linear("block.fc1", ln, w1, b1))
	out := ops.Linear("block.fc2", h, w2, b2)
	if residual {
		out = ops.Add(out, ops.Sum(ops.Reshape(ln, batch, 16, 4), 2))
	}
	m.logits = out
	m.finish(t, batch, 64, 16)
	return m
}

func (m *model) finish(t testing.TB, batch, in, classes int) {
	m.loss = ops.CrossEntropy(m.logits, m.y)
	var err error
	m.grads, err = graph.Grad(m.loss, m.params...)
	require.NoError(t, err)
	m.trainOf = append([]*graph.Node{m.loss}, m.grads...)
	m.store = initStore(t, m.g, 11)
	rng := rand.New(rand.NewPCG(5, 5))
	m.xs = make([]float32, batch*in)
	for i := range m.xs {
		m.xs[i] = float32(rng.NormFloat64())
	}
	m.ys = make([]int32, batch)
	for i := range m.ys {
		m.ys[i] = rng.Int32N(int32(classes))
	}
}

func (m *model) run(t testing.TB, p *graph.Program) {
	require.NoError(t, p.FeedFloat32(m.x, m.xs))
	if p.Float32(m.y) != nil || true {
		_ = p.FeedInt32(m.y, m.ys) // not every program reads the labels
	}
	require.NoError(t, p.Run())
}

// live counts op types and roles among the nodes a training program runs.
func live(m *model) (map[string]int, map[graph.Role]int) {
	ops, roles := map[string]int{}, map[graph.Role]int{}
	for _, n := range graph.Live(graph.Options{Training: true}, m.trainOf...) {
		ops[n.Op().Type()]++
		if n.Role() != graph.RoleNone {
			roles[n.Role()]++
		}
	}
	return ops, roles
}

func TestConvertLinearMLPTE(t *testing.T) {
	m := mlp(t, 32)
	before, roles := live(m)
	require.Equal(t, 3, before["Linear"])
	require.Equal(t, 5, before["MatMul"]) // 2 dgrad + 3 wgrad
	require.Equal(t, map[graph.Role]int{graph.Fprop: 3, graph.Dgrad: 2, graph.Wgrad: 3}, roles)

	rep, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2"}, rep.Converted())
	fc3, _ := rep.Layer("mlp.fc3")
	require.False(t, fc3.Converted)
	require.Contains(t, fc3.Reason, "[10 512]")
	require.Contains(t, fc3.Reason, "16")
	require.Equal(t, []string{"fprop", "wgrad"}, mustLayer(t, rep, "mlp.fc1").FP8, "fc1 has no dgrad (its input is data)")
	require.Equal(t, []string{"fprop", "dgrad", "wgrad"}, mustLayer(t, rep, "mlp.fc2").FP8)

	after, roles := live(m)
	require.Equal(t, 1, after["Linear"], "only fc3 stays a float32 Linear")
	require.Equal(t, 2, after["MatMul"], "fc3's dgrad and wgrad stay float32")
	require.Equal(t, 5, after["ScaledMatMul"])
	require.Equal(t, 6, after["Quantize"], "input, weight and grad_output casts of fc1 and fc2")
	require.Equal(t, map[graph.Role]int{graph.Fprop: 3, graph.Dgrad: 2, graph.Wgrad: 3}, roles, "roles are preserved")
	require.True(t, passes.HasFP8Layers(m.g))
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2"}, passes.FP8Layers(m.g))

	// HYBRID: forward casts E4M3, grad_output E5M2; one state per layer.
	for _, n := range graph.Live(graph.Options{Training: true}, m.trainOf...) {
		cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n)
		if !ok {
			continue
		}
		want := graph.Float8E4M3
		if cfg.Tensor == fp8.RoleGradOutput {
			want = graph.Float8E5M2
		}
		require.Equal(t, want, n.DType(), n.Name())
		st := m.store.State(fp8.LayerStateKey(strings.Split(n.Name(), "/")[0])).(*fp8.LayerState)
		require.Contains(t, []*fp8.Meta{st.Input, st.Weight, st.GradOutput}, cfg.Meta)
	}
	// Backward FP8 GEMMs link to the FP8 forward node of their layer.
	for _, n := range m.g.Nodes() {
		if n.Op().Type() == "ScaledMatMul" && n.Role() != graph.Fprop {
			require.Equal(t, "ScaledMatMul", n.Forward().Op().Type())
			require.True(t, strings.HasPrefix(n.Name(), n.Forward().Name()[:len("mlp.fcN")]))
		}
	}
	// Converting again changes nothing.
	rep2, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	require.Contains(t, mustLayer(t, rep2, "mlp.fc1").Reason, "already FP8")
	again, _ := live(m)
	require.Equal(t, after, again)
	require.NoError(t, graph.Verify(m.g))
}

func mustLayer(t testing.TB, r passes.Report, fqn string) passes.LayerReport {
	l, ok := r.Layer(fqn)
	require.True(t, ok, fqn)
	return l
}

func TestConvertLinearAODefaultFilter(t *testing.T) {
	m := mlp(t, 16)
	ao, err := recipe.NewAO("tensorwise")
	require.NoError(t, err)
	rep, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: ao})
	require.NoError(t, err)
	require.Equal(t, []string{"mlp.fc2"}, rep.Converted())
	require.Contains(t, mustLayer(t, rep, "mlp.fc1").Reason, "first linear")
	require.Contains(t, mustLayer(t, rep, "mlp.fc3").Reason, "last linear")
	after, _ := live(m)
	require.Equal(t, 2, after["Linear"])
	require.Equal(t, 3, after["ScaledMatMul"])

	// A user filter replaces the default; fc3 (10 % 16 ≠ 0) converts only
	// with pad_inner_dim.
	for _, pad := range []bool{true, false} {
		m := mlp(t, 16)
		ao.PadInnerDim = pad
		rep, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: ao,
			Filter: func(_ *graph.Node, fqn string) bool { return fqn != "mlp.fc1" }})
		require.NoError(t, err)
		if pad {
			require.Equal(t, []string{"mlp.fc2", "mlp.fc3"}, rep.Converted())
		} else {
			require.Equal(t, []string{"mlp.fc2"}, rep.Converted())
			require.Contains(t, mustLayer(t, rep, "mlp.fc3").Reason, "pad_inner_dim")
		}
		require.Contains(t, mustLayer(t, rep, "mlp.fc1").Reason, "filter")
	}
}

// A layer that is not eligible is skipped alone: its later siblings still
// convert (Accelerate's early return skips them).
func TestIneligibleLayerSkippedAlone(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 8, 64)
	h := x
	var params []*graph.Node
	for i, d := range [][2]int{{64, 64}, {64, 40}, {40, 64}, {64, 64}} {
		name := fmt.Sprintf("net.l%d", i)
		w := g.Param(name+".weight", d[1], d[0])
		params = append(params, w)
		h = ops.ReLU(ops.Linear(name, h, w, nil))
	}
	loss := ops.Mean(h)
	_, err := graph.Grad(loss, params...)
	require.NoError(t, err)
	rep, err := passes.ConvertLinear(g, initStore(t, g, 1), passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	require.Equal(t, []string{"net.l0", "net.l3"}, rep.Converted())
	require.Contains(t, mustLayer(t, rep, "net.l1").Reason, "[40 64]")
	require.Contains(t, mustLayer(t, rep, "net.l2").Reason, "[64 40]")
	require.Contains(t, rep.String(), "net.l2")
}

func TestOverrideCombinations(t *testing.T) {
	for mask := 0; mask < 8; mask++ {
		ov := recipe.Override{Fprop: mask&1 != 0, Dgrad: mask&2 != 0, Wgrad: mask&4 != 0}
		m := mlp(t, 16)
		_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{OverrideLinearPrecision: ov}})
		require.NoError(t, err, ov)
		// For fc2 (the layer with all three GEMMs), exactly the overridden
		// GEMMs stay float32.
		kinds := map[graph.Role]string{}
		for _, n := range graph.Live(graph.Options{Training: true}, m.trainOf...) {
			if n.Role() != graph.RoleNone && strings.HasPrefix(n.Name(), "mlp.fc2") {
				kinds[n.Role()] = n.Op().Type()
			}
		}
		hp := func(b bool, fp string, hpKind string) string {
			if b {
				return hpKind
			}
			return fp
		}
		require.Equal(t, map[graph.Role]string{
			graph.Fprop: hp(ov.Fprop, "ScaledMatMul", "Linear"),
			graph.Dgrad: hp(ov.Dgrad, "ScaledMatMul", "MatMul"),
			graph.Wgrad: hp(ov.Wgrad, "ScaledMatMul", "MatMul"),
		}, kinds, "override %v", ov)
		p, err := graph.Compile(m.g, m.store, graph.Options{Training: true}, m.trainOf...)
		require.NoError(t, err)
		m.run(t, p)
	}
}

func compileRun(t testing.TB, m *model, opts graph.Options, outs ...*graph.Node) (*graph.Program, [][]float32) {
	p, err := graph.Compile(m.g, m.store, opts, outs...)
	require.NoError(t, err)
	m.run(t, p)
	vals := make([][]float32, len(outs))
	for i, o := range outs {
		vals[i] = append([]float32(nil), p.Float32(o)...)
	}
	return p, vals
}

func TestConvertModelRoundTrip(t *testing.T) {
	for _, build := range []func() *model{
		func() *model { return mlp(t, 16) },
		func() *model { return lnLinear(t, 16, false) },
	} {
		m := build()
		kindsBefore, _ := live(m)
		_, ref := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)

		rep, err := passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: true, Linear: true, LayerNorm: true,
			Recipe: recipe.TE{}, Outputs: m.trainOf})
		require.NoError(t, err)
		require.NotEmpty(t, rep.Converted())
		require.True(t, passes.HasFP8Layers(m.g))
		_, fp := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
		require.NotEqual(t, ref[0], fp[0], "FP8 changes the loss")

		_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: false, Linear: true, LayerNorm: true})
		require.NoError(t, err)
		require.False(t, passes.HasFP8Layers(m.g))
		kindsAfter, _ := live(m)
		require.Equal(t, kindsBefore, kindsAfter, "the original op kinds are back")
		_, back := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
		require.Equal(t, ref, back, "the same outputs, bit for bit")

		// And to FP8 once more: the earlier FP8 nodes are reused.
		_, err = passes.ConvertModel(m.g, m.store, passes.ModelConfig{ToFP8: true, Linear: true, LayerNorm: true,
			Recipe: recipe.TE{}, Outputs: m.trainOf})
		require.NoError(t, err)
		k2, _ := live(m)
		require.Equal(t, 0, k2["Linear"]-kindsBefore["Linear"]+len(rep.Converted()), "layers are FP8 again")
	}
}

func TestConvertLNFusion(t *testing.T) {
	m := lnLinear(t, 16, false)
	_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	rep, err := passes.ConvertLN(m.g, m.trainOf...)
	require.NoError(t, err)
	require.Len(t, rep.Notes, 2, "the LayerNorm and the GELU")
	require.Contains(t, rep.Notes[0], "block.ln")
	require.Contains(t, rep.Notes[1], "block.fc1/gelu: GELU fused")
	kinds, _ := live(m)
	require.Equal(t, 1, kinds["LayerNormQuantize"])
	require.Equal(t, 0, kinds["LayerNorm"], "the float32 LayerNorm output is gone from training")
	require.Equal(t, 1, kinds["LayerNormGradGamma"], "the backward of the LayerNorm is unchanged")
	// The fused node writes FP8 straight into the fprop GEMM.
	var fused *graph.Node
	for _, n := range graph.Live(graph.Options{Training: true}, m.trainOf...) {
		if n.Op().Type() == "LayerNormQuantize" {
			fused = n
		}
	}
	require.Equal(t, graph.Float8E4M3, fused.DType())
	fc1 := m.g.Lookup("block.fc1.fp8")
	require.Equal(t, fused, fc1.Input(0))
	p, err := graph.Compile(m.g, m.store, graph.Options{Training: true}, m.trainOf...)
	require.NoError(t, err)
	m.run(t, p)

	// With another float32 consumer the LayerNorm keeps its output.
	r := lnLinear(t, 16, true)
	_, err = passes.ConvertLinear(r.g, r.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	rep, err = passes.ConvertLN(r.g, r.trainOf...)
	require.NoError(t, err)
	require.Contains(t, rep.Notes[0], "float32 output kept for 1")
	kinds, _ = live(r)
	require.Equal(t, 1, kinds["LayerNormQuantize"])
	require.Equal(t, 1, kinds["LayerNorm"])
}

// The fused LayerNormQuantize gives the same codes as LayerNorm then
// Quantize with the same state, and records the same amax — on 8 rows
// (one part) and on 1024 (split over the workers, a row with the
// largest value in the first part and, in a second run, a NaN in the
// last).
func TestLayerNormQuantizeMatchesUnfused(t *testing.T) {
	for _, rows := range []int{8, 1024} {
		for _, scaling := range []fp8.Quantizer{{Kind: fp8.DelayedScaling}, {Kind: fp8.CurrentScaling}, {Kind: fp8.CurrentScaling, Axiswise: true}, {Kind: fp8.MXFP8Blocks}} {
			g := graph.New()
			x := g.Input("x", graph.Float32, rows, 64)
			gm, bt := g.Param("ln.weight", 64), g.Param("ln.bias", 64)
			var metas []*fp8.Meta
			mk := func() ops.QuantizeConfig {
				meta := fp8.NewMeta(fp8.E4M3, 4, 0, fp8.MostRecent, 1)
				meta.Scale, meta.ScaleInv = 32, 1.0/32
				metas = append(metas, meta)
				return ops.QuantizeConfig{Quantizer: withFormat(scaling, fp8.E4M3), Meta: meta, Axis: 1, Tensor: fp8.RoleInput}
			}
			a := ops.Quantize(ops.LayerNorm("ln", x, gm, bt, ops.LayerNormConfig{}), mk())
			b := ops.LayerNormQuantize("ln.fused", x, gm, bt, ops.LayerNormConfig{}, mk())
			store := initStore(t, g, 2)
			p, err := graph.Compile(g, store, graph.Options{Training: true}, a, b)
			require.NoError(t, err)
			xs := make([]float32, rows*64)
			for i := range xs {
				xs[i] = float32(math.Sin(float64(i))) * 3
			}
			xs[64+5] = 1e3 // row 1's largest value
			for run := 0; run < 2; run++ {
				if run == 1 && rows > 8 {
					xs[(rows-2)*64+3] = float32(math.NaN())
				}
				require.NoError(t, p.FeedFloat32(x, xs))
				require.NoError(t, p.Run())
				msg := fmt.Sprintf("%s, %d rows, run %d", scaling.String(), rows, run)
				require.Equal(t, p.Float32(a), p.Float32(b), msg)
				// The amaxes recorded (rolled into the window at the
				// step's end) and the scales they gave.
				for i, want := range metas[0].History {
					got := metas[1].History[i]
					require.Equal(t, math.Float32bits(want), math.Float32bits(got), "%s: amax history[%d] %v, want %v", msg, i, got, want)
				}
				require.Equal(t, metas[0].Scale, metas[1].Scale, msg)
			}
		}
	}
}

// TestWorkedExampleThroughGraph reproduces fp8's package-doc worked
// example (16×16 linear, margin 2, HYBRID) through a compiled program.
func TestWorkedExampleThroughGraph(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 16, 16)
	r := g.Input("dy", graph.Float32, 16, 16)
	w := g.Param("fc.weight", 16, 16)
	y := ops.Linear("fc", x, w, nil)
	loss := ops.Sum(ops.Mul(y, r)) // dL/dy = r
	grads, err := graph.Grad(loss, w)
	require.NoError(t, err)
	store := initStore(t, g, 1)
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{Margin: 2}, TrainOutputs: []*graph.Node{loss, grads[0]}})
	require.NoError(t, err)
	st := store.State(fp8.LayerStateKey("fc")).(*fp8.LayerState)
	want := map[string][4]float64{
		"input":       {448, 89.6, 49.778, 34.4615},
		"weight":      {224, 74.667, 44.8, 32},
		"grad_output": {19114.67, 8192, 5213.09, 3822.93},
	}
	fill := func(v float32) []float32 {
		s := make([]float32, 256)
		for i := range s {
			s[i] = v
		}
		return s
	}
	for k := 0; k < 4; k++ {
		require.NoError(t, prep.Train.FeedFloat32(x, fill(float32(k)+0.25)))
		require.NoError(t, prep.Train.FeedFloat32(r, fill(float32(k)+0.75)))
		copy(store.Float32("fc.weight"), fill(float32(k)+0.5))
		require.NoError(t, prep.Train.Run())
		for name, meta := range map[string]*fp8.Meta{"input": st.Input, "weight": st.Weight, "grad_output": st.GradOutput} {
			require.InEpsilon(t, want[name][k], float64(meta.Scale), 1e-4, "%s after step %d", name, k)
		}
	}
}

func sqnr(ref, out []float32) float64 {
	var num, den float64
	for i := range ref {
		d := float64(ref[i]) - float64(out[i])
		num += d * d
		den += float64(ref[i]) * float64(ref[i])
	}
	return 10 * math.Log10(den/num)
}

// TestFP8LinearSQNR compares an FP8 linear layer with float32 on random
// data: output SQNR ≥ 18 dB and weight-gradient SQNR ≥ 17 dB (torchao's
// bar), for each recipe.
func TestFP8LinearSQNR(t *testing.T) {
	rowwise, _ := recipe.NewAO("rowwise")
	tensorwise, _ := recipe.NewAO("tensorwise")
	gwhp, _ := recipe.NewAO("rowwise_with_gw_hp")
	all := func(*graph.Node, string) bool { return true }
	for _, c := range []struct {
		name string
		rec  recipe.Recipe
	}{
		{"TE", recipe.TE{}},
		{"AO tensorwise", tensorwise},
		{"AO rowwise", rowwise},
		{"AO rowwise_with_gw_hp", gwhp},
		{"MXFP8", recipe.TE{UseMXFP8BlockScaling: true}},
		{"MS-AMP", recipe.MSAMP{}},
		{"Float8BlockScaling", recipe.Float8Block{}},
		{"Float8BlockScaling HYBRID, FP32 scales, 2-D inputs", recipe.Float8Block{Hybrid: true, FP32Scales: true, XBlockDim: 2, WBlockDim: 1}},
		{"NVFP4", recipe.NVFP4{}},
		{"NVFP4 without RHT, SR and 2-D", recipe.NVFP4{DisableRHT: true, DisableStochasticRounding: true, Disable2DQuantization: true}},
	} {
		build := func() (*graph.Graph, *graph.Store, *graph.Node, *graph.Node, *graph.Node, *graph.Node, *graph.Node) {
			g := graph.New()
			x := g.Input("x", graph.Float32, 4, 32, 128)
			r := g.Input("r", graph.Float32, 4, 32, 96)
			w, b := g.Param("fc.weight", 96, 128), g.Param("fc.bias", 96)
			y := ops.Linear("fc", x, w, b)
			loss := ops.Sum(ops.Mul(y, r))
			grads, err := graph.Grad(loss, w)
			require.NoError(t, err)
			return g, initStore(t, g, 4), x, r, y, loss, grads[0]
		}
		rng := rand.New(rand.NewPCG(8, 8))
		xs, rs := make([]float32, 4*32*128), make([]float32, 4*32*96)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		for i := range rs {
			rs[i] = float32(rng.NormFloat64())
		}
		runOnce := func(fp bool, steps int) ([]float32, []float32) {
			g, store, x, r, y, loss, dw := build()
			var p *graph.Program
			var err error
			if fp {
				var prep *passes.Prepared
				prep, err = passes.Prepare(g, store, passes.Config{Recipe: c.rec, Filter: all, TrainOutputs: []*graph.Node{loss, y, dw}})
				require.NoError(t, err, c.name)
				require.Equal(t, []string{"fc"}, prep.Report.Converted(), c.name)
				p = prep.Train
			} else {
				p, err = graph.Compile(g, store, graph.Options{Training: true}, loss, y, dw)
				require.NoError(t, err)
			}
			require.NoError(t, p.FeedFloat32(x, xs))
			require.NoError(t, p.FeedFloat32(r, rs))
			for i := 0; i < steps; i++ { // delayed scaling needs a step to learn its scales
				require.NoError(t, p.Run())
			}
			return p.Float32(y), p.Float32(dw)
		}
		ry, rdw := runOnce(false, 1)
		fy, fdw := runOnce(true, 3)
		sy, sw := sqnr(ry, fy), sqnr(rdw, fdw)
		t.Logf("%-22s output SQNR %.1f dB, weight gradient SQNR %.1f dB", c.name, sy, sw)
		barY, barW := 18.0, 17.0
		if _, ok := c.rec.(recipe.NVFP4); ok {
			// 4-bit elements: E2M1 with E4M3 block scales measures
			// 16.7 and 15.4 dB here (the transform and stochastic
			// rounding cost about 1 dB of it), so a bar below FP8's.
			barY, barW = 15.0, 14.0
		}
		require.GreaterOrEqual(t, sy, barY, c.name)
		require.GreaterOrEqual(t, sw, barW, c.name)
	}
}

func TestEvalPrograms(t *testing.T) {
	for _, autocast := range []bool{false, true} {
		m := mlp(t, 16)
		_, ref := compileRun(t, m, graph.Options{}, m.logits)
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{UseAutocastDuringEval: autocast},
			TrainOutputs: m.trainOf, EvalOutputs: []*graph.Node{m.logits}})
		require.NoError(t, err)
		m.run(t, prep.Train)
		st := m.store.State(fp8.LayerStateKey("mlp.fc1")).(*fp8.LayerState)
		before := st.Input.Clone()
		// Switch outputs to compare the eval logits with the training
		// program's FP8 logits.
		_, trainLogits := compileRun(t, m, graph.Options{Training: true}, m.logits)
		after := st.Input.Clone()
		require.Equal(t, before.Steps+1, after.Steps, "a training program records and updates")
		for i := 0; i < 3; i++ {
			m.run(t, prep.Eval)
		}
		require.Equal(t, after, st.Input, "evaluation records no amax and updates nothing")
		got := prep.Eval.Float32(m.logits)
		kinds := map[string]int{}
		for _, n := range prep.Eval.Schedule() {
			kinds[n.Op().Type()]++
		}
		if autocast {
			require.Equal(t, 2, kinds["ScaledMatMul"], "FP8 in evaluation with use_autocast_during_eval")
			require.Greater(t, sqnr(ref[0], got), 15.0)
			require.NotEqual(t, ref[0], got)
			_ = trainLogits
		} else {
			require.Zero(t, kinds["ScaledMatMul"]+kinds["Quantize"], "no FP8 in evaluation by default")
			require.Equal(t, ref[0], got, "evaluation is the float32 model, bit for bit")
		}
	}
}

func TestInvalidCombinations(t *testing.T) {
	rowwise, _ := recipe.NewAO("rowwise")
	e5 := rowwise
	e5.Input.Format, e5.Weight.Format, e5.GradOutput.Format = fp8.E5M2, fp8.E5M2, fp8.E5M2
	e5.InputForGradWeight, e5.WeightForGradInput, e5.GradOutputForGradWeight = e5.Input, e5.Weight, e5.GradOutput
	ag := rowwise
	ag.EnableFSDPFloat8AllGather = true
	for _, c := range []struct {
		name string
		rec  recipe.Recipe
		says []string
	}{
		{"pure-E5M2 rowwise", e5, []string{"E5M2", "E4M3"}},
		{"amax settings with MXFP8", recipe.TE{UseMXFP8BlockScaling: true, AmaxHistoryLen: 16}, []string{"amax_history_len", "unset"}},
		{"float8 all-gather with rowwise weights", ag, []string{"enable_fsdp_float8_all_gather", "tensorwise"}},
		{"MS-AMP O3", recipe.MSAMP{OptLevel: "O3"}, []string{"O2"}},
		{"two 2-D block operands in fprop", recipe.Float8Block{XBlockDim: 2}, []string{"x_block_scaling_dim", "w_block_scaling_dim", "fprop"}},
		{"two 2-D block operands in wgrad", recipe.Float8Block{XBlockDim: 2, WBlockDim: 1, GradBlockDim: 2}, []string{"grad_block_scaling_dim", "x_block_scaling_dim", "wgrad"}},
		{"block dim 3", recipe.Float8Block{GradBlockDim: 3}, []string{"grad_block_scaling_dim 3"}},
		{"negative block epsilon", recipe.Float8Block{AmaxEpsilon: -1}, []string{"amax_epsilon"}},
		{"negative NVFP4 keep_last", recipe.NVFP4{KeepLast: -1}, []string{"keep_last"}},
	} {
		m := mlp(t, 4)
		_, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: c.rec, TrainOutputs: m.trainOf})
		require.Error(t, err, c.name)
		for _, s := range c.says {
			require.Contains(t, err.Error(), s, c.name)
		}
	}
}

func TestAutowrapTwiceAndPipelineDumps(t *testing.T) {
	m := lnLinear(t, 8, false)
	var dump, log bytes.Buffer
	dir := t.TempDir()
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.TE{}, TrainOutputs: m.trainOf,
		EvalOutputs: []*graph.Node{m.logits}, Dump: &dump, DOTDir: dir, Log: &log})
	require.NoError(t, err)
	out := dump.String()
	for _, stage := range []string{"== input ==", "== after ConvertLinear ==", "== after ConvertLN ==", "== after Autowrap ==", "== after Fuse =="} {
		require.Contains(t, out, stage)
	}
	require.Contains(t, out, "LayerNormQuantize")
	require.Contains(t, log.String(), "ConvertLinear: 2 of 2 linear layers converted (te)")
	files, _ := filepath.Glob(filepath.Join(dir, "*.dot"))
	require.Len(t, files, 5)
	b, _ := os.ReadFile(files[3])
	require.Contains(t, string(b), "Switch")

	rep, err := passes.Autowrap(m.g, passes.AutowrapConfig{})
	require.NoError(t, err)
	require.Contains(t, rep.Notes[0], "already applied")
	m.run(t, prep.Train)
}

func TestFP8TrainingStepAllocatesNothing(t *testing.T) {
	for _, rec := range []recipe.Recipe{recipe.TE{}, recipe.TE{UseMXFP8BlockScaling: true}, recipe.Float8Block{}, recipe.Float8Block{FP32Scales: true}, recipe.NVFP4{}} {
		m := mlp(t, 32)
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: rec, TrainOutputs: m.trainOf})
		require.NoError(t, err)
		m.run(t, prep.Train)
		allocs := testing.AllocsPerRun(3, func() {
			if err := prep.Train.Run(); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs)
	}
}

// Prepare without a recipe converts nothing (Accelerate's
// mixed_precision="no"): the programs compute what graph.Compile's do,
// and further passes still run in the checked pipeline.
func TestPrepareWithoutRecipe(t *testing.T) {
	m := mlp(t, 16)
	_, ref := compileRun(t, m, graph.Options{Training: true}, m.trainOf...)
	ran := false
	probe := passes.Pass{Name: "Probe", Run: func(*graph.Graph) (string, error) { ran = true; return "", nil }}
	prep, err := passes.Prepare(m.g, m.store, passes.Config{TrainOutputs: m.trainOf, EvalOutputs: []*graph.Node{m.logits}, Passes: []passes.Pass{probe}})
	require.NoError(t, err)
	require.True(t, ran, "further passes run")
	require.Empty(t, prep.Report.Layers)
	require.Empty(t, m.store.StateKeys(), "no FP8 state")
	kinds, _ := live(m)
	require.Zero(t, kinds["ScaledMatMul"]+kinds["Quantize"])
	require.NotNil(t, prep.Eval)
	m.run(t, prep.Train)
	for i, o := range m.trainOf {
		require.Equal(t, ref[i], prep.Train.Float32(o), o.Name())
	}
}

// TestFloat8BlockConversion: with the Float8BlockScaling recipe each
// converted layer's input and gradient get two 1-D casts (one along each
// GEMM's contraction axis: Transformer Engine quantizes the column-wise
// copy again from the source) and its weight one 2-D cast that both the
// fprop and the dgrad read; there is no scaling state to update, and the
// recipe's dims and formats reach the casts.
func TestFloat8BlockConversion(t *testing.T) {
	for _, hybrid := range []bool{false, true} {
		m := mlp(t, 16)
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.Float8Block{Hybrid: hybrid}, TrainOutputs: m.trainOf, NoLayerNormFusion: true})
		require.NoError(t, err)
		require.Equal(t, []string{"mlp.fc1", "mlp.fc2"}, prep.Report.Converted())
		casts := map[string]ops.QuantizeConfig{}
		readers := map[string]int{}
		for _, n := range prep.Train.Schedule() {
			if cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n); ok {
				casts[n.Name()] = cfg
			}
			for _, in := range n.Inputs() {
				if _, ok := graph.SettingsOf[ops.QuantizeConfig](in); ok {
					readers[in.Name()]++
				}
			}
		}
		for _, l := range []string{"mlp.fc1", "mlp.fc2"} {
			for name, want := range map[string][3]int{ // axis, dim, E5M2?
				"/quantize.input.axis1": {1, 1, 0}, "/quantize.input.axis0": {0, 1, 0},
				"/quantize.weight.tiles": {0, 2, 0}, "/quantize.grad_output.axis1": {1, 1, 1}, "/quantize.grad_output.axis0": {0, 1, 1},
			} {
				if l == "mlp.fc1" && name == "/quantize.grad_output.axis1" {
					continue // the first layer's dgrad is dead: x is data
				}
				cfg, ok := casts[l+name]
				require.True(t, ok, "%s%s missing (casts %v)", l, name, casts)
				f := fp8.E4M3
				if want[2] == 1 && hybrid {
					f = fp8.E5M2
				}
				require.Equal(t, fp8.Float8Blocks, cfg.Kind, l+name)
				require.Equal(t, [2]int{want[0], want[1]}, [2]int{cfg.Axis, cfg.BlockDim}, l+name)
				require.Equal(t, f, cfg.Format, l+name)
			}
			if l == "mlp.fc2" {
				require.Equal(t, 2, readers[l+"/quantize.weight.tiles"], "fprop and dgrad share the weight's tiles")
			}
			st := m.store.State(fp8.LayerStateKey(l)).(*fp8.LayerState)
			require.Nil(t, st.Input, "no scaling state")
		}
		require.Len(t, casts, 9)
		m.run(t, prep.Train)
	}
}

// TestNVFP4Conversion: with the NVFP4 recipe a layer's weight gets one
// 16×16-tiled cast (fprop and dgrad), its input a 1×16 cast along each
// GEMM's axis with the random Hadamard transform on the wgrad's, its
// gradient stochastic rounding on both casts and the transform on the
// wgrad's; the switches turn each off; KeepFirst and KeepLast keep
// layers in high precision and say why; rows that are not a multiple of
// 16 turn the transform off for the layer with a note.
func TestNVFP4Conversion(t *testing.T) {
	type want struct {
		axis, dim  int
		rht, stoch bool
	}
	for _, c := range []struct {
		name  string
		rec   recipe.NVFP4
		rows  int
		casts map[string]want
	}{
		{"defaults", recipe.NVFP4{}, 16, map[string]want{
			"/quantize.input.axis1": {1, 1, false, false}, "/quantize.input.axis0.rht": {0, 1, true, false},
			"/quantize.weight.tiles": {0, 2, false, false}, "/quantize.grad_output.axis1": {1, 1, false, true},
			"/quantize.grad_output.axis0.rht": {0, 1, true, true}}},
		{"switches off", recipe.NVFP4{DisableRHT: true, DisableStochasticRounding: true, Disable2DQuantization: true}, 16, map[string]want{
			"/quantize.input.axis1": {1, 1, false, false}, "/quantize.input.axis0": {0, 1, false, false},
			"/quantize.weight.axis1": {1, 1, false, false}, "/quantize.weight.axis0": {0, 1, false, false},
			"/quantize.grad_output.axis1": {1, 1, false, false}, "/quantize.grad_output.axis0": {0, 1, false, false}}},
		{"ragged rows", recipe.NVFP4{}, 12, map[string]want{
			"/quantize.input.axis0": {0, 1, false, false}, "/quantize.grad_output.axis0": {0, 1, false, true}}},
	} {
		m := mlp(t, c.rows)
		prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: c.rec, TrainOutputs: m.trainOf, NoLayerNormFusion: true})
		require.NoError(t, err, c.name)
		require.Equal(t, []string{"mlp.fc1", "mlp.fc2"}, prep.Report.Converted(), c.name)
		casts := map[string]ops.QuantizeConfig{}
		for _, n := range prep.Train.Schedule() {
			if cfg, ok := graph.SettingsOf[ops.QuantizeConfig](n); ok {
				casts[n.Name()] = cfg
				require.Equal(t, graph.Float4E2M1, n.DType(), n.Name())
			}
		}
		for name, w := range c.casts {
			cfg, ok := casts["mlp.fc2"+name]
			require.True(t, ok, "%s: mlp.fc2%s missing (%v)", c.name, name, casts)
			require.Equal(t, fp8.NVFP4Blocks, cfg.Kind)
			require.Equal(t, w, want{cfg.Axis, cfg.BlockDim, cfg.RHT, cfg.Stochastic}, "%s: %s", c.name, name)
		}
		if c.rows%16 != 0 {
			require.Contains(t, strings.Join(prep.Report.Notes, "\n"), "mlp.fc2: wgrad operands cast without the random Hadamard transform: 12 rows")
		}
		m.run(t, prep.Train)
	}
	m := mlp(t, 16)
	prep, err := passes.Prepare(m.g, m.store, passes.Config{Recipe: recipe.NVFP4{KeepFirst: 1, KeepLast: 1}, TrainOutputs: m.trainOf})
	require.NoError(t, err)
	require.Equal(t, []string{"mlp.fc2"}, prep.Report.Converted())
	why := map[string]string{}
	for _, l := range prep.Report.Layers {
		why[l.FQN] = l.Reason
	}
	require.Contains(t, why["mlp.fc1"], "first 1 linear layers")
	require.Contains(t, why["mlp.fc3"], "last 1 linear layers")
}

// TestConvertLNTwoCasts: under Float8BlockScaling and NVFP4 the
// column-wise copy of a linear layer's input is cast again from its
// float32 values, so the LayerNorm and the GELU feeding it are not fused
// into their row-wise casts (that would compute them twice): both casts
// read the float32 output, a note says why, and the step runs.
func TestConvertLNTwoCasts(t *testing.T) {
	for _, rec := range []recipe.Recipe{recipe.Float8Block{}, recipe.NVFP4{}} {
		m := lnLinear(t, 16, false)
		_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: rec})
		require.NoError(t, err)
		rep, err := passes.ConvertLN(m.g, m.trainOf...)
		require.NoError(t, err)
		require.Equal(t, []string{"block.ln: not fused: 2 FP8 casts read its float32 output", "block.fc1/gelu: not fused: 2 FP8 casts read its float32 output"}, rep.Notes, "%T", rec)
		kinds, _ := live(m)
		require.Zero(t, kinds["LayerNormQuantize"])
		require.Zero(t, kinds["GELUQuantize"])
		require.Equal(t, 1, kinds["LayerNorm"])
		require.Equal(t, 1, kinds["GELU"])
		ln := m.g.Lookup("block.ln")
		readers := 0
		for _, n := range graph.Live(graph.Options{Training: true}, m.trainOf...) {
			if n.Is(ops.KindQuantize) && n.Input(0) == ln {
				readers++
			}
		}
		require.Equal(t, 2, readers, "%T: both casts read the LayerNorm", rec)
		p, err := graph.Compile(m.g, m.store, graph.Options{Training: true}, m.trainOf...)
		require.NoError(t, err)
		m.run(t, p)
	}
}

// TestClassifierFusionFreesTheLogits: with the TE recipe a classifier
// whose logits only its loss reads computes them in bands (no float32
// tensor of rows × classes in the training program, whose arena is
// smaller than the logits alone), and an evaluation program in FP8
// (UseAutocastDuringEval) still computes CrossEntropy from whole logits
// — the same loss, bit for bit, on the same batch and weights.
func TestClassifierFusionFreesTheLogits(t *testing.T) {
	const rows, in, classes = 300, 64, 2048
	g := graph.New()
	x := g.Input("x", graph.Float32, rows, in)
	y := g.Input("labels", graph.Int32, rows)
	w1, w2 := g.Param("fc1.weight", 64, in), g.Param("fc2.weight", classes, 64)
	loss := ops.CrossEntropy(ops.Linear("fc2", ops.ReLU(ops.Linear("fc1", x, w1, nil)), w2, nil), y)
	grads, err := graph.Grad(loss, w1, w2)
	require.NoError(t, err)
	store := initStore(t, g, 3)
	all := func(*graph.Node, string) bool { return true }
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{UseAutocastDuringEval: true}, Filter: all,
		TrainOutputs: append([]*graph.Node{loss}, grads...), EvalOutputs: []*graph.Node{loss}})
	require.NoError(t, err)
	for _, n := range prep.Train.Schedule() {
		require.False(t, n.Shape().Equal(graph.Shape{rows, classes}) && n.DType() == graph.Float32, "float32 logits %q in training", n.Name())
	}
	require.Less(t, prep.Train.Stats().ArenaBytes, 4*rows*classes)
	evalCE := 0
	for _, n := range prep.Eval.Schedule() {
		if n.Is(ops.KindCrossEntropy) {
			evalCE++
		}
	}
	require.Equal(t, 1, evalCE, "evaluation computes the loss from the logits")
	rng := rand.New(rand.NewPCG(9, 9))
	xs, ys := make([]float32, rows*in), make([]int32, rows)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	for i := range ys {
		ys[i] = rng.Int32N(classes)
	}
	var losses []float32
	for _, p := range []*graph.Program{prep.Eval, prep.Train} { // both with the first step's scales
		require.NoError(t, p.FeedFloat32(x, xs))
		require.NoError(t, p.FeedInt32(y, ys))
		require.NoError(t, p.Run())
		v, err := p.Value(g.Resolve(loss))
		require.NoError(t, err)
		losses = append(losses, v.F32[0])
	}
	require.Equal(t, math.Float32bits(losses[0]), math.Float32bits(losses[1]), "evaluation %v, training %v", losses[0], losses[1])
}

// withFormat is q casting to f.
func withFormat(q fp8.Quantizer, f fp8.Format) fp8.Quantizer {
	q.Format = f
	return q
}
