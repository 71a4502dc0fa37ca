package graph_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// mlp builds a 784-512-512-10 ReLU MLP with a cross-entropy loss and its
// backward graph, with random weights in store.
func mlp(t testing.TB, batch int) (g *graph.Graph, store *graph.Store, x, y, loss *graph.Node, grads []*graph.Node) {
	g = graph.New()
	store = graph.NewStore()
	x = g.Input("x", graph.Float32, batch, 784)
	y = g.Input("labels", graph.Int32, batch)
	h := x
	var params []*graph.Node
	dims := []int{784, 512, 512, 10}
	for i := 0; i+1 < len(dims); i++ {
		name := []string{"mlp.fc1", "mlp.fc2", "mlp.fc3"}[i]
		w := g.Param(name+".weight", dims[i+1], dims[i])
		b := g.Param(name+".bias", dims[i+1])
		params = append(params, w, b)
		h = ops.Linear(name, h, w, b)
		if i < 2 {
			h = ops.ReLU(h)
		}
	}
	loss = ops.CrossEntropy(h, y)
	var err error
	grads, err = graph.Grad(loss, params...)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 1))
	require.NoError(t, store.Init(g, func(n *graph.Node, v []float32) {
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.05)
		}
	}))
	return
}

func feedMLP(t testing.TB, p *graph.Program, x, y *graph.Node, batch int) {
	xs := make([]float32, batch*784)
	for i := range xs {
		xs[i] = float32(i%17) / 17
	}
	ys := make([]int32, batch)
	for i := range ys {
		ys[i] = int32(i % 10)
	}
	require.NoError(t, p.FeedFloat32(x, xs))
	require.NoError(t, p.FeedInt32(y, ys))
}

func TestTrainingStepAllocatesNothing(t *testing.T) {
	g, store, x, y, loss, grads := mlp(t, 128)
	p, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
	require.NoError(t, err)
	feedMLP(t, p, x, y, 128)
	require.NoError(t, p.Run())
	allocs := testing.AllocsPerRun(5, func() {
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "allocations per training step")
}

func TestBackwardGEMMRoles(t *testing.T) {
	g, _, _, _, _, _ := mlp(t, 4)
	count := map[graph.Role]int{}
	for _, n := range g.Nodes() {
		count[n.Role()]++
		if n.Role() == graph.Dgrad || n.Role() == graph.Wgrad {
			require.NotNil(t, n.Forward())
			require.Equal(t, graph.Fprop, n.Forward().Role())
			require.True(t, strings.HasPrefix(n.Name(), n.Forward().Name()+"."), n.Name())
		}
	}
	require.Equal(t, 3, count[graph.Fprop])
	require.Equal(t, 3, count[graph.Wgrad])
	// The first layer's input is data: no Dgrad is built for it.
	require.Equal(t, 2, count[graph.Dgrad])
	require.Nil(t, g.Lookup("mlp.fc1.dgrad"))
	require.NotNil(t, g.Lookup("mlp.fc2.dgrad"))
}

func TestMemoryPlanReusesBuffers(t *testing.T) {
	g, store, _, _, loss, grads := mlp(t, 128)
	p, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
	require.NoError(t, err)
	st := p.Stats()
	t.Logf("arena %d bytes, one buffer per node %d bytes", st.ArenaBytes, st.NaiveBytes)
	require.Less(t, st.ArenaBytes, st.NaiveBytes*3/4)
}

func TestTrainAndEvalShareParameters(t *testing.T) {
	g, store, x, y, loss, grads := mlp(t, 8)
	train, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
	require.NoError(t, err)
	eval, err := graph.Compile(g, store, graph.Options{}, loss)
	require.NoError(t, err)
	require.Less(t, len(eval.Schedule()), len(train.Schedule()), "eval program drops the backward nodes")
	feedMLP(t, train, x, y, 8)
	feedMLP(t, eval, x, y, 8)
	require.NoError(t, train.Run())
	require.NoError(t, eval.Run())
	l1, _ := train.Scalar(loss)
	l2, _ := eval.Scalar(loss)
	require.Equal(t, l1, l2)
	// A change to the store is seen by both programs.
	w := store.Float32("mlp.fc3.bias")
	w[0] += 5
	require.NoError(t, train.Run())
	require.NoError(t, eval.Run())
	l3, _ := train.Scalar(loss)
	l4, _ := eval.Scalar(loss)
	require.NotEqual(t, l1, l3)
	require.Equal(t, l3, l4)
}

func TestShapeErrorsNameTheNode(t *testing.T) {
	g := graph.New()
	a := g.Input("a", graph.Float32, 2, 3)
	b := g.Param("b", 4, 5)
	m := ops.MatMul(a, b, false, false)
	require.NotNil(t, m)
	err := g.Err()
	require.Error(t, err)
	require.Contains(t, err.Error(), `"a/matmul"`)
	require.Contains(t, err.Error(), "[2 3]")
	require.Contains(t, err.Error(), "[4 5]")
	// Ops on an invalid node add no further error.
	_ = ops.ReLU(m)
	require.Equal(t, err.Error(), g.Err().Error())
	// Grad and Compile refuse a graph with errors.
	_, gerr := graph.Grad(ops.Sum(a), a)
	require.Error(t, gerr)
	_, cerr := graph.Compile(g, graph.NewStore(), graph.Options{}, a)
	require.ErrorContains(t, cerr, "a/matmul")

	g2 := graph.New()
	x := g2.Input("x", graph.Float32, 8, 16)
	w := g2.Param("fc.weight", 32, 15)
	ops.Linear("fc", x, w, nil)
	require.ErrorContains(t, g2.Err(), `node "fc" (Linear)`)
	require.ErrorContains(t, g2.Err(), "[8 16]")
	require.ErrorContains(t, g2.Err(), "[32 15]")

	g3 := graph.New()
	ops.Add(g3.Input("p", graph.Float32, 3, 4), g3.Input("q", graph.Float32, 5))
	require.ErrorContains(t, g3.Err(), "[3 4]")
	require.ErrorContains(t, g3.Err(), "[5]")
	require.ErrorContains(t, g3.Err(), "p/add")
}

func TestUnknownDTypeAndBadNames(t *testing.T) {
	g := graph.New()
	g.Input("tokens", graph.DType(42), 3)
	require.ErrorContains(t, g.Err(), `"tokens"`)
	require.ErrorContains(t, g.Err(), "unknown dtype")
	_, err := graph.ParseDType("float9")
	require.ErrorContains(t, err, "float9")
	d, err := graph.ParseDType("float8_e4m3")
	require.NoError(t, err)
	require.Equal(t, graph.Float8E4M3, d)

	g2 := graph.New()
	g2.Param("w", 2)
	g2.Param("w", 3)
	require.ErrorContains(t, g2.Err(), `"w"`)
	g3 := graph.New()
	g3.Input("x", graph.Float32, 0, 3)
	require.ErrorContains(t, g3.Err(), `"x"`)
}

func TestRunErrors(t *testing.T) {
	g, store, x, y, loss, _ := mlp(t, 4)
	p, err := graph.Compile(g, store, graph.Options{}, loss)
	require.NoError(t, err)
	err = p.Run()
	require.ErrorContains(t, err, `input "x"`)
	require.ErrorContains(t, err, "not fed")
	require.ErrorContains(t, p.FeedFloat32(x, make([]float32, 3)), `"x"`)
	require.ErrorContains(t, p.FeedFloat32(y, make([]float32, 4)), `"labels"`)
	feedMLP(t, p, x, y, 4)
	require.NoError(t, p.FeedInt32(y, []int32{0, 1, 10, 3}))
	err = p.Run()
	require.ErrorContains(t, err, "CrossEntropy")
	require.ErrorContains(t, err, "label 10 at row 2")

	other := graph.New().Input("z", graph.Float32, 1)
	require.ErrorContains(t, p.FeedFloat32(other, []float32{1}), `"z"`)

	// A parameter missing from the store is named at compile time.
	_, err = graph.Compile(g, graph.NewStore(), graph.Options{}, loss)
	require.ErrorContains(t, err, "mlp.fc")
	require.ErrorContains(t, err, "no value in the store")
}

func TestGradErrors(t *testing.T) {
	g := graph.New()
	x := g.Param("x", 3)
	unused := g.Param("unused", 3)
	_, err := graph.Grad(ops.Tanh(x), x)
	require.ErrorContains(t, err, "scalar")
	_, err = graph.Grad(ops.Sum(x), unused)
	require.ErrorContains(t, err, `"unused"`)
}

func TestDumps(t *testing.T) {
	g, _, _, _, loss, _ := mlp(t, 2)
	var text strings.Builder
	require.NoError(t, g.WriteText(&text))
	out := text.String()
	require.Contains(t, out, `Linear(`)
	require.Contains(t, out, `role=fprop`)
	require.Contains(t, out, `role=wgrad(of %`)
	require.Contains(t, out, `"mlp.fc2.dgrad"`)
	require.Contains(t, out, "[2 512] float32")
	var part strings.Builder
	require.NoError(t, g.WriteText(&part, loss))
	require.NotContains(t, part.String(), "wgrad", "a dump of the forward outputs holds no backward nodes")
	var dot strings.Builder
	require.NoError(t, g.WriteDOT(&dot))
	require.True(t, strings.HasPrefix(dot.String(), "digraph octet {"))
	require.Contains(t, dot.String(), "role=dgrad")
	require.Equal(t, strings.Count(dot.String(), "{"), strings.Count(dot.String(), "}"))
}

func TestVerifyCatchesBadRewrite(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	y := ops.ReLU(x)
	z := ops.Sum(y)
	require.NoError(t, graph.Verify(g))
	other := g.Input("other", graph.Float32, 4)
	require.Error(t, g.ReplaceUses(y, other), "shape mismatch must be refused")
	y2 := ops.Tanh(x)
	require.NoError(t, g.ReplaceUses(y, y2))
	require.NoError(t, graph.Verify(g))
	require.Equal(t, y2, z.Input(0))
}

func TestDropoutTrainVersusEval(t *testing.T) {
	g := graph.New()
	store := graph.NewStore()
	x := g.Param("x", 1000)
	require.NoError(t, store.Init(g, func(_ *graph.Node, v []float32) {
		for i := range v {
			v[i] = 1
		}
	}))
	y := ops.Dropout(x, 0.25, 9)
	loss := ops.Sum(y)
	grads, err := graph.Grad(loss, x)
	require.NoError(t, err)
	train, err := graph.Compile(g, store, graph.Options{Training: true}, y, grads[0])
	require.NoError(t, err)
	eval, err := graph.Compile(g, store, graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, train.Run())
	zeros := 0
	out, dx := train.Float32(y), train.Float32(grads[0])
	for i, v := range out {
		require.Contains(t, []float32{0, 1 / 0.75}, v)
		require.Equal(t, v, dx[i], "the gradient uses the same mask")
		if v == 0 {
			zeros++
		}
	}
	require.InDelta(t, 250, zeros, 60)
	first := append([]float32(nil), out...)
	require.NoError(t, train.Run())
	require.NotEqual(t, first, train.Float32(y), "a new mask each step")
	require.NoError(t, eval.Run())
	for _, v := range eval.Float32(y) {
		require.Equal(t, float32(1), v)
	}
	// Same seed, same masks.
	again, err := graph.Compile(g, store, graph.Options{Training: true}, y, grads[0])
	require.NoError(t, err)
	require.NoError(t, again.Run())
	require.Equal(t, first, again.Float32(y))
}

// TestFailedNode: a node from Failed carries its one error; ops applied
// to it add none, and it prints and compiles without a panic.
func TestFailedNode(t *testing.T) {
	g := graph.New()
	f := g.Failed(errTest)
	y := ops.ReLU(ops.Add(f, g.Input("x", graph.Float32, 2)))
	require.Equal(t, errTest.Error(), g.Err().Error())
	require.Contains(t, f.String(), "Failed")
	require.Equal(t, graph.Invalid, y.DType())
	_, err := graph.Compile(g, graph.NewStore(), graph.Options{}, y)
	require.ErrorIs(t, err, errTest)
}

var errTest = errors.New("the builder's own error")
