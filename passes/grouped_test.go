package passes_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// groupedRecipes are the recipes grouped expert GEMMs convert under.
func groupedRecipes(t *testing.T) map[string]recipe.Recipe {
	rowwise, err := recipe.NewAO(recipe.AORowwise)
	require.NoError(t, err)
	tensorwise, err := recipe.NewAO(recipe.AOTensorwise)
	require.NoError(t, err)
	return map[string]recipe.Recipe{
		"te delayed": recipe.TE{Margin: 1, AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.MaxAlgo},
		"te mxfp8":   recipe.TE{UseMXFP8BlockScaling: true},
		"block":      recipe.Float8Block{},
		"ao rowwise": rowwise, "ao tensorwise": tensorwise,
		"msamp": recipe.MSAMP{}, "bf16": recipe.BF16{},
	}
}

// stepOut is one step's outputs of an expert layer.
type stepOut struct{ y, dx, dw []float32 }

// expertLayer builds y = GroupedLinear(x, counts, w) (or, with counts
// nil, the linear layer y = x·wᵀ of one expert) as a model's layer,
// converts it with rc and returns a function running one step on the
// store's parameters.
func expertLayer(t *testing.T, rc recipe.Recipe, store *graph.Store, rows, experts, in, out int, grouped bool) func(x, w, dy []float32, counts []int32) stepOut {
	g := graph.New()
	x := g.Param("x", rows, in)
	var w, y, cn *graph.Node
	if grouped {
		w = g.Param("w", experts, out, in)
		cn = g.Input("counts", graph.Int32, experts)
		y = ops.GroupedLinear("experts", x, cn, w)
	} else {
		w = g.Param("w", out, in)
		y = ops.Linear("experts", x, w, nil)
	}
	dy := g.Input("dy", graph.Float32, rows, out)
	yOut := ops.Scale(y, 1) // the output, after whatever replaces y
	loss := ops.Sum(ops.Mul(y, dy))
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: rc, Loss: loss, Params: []*graph.Node{x, w}, TrainOutputs: []*graph.Node{yOut},
		Filter: func(*graph.Node, string) bool { return true }})
	require.NoError(t, err)
	wantFP8 := 3
	if _, bf := rc.(recipe.BF16); bf {
		wantFP8 = 3
	}
	require.Len(t, prep.Report.Layers, 1)
	require.Len(t, prep.Report.Layers[0].FP8, wantFP8, "%+v", prep.Report.Layers[0])
	return func(xv, wv, dyv []float32, counts []int32) stepOut {
		copy(store.Float32("x"), xv)
		copy(store.Float32("w"), wv)
		p := prep.Train
		require.NoError(t, p.FeedFloat32(dy, dyv))
		if grouped {
			require.NoError(t, p.FeedInt32(cn, counts))
		}
		require.NoError(t, p.Run())
		cp := func(v []float32) []float32 { return append([]float32(nil), v...) }
		return stepOut{cp(p.Float32(yOut)), cp(p.Float32(prep.Grads[0])), cp(p.Float32(prep.Grads[1]))}
	}
}

// TestGroupedGEMMIsEachExpertsLinearLayer: under every recipe, a
// converted grouped expert GEMM gives each expert's output, input
// gradient and weight gradient bit for bit as the converted linear layer
// of that expert's weight gives on that expert's rows — over two steps,
// so that each expert's delayed scaling state is its own, group sizes
// not multiples of the block sizes (the casts' blocks start at each
// group), an expert without tokens (zero weight gradient, state not
// rolled) — and the experts' scaling states equal the linear layers'.
func TestGroupedGEMMIsEachExpertsLinearLayer(t *testing.T) {
	const experts, in, out = 4, 32, 48
	steps := [][]int32{{5, 0, 37, 22}, {20, 13, 0, 31}}
	const rows = 64
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int, s float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * s)
		}
		return v
	}
	for name, rc := range groupedRecipes(t) {
		gStore := graph.NewStore()
		require.NoError(t, gStore.SetFloat32("x", make([]float32, rows*in), rows, in))
		require.NoError(t, gStore.SetFloat32("w", make([]float32, experts*out*in), experts, out, in))
		grouped := expertLayer(t, rc, gStore, rows, experts, in, out, true)
		dense := make([]*graph.Store, experts)
		for e := range dense {
			dense[e] = graph.NewStore()
		}
		for step, counts := range steps {
			xv, wv, dyv := rnd(rows*in, 3), rnd(experts*out*in, 0.5), rnd(rows*out, 0.01)
			got := grouped(xv, wv, dyv, counts)
			r0 := 0
			for e, c := range counts {
				n := int(c)
				what := fmt.Sprintf("%s step %d expert %d", name, step, e)
				ew := got.dw[e*out*in : (e+1)*out*in]
				if n == 0 {
					require.Equal(t, make([]float32, out*in), ew, what)
					continue
				}
				s := graph.NewStore() // the rows change; the layer's state carries over
				if st := dense[e].State(fp8.LayerStateKey("experts")); st != nil {
					s.SetState(fp8.LayerStateKey("experts"), st)
				}
				dense[e] = s
				require.NoError(t, s.SetFloat32("x", make([]float32, n*in), n, in))
				require.NoError(t, s.SetFloat32("w", make([]float32, out*in), out, in))
				run := expertLayer(t, rc, s, n, 1, in, out, false)
				want := run(xv[r0*in:(r0+n)*in], wv[e*out*in:(e+1)*out*in], dyv[r0*out:(r0+n)*out], nil)
				require.Equal(t, bitsOf(want.y), bitsOf(got.y[r0*out:(r0+n)*out]), "%s output", what)
				require.Equal(t, bitsOf(want.dx), bitsOf(got.dx[r0*in:(r0+n)*in]), "%s input gradient", what)
				require.Equal(t, bitsOf(want.dw), bitsOf(ew), "%s weight gradient", what)
				r0 += n
			}
		}
		// The experts' delayed states are the linear layers'.
		for e := range experts {
			gs, _ := gStore.State(fp8.LayerStateKey(fmt.Sprintf("experts.%d", e))).(*fp8.LayerState)
			ds, _ := dense[e].State(fp8.LayerStateKey("experts")).(*fp8.LayerState)
			require.NotNil(t, gs, "%s expert %d has a state", name, e)
			require.NotNil(t, ds)
			for _, r := range fp8.Roles {
				gm, dm := gs.Meta(r), ds.Meta(r)
				require.Equal(t, dm == nil, gm == nil)
				if dm != nil {
					require.Equal(t, dm.Scale, gm.Scale, "%s expert %d %v scale", name, e, r)
					require.Equal(t, fmt.Sprint(dm.History), fmt.Sprint(gm.History), "%s expert %d %v history", name, e, r)
				}
			}
		}
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestGroupedGEMMAllocatesNothing: a converted grouped layer's training
// step allocates nothing after the first, under every recipe, whatever
// the group sizes.
func TestGroupedGEMMAllocatesNothing(t *testing.T) {
	const rows, experts, in, out = 256, 4, 64, 128
	for name, rc := range groupedRecipes(t) {
		g := graph.New()
		x, w := g.Param("x", rows, in), g.Param("w", experts, out, in)
		cn := g.Input("counts", graph.Int32, experts)
		y := ops.GroupedLinear("experts", x, cn, w)
		loss := ops.Mean(ops.Mul(y, y))
		store := graph.NewStore()
		require.NoError(t, store.SetFloat32("x", make([]float32, rows*in), rows, in))
		wv := make([]float32, experts*out*in)
		for i := range wv {
			wv[i] = float32(i%7) - 3
		}
		require.NoError(t, store.SetFloat32("w", wv, experts, out, in))
		prep, err := passes.Prepare(g, store, passes.Config{Recipe: rc, Loss: loss, Params: []*graph.Node{x, w}, Filter: func(*graph.Node, string) bool { return true }})
		require.NoError(t, err, name)
		splits := [][]int32{{64, 64, 64, 64}, {0, 200, 56, 0}, {1, 2, 3, 250}}
		require.NoError(t, prep.Train.FeedInt32(cn, splits[0]))
		require.NoError(t, prep.Train.Run())
		// Each routing with a group larger than any before runs as
		// AllocsPerRun's measured run (its warm-up run routes evenly),
		// so that a buffer growing with the groups would count.
		for _, big := range splits[1:] {
			calls := 0
			allocs := testing.AllocsPerRun(1, func() {
				calls++
				s := splits[0]
				if calls == 2 {
					s = big
				}
				if err := prep.Train.FeedInt32(cn, s); err != nil {
					t.Fatal(err)
				}
				if err := prep.Train.Run(); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs, "%s: routing %v", name, big)
		}
	}
}

// TestGroupedGEMMReported: the report and FP8Layers name a converted
// grouped layer, and NVFP4 keeps it float32 with the reason.
func TestGroupedGEMMReported(t *testing.T) {
	build := func() (*graph.Graph, *graph.Store, *graph.Node, []*graph.Node) {
		g := graph.New()
		x, w := g.Param("x", 32, 32), g.Param("w", 2, 16, 32)
		cn := g.Input("counts", graph.Int32, 2)
		y := ops.GroupedLinear("moe.experts.gate_up", x, cn, w)
		store := graph.NewStore()
		require.NoError(t, store.SetFloat32("x", make([]float32, 32*32), 32, 32))
		require.NoError(t, store.SetFloat32("w", make([]float32, 2*16*32), 2, 16, 32))
		return g, store, ops.Mean(y), []*graph.Node{x, w}
	}
	g, store, loss, params := build()
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{}, Loss: loss, Params: params})
	require.NoError(t, err)
	require.Equal(t, []string{"moe.experts.gate_up"}, prep.Report.Converted())
	require.Equal(t, []string{"moe.experts.gate_up"}, passes.FP8Layers(g))
	require.NotNil(t, store.State(fp8.LayerStateKey("moe.experts.gate_up.1")), "one state per expert")
	g, store, loss, params = build()
	prep, err = passes.Prepare(g, store, passes.Config{Recipe: recipe.NVFP4{}, Loss: loss, Params: params})
	require.NoError(t, err)
	l := mustLayer(t, prep.Report, "moe.experts.gate_up")
	require.False(t, l.Converted)
	require.Contains(t, l.Reason, "NVFP4")
}

// TestGroupedGEMMEvaluation: without use_autocast_during_eval an
// evaluation program runs the grouped GEMM in float32, bit for bit the
// unconverted model's, as it does a linear layer; with it, in FP8.
func TestGroupedGEMMEvaluation(t *testing.T) {
	const rows, experts, in, out = 48, 3, 32, 16
	counts := []int32{20, 0, 28}
	xv := make([]float32, rows*in)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i))) * 3
	}
	eval := func(rc recipe.Recipe) []float32 {
		g := graph.New()
		x, w := g.Param("x", rows, in), g.Param("w", experts, out, in)
		cn := g.Input("counts", graph.Int32, experts)
		y := ops.GroupedLinear("experts", x, cn, w)
		yOut := ops.Scale(y, 1)
		store := graph.NewStore()
		require.NoError(t, store.SetFloat32("x", xv, rows, in))
		wv := make([]float32, experts*out*in)
		for i := range wv {
			wv[i] = float32(math.Cos(float64(i))) * 0.3
		}
		require.NoError(t, store.SetFloat32("w", wv, experts, out, in))
		prep, err := passes.Prepare(g, store, passes.Config{Recipe: rc, Loss: ops.Mean(y), Params: []*graph.Node{x, w}, EvalOutputs: []*graph.Node{yOut},
			Filter: func(*graph.Node, string) bool { return true }})
		require.NoError(t, err)
		require.NoError(t, prep.Eval.FeedInt32(cn, counts))
		require.NoError(t, prep.Eval.Run())
		return append([]float32(nil), prep.Eval.Float32(yOut)...)
	}
	f32 := eval(nil)
	require.Equal(t, bitsOf(f32), bitsOf(eval(recipe.TE{})), "evaluation runs float32")
	require.NotEqual(t, bitsOf(f32), bitsOf(eval(recipe.TE{UseAutocastDuringEval: true})), "evaluation runs FP8")
}

// TestGroupedConvertModelRoundTrip: ConvertModel converts a grouped
// layer to FP8 and back — the float32 outputs again bit for bit, no FP8
// layer left — and to FP8 once more, reusing the earlier FP8 nodes.
func TestGroupedConvertModelRoundTrip(t *testing.T) {
	const rows, experts, in, out = 40, 2, 32, 16
	g := graph.New()
	x, w := g.Param("x", rows, in), g.Param("w", experts, out, in)
	cn := g.Input("counts", graph.Int32, experts)
	y := ops.GroupedLinear("experts", x, cn, w)
	loss := ops.Mean(ops.Mul(y, y))
	grads, err := graph.Grad(loss, x, w)
	require.NoError(t, err)
	outs := append([]*graph.Node{loss}, grads...)
	store := graph.NewStore()
	xv, wv := make([]float32, rows*in), make([]float32, experts*out*in)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i)))
	}
	for i := range wv {
		wv[i] = float32(math.Cos(float64(i))) * 0.2
	}
	require.NoError(t, store.SetFloat32("x", xv, rows, in))
	require.NoError(t, store.SetFloat32("w", wv, experts, out, in))
	run := func() [][]float32 {
		p, err := graph.Compile(g, store, graph.Options{Training: true}, outs...)
		require.NoError(t, err)
		require.NoError(t, p.FeedInt32(cn, []int32{15, 25}))
		require.NoError(t, p.Run())
		var res [][]float32
		for _, o := range outs {
			res = append(res, append([]float32(nil), p.Float32(o)...))
		}
		return res
	}
	ref := run()
	to := func(fp bool) passes.Report {
		rep, err := passes.ConvertModel(g, store, passes.ModelConfig{ToFP8: fp, Linear: true, Recipe: recipe.Float8Block{}, Outputs: outs,
			Filter: func(*graph.Node, string) bool { return true }})
		require.NoError(t, err)
		return rep
	}
	rep := to(true)
	require.Equal(t, []string{"experts"}, rep.Converted())
	require.True(t, passes.HasFP8Layers(g))
	fp := run()
	require.NotEqual(t, ref[0], fp[0], "FP8 changes the loss")
	rep = to(false)
	require.Contains(t, rep.String(), "converted back to float32")
	require.False(t, passes.HasFP8Layers(g))
	require.Equal(t, ref, run(), "the float32 outputs again, bit for bit")
	rep = to(true)
	l := mustLayer(t, rep, "experts")
	require.Contains(t, l.Reason, "converted again")
	require.True(t, passes.HasFP8Layers(g))
	require.Equal(t, fp, run(), "the same FP8 nodes")
}
