package optim

import (
	"math"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

func near(t *testing.T, want, got float64, msg string) {
	t.Helper()
	if math.Abs(want-got) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s: got %.9g, want %.9g", msg, got, want)
	}
}

// adamRef is Adam written out in float64 from the paper's formulas.
func adamRef(w float64, gs []float64, lr, b1, b2, eps, wd float64, decoupled bool) float64 {
	var m, v float64
	for t, g := range gs {
		if decoupled {
			w *= 1 - lr*wd
		} else {
			g += wd * w
		}
		m = b1*m + (1-b1)*g
		v = b2*v + (1-b2)*g*g
		mh := m / (1 - math.Pow(b1, float64(t+1)))
		vh := v / (1 - math.Pow(b2, float64(t+1)))
		w -= lr * mh / (math.Sqrt(vh) + eps)
	}
	return w
}

func TestAdamFirstStepsByHand(t *testing.T) {
	// Step 1: m̂ = g, v̂ = g², so w moves by lr·g/(|g|+ε) ≈ lr·sign(g).
	p := []Param{{W: []float32{1, -2}, G: []float32{0.5, -3}, Decay: true}}
	o := NewAdam(p, 0)
	o.Step(0.1)
	near(t, 0.9, float64(p[0].W[0]), "w0 after step 1")
	near(t, -1.9, float64(p[0].W[1]), "w1 after step 1")
	// Steps 2 and 3 with new gradients against the written-out formulas.
	gs := [][2]float32{{0.5, -3}, {-0.25, 1}, {2, 0.5}}
	for i := 1; i < 3; i++ {
		p[0].G[0], p[0].G[1] = gs[i][0], gs[i][1]
		o.Step(0.1)
	}
	near(t, adamRef(1, []float64{0.5, -0.25, 2}, 0.1, 0.9, 0.999, 1e-8, 0, false), float64(p[0].W[0]), "w0 after 3 steps")
	near(t, adamRef(-2, []float64{-3, 1, 0.5}, 0.1, 0.9, 0.999, 1e-8, 0, false), float64(p[0].W[1]), "w1 after 3 steps")
	require.Equal(t, 3, o.Steps())
	m, v := o.Moments(0)
	near(t, 0.9*(0.9*0.1*0.5+0.1*-0.25)+0.1*2, float64(m[0]), "first moment")
	near(t, 0.999*(0.999*0.001*0.25+0.001*0.0625)+0.001*4, float64(v[0]), "second moment")
}

func TestWeightDecay(t *testing.T) {
	// AdamW decays the weight itself: w·(1−lr·wd), then the Adam step.
	p := []Param{{W: []float32{1}, G: []float32{0.5}, Decay: true}, {W: []float32{1}, G: []float32{0.5}, Decay: false}}
	o := NewAdamW(p, 0.1)
	o.Step(0.1)
	near(t, 1*(1-0.01)-0.1, float64(p[0].W[0]), "AdamW decays")
	near(t, 0.9, float64(p[1].W[0]), "no decay on a bias")
	for i := 0; i < 4; i++ {
		o.Step(0.1)
	}
	near(t, adamRef(1, []float64{0.5, 0.5, 0.5, 0.5, 0.5}, 0.1, 0.9, 0.999, 1e-8, 0.1, true), float64(p[0].W[0]), "AdamW after 5 steps")
	// Adam adds wd·w to the gradient instead.
	q := []Param{{W: []float32{1}, G: []float32{0.5}, Decay: true}}
	a := NewAdam(q, 0.1)
	for i := 0; i < 5; i++ {
		a.Step(0.1)
	}
	near(t, adamRef(1, []float64{0.5, 0.5, 0.5, 0.5, 0.5}, 0.1, 0.9, 0.999, 1e-8, 0.1, false), float64(q[0].W[0]), "Adam L2 after 5 steps")
	// SGD with L2 decay: w -= lr·(g + wd·w).
	s := []Param{{W: []float32{2}, G: []float32{1}, Decay: true}}
	NewSGD(s, 0, 0.5, false).Step(0.1)
	near(t, 2-0.1*(1+0.5*2), float64(s[0].W[0]), "SGD weight decay")
}

func TestSGDMomentumAndNesterov(t *testing.T) {
	gs := []float32{1, 2, -1}
	p := []Param{{W: []float32{0}, G: []float32{0}}}
	o := NewSGD(p, 0.9, 0, false)
	w, b := 0.0, 0.0
	for i, g := range gs {
		p[0].G[0] = g
		o.Step(0.1)
		if i == 0 {
			b = float64(g)
		} else {
			b = 0.9*b + float64(g)
		}
		w -= 0.1 * b
		near(t, w, float64(p[0].W[0]), "momentum")
	}
	n := []Param{{W: []float32{0}, G: []float32{0}}}
	on := NewSGD(n, 0.9, 0, true)
	w, b = 0, 0
	for i, g := range gs {
		n[0].G[0] = g
		on.Step(0.1)
		if i == 0 {
			b = float64(g)
		} else {
			b = 0.9*b + float64(g)
		}
		w -= 0.1 * (float64(g) + 0.9*b)
		near(t, w, float64(n[0].W[0]), "nesterov")
	}
}

func TestClipGradNorm(t *testing.T) {
	p := []Param{{G: []float32{3}}, {G: []float32{4}}}
	norm := ClipGradNorm(p, 1)
	near(t, 5, float64(norm), "norm")
	near(t, 3/(5+1e-6), float64(p[0].G[0]), "clipped g0")
	near(t, 4/(5+1e-6), float64(p[1].G[0]), "clipped g1")
	q := []Param{{G: []float32{0.3, 0.4}}}
	ClipGradNorm(q, 1)
	require.Equal(t, []float32{0.3, 0.4}, q[0].G, "under the limit nothing changes")
	r := []Param{{G: []float32{float32(math.Inf(1)), 1}}}
	require.True(t, math.IsInf(float64(ClipGradNorm(r, 1)), 1))
	require.Equal(t, float32(1), r[0].G[1], "a non-finite norm scales nothing")
}

func TestSchedules(t *testing.T) {
	s := WarmupCosine{Base: 1, Min: 0.1, Warmup: 10, Total: 110}
	near(t, 0.1, float64(s.LR(0)), "warmup start")
	near(t, 1, float64(s.LR(9)), "warmup end")
	near(t, 1, float64(s.LR(10)), "cosine start")
	near(t, 0.55, float64(s.LR(60)), "cosine middle")
	near(t, 0.1, float64(s.LR(110)), "cosine end")
	near(t, 0.1, float64(s.LR(500)), "after the end")
	d := StepDecay{Base: 1, Gamma: 0.5, Every: 10}
	near(t, 1, float64(d.LR(9)), "step 9")
	near(t, 0.25, float64(d.LR(25)), "step 25")
	near(t, 0.3, float64(Constant(0.3).LR(7)), "constant")
}

func TestOptimizersAllocateNothing(t *testing.T) {
	p := []Param{{W: make([]float32, 100), G: make([]float32, 100), Decay: true}}
	for _, o := range []Optimizer{NewAdamW(p, 0.01), NewSGD(p, 0.9, 0.01, true)} {
		o.Step(0.1)
		require.Zero(t, testing.AllocsPerRun(10, func() { o.Step(0.1) }))
	}
	require.Zero(t, testing.AllocsPerRun(10, func() { ClipGradNorm(p, 1) }))
}

func TestBind(t *testing.T) {
	g := graph.New()
	w := g.Param("w", 2, 3)
	b := g.Param("b", 3)
	loss := ops.Sum(ops.Add(w, b))
	grads, err := graph.Grad(loss, w, b)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, store.Init(g, nil))
	prog, err := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0], grads[1])
	require.NoError(t, err)
	ps, err := Bind(store, prog, []*graph.Node{w, b}, grads)
	require.NoError(t, err)
	require.True(t, ps[0].Decay)
	require.False(t, ps[1].Decay)
	require.NoError(t, prog.Run())
	NewSGD(ps, 0, 0, false).Step(1)
	require.Equal(t, []float32{-1, -1, -1, -1, -1, -1}, store.Float32("w"))
	require.Equal(t, []float32{-2, -2, -2}, store.Float32("b"))
	_, err = Bind(store, prog, []*graph.Node{w}, grads)
	require.Error(t, err)
	_, err = Bind(store, prog, []*graph.Node{w, b}, []*graph.Node{loss, loss})
	require.ErrorContains(t, err, `"w"`)
}
