package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/safetensors"
	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// run is a small training run: an MLP on synthetic digits, AdamW, a
// shuffling loader, dropout, in float32 or FP8.
type run struct {
	store  *graph.Store
	prog   *graph.Program
	opt    optim.Stateful
	loader *mnist.Loader
	x, y   *graph.Node
	loss   *graph.Node
	xb     []float32
	yb     []int32
	losses []float32
}

func synthetic() *mnist.Set {
	rng := rand.New(rand.NewPCG(4, 4))
	s := &mnist.Set{Images: make([]float32, 256*mnist.Pixels), Labels: make([]int32, 256)}
	for i := range s.Labels {
		s.Labels[i] = int32(i % 10)
		for p := 0; p < mnist.Pixels; p++ {
			s.Images[i*mnist.Pixels+p] = float32(rng.NormFloat64()) + 0.5*float32(i%10)*float32(p%10)/10
		}
	}
	return s
}

func newRun(t *testing.T, rec recipe.Recipe) *run { return newRunLevel(t, rec, "") }

// newRunLevel is newRun with MS-AMP's low-bit AdamW at level (O1, O2) when
// level is set.
func newRunLevel(t *testing.T, rec recipe.Recipe, level string) *run {
	g := graph.New()
	b := nn.NewBuilder(g)
	r := &run{}
	r.x = g.Input("x", graph.Float32, 16, mnist.Pixels)
	r.y = g.Input("labels", graph.Int32, 16)
	mlp, err := nn.NewMLP(b, "mlp", []int{mnist.Pixels, 64, 32, 10}, nn.ReLU, nn.Dropout{P: 0.1, Seed: 3})
	require.NoError(t, err)
	r.loss = ops.CrossEntropy(mlp.Forward(r.x), r.y)
	grads, err := graph.Grad(r.loss, b.Params()...)
	require.NoError(t, err)
	r.store = graph.NewStore()
	require.NoError(t, b.Init(r.store, 9))
	outs := append([]*graph.Node{r.loss}, grads...)
	if rec != nil {
		prep, err := passes.Prepare(g, r.store, passes.Config{Recipe: rec, TrainOutputs: outs, Filter: func(*graph.Node, string) bool { return true }})
		require.NoError(t, err)
		r.prog = prep.Train
	} else {
		r.prog, err = graph.Compile(g, r.store, graph.Options{Training: true}, outs...)
		require.NoError(t, err)
	}
	params, err := optim.Bind(r.store, r.prog, b.Params(), grads)
	require.NoError(t, err)
	if level != "" {
		r.opt, err = optim.NewLowBitAdam(params, recipe.MSAMP{OptLevel: level}, 0.01, nil)
		require.NoError(t, err)
	} else {
		r.opt = optim.NewAdamW(params, 0.01)
	}
	r.loader, err = mnist.NewLoader(synthetic(), 16, true, 5)
	require.NoError(t, err)
	r.xb, r.yb = make([]float32, 16*mnist.Pixels), make([]int32, 16)
	return r
}

func (r *run) steps(t *testing.T, n int) {
	for i := 0; i < n; i++ {
		r.loader.Next(r.xb, r.yb)
		require.NoError(t, r.prog.FeedFloat32(r.x, r.xb))
		require.NoError(t, r.prog.FeedInt32(r.y, r.yb))
		require.NoError(t, r.prog.Run())
		r.opt.Step(1e-3)
		l, _ := r.prog.Scalar(r.loss)
		r.losses = append(r.losses, l)
	}
}

func (r *run) state(t *testing.T) *State {
	lb, err := r.loader.MarshalBinary()
	require.NoError(t, err)
	return &State{Store: r.store, Optimizer: r.opt, Step: r.prog.Step(), RNG: map[string][]byte{"loader": lb},
		Meta: map[string]string{"model": "mlp-784-64-32-10"}}
}

func (r *run) restore(t *testing.T, path string) {
	st := r.state(t)
	require.NoError(t, Load(path, st))
	require.NoError(t, r.loader.UnmarshalBinary(st.RNG["loader"]))
	r.prog.SetStep(st.Step)
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestResumeIsExact trains N+M steps straight, and N steps, a save, a
// fresh model that loads the checkpoint and M more steps: parameters, FP8
// scales and histories, optimizer moments and the losses agree to the bit.
func TestResumeIsExact(t *testing.T) {
	for _, c := range []struct {
		name  string
		rec   recipe.Recipe
		level string
	}{{"float32", nil, ""}, {"FP8 TE delayed", recipe.TE{AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.MaxAlgo, Interval: 2}, ""},
		{"MS-AMP O1", recipe.MSAMP{OptLevel: "O1"}, "O1"}, {"MS-AMP O2", recipe.MSAMP{}, "O2"}, {"bf16", recipe.BF16{}, ""}} {
		const n, m = 7, 6
		straight := newRunLevel(t, c.rec, c.level)
		straight.steps(t, n+m)

		first := newRunLevel(t, c.rec, c.level)
		first.steps(t, n)
		path := filepath.Join(t.TempDir(), "ckpt.safetensors")
		require.NoError(t, Save(path, first.state(t)))
		resumed := newRunLevel(t, c.rec, c.level)
		resumed.restore(t, path)
		resumed.steps(t, m)

		require.Equal(t, bits(straight.losses[n:]), bits(resumed.losses), "%s: losses after resuming", c.name)
		for _, name := range straight.store.Names() {
			require.Equal(t, bits(straight.store.Float32(name)), bits(resumed.store.Float32(name)), "%s: %s", c.name, name)
		}
		for k, v := range straight.opt.StateBuffers() {
			require.Equal(t, bits(v), bits(resumed.opt.StateBuffers()[k]), "%s: %s", c.name, k)
		}
		if raw, ok := straight.opt.(RawStateful); ok {
			for k, v := range raw.RawStateBuffers() {
				require.Equal(t, v, resumed.opt.(RawStateful).RawStateBuffers()[k], "%s: %s", c.name, k)
			}
		}
		for fqn, st := range fp8Layers(straight.store) {
			rs := fp8Layers(resumed.store)[fqn]
			for tensor, mt := range metasOf(st) {
				mr := metasOf(rs)[tensor]
				require.Equal(t, math.Float32bits(mt.Scale), math.Float32bits(mr.Scale), "%s %s %s scale", c.name, fqn, tensor)
				require.Equal(t, bits(mt.History), bits(mr.History), "%s %s %s history", c.name, fqn, tensor)
				require.Equal(t, mt.Steps, mr.Steps)
			}
		}
		if c.rec != nil {
			require.NotEmpty(t, fp8Layers(straight.store))
		}
	}
}

type failingWriter struct {
	w    io.Writer
	left int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		n, _ := f.w.Write(p[:f.left])
		f.left = 0
		return n, errors.New("simulated crash")
	}
	f.left -= len(p)
	return f.w.Write(p)
}

func TestCrashMidSaveKeepsOldCheckpoint(t *testing.T) {
	r := newRun(t, recipe.TE{})
	r.steps(t, 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	require.NoError(t, Save(path, r.state(t)))
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	r.steps(t, 2)
	err = save(path, r.state(t), func(w io.Writer) io.Writer { return &failingWriter{w: w, left: 5000} })
	require.ErrorContains(t, err, "simulated crash")
	now, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, old, now, "the previous checkpoint is untouched")
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 1, "no temporary file is left behind")
	fresh := newRun(t, recipe.TE{})
	fresh.restore(t, path)
	require.Equal(t, int64(2), fresh.prog.Step())
}

func TestCorruptFilesAreRefusedWhole(t *testing.T) {
	r := newRun(t, recipe.TE{})
	r.steps(t, 3)
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")
	require.NoError(t, Save(path, r.state(t)))
	good, _ := os.ReadFile(path)
	target := newRun(t, recipe.TE{})
	before := bits(target.store.Float32("mlp.fc1.weight"))
	for name, data := range map[string][]byte{
		"empty":          {},
		"short header":   good[:5],
		"truncated head": good[:100],
		"truncated data": good[:len(good)-10],
		"huge length":    append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, good[8:]...),
		"not json":       append(append([]byte(nil), good[:8]...), bytes.Repeat([]byte("x"), len(good)-8)...),
	} {
		bad := filepath.Join(dir, "bad")
		require.NoError(t, os.WriteFile(bad, data, 0o644))
		err := Load(bad, target.state(t))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), bad, name)
		require.Equal(t, before, bits(target.store.Float32("mlp.fc1.weight")), "%s: nothing is half-loaded", name)
	}
	// A wrong shape names the tensor.
	other := graph.NewStore()
	require.NoError(t, other.SetFloat32("mlp.fc1.weight", make([]float32, 10), 10))
	err := Load(path, &State{Store: other})
	require.ErrorContains(t, err, `"param/mlp.fc1.weight"`)
	require.ErrorContains(t, err, "[10]")
	// An FP8 checkpoint does not load into a float32 run, and vice versa.
	fp32 := newRun(t, nil)
	require.ErrorContains(t, Load(path, fp32.state(t)), "was converted with the te backend")
	p32 := filepath.Join(dir, "fp32.safetensors")
	require.NoError(t, Save(p32, fp32.state(t)))
	require.ErrorContains(t, Load(p32, target.state(t)), "has no state for it")
	// A bf16 checkpoint records its layers: it loads into a bf16 run
	// only.
	b16 := newRun(t, recipe.BF16{})
	pb16 := filepath.Join(dir, "bf16.safetensors")
	require.NoError(t, Save(pb16, b16.state(t)))
	require.NoError(t, Load(pb16, newRun(t, recipe.BF16{}).state(t)))
	require.ErrorContains(t, Load(pb16, fp32.state(t)), "was converted with the bf16 backend")
	require.ErrorContains(t, Load(pb16, target.state(t)), "bf16 backend")
	require.ErrorContains(t, Load(path, b16.state(t)), "saved with the te backend, this run uses bf16")
	// Another fp8_format is refused.
	e4 := newRun(t, recipe.TE{Format: recipe.AllE4M3})
	require.ErrorContains(t, Load(path, e4.state(t)), "fp8_format")
	// The recipe named in the metadata must match.
	st := target.state(t)
	st.Meta["recipe"] = "te/E4M3"
	require.ErrorContains(t, Load(path, st), "recipe")
}

// TestOtherReader reads the file with a hand-written safetensors parser
// (length, JSON header, little-endian data), independent of the library
// the package writes with.
func TestOtherReader(t *testing.T) {
	r := newRun(t, recipe.TE{})
	r.steps(t, 1)
	path := filepath.Join(t.TempDir(), "ckpt.safetensors")
	require.NoError(t, Save(path, r.state(t)))
	b, _ := os.ReadFile(path)
	n := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &header))
	data := b[8+n:]
	var meta map[string]string
	require.NoError(t, json.Unmarshal(header["__metadata__"], &meta))
	require.Equal(t, Format, meta["octet.format"])
	for _, name := range r.store.Names() {
		var info struct {
			DType   string    `json:"dtype"`
			Shape   []int     `json:"shape"`
			Offsets [2]uint64 `json:"data_offsets"`
		}
		require.NoError(t, json.Unmarshal(header["param/"+name], &info), name)
		require.Equal(t, "F32", info.DType)
		sh, _ := r.store.Shape(name)
		require.Equal(t, []int(sh), info.Shape)
		raw := data[info.Offsets[0]:info.Offsets[1]]
		got := make([]float32, len(raw)/4)
		for i := range got {
			got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		require.Equal(t, r.store.Float32(name), got, name)
	}
}

// tinyState is a small state for fuzzing: two parameters, AdamW and one
// FP8 layer's scaling state.
func tinyState(t testing.TB) *State {
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("w", []float32{1, 2, 3, 4, 5, 6}, 2, 3))
	require.NoError(t, store.SetFloat32("b", []float32{0.5, -0.5}, 2))
	te := recipe.TE{AmaxHistoryLen: 3}
	store.SetState(fp8.LayerStateKey("fc"), &fp8.LayerState{FQN: "fc", Backend: fp8.BackendTE, Input: te.NewMeta(false), Weight: te.NewMeta(false), GradOutput: te.NewMeta(true)})
	params := []optim.Param{{Name: "w", W: store.Float32("w"), G: make([]float32, 6), Decay: true}, {Name: "b", W: store.Float32("b"), G: make([]float32, 2)}}
	return &State{Store: store, Optimizer: optim.NewAdamW(params, 0.01), Step: 3, RNG: map[string][]byte{"loader": {1, 2, 3}}}
}

func FuzzLoad(f *testing.F) {
	st := tinyState(f)
	path := filepath.Join(f.TempDir(), "seed.safetensors")
	if err := Save(path, st); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		target := tinyState(t)
		before := bits(target.Store.Float32("w"))
		if err := loadBytes("fuzz", data, target); err != nil {
			if !bytes.Equal(u32bytes(before), u32bytes(bits(target.Store.Float32("w")))) {
				t.Fatal("a failed load changed the model")
			}
		}
	})
}

func u32bytes(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// TestNilStateIsTheCallersError: Save and Load of a nil state are errors
// that blame the call, not a panic or a "corrupt file".
func TestNilStateIsTheCallersError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	require.ErrorContains(t, Save(path, nil), "no state")
	require.NoError(t, Save(path, tinyState(t)))
	err := Load(path, nil)
	require.ErrorContains(t, err, "no state")
	require.NotContains(t, err.Error(), "corrupt")
}

// snapshot is everything a load writes into a tinyState.
func snapshot(s *State) string {
	var b bytes.Buffer
	for _, name := range s.Store.Names() {
		b.Write(u32bytes(bits(s.Store.Float32(name))))
	}
	for _, name := range []string{"exp_avg/w", "exp_avg_sq/w"} {
		b.Write(u32bytes(bits(s.Optimizer.StateBuffers()[name])))
	}
	st := fp8Layers(s.Store)["fc"]
	for _, r := range fp8.Roles {
		m := st.Meta(r)
		b.Write(u32bytes(bits(append([]float32{m.Scale, m.ScaleInv}, m.History...))))
	}
	b.Write(s.RNG["loader"])
	return b.String()
}

// FuzzFlippedBytes flips one byte anywhere in a saved checkpoint (header
// or tensor data): the load must be refused, leaving the target as it
// was, or give exactly what an untouched file gives — never a silent
// difference.
func FuzzFlippedBytes(f *testing.F) {
	src := tinyState(f)
	src.Store.Float32("w")[0] = 7
	path := filepath.Join(f.TempDir(), "seed.safetensors")
	if err := Save(path, src); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	ref := tinyState(f)
	if err := loadBytes("good", good, ref); err != nil {
		f.Fatal(err)
	}
	want := snapshot(ref)
	for _, pos := range []int{0, 9, len(good) / 2, len(good) - 1} {
		f.Add(pos, byte(1))
	}
	f.Fuzz(func(t *testing.T, pos int, x byte) {
		if x == 0 || pos < 0 || pos >= len(good) {
			return
		}
		data := append([]byte(nil), good...)
		data[pos] ^= x
		target := tinyState(t)
		before := snapshot(target)
		err := loadBytes("flipped", data, target)
		switch got := snapshot(target); {
		case err != nil && got != before:
			t.Fatalf("byte %d ^ %#x: refused (%v) but the target changed", pos, x, err)
		case err == nil && got != want:
			t.Fatalf("byte %d ^ %#x: loaded something other than the saved state", pos, x)
		}
	})
}

// TestEveryTensorByteIsChecked flips each byte of the tensor data of a
// saved checkpoint in turn: every flip is refused, naming the tensor.
func TestEveryTensorByteIsChecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, Save(path, tinyState(t)))
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	header := 8 + int(binary.LittleEndian.Uint64(good))
	for pos := header; pos < len(good); pos++ {
		data := append([]byte(nil), good...)
		data[pos] ^= 0x10
		err := loadBytes("flipped", data, tinyState(t))
		require.Error(t, err, "byte %d", pos)
		require.Contains(t, err.Error(), "CRC-32C", "byte %d", pos)
	}
}

// TestCorruptStateValuesAreRefused saves non-finite weights and broken
// FP8 scaling states (with valid checksums, as a buggy writer would) and
// expects each load refused; a file without checksums loads, marked
// unverified.
func TestCorruptStateValuesAreRefused(t *testing.T) {
	dir := t.TempDir()
	for name, spoil := range map[string]func(s *State){
		"NaN weight":      func(s *State) { s.Store.Float32("w")[2] = float32(math.NaN()) },
		"infinite weight": func(s *State) { s.Store.Float32("b")[0] = float32(math.Inf(-1)) },
		"zero scale": func(s *State) {
			st := fp8Layers(s.Store)["fc"]
			st.Input.Scale, st.Input.ScaleInv = 0, float32(math.Inf(1))
		},
		"negative scale":     func(s *State) { st := fp8Layers(s.Store)["fc"]; st.Weight.Scale, st.Weight.ScaleInv = -1, -1 },
		"NaN scale":          func(s *State) { st := fp8Layers(s.Store)["fc"]; st.GradOutput.Scale = float32(math.NaN()) },
		"mismatched inverse": func(s *State) { st := fp8Layers(s.Store)["fc"]; st.Input.ScaleInv = 3 },
		"negative amax":      func(s *State) { st := fp8Layers(s.Store)["fc"]; st.Input.History[1] = -2 },
	} {
		s := tinyState(t)
		spoil(s)
		path := filepath.Join(dir, "x.safetensors")
		require.NoError(t, Save(path, s), name)
		require.Error(t, Load(path, tinyState(t)), name)
	}
	// An inf amax in the history is what the spec keeps (and counts).
	s := tinyState(t)
	fp8Layers(s.Store)["fc"].Input.History[0] = float32(math.Inf(1))
	path := filepath.Join(dir, "inf.safetensors")
	require.NoError(t, Save(path, s))
	target := tinyState(t)
	require.NoError(t, Load(path, target))
	require.False(t, target.Unverified)

	// A file written before checksums: its metadata has no octet.crc32c.
	views, meta, err := build(tinyState(t))
	require.NoError(t, err)
	delete(meta, crcKey)
	var buf bytes.Buffer
	require.NoError(t, safetensors.SerializeToWriter(views, meta, &buf))
	old := tinyState(t)
	require.NoError(t, loadBytes("old", buf.Bytes(), old))
	require.True(t, old.Unverified)
}

// TestTruncatedAndTrailing names the problem of a file one byte short or
// one byte long, with the offset.
func TestTruncatedAndTrailing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, Save(path, tinyState(t)))
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	err = loadBytes(path, good[:len(good)-1], tinyState(t))
	require.ErrorContains(t, err, "truncated")
	require.ErrorContains(t, err, fmt.Sprint(len(good)))
	err = loadBytes(path, append(append([]byte(nil), good...), 0), tinyState(t))
	require.ErrorContains(t, err, "trailing data: 1 byte(s)")
	require.NoError(t, loadBytes(path, good, tinyState(t)))
}

// TestResumeRefusesChangedScalingSettings: a checkpoint saved with one
// delayed-scaling recipe does not load into a run whose margin, interval,
// algorithm or history length differ.
func TestResumeRefusesChangedScalingSettings(t *testing.T) {
	saved := recipe.TE{Margin: 1, Interval: 2, AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.MaxAlgo}
	src := newRun(t, saved)
	src.steps(t, 2)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, Save(path, src.state(t)))
	require.NoError(t, Load(path, newRun(t, saved).state(t)))
	for want, r := range map[string]recipe.TE{
		"margin":            {Margin: 2, Interval: 2, AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.MaxAlgo},
		"interval":          {Margin: 1, Interval: 3, AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.MaxAlgo},
		"amax_compute_algo": {Margin: 1, Interval: 2, AmaxHistoryLen: 4},
		"amax_history":      {Margin: 1, Interval: 2, AmaxHistoryLen: 8, AmaxComputeAlgo: fp8.MaxAlgo},
	} {
		require.ErrorContains(t, Load(path, newRun(t, r).state(t)), want)
	}
}
