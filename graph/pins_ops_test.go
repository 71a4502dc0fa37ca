package graph_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// toInt is a test op with an int32 output (no op of package ops has an
// int32 intermediate), rounding its float32 input.
type toInt struct{}

func (toInt) Type() string { return "ToInt" }
func (toInt) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	return in[0].Shape(), graph.Int32, nil
}
func (toInt) Bind(b *graph.Binding) (graph.Kernel, error) {
	return func() error {
		for i, v := range b.In[0].F32 {
			b.Out.I32[i] = int32(v)
		}
		return nil
	}, nil
}

// badAlias claims to view an input that does not exist (index past the
// end, or -1): the compiler must treat it as a node with its own buffer.
type badAlias struct{ idx int }

func (badAlias) Type() string { return "BadAlias" }
func (badAlias) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	return in[0].Shape(), in[0].DType(), nil
}
func (a badAlias) AliasOf(graph.Options) int { return a.idx }
func (badAlias) Bind(b *graph.Binding) (graph.Kernel, error) {
	return func() error { copy(b.Out.F32, b.In[0].F32); return nil }, nil
}

// Every storage class counts in the one arena: float32 and int32 at 4
// bytes, FP8 at 1 (rounded to 64), and an FP8 buffer reuses the bytes a
// float32 one freed.
func TestArenaCountsEveryStorage(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4, 8)
	i := g.Apply(toInt{}, "i", ops.Neg(x))
	q := ops.Quantize(x, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling}})
	p, err := graph.Compile(g, nil, graph.Options{}, i, q)
	require.NoError(t, err)
	// Neg's 128 bytes and the int32 128; Neg is dead once toInt ran, and
	// the 32 FP8 codes (64 aligned) take its bytes: separate arenas per
	// dtype would need 320.
	require.Equal(t, 32*4+32*4, p.Stats().ArenaBytes)
	in := make([]float32, 32)
	in[3] = -2.7
	require.NoError(t, p.FeedFloat32(x, in))
	require.NoError(t, p.Run())
	v, err := p.Value(i)
	require.NoError(t, err)
	require.Equal(t, int32(2), v.I32[3])
}

func TestAliasIndexOutOfRangeIsNoView(t *testing.T) {
	for _, idx := range []int{-1, 1, 5} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 2, 2)
		a := ops.Neg(x)
		v := g.Apply(badAlias{idx}, "v", a)
		p, err := graph.Compile(g, nil, graph.Options{}, a, v)
		require.NoError(t, err, idx)
		require.NotSame(t, &p.Float32(a)[0], &p.Float32(v)[0], "index %d: its own buffer", idx)
		require.NoError(t, p.FeedFloat32(x, []float32{1, 2, 3, 4}))
		require.NoError(t, p.Run())
		require.Equal(t, []float32{-1, -2, -3, -4}, p.Float32(v))
	}
}

// The program's step counts Runs and can be set (a resumed run).
func TestProgramStepCounts(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2)
	y := ops.Neg(x)
	p, err := graph.Compile(g, nil, graph.Options{}, y)
	require.NoError(t, err)
	require.Zero(t, p.Step())
	require.NoError(t, p.FeedFloat32(x, []float32{1, 2}))
	require.NoError(t, p.Run())
	require.NoError(t, p.Run())
	require.Equal(t, int64(2), p.Step())
	p.SetStep(40)
	require.NoError(t, p.Run())
	require.Equal(t, int64(41), p.Step())
}

// Names: a repeated name gets #1, #2, …; handles follow replacements to
// the end of a chain, and replacing a node by itself forwards nothing.
func TestNamesAndResolve(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2)
	a := g.Apply(badAlias{-1}, "n", x)
	b := g.Apply(badAlias{-1}, "n", x)
	c := g.Apply(badAlias{-1}, "n", x)
	require.Equal(t, []string{"n", "n#1", "n#2"}, []string{a.Name(), b.Name(), c.Name()})
	require.NoError(t, g.ReplaceUses(a, b))
	require.NoError(t, g.ReplaceUses(b, c))
	require.Same(t, c, g.Resolve(a))
	require.Same(t, c, g.Resolve(b))
	require.NoError(t, g.ReplaceUses(c, c))
	require.Same(t, c, g.Resolve(c), "no self-forwarding loop")
	require.Same(t, c, g.Resolve(a))
	require.Same(t, x, g.Resolve(x))
}

// A dump shows an op's attributes in braces only when it has some.
func TestDumpAttributes(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2, 3)
	y := ops.Neg(x)
	s := ops.Sum(x, 1)
	var buf bytes.Buffer
	require.NoError(t, g.WriteText(&buf, y, s))
	out := buf.String()
	require.Contains(t, out, "Sum{axes=[1]}(")
	require.NotContains(t, out, "Neg{")
	require.True(t, strings.Contains(out, "= Neg("), out)
}

// Live follows only the taken branch of a Switch: the training program
// runs one side, evaluation the other.
func TestLiveFollowsTheTakenBranch(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2)
	tr, ev := ops.Neg(x), ops.ReLU(x)
	sw := g.Switch("sw", "training?", func(o graph.Options) bool { return o.Training }, tr, ev)
	require.NoError(t, g.Err(), "branches of one shape and dtype")
	has := func(nodes []*graph.Node, n *graph.Node) bool {
		for _, m := range nodes {
			if m == n {
				return true
			}
		}
		return false
	}
	train := graph.Live(graph.Options{Training: true}, sw)
	require.True(t, has(train, tr))
	require.False(t, has(train, ev))
	eval := graph.Live(graph.Options{}, sw)
	require.True(t, has(eval, ev))
	require.False(t, has(eval, tr))
	require.Nil(t, graph.Live(graph.Options{}))
}

func TestDTypeParsing(t *testing.T) {
	require.True(t, graph.Float8E5M2.IsFloat8())
	require.True(t, graph.Float8E4M3.IsFloat8())
	require.False(t, graph.Float32.IsFloat8())
	d, err := graph.ParseDType("INT32")
	require.NoError(t, err)
	require.Equal(t, graph.Int32, d)
	_, err = graph.ParseDType("invalid")
	require.Error(t, err, "the invalid dtype is not a name to parse")
}

func TestShapeHelpers(t *testing.T) {
	require.Equal(t, []int{12, 4, 1}, graph.Shape{2, 3, 4}.Strides())
	require.Equal(t, []int{1}, graph.Shape{7}.Strides())
	for _, c := range []struct{ a, b, want graph.Shape }{
		{graph.Shape{3, 1}, graph.Shape{4}, graph.Shape{3, 4}},
		{graph.Shape{4}, graph.Shape{3, 1}, graph.Shape{3, 4}},
		{graph.Shape{2, 1, 5}, graph.Shape{1, 3, 1}, graph.Shape{2, 3, 5}},
		{graph.Shape{5}, graph.Shape{5}, graph.Shape{5}},
	} {
		got, err := graph.Broadcast(c.a, c.b)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%v %v", c.a, c.b)
	}
	_, err := graph.Broadcast(graph.Shape{3}, graph.Shape{4})
	require.Error(t, err)
	require.Error(t, graph.Shape{2, 0}.Validate())
	require.NoError(t, graph.Shape{2, 1}.Validate())
}

func TestStructuralOps(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 2)
	y := ops.Neg(x)
	require.Nil(t, graph.AddN("s"))
	require.Nil(t, graph.AddN("s", nil))
	require.Same(t, x, graph.AddN("s", x))
	s := graph.AddN("s", x, y)
	require.Equal(t, "AddN", s.Op().Type())
	require.NoError(t, g.Err(), "two float32 inputs of one shape")
	c := g.Const("c", 1.5, 2)
	var buf bytes.Buffer
	require.NoError(t, g.WriteText(&buf, c))
	require.Contains(t, buf.String(), "Fill{value=1.5}")
	require.Equal(t, "<nil>", (*graph.Node)(nil).String())
	// A Switch needs two branches of one shape and dtype.
	z := g.Input("z", graph.Float32, 3)
	g.Switch("bad", "?", func(graph.Options) bool { return true }, x, z)
	require.ErrorContains(t, g.Err(), "branches differ")
}

// negInPlace negates its input and may write over it (see InPlacer).
type negInPlace struct{}

func (negInPlace) Type() string { return "NegInPlace" }
func (negInPlace) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	return in[0].Shape(), in[0].DType(), nil
}
func (negInPlace) InPlace() int { return 0 }
func (negInPlace) Bind(b *graph.Binding) (graph.Kernel, error) {
	return func() error {
		for i, v := range b.In[0].F32 {
			b.Out.F32[i] = -v
		}
		return nil
	}, nil
}

// An in-place node takes its input's buffer when it is the input's last
// reader, and gets its own when another node reads the input later.
func TestInPlaceTakesADyingInput(t *testing.T) {
	for _, laterReader := range []bool{false, true} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 256)
		a := ops.Neg(x)
		b := g.Apply(negInPlace{}, "b", a)
		outs := []*graph.Node{ops.Sum(b)}
		if laterReader {
			outs = append(outs, ops.Sum(ops.Add(a, b)))
		}
		p, err := graph.Compile(g, nil, graph.Options{}, outs...)
		require.NoError(t, err)
		in := make([]float32, 256)
		for i := range in {
			in[i] = float32(i)
		}
		require.NoError(t, p.FeedFloat32(x, in))
		require.NoError(t, p.Run())
		s, err := p.Scalar(outs[0])
		require.NoError(t, err)
		require.Equal(t, float32(255*256/2), s, "b = −(−x) whether or not it is in place")
		want := 1024 + 64 // a's bytes (b in them), the sum
		if laterReader {
			want = 3 * 1024 // a, b and a+b; the sums in freed bytes
		}
		require.Equal(t, want, p.Stats().ArenaBytes, "later reader %v", laterReader)
	}
}

// The schedule runs a ready node that frees a large buffer before
// continuing depth first: here Sum(big), listed as the second output,
// runs as soon as big exists, so big is not kept alive through the chain
// that the first output needs.
func TestScheduleFreesEarly(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 1024)
	big := ops.Neg(x)
	c := big
	for i := 0; i < 4; i++ {
		c = ops.Neg(c)
	}
	o1, o2 := ops.Sum(c), ops.Sum(big)
	p, err := graph.Compile(g, nil, graph.Options{}, o1, o2)
	require.NoError(t, err)
	// Depth first: big, the chain (two of its buffers at a time), o1,
	// then o2: 3·4096 bytes. Reordered: big and the chain's first, then
	// two of the chain's: 2·4096, and a sum (the other in freed bytes).
	require.Equal(t, 2*4096+64, p.Stats().ArenaBytes)
	sched := p.Schedule()
	at := func(n *graph.Node) int { return slices.Index(sched, n) }
	require.Less(t, at(o2), at(c), "Sum(big) runs before the chain ends")
}

// widen is an in-place op whose output is larger than its input (or, with
// idx out of range, names no input): the compiler must not put it in
// its input's buffer, nor fail.
type widen struct{ idx int }

func (widen) Type() string { return "Widen" }
func (widen) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	return graph.Shape{2 * in[0].Shape().Numel()}, in[0].DType(), nil
}
func (w widen) InPlace() int { return w.idx }
func (widen) Bind(b *graph.Binding) (graph.Kernel, error) {
	return func() error {
		n := len(b.In[0].F32)
		for i, v := range b.In[0].F32 {
			b.Out.F32[i], b.Out.F32[n+i] = v, -v
		}
		return nil
	}, nil
}

func TestInPlaceNeedsRoomAndAnInput(t *testing.T) {
	for _, idx := range []int{0, 1, -1} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 256)
		a := ops.Neg(x)
		w := g.Apply(widen{idx}, "w", a)
		p, err := graph.Compile(g, nil, graph.Options{}, w)
		require.NoError(t, err)
		require.Equal(t, 1024+2048, p.Stats().ArenaBytes, "idx %d: a and the wider output apart", idx)
		in := make([]float32, 256)
		for i := range in {
			in[i] = float32(i)
		}
		require.NoError(t, p.FeedFloat32(x, in))
		require.NoError(t, p.Run())
		v, err := p.Value(w)
		require.NoError(t, err)
		require.Equal(t, float32(-5), v.F32[5])
		require.Equal(t, float32(5), v.F32[256+5])
	}
}

// AddN sums its inputs in order, ((a + b) + c) + d, element by element,
// across the workers' runs and the ragged end, as the loop does.
func TestAddNSumsInOrder(t *testing.T) {
	for _, n := range []int{7, 40001} {
		g := graph.New()
		var in []*graph.Node
		vals := make([][]float32, 4)
		for i := range vals {
			in = append(in, g.Input(string(rune('a'+i)), graph.Float32, n))
			vals[i] = make([]float32, n)
			for j := range vals[i] {
				// Magnitudes that make the order matter.
				vals[i][j] = float32(j%13-6) * []float32{1e8, 1, -1e8, 0.37}[i] * float32(1+j%7)
			}
		}
		s := graph.AddN("s", in...)
		p, err := graph.Compile(g, nil, graph.Options{}, s)
		require.NoError(t, err)
		for i, x := range in {
			require.NoError(t, p.FeedFloat32(x, vals[i]))
		}
		require.NoError(t, p.Run())
		got := p.Float32(s)
		for j := range n {
			want := ((vals[0][j] + vals[1][j]) + vals[2][j]) + vals[3][j]
			require.Equal(t, want, got[j], "n=%d element %d", n, j)
		}
	}
}

// countingSums adds as graph's plain loops do and counts its calls.
type countingSums struct{ add, addTo int }

func (c *countingSums) Add(dst, x, y []float32) {
	c.add++
	for i := range dst {
		dst[i] = x[i] + y[i]
	}
}

func (c *countingSums) AddTo(dst, src []float32) {
	c.addTo++
	for i := range dst {
		dst[i] += src[i]
	}
}

// AddN adds with Options.Sums when it is set, and in plain Go
// otherwise; ops.VectorSums gives the plain loops' bits.
func TestAddNUsesTheOptionsSums(t *testing.T) {
	g := graph.New()
	const n = 1000
	xs := []*graph.Node{g.Input("a", graph.Float32, n), g.Input("b", graph.Float32, n), g.Input("c", graph.Float32, n)}
	s := graph.AddN("s", xs...)
	run := func(opts graph.Options) []float32 {
		p, err := graph.Compile(g, graph.NewStore(), opts, s)
		require.NoError(t, err)
		for k, x := range xs {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(i*(k+3)%17)/7 - 1.1
			}
			require.NoError(t, p.FeedFloat32(x, v))
		}
		require.NoError(t, p.Run())
		return append([]float32(nil), p.Float32(s)...)
	}
	plain := run(graph.Options{})
	c := &countingSums{}
	require.Equal(t, plain, run(graph.Options{Sums: c}))
	require.Positive(t, c.add)
	require.Equal(t, c.add, c.addTo, "one AddTo for the third input per part")
	require.Equal(t, plain, run(graph.Options{Sums: ops.VectorSums()}))
}
