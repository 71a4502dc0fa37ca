package passes_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// fuseModel builds chains that cover every step kind: GEMM epilogues (a
// Linear with bias followed by an activation, a scale, row and full
// operands, a reversed subtraction, dropout, ReLU; the backward's MatMuls
// through a reshape into GELU's and ReLU's gradients; a MatMul into a
// three-way sum) and a chain that starts from a value the program also
// reads.
func fuseModel(t *testing.T, dropout float32) (*graph.Graph, []*graph.Node, map[string][]float32) {
	g := graph.New()
	x, w, b := g.Input("x", graph.Float32, 2, 12, 40), g.Input("w", graph.Float32, 48, 40), g.Input("b", graph.Float32, 48)
	row, full := g.Input("row", graph.Float32, 48), g.Input("full", graph.Float32, 2, 12, 48)
	w2, r := g.Input("w2", graph.Float32, 40, 48), g.Input("r", graph.Float32, 2, 12, 40)
	y := ops.Linear("fc", x, w, b)
	y = ops.Scale(ops.GELU(y), 0.5)
	y = ops.Mul(y, row)
	y = ops.Sub(full, y)
	y = ops.Dropout(y, dropout, 7)
	y = ops.ReLU(y)
	outs := []*graph.Node{y}
	for i, act := range []func(*graph.Node) *graph.Node{ops.GELU, ops.ReLU} {
		h := act(ops.Linear(fmt.Sprintf("l%d", i), x, w, nil))
		loss := ops.Sum(ops.Mul(ops.Linear(fmt.Sprintf("m%d", i), h, w2, nil), r))
		gs, err := graph.Grad(loss, x)
		require.NoError(t, err)
		outs = append(outs, gs[0])
	}
	outs = append(outs, graph.AddN("sum", full, ops.Reshape(ops.MatMul(ops.Reshape(x, 24, 40), w, false, true), 2, 12, 48), full))
	side := ops.Neg(full)
	outs = append(outs, side, ops.ReLU(ops.Add(ops.Neg(side), row)))
	rng := rand.New(rand.NewPCG(5, 5))
	feeds := map[string][]float32{}
	for _, in := range []*graph.Node{x, w, b, row, full, w2, r} {
		v := make([]float32, in.Shape().Numel())
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		feeds[in.Name()] = v
	}
	return g, outs, feeds
}

func runFuseModel(t *testing.T, fuse bool, opts graph.Options, dropout float32) ([][]float32, passes.FuseReport) {
	g, outs, feeds := fuseModel(t, dropout)
	var rep passes.FuseReport
	if fuse {
		var err error
		rep, err = passes.Fuse(g, outs...)
		require.NoError(t, err)
		require.NoError(t, graph.Verify(g))
	}
	p, err := graph.Compile(g, graph.NewStore(), opts, outs...)
	require.NoError(t, err)
	for name, v := range feeds {
		require.NoError(t, p.FeedFloat32(g.Lookup(name), v))
	}
	require.NoError(t, p.Run())
	var res [][]float32
	for _, o := range outs {
		res = append(res, append([]float32(nil), p.Float32(o)...))
	}
	return res, rep
}

// TestFuseBitForBit checks that fused chains and GEMM epilogues give the
// unfused graph's results to the bit, in training (dropout on) and
// evaluation, and so does a fused program run with Options.Unfused.
func TestFuseBitForBit(t *testing.T) {
	for _, training := range []bool{true, false} {
		opts := graph.Options{Training: training}
		want, _ := runFuseModel(t, false, opts, 0.25)
		got, rep := runFuseModel(t, true, opts, 0.25)
		step, _ := runFuseModel(t, true, graph.Options{Training: training, Unfused: true}, 0.25)
		require.Equal(t, 4, rep.Epilogues, "Linear+…, MatMul+GELUGrad, MatMul+ReLUGrad, MatMul+AddN: %+v", rep)
		require.Equal(t, 1, rep.Chains, "Neg+Add+ReLU: %+v", rep)
		for i := range want {
			require.Equal(t, want[i], got[i], "output %d (training %v)", i, training)
			require.Equal(t, want[i], step[i], "output %d step by step (training %v)", i, training)
		}
	}
}

// TestFuseKeepsWhatOthersRead checks that a value another node (or the
// program) reads is not fused away: the chain stops before it.
func TestFuseKeepsWhatOthersRead(t *testing.T) {
	g := graph.New()
	x, w := g.Input("x", graph.Float32, 4, 8), g.Input("w", graph.Float32, 8, 8)
	h := ops.Linear("fc", x, w, nil)
	a := ops.GELU(h)
	out := ops.Add(a, h) // h read twice: no epilogue
	rep, err := passes.Fuse(g, out, a)
	require.NoError(t, err)
	require.Zero(t, rep.Epilogues+rep.Chains, "%+v", rep)
	// With only out as output, GELU's value is internal to GELU+Add.
	g2 := graph.New()
	x2 := g2.Input("x", graph.Float32, 4, 8)
	out2 := ops.Add(ops.GELU(ops.Neg(x2)), x2)
	rep, err = passes.Fuse(g2, out2)
	require.NoError(t, err)
	require.Equal(t, passes.FuseReport{Chains: 1, Nodes: 3}, rep)
	require.Equal(t, "FusedElementwise", g2.Resolve(out2).Op().Type())
}

// TestUnfuseRestoresTheLayers prepares a float32 model (fused), then
// converts it to FP8: ConvertModel undoes the fusions first, so every
// layer converts, and the result trains like a model converted fresh.
func TestUnfuseRestoresTheLayers(t *testing.T) {
	build := func() (*graph.Graph, *graph.Node, *graph.Node) {
		g := graph.New()
		x := g.Input("x", graph.Float32, 32, 32)
		w1, w2 := g.Param("fc1.weight", 32, 32), g.Param("fc2.weight", 32, 32)
		h := ops.Add(x, ops.Linear("fc1", x, w1, nil)) // Linear+Add once fused
		out := ops.Sum(ops.ReLU(ops.Linear("fc2", h, w2, nil)))
		gs, err := graph.Grad(out, w1, w2)
		require.NoError(t, err)
		return g, out, gs[0]
	}
	g, out, grad := build()
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("fc1.weight", make([]float32, 32*32), 32, 32))
	require.NoError(t, store.SetFloat32("fc2.weight", make([]float32, 32*32), 32, 32))
	_, err := passes.Prepare(g, store, passes.Config{TrainOutputs: []*graph.Node{out, grad}})
	require.NoError(t, err)
	fusedTypes := func() int {
		n := 0
		for _, v := range graph.Live(graph.Options{Training: true}, out, grad) {
			if t := v.Op().Type(); t == "FusedElementwise" || strings.Contains(t, "+") {
				n++
			}
		}
		return n
	}
	require.Positive(t, fusedTypes(), "Prepare fused something")
	rep, err := passes.ConvertModel(g, store, passes.ModelConfig{ToFP8: true, Linear: true, Recipe: recipe.TE{}, Outputs: []*graph.Node{out, grad}})
	require.NoError(t, err)
	require.Zero(t, fusedTypes(), "ConvertModel unfused first")
	require.Len(t, rep.Converted(), 2, "both layers converted: %v", rep)
	n, err := passes.Unfuse(g)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to undo")
}

// TestFuseThroughSwitch: a residual add and an activation read from a
// Switch between a training and an evaluation GEMM (as autocast builds
// them) are applied to each branch, so each GEMM takes them in its
// epilogue; both programs give the unfused values to the bit, and Unfuse
// puts the graph back. A Switch the program outputs is left alone.
func TestFuseThroughSwitch(t *testing.T) {
	build := func(outputSwitch bool) (*graph.Graph, []*graph.Node, map[string][]float32) {
		g := graph.New()
		x, r := g.Input("x", graph.Float32, 6, 20), g.Input("r", graph.Float32, 6, 16)
		w1, w2, b := g.Input("w1", graph.Float32, 16, 20), g.Input("w2", graph.Float32, 16, 20), g.Input("b", graph.Float32, 16)
		sw := g.Switch("sw", "training", func(o graph.Options) bool { return o.Training },
			ops.Linear("train", x, w1, b), ops.Linear("eval", x, w2, nil))
		outs := []*graph.Node{ops.ReLU(ops.Add(r, sw))}
		if outputSwitch {
			outs = append(outs, sw)
		}
		rng := rand.New(rand.NewPCG(9, 9))
		feeds := map[string][]float32{}
		for _, in := range []*graph.Node{x, r, w1, w2, b} {
			v := make([]float32, in.Shape().Numel())
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			feeds[in.Name()] = v
		}
		return g, outs, feeds
	}
	run := func(g *graph.Graph, outs []*graph.Node, feeds map[string][]float32, opts graph.Options) []float32 {
		p, err := graph.Compile(g, graph.NewStore(), opts, outs...)
		require.NoError(t, err)
		for name, v := range feeds {
			if in := g.Lookup(name); p.HasInput(in) {
				require.NoError(t, p.FeedFloat32(in, v))
			}
		}
		require.NoError(t, p.Run())
		return append([]float32(nil), p.Float32(outs[0])...)
	}
	for _, training := range []bool{true, false} {
		opts := graph.Options{Training: training}
		g, outs, feeds := build(false)
		want := run(g, outs, feeds, opts)
		rep, err := passes.Fuse(g, outs...)
		require.NoError(t, err)
		require.NoError(t, graph.Verify(g))
		require.Equal(t, passes.FuseReport{Epilogues: 2, Nodes: 4}, rep, "Add and ReLU in each branch's Linear")
		got := g.Resolve(outs[0])
		require.True(t, got.IsSwitch(), "the output is a Switch of the fused GEMMs: %s", got.Op().Type())
		for i := 0; i < 2; i++ {
			require.Equal(t, "Linear+Add+ReLU", got.Input(i).Op().Type())
		}
		require.Equal(t, want, run(g, outs, feeds, opts), "training %v", training)
		require.Equal(t, want, run(g, outs, feeds, graph.Options{Training: training, Unfused: true}), "step by step, training %v", training)
		n, err := passes.Unfuse(g)
		require.NoError(t, err)
		require.Equal(t, 4, n, "two epilogues, and Add and ReLU each moved into the branches")
		require.Equal(t, "ReLU", g.Resolve(outs[0]).Op().Type())
		require.Equal(t, want, run(g, outs, feeds, opts), "unfused again, training %v", training)
	}
	g, outs, _ := build(true)
	rep, err := passes.Fuse(g, outs...)
	require.NoError(t, err)
	require.Equal(t, passes.FuseReport{Chains: 1, Nodes: 2}, rep, "the Switch is an output: Add+ReLU one loop")
}
