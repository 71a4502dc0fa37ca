package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// gradCase is one finite-difference check: build makes the op under test
// from float32 parameters (the values we differentiate with respect to)
// and optional int32 inputs.
type gradCase struct {
	name   string
	params []graph.Shape
	ints   []intInput
	// values draws a parameter's entries; nil means standard normal.
	values func(rng *rand.Rand) float32
	build  func(ps, ints []*graph.Node) *graph.Node
	tol    float64 // relative error allowed; 0 means 1e-3
	sample int     // check only this many entries per parameter (0: all)
}

type intInput struct {
	shape graph.Shape
	max   int32
}

// awayFromZero draws |v| ≥ 0.1 with a random sign, so that kinks (ReLU)
// are not within a finite-difference step.
func awayFromZero(rng *rand.Rand) float32 {
	v := float32(0.1 + math.Abs(rng.NormFloat64()))
	if rng.IntN(2) == 0 {
		return -v
	}
	return v
}

func positive(rng *rand.Rand) float32 { return float32(0.5 + 1.5*rng.Float64()) }

// checkGrad compares every parameter gradient of L = Σ out·R, R fixed and
// random, with central differences of L computed in float64 from the
// program's float32 output. The error measure is ‖g − fd‖₂ / ‖fd‖₂.
func checkGrad(t *testing.T, c gradCase) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(len(c.name))))
	g := graph.New()
	store := graph.NewStore()
	var ps, ints []*graph.Node
	for i, s := range c.params {
		name := fmt.Sprintf("p%d", i)
		ps = append(ps, g.Param(name, s...))
		data := make([]float32, s.Numel())
		for j := range data {
			if c.values != nil {
				data[j] = c.values(rng)
			} else {
				data[j] = float32(rng.NormFloat64())
			}
		}
		if err := store.SetFloat32(name, data, s...); err != nil {
			t.Fatal(err)
		}
	}
	intData := make([][]int32, len(c.ints))
	for i, in := range c.ints {
		ints = append(ints, g.Input(fmt.Sprintf("ids%d", i), graph.Int32, in.shape...))
		intData[i] = make([]int32, in.shape.Numel())
		for j := range intData[i] {
			intData[i][j] = rng.Int32N(in.max)
		}
	}
	out := c.build(ps, ints)
	if err := g.Err(); err != nil {
		t.Fatalf("%s: build: %v", c.name, err)
	}
	r := g.Input("R", graph.Float32, out.Shape()...)
	rv := make([]float32, out.Shape().Numel())
	for i := range rv {
		rv[i] = float32(rng.NormFloat64())
	}
	loss := ops.Sum(ops.Mul(out, r))
	grads, err := graph.Grad(loss, ps...)
	if err != nil {
		t.Fatalf("%s: grad: %v", c.name, err)
	}
	feed := func(p *graph.Program) {
		t.Helper()
		for i, in := range ints {
			if err := p.FeedInt32(in, intData[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	gp, err := graph.Compile(g, store, graph.Options{Training: true}, grads...)
	if err != nil {
		t.Fatalf("%s: compile: %v", c.name, err)
	}
	if err := gp.FeedFloat32(r, rv); err != nil {
		t.Fatal(err)
	}
	feed(gp)
	if err := gp.Run(); err != nil {
		t.Fatalf("%s: run: %v", c.name, err)
	}
	fp, err := graph.Compile(g, store, graph.Options{Training: true}, out)
	if err != nil {
		t.Fatal(err)
	}
	feed(fp)
	lossAt := func() float64 {
		if err := fp.Run(); err != nil {
			t.Fatal(err)
		}
		var s float64
		for i, v := range fp.Float32(out) {
			s += float64(v) * float64(rv[i])
		}
		return s
	}
	tol := c.tol
	if tol == 0 {
		tol = 1e-3
	}
	for i, p := range ps {
		got := gp.Float32(grads[i])
		vals := store.Float32(p.Name())
		var num, den float64
		idx := rng.Perm(len(vals))
		if c.sample > 0 && c.sample < len(idx) {
			idx = idx[:c.sample]
		}
		for _, j := range idx {
			v := vals[j]
			h := float32(1e-2) * max(1, abs32(v))
			vals[j] = v + h
			hp := float64(vals[j] - v)
			lp := lossAt()
			vals[j] = v - h
			hm := float64(v - vals[j])
			lm := lossAt()
			vals[j] = v
			fd := (lp - lm) / (hp + hm)
			d := float64(got[j]) - fd
			num += d * d
			den += fd * fd
		}
		rel := math.Sqrt(num) / max(math.Sqrt(den), 1e-6)
		if rel > tol || math.IsNaN(rel) {
			t.Errorf("%s: gradient of input %d: relative error %.3g > %.0e", c.name, i, rel, tol)
		}
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

func s(d ...int) graph.Shape { return graph.Shape(d) }

func TestGradUnary(t *testing.T) {
	one := func(f func(*graph.Node) *graph.Node) func(ps, _ []*graph.Node) *graph.Node {
		return func(ps, _ []*graph.Node) *graph.Node { return f(ps[0]) }
	}
	for _, c := range []gradCase{
		{name: "Neg", params: []graph.Shape{s(3, 5)}, build: one(ops.Neg)},
		{name: "Scale", params: []graph.Shape{s(3, 5)}, build: one(func(x *graph.Node) *graph.Node { return ops.Scale(x, -2.5) })},
		{name: "ReLU", params: []graph.Shape{s(4, 6)}, values: awayFromZero, build: one(ops.ReLU)},
		{name: "GELU", params: []graph.Shape{s(4, 6)}, build: one(ops.GELU)},
		{name: "Tanh", params: []graph.Shape{s(4, 6)}, build: one(ops.Tanh)},
		{name: "Exp", params: []graph.Shape{s(4, 6)}, build: one(ops.Exp)},
		{name: "Log", params: []graph.Shape{s(4, 6)}, values: positive, build: one(ops.Log)},
		{name: "Sqrt", params: []graph.Shape{s(4, 6)}, values: positive, build: one(ops.Sqrt)},
		{name: "SiLU", params: []graph.Shape{s(4, 9)}, build: one(ops.SiLU)},
		{name: "Sigmoid", params: []graph.Shape{s(4, 9)}, build: one(ops.Sigmoid)},
	} {
		checkGrad(t, c)
	}
}

func TestGradBinaryBroadcast(t *testing.T) {
	type bf = func(a, b *graph.Node) *graph.Node
	fns := map[string]bf{"Add": ops.Add, "Sub": ops.Sub, "Mul": ops.Mul, "Div": ops.Div}
	shapes := [][2]graph.Shape{
		{s(3, 4), s(3, 4)},
		{s(3, 4), s(4)},
		{s(4), s(3, 4)},
		{s(2, 3, 4), s(1, 3, 1)},
		{s(2, 1, 4), s(1, 3, 1)},
		{s(3, 4), s()},
		{s(1), s(3, 4)},
	}
	for name, f := range fns {
		for _, sh := range shapes {
			c := gradCase{name: fmt.Sprintf("%s %v %v", name, sh[0], sh[1]), params: []graph.Shape{sh[0], sh[1]},
				build: func(ps, _ []*graph.Node) *graph.Node { return f(ps[0], ps[1]) }}
			if name == "Div" {
				c.values = positive
			}
			checkGrad(t, c)
		}
	}
}

// TestImplicitBroadcastRefused: operands of different ranks that numpy
// would stretch ([n 1] against [n] is [n n] there) are refused, naming
// both nodes and shapes; BroadcastTo asks for the stretch.
func TestImplicitBroadcastRefused(t *testing.T) {
	for _, sh := range [][2]graph.Shape{{s(5, 1), s(5)}, {s(5), s(5, 1)}, {s(2, 3, 4), s(3, 1)}, {s(2, 3, 4), s(1, 4)}} {
		for name, f := range map[string]func(a, b *graph.Node) *graph.Node{"Add": ops.Add, "Sub": ops.Sub, "Mul": ops.Mul, "Div": ops.Div} {
			g := graph.New()
			a, b := g.Input("pred", graph.Float32, sh[0]...), g.Input("target", graph.Float32, sh[1]...)
			f(a, b)
			err := g.Err()
			require.Error(t, err, "%s %v %v", name, sh[0], sh[1])
			require.ErrorIs(t, err, graph.ErrImplicitBroadcast)
			for _, want := range []string{`"pred" ` + sh[0].String(), `"target" ` + sh[1].String()} {
				require.Contains(t, err.Error(), want)
			}
		}
	}
	g := graph.New()
	a, b := g.Input("pred", graph.Float32, 5, 1), g.Input("target", graph.Float32, 5)
	d := ops.Sub(ops.BroadcastTo(a, graph.Shape{5, 5}), b)
	require.NoError(t, g.Err())
	require.Equal(t, graph.Shape{5, 5}, d.Shape())
}

func TestGradReduceAndShape(t *testing.T) {
	for _, c := range []gradCase{
		{name: "Sum all", params: []graph.Shape{s(3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Sum(ps[0]) }},
		{name: "Sum axis 1", params: []graph.Shape{s(2, 3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Sum(ps[0], 1) }},
		{name: "Sum axes 0,-1", params: []graph.Shape{s(2, 3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Sum(ps[0], 0, -1) }},
		{name: "SumKeepDims", params: []graph.Shape{s(2, 3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.SumKeepDims(ps[0], 2) }},
		{name: "Mean axis 0", params: []graph.Shape{s(5, 3)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Mean(ps[0], 0) }},
		{name: "Mean all", params: []graph.Shape{s(5, 3)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Mean(ps[0]) }},
		{name: "MeanKeepDims", params: []graph.Shape{s(5, 3)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.MeanKeepDims(ps[0], -1) }},
		{name: "SumTo", params: []graph.Shape{s(2, 3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.SumTo(ps[0], s(3, 1)) }},
		{name: "BroadcastTo", params: []graph.Shape{s(3, 1)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.BroadcastTo(ps[0], s(2, 3, 4)) }},
		{name: "Reshape", params: []graph.Shape{s(2, 3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Reshape(ps[0], 4, -1) }},
		{name: "Permute", params: []graph.Shape{s(2, 3, 4)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Permute(ps[0], 2, 0, 1) }},
		{name: "Transpose", params: []graph.Shape{s(2, 3, 5)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Transpose(ps[0]) }},
	} {
		checkGrad(t, c)
	}
}

func TestGradMatMul(t *testing.T) {
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			as, bs := s(5, 7), s(7, 3)
			if tA {
				as = s(7, 5)
			}
			if tB {
				bs = s(3, 7)
			}
			checkGrad(t, gradCase{name: fmt.Sprintf("MatMul tA=%v tB=%v", tA, tB), params: []graph.Shape{as, bs},
				build: func(ps, _ []*graph.Node) *graph.Node { return ops.MatMul(ps[0], ps[1], tA, tB) }})
			ab, bb := append(s(2, 3), as...), append(s(2, 3), bs...)
			checkGrad(t, gradCase{name: fmt.Sprintf("BatchMatMul tA=%v tB=%v", tA, tB), params: []graph.Shape{ab, bb},
				build: func(ps, _ []*graph.Node) *graph.Node { return ops.BatchMatMul(ps[0], ps[1], tA, tB) }})
		}
	}
	// Large enough for the blocked, parallel path.
	checkGrad(t, gradCase{name: "MatMul large", params: []graph.Shape{s(70, 90), s(80, 90)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.MatMul(ps[0], ps[1], false, true) }, tol: 2e-3, sample: 200})
}

func TestGradLinear(t *testing.T) {
	checkGrad(t, gradCase{name: "Linear", params: []graph.Shape{s(6, 5), s(4, 5), s(4)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.Linear("fc", ps[0], ps[1], ps[2]) }})
	checkGrad(t, gradCase{name: "Linear no bias rank 3", params: []graph.Shape{s(2, 3, 5), s(4, 5)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.Linear("fc", ps[0], ps[1], nil) }})
}

func TestGradSoftmaxFamily(t *testing.T) {
	for _, c := range []gradCase{
		{name: "Softmax", params: []graph.Shape{s(3, 7)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.Softmax(ps[0]) }},
		{name: "LogSoftmax", params: []graph.Shape{s(2, 3, 7)}, build: func(ps, _ []*graph.Node) *graph.Node { return ops.LogSoftmax(ps[0]) }},
		{name: "CrossEntropy", params: []graph.Shape{s(6, 5)}, ints: []intInput{{s(6), 5}},
			build: func(ps, in []*graph.Node) *graph.Node { return ops.CrossEntropy(ps[0], in[0]) }},
		{name: "CrossEntropy rank 3", params: []graph.Shape{s(2, 3, 5)}, ints: []intInput{{s(2, 3), 5}},
			build: func(ps, in []*graph.Node) *graph.Node { return ops.CrossEntropy(ps[0], in[0]) }},
	} {
		checkGrad(t, c)
	}
}

func TestGradLayerNorm(t *testing.T) {
	for _, zc := range []bool{false, true} {
		checkGrad(t, gradCase{name: fmt.Sprintf("LayerNorm zc=%v", zc), params: []graph.Shape{s(4, 8), s(8), s(8)},
			build: func(ps, _ []*graph.Node) *graph.Node {
				return ops.LayerNorm("ln", ps[0], ps[1], ps[2], ops.LayerNormConfig{ZeroCenteredGamma: zc})
			}, tol: 2e-3})
	}
}

func TestGradEmbeddingAndMask(t *testing.T) {
	checkGrad(t, gradCase{name: "Embedding", params: []graph.Shape{s(5, 3)}, ints: []intInput{{s(2, 4), 5}},
		build: func(ps, in []*graph.Node) *graph.Node { return ops.Embedding("emb", ps[0], in[0]) }})
	checkGrad(t, gradCase{name: "CausalMask+Softmax", params: []graph.Shape{s(2, 4, 4)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.Softmax(ops.CausalMask(ps[0])) }})
}

// TestGradAttention checks a whole causal self-attention head against
// finite differences: softmax(mask(q·kᵀ/√d))·v.
func TestGradAttention(t *testing.T) {
	checkGrad(t, gradCase{name: "attention", params: []graph.Shape{s(2, 5, 4), s(2, 5, 4), s(2, 5, 4)},
		build: func(ps, _ []*graph.Node) *graph.Node {
			att := ops.Scale(ops.BatchMatMul(ps[0], ps[1], false, true), 0.5)
			return ops.BatchMatMul(ops.Softmax(ops.CausalMask(att)), ps[2], false, false)
		}})
}

// TestGradReuse checks that the gradients of a node used several times
// accumulate: f(x) = x·x + tanh(x).
func TestGradReuse(t *testing.T) {
	checkGrad(t, gradCase{name: "reuse", params: []graph.Shape{s(3, 3)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.Add(ops.Mul(ps[0], ps[0]), ops.Tanh(ps[0])) }})
}

func TestGradSlice(t *testing.T) {
	checkGrad(t, gradCase{name: "Slice last axis", params: []graph.Shape{s(2, 3, 9)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.Slice(ps[0], -1, 3, 7) }})
	checkGrad(t, gradCase{name: "Slice middle axis", params: []graph.Shape{s(2, 5, 4)},
		build: func(ps, _ []*graph.Node) *graph.Node { return ops.Slice(ps[0], 1, 1, 3) }})
	// q, k, v split of one tensor: gradients of the three slices add up.
	checkGrad(t, gradCase{name: "Slice split", params: []graph.Shape{s(4, 6)},
		build: func(ps, _ []*graph.Node) *graph.Node {
			return ops.Add(ops.Mul(ops.Slice(ps[0], 1, 0, 2), ops.Slice(ps[0], 1, 2, 4)), ops.Tanh(ops.Slice(ps[0], 1, 4, 6)))
		}})
}

func TestFastTanhAccuracy(t *testing.T) {
	worst := 0.0
	for x := -8.0; x <= 8; x += 1e-3 {
		d := math.Abs(float64(ops.FastTanhForTest(float32(x))) - math.Tanh(x))
		worst = math.Max(worst, d)
	}
	if worst > 3e-7 {
		t.Fatalf("fastTanh max error %.3g", worst)
	}
	t.Logf("fastTanh max abs error %.3g", worst)
}

// TestGELUVectorMatchesScalar compares the vector GELU forward and
// backward with the Go loops (run on the tail of a slice), bit for bit.
func TestGELUVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	n := 4096
	x, dy := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 4)
		dy[i] = float32(rng.NormFloat64())
	}
	x[0], x[1], x[2], x[3] = 0, 30, -30, 11.3 // |u| beyond the ±9 clamps
	// Each value computed twice: once by the vector kernel (head of the
	// slice) and once by the Go loop (a one-element tail).
	for i := 0; i < n; i++ {
		xs := make([]float32, 17)
		ds := make([]float32, 17)
		for j := range xs {
			xs[j], ds[j] = x[i], dy[i]
		}
		y, g := ops.GELUForTest(xs), ops.GELUGradForTest(xs, ds)
		if math.Float32bits(y[0]) != math.Float32bits(y[16]) || math.Float32bits(g[0]) != math.Float32bits(g[16]) {
			t.Fatalf("x=%v: vector %v/%v, Go %v/%v", x[i], y[0], g[0], y[16], g[16])
		}
	}
}

// TestReLUGradVectorMatchesScalar compares the vector ReLU backward with
// the Go loop bit for bit, on every kind of x (zeros of both signs,
// denormals, infinities, NaN) and dy.
func TestReLUGradVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3, -3}
	for i := 0; i < 2000; i++ {
		x := specials[rng.IntN(len(specials))]
		if i%2 == 0 {
			x = float32(rng.NormFloat64())
		}
		dy := float32(rng.NormFloat64())
		if i%7 == 0 {
			dy = specials[rng.IntN(len(specials))]
		}
		xs, ds := make([]float32, 17), make([]float32, 17)
		for j := range xs {
			xs[j], ds[j] = x, dy
		}
		g := ops.ReLUGradForTest(xs, ds)
		want := dy
		if !(x > 0) {
			want = 0
		}
		if math.Float32bits(g[0]) != math.Float32bits(g[16]) || math.Float32bits(g[16]) != math.Float32bits(want) {
			t.Fatalf("x=%v dy=%v: vector %v, Go %v, want %v", x, dy, g[0], g[16], want)
		}
	}
}
