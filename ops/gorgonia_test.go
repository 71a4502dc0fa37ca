package ops_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// These tests build the same model in Octet and in gorgonia v0.9.18, the
// established Go autodiff engine, feed both the same inputs and weights,
// and require the loss and every parameter gradient to agree.

func relErr(got []float32, want []float64) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	return math.Sqrt(num) / max(math.Sqrt(den), 1e-30)
}

func gValues(t *testing.T, n *G.Node, grad bool) []float64 {
	t.Helper()
	v := n.Value()
	if grad {
		var err error
		if v, err = n.Grad(); err != nil {
			t.Fatalf("gorgonia grad of %s: %v", n.Name(), err)
		}
	}
	switch d := v.Data().(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, x := range d {
			out[i] = float64(x)
		}
		return out
	case float32:
		return []float64{float64(d)}
	}
	t.Fatalf("unexpected gorgonia value %T", v.Data())
	return nil
}

// transpose returns the [c r] transpose of a row-major [r c] matrix.
func transpose(m []float32, r, c int) []float32 {
	out := make([]float32, len(m))
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			out[j*r+i] = m[i*c+j]
		}
	}
	return out
}

func randn(rng *rand.Rand, n int, std float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * std)
	}
	return s
}

type linearParams struct {
	w, b    []float32
	in, out int
}

// gLinear builds x·W + b in gorgonia from Octet's [out in] weight.
func gLinear(t *testing.T, g *G.ExprGraph, x *G.Node, p linearParams, name string) (y, w, b *G.Node) {
	t.Helper()
	w = G.NewMatrix(g, tensor.Float32, G.WithShape(p.in, p.out), G.WithName(name+".w"),
		G.WithValue(tensor.New(tensor.WithShape(p.in, p.out), tensor.WithBacking(transpose(p.w, p.out, p.in)))))
	b = G.NewVector(g, tensor.Float32, G.WithShape(p.out), G.WithName(name+".b"),
		G.WithValue(tensor.New(tensor.WithShape(p.out), tensor.WithBacking(append([]float32(nil), p.b...)))))
	y = G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), b, nil, []byte{0}))
	return y, w, b
}

// gCrossEntropy is the mean softmax cross-entropy built from gorgonia's
// LogSoftMax and a one-hot mask.
func gCrossEntropy(g *G.ExprGraph, logits *G.Node, labels []int32, classes int) *G.Node {
	onehot := make([]float32, len(labels)*classes)
	for i, l := range labels {
		onehot[i*classes+int(l)] = 1
	}
	oh := G.NewConstant(tensor.New(tensor.WithShape(len(labels), classes), tensor.WithBacking(onehot)), G.WithName("onehot"))
	s := G.Must(G.Sum(G.Must(G.HadamardProd(G.Must(G.LogSoftMax(logits)), oh))))
	return G.Must(G.Mul(s, G.NewConstant(float32(-1)/float32(len(labels)))))
}

func TestMLPAgainstGorgonia(t *testing.T) {
	const batch = 64
	sizes := []int{784, 512, 512, 10}
	rng := rand.New(rand.NewPCG(42, 1))
	xv := randn(rng, batch*sizes[0], 1)
	labels := make([]int32, batch)
	for i := range labels {
		labels[i] = rng.Int32N(10)
	}
	var layers []linearParams
	for i := 0; i+1 < len(sizes); i++ {
		layers = append(layers, linearParams{
			w: randn(rng, sizes[i+1]*sizes[i], math.Sqrt(2/float64(sizes[i]))),
			b: randn(rng, sizes[i+1], 0.1), in: sizes[i], out: sizes[i+1]})
	}

	// Octet.
	g := graph.New()
	store := graph.NewStore()
	x := g.Input("x", graph.Float32, batch, sizes[0])
	y := g.Input("labels", graph.Int32, batch)
	h := x
	var params []*graph.Node
	for i, l := range layers {
		name := []string{"mlp.fc1", "mlp.fc2", "mlp.fc3"}[i]
		w := g.Param(name+".weight", l.out, l.in)
		b := g.Param(name+".bias", l.out)
		_ = store.SetFloat32(w.Name(), l.w, l.out, l.in)
		_ = store.SetFloat32(b.Name(), l.b, l.out)
		params = append(params, w, b)
		h = ops.Linear(name, h, w, b)
		if i+1 < len(layers) {
			h = ops.ReLU(h)
		}
	}
	loss := ops.CrossEntropy(h, y)
	grads, err := graph.Grad(loss, params...)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.FeedFloat32(x, xv); err != nil {
		t.Fatal(err)
	}
	if err := prog.FeedInt32(y, labels); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}

	// gorgonia.
	gg := G.NewGraph()
	gx := G.NewMatrix(gg, tensor.Float32, G.WithShape(batch, sizes[0]), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(batch, sizes[0]), tensor.WithBacking(xv))))
	gh := gx
	var gparams G.Nodes
	for i, l := range layers {
		var w, b *G.Node
		gh, w, b = gLinear(t, gg, gh, l, []string{"fc1", "fc2", "fc3"}[i])
		gparams = append(gparams, w, b)
		if i+1 < len(layers) {
			gh = G.Must(G.Rectify(gh))
		}
	}
	gloss := gCrossEntropy(gg, gh, labels, sizes[3])
	if _, err := G.Grad(gloss, gparams...); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(gg)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}

	got, _ := prog.Scalar(loss)
	want := gValues(t, gloss, false)[0]
	if e := math.Abs(float64(got)-want) / math.Abs(want); e > 1e-4 {
		t.Errorf("loss %v, gorgonia %v (relative error %.2g)", got, want, e)
	}
	for i, p := range params {
		gw := gValues(t, gparams[i], true)
		gotGrad := prog.Float32(grads[i])
		if i%2 == 0 { // gorgonia's weight is [in out]
			l := layers[i/2]
			gotGrad = transpose(gotGrad, l.out, l.in)
		}
		if e := relErr(gotGrad, gw); e > 1e-4 {
			t.Errorf("gradient of %s: relative error %.3g vs gorgonia", p.Name(), e)
		} else {
			t.Logf("gradient of %s: relative error %.3g vs gorgonia", p.Name(), e)
		}
	}
}

func TestLayerNormLinearAgainstGorgonia(t *testing.T) {
	const batch, d, out = 32, 64, 48
	const eps = 1e-5
	rng := rand.New(rand.NewPCG(3, 4))
	xv := randn(rng, batch*d, 2)
	for i := range xv {
		xv[i] += 0.5
	}
	gamma := randn(rng, d, 0.2)
	for i := range gamma {
		gamma[i] += 1
	}
	beta := randn(rng, d, 0.1)
	lin := linearParams{w: randn(rng, out*d, 0.1), b: randn(rng, out, 0.1), in: d, out: out}
	labels := make([]int32, batch)
	for i := range labels {
		labels[i] = rng.Int32N(out)
	}

	g := graph.New()
	store := graph.NewStore()
	x := g.Param("x", batch, d) // a parameter, so that dx is checked too
	y := g.Input("labels", graph.Int32, batch)
	pg, pb := g.Param("ln.weight", d), g.Param("ln.bias", d)
	pw, pbias := g.Param("fc.weight", out, d), g.Param("fc.bias", out)
	for _, kv := range []struct {
		n    *graph.Node
		v    []float32
		dims []int
	}{{x, xv, []int{batch, d}}, {pg, gamma, []int{d}}, {pb, beta, []int{d}}, {pw, lin.w, []int{out, d}}, {pbias, lin.b, []int{out}}} {
		if err := store.SetFloat32(kv.n.Name(), kv.v, kv.dims...); err != nil {
			t.Fatal(err)
		}
	}
	loss := ops.CrossEntropy(ops.Linear("fc", ops.LayerNorm("ln", x, pg, pb, ops.LayerNormConfig{Eps: eps}), pw, pbias), y)
	params := []*graph.Node{x, pg, pb, pw, pbias}
	grads, err := graph.Grad(loss, params...)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := graph.Compile(g, store, graph.Options{Training: true}, append([]*graph.Node{loss}, grads...)...)
	if err != nil {
		t.Fatal(err)
	}
	_ = prog.FeedInt32(y, labels)
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}

	gg := G.NewGraph()
	gx := G.NewMatrix(gg, tensor.Float32, G.WithShape(batch, d), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(batch, d), tensor.WithBacking(append([]float32(nil), xv...)))))
	ggamma := G.NewVector(gg, tensor.Float32, G.WithShape(d), G.WithName("gamma"),
		G.WithValue(tensor.New(tensor.WithShape(d), tensor.WithBacking(append([]float32(nil), gamma...)))))
	gbeta := G.NewVector(gg, tensor.Float32, G.WithShape(d), G.WithName("beta"),
		G.WithValue(tensor.New(tensor.WithShape(d), tensor.WithBacking(append([]float32(nil), beta...)))))
	mean := G.Must(G.Mean(gx, 1))
	xc := G.Must(G.BroadcastSub(gx, mean, nil, []byte{1}))
	variance := G.Must(G.Mean(G.Must(G.Square(xc)), 1))
	// 1/√v is written as Inverse(Sqrt(v)): gorgonia v0.9.18's InverseSqrt
	// has a wrong gradient (finite differences side with Octet).
	rstd := G.Must(G.Inverse(G.Must(G.Sqrt(G.Must(G.Add(variance, G.NewConstant(float32(eps))))))))
	xhat := G.Must(G.BroadcastHadamardProd(xc, rstd, nil, []byte{1}))
	ln := G.Must(G.BroadcastAdd(G.Must(G.BroadcastHadamardProd(xhat, ggamma, nil, []byte{0})), gbeta, nil, []byte{0}))
	logits, gw, gbias := gLinear(t, gg, ln, lin, "fc")
	gloss := gCrossEntropy(gg, logits, labels, out)
	gparams := G.Nodes{gx, ggamma, gbeta, gw, gbias}
	if _, err := G.Grad(gloss, gparams...); err != nil {
		t.Fatal(err)
	}
	vm := G.NewTapeMachine(gg)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	got, _ := prog.Scalar(loss)
	want := gValues(t, gloss, false)[0]
	if e := math.Abs(float64(got)-want) / math.Abs(want); e > 1e-4 {
		t.Errorf("loss %v, gorgonia %v (relative error %.2g)", got, want, e)
	}
	for i, p := range params {
		gotGrad := prog.Float32(grads[i])
		if p == pw {
			gotGrad = transpose(gotGrad, out, d)
		}
		if e := relErr(gotGrad, gValues(t, gparams[i], true)); e > 1e-4 {
			t.Errorf("gradient of %s: relative error %.3g vs gorgonia", p.Name(), e)
		} else {
			t.Logf("gradient of %s: relative error %.3g vs gorgonia", p.Name(), e)
		}
	}
}
