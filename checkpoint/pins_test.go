package checkpoint

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/nlpodyssey/safetensors"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// The tests in this file pin behaviours that mutation testing found
// unguarded: each fails when the behaviour it names changes.

// rebuild saves s through build, lets edit change the tensors (the file
// then carries no checksums, as an older writer's would) and loads the
// bytes into target.
func rebuild(t *testing.T, s *State, edit func(views map[string]safetensors.TensorView), target *State) error {
	t.Helper()
	views, meta, err := build(s)
	require.NoError(t, err)
	delete(meta, crcKey)
	edit(views)
	var buf bytes.Buffer
	require.NoError(t, safetensors.SerializeToWriter(views, meta, &buf))
	return loadBytes("edited", buf.Bytes(), target)
}

// A tensor with as many elements but other dimensions ([8 4] into
// [4 8]) is refused, naming it and both shapes.
func TestSameSizeOtherShapeRefused(t *testing.T) {
	src, dst := graph.NewStore(), graph.NewStore()
	require.NoError(t, src.SetFloat32("w", make([]float32, 32), 8, 4))
	require.NoError(t, dst.SetFloat32("w", make([]float32, 32), 4, 8))
	path := filepath.Join(t.TempDir(), "x.safetensors")
	require.NoError(t, Save(path, &State{Store: src}))
	require.ErrorContains(t, Load(path, &State{Store: dst}), `tensor "param/w" has shape [8 4], the model wants [4 8]`)
	same := graph.NewStore()
	require.NoError(t, same.SetFloat32("w", make([]float32, 32), 8, 4))
	require.NoError(t, Load(path, &State{Store: same}))
}

// An FP8 model saved before its first step (scales 1, empty histories)
// loads: that state is valid, not corrupt.
func TestFP8StateBeforeTheFirstStepLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	require.NoError(t, Save(path, tinyState(t)))
	target := tinyState(t)
	ls := fp8Layers(target.Store)["fc"]
	ls.Input.Scale, ls.Input.ScaleInv = 4, 0.25
	require.NoError(t, Load(path, target))
	require.Equal(t, float32(1), ls.Input.Scale)
	require.Equal(t, float32(1), ls.Input.ScaleInv)
	require.Equal(t, []float32{0, 0, 0}, ls.Input.History)
}

func lowBitState(t *testing.T) *State {
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("w", []float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4))
	params := []optim.Param{{Name: "w", W: store.Float32("w"), G: []float32{1, -1, 1, -1, 1, -1, 1, -1}, Decay: true}}
	opt, err := optim.NewLowBitAdam(params, recipe.MSAMP{OptLevel: "O2"}, 0.01, nil)
	require.NoError(t, err)
	opt.Step(1e-3)
	return &State{Store: store, Optimizer: opt}
}

// MS-AMP's raw optimizer state: a missing or wrong-size buffer is
// refused, naming it.
func TestRawOptimizerStateChecked(t *testing.T) {
	var rawName string
	views, _, err := build(lowBitState(t))
	require.NoError(t, err)
	for k := range views {
		if len(k) > 10 && k[:10] == "optim_raw/" {
			rawName = k
		}
	}
	require.NotEmpty(t, rawName)
	err = rebuild(t, lowBitState(t), func(v map[string]safetensors.TensorView) { delete(v, rawName) }, lowBitState(t))
	require.ErrorContains(t, err, "optimizer state \""+rawName+"\" is missing")
	err = rebuild(t, lowBitState(t), func(v map[string]safetensors.TensorView) {
		tv, err := safetensors.NewTensorView(safetensors.U8, []uint64{3}, []byte{1, 2, 3})
		require.NoError(t, err)
		v[rawName] = tv
	}, lowBitState(t))
	require.ErrorContains(t, err, "tensor \""+rawName+"\" has 3 bytes of U8")
	require.NoError(t, rebuild(t, lowBitState(t), func(map[string]safetensors.TensorView) {}, lowBitState(t)))
}

// A generator state stored with another dtype is refused.
func TestRNGStateDTypeChecked(t *testing.T) {
	err := rebuild(t, tinyState(t), func(v map[string]safetensors.TensorView) {
		tv, err := safetensors.NewTensorView(safetensors.F32, []uint64{1}, []byte{0, 0, 128, 63})
		require.NoError(t, err)
		v["rng/loader"] = tv
	}, tinyState(t))
	require.ErrorContains(t, err, `tensor "rng/loader" is F32, want U8`)
	err = rebuild(t, tinyState(t), func(v map[string]safetensors.TensorView) { delete(v, "rng/loader") }, tinyState(t))
	require.ErrorContains(t, err, `generator state "loader" is missing`)
	target := tinyState(t)
	require.NoError(t, rebuild(t, tinyState(t), func(map[string]safetensors.TensorView) {}, target))
	require.Equal(t, []byte{1, 2, 3}, target.RNG["loader"])
	require.Equal(t, int64(3), target.Step)
}

// A parameter stored with another dtype, or missing, is refused; a
// non-finite one names its element.
func TestParamTensorsChecked(t *testing.T) {
	err := rebuild(t, tinyState(t), func(v map[string]safetensors.TensorView) {
		tv, err := safetensors.NewTensorView(safetensors.U8, []uint64{2}, []byte{1, 2})
		require.NoError(t, err)
		v["param/b"] = tv
	}, tinyState(t))
	require.ErrorContains(t, err, `tensor "param/b" is U8, want F32`)
	err = rebuild(t, tinyState(t), func(v map[string]safetensors.TensorView) { delete(v, "param/w") }, tinyState(t))
	require.ErrorContains(t, err, `tensor "param/w" is missing`)
	s := tinyState(t)
	s.Store.Float32("w")[4] = float32(math.Inf(1))
	err = rebuild(t, s, func(map[string]safetensors.TensorView) {}, tinyState(t))
	require.ErrorContains(t, err, `parameter "w" holds a non-finite value at element 4`)
}

// The framing messages at their exact boundaries: an 8-byte file has a
// header length (and it runs past the end), a header that fills the
// file exactly is read, and trailing data names the offset where the
// tensors end.
func TestFramingBoundaries(t *testing.T) {
	eight := []byte{5, 0, 0, 0, 0, 0, 0, 0}
	err := loadBytes("f", eight, tinyState(t))
	require.ErrorContains(t, err, "header length 5 at offset 0 runs past the end of the file (8 bytes)")
	err = loadBytes("f", eight[:7], tinyState(t))
	require.ErrorContains(t, err, "7 bytes, too short for a header length at offset 0")
	exact := append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, "{}"...)
	err = loadBytes("f", exact, tinyState(t))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "runs past the end")

	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, Save(path, tinyState(t)))
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	err = loadBytes(path, append(append([]byte(nil), good...), 0, 0, 0), tinyState(t))
	require.ErrorContains(t, err, fmt.Sprintf("trailing data: 3 byte(s) after the last tensor (offset %d)", len(good)))
}

// A one-element parameter that is not finite is refused too.
func TestOneElementParameterChecked(t *testing.T) {
	mk := func(v float32) *State {
		s := graph.NewStore()
		require.NoError(t, s.SetFloat32("g", []float32{v}, 1))
		return &State{Store: s}
	}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	require.NoError(t, Save(path, mk(float32(math.NaN()))))
	require.ErrorContains(t, Load(path, mk(1)), `parameter "g" holds a non-finite value at element 0`)
	require.NoError(t, Save(path, mk(2)))
	require.NoError(t, Load(path, mk(1)))
}
