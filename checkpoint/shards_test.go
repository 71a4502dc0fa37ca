package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
	"github.com/stretchr/testify/require"
)

// shardShapes are the parameters of the resharding tests.
var shardShapes = map[string][]int{"w": {3, 4}, "b": {5}, "e": {2, 3, 2}}

var shardNames = []string{"b", "e", "w"}

// layout is one rank's state of a run laid out over world ranks: its part
// of every parameter (all of it when !sharded) and of Adam's moments.
type layout struct {
	st  *State
	opt *optim.Adam
}

// fullValues returns the global values of the test run: parameters and
// Adam moments, distinct everywhere.
func fullValues() map[string][]float32 {
	out := map[string][]float32{}
	for k, name := range shardNames {
		n := numel(shardShapes[name])
		for j, prefix := range []string{"param/", "adam.m/", "adam.v/"} {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(1000*k+100*j+i) + 0.25
			}
			out[prefix+name] = v
		}
	}
	return out
}

// newLayout builds rank's state of a world-rank layout (sharded: FSDP's
// flat split; else a full replica), filled from vals (nil: zeros).
func newLayout(t *testing.T, world, rank int, sharded bool, vals map[string][]float32) layout {
	store := graph.NewStore()
	var params []optim.Param
	slices := map[string]Slice{}
	for _, name := range shardNames {
		shape := shardShapes[name]
		n, off := numel(shape), 0
		if sharded {
			counts := dist.Split(n, world)
			n, off = counts[rank], dist.Offsets(counts)[rank]
			slices[name] = Slice{Shape: shape, Offset: off}
		}
		w := make([]float32, n)
		if vals != nil {
			copy(w, vals["param/"+name][off:])
		}
		if sharded {
			require.NoError(t, store.Bind(name, w, n))
		} else {
			require.NoError(t, store.Bind(name, w, shape...))
		}
		params = append(params, optim.Param{Name: name, W: w, G: make([]float32, n)})
	}
	opt := optim.NewAdam(params, 0)
	if vals != nil {
		for name, buf := range opt.StateBuffers() {
			off := 0
			if sl, ok := slices[name[len("adam.m/"):]]; ok {
				off = sl.Offset
			}
			copy(buf, vals[name][off:])
		}
		opt.SetSteps(7)
	}
	st := &State{Store: store, Optimizer: opt, Step: 7, RNG: map[string][]byte{"loader": {1, 2, 3}}}
	if sharded {
		st.Slices = slices
	}
	return layout{st: st, opt: opt}
}

// saveLayout writes every rank's file of a layout into dir.
func saveLayout(t *testing.T, dir string, world int, sharded bool) []string {
	vals := fullValues()
	var paths []string
	for r := 0; r < world; r++ {
		l := newLayout(t, world, r, sharded, vals)
		p := filepath.Join(dir, fmt.Sprintf("state-rank%d-of-%d.safetensors", r, world))
		require.NoError(t, Save(p, l.st))
		paths = append(paths, p)
	}
	return paths
}

// A checkpoint of one file per rank loads into any other layout: FSDP 3
// into FSDP 2, one process and DP replicas; DP replicas into FSDP; every
// parameter and moment element equal to the global value.
func TestLoadShardsReshards(t *testing.T) {
	vals := fullValues()
	for _, from := range []struct {
		world   int
		sharded bool
	}{{3, true}, {2, false}, {1, false}, {5, true}} {
		dir := t.TempDir()
		paths := saveLayout(t, dir, from.world, from.sharded)
		for _, to := range []struct {
			world   int
			sharded bool
		}{{2, true}, {1, false}, {3, false}, {4, true}, {3, true}} {
			for r := 0; r < to.world; r++ {
				l := newLayout(t, to.world, r, to.sharded, nil)
				require.NoError(t, LoadShards(paths, l.st), "from %+v to %+v rank %d", from, to, r)
				require.Equal(t, 7, l.opt.Steps())
				require.Equal(t, int64(7), l.st.Step)
				require.Equal(t, []byte{1, 2, 3}, l.st.RNG["loader"])
				for _, name := range shardNames {
					off := 0
					if sl, ok := l.st.Slices[name]; ok {
						off = sl.Offset
					}
					w := l.st.Store.Float32(name)
					require.Equal(t, vals["param/"+name][off:off+len(w)], w, "%s from %+v to %+v rank %d", name, from, to, r)
					bufs := l.opt.StateBuffers()
					require.Equal(t, vals["adam.m/"+name][off:off+len(w)], bufs["adam.m/"+name])
					require.Equal(t, vals["adam.v/"+name][off:off+len(w)], bufs["adam.v/"+name])
				}
			}
		}
	}
}

// A missing shard, files of different steps, a shard of another shape and
// a corrupt shard are refused, naming the tensor or file, and nothing is
// written.
func TestLoadShardsRefuses(t *testing.T) {
	dir := t.TempDir()
	paths := saveLayout(t, dir, 3, true)
	into := func() layout { return newLayout(t, 1, 0, false, nil) }

	l := into()
	err := LoadShards([]string{paths[0], paths[2]}, l.st)
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "a shard is missing")
	require.Equal(t, make([]float32, 12), l.st.Store.Float32("w"), "nothing written")

	other := newLayout(t, 3, 1, true, fullValues())
	other.st.Step = 8
	odd := filepath.Join(dir, "odd.safetensors")
	require.NoError(t, Save(odd, other.st))
	err = LoadShards([]string{paths[0], odd, paths[2]}, into().st)
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, "of step 8")

	// A shard of a model whose "w" has another global shape.
	saved := shardShapes["w"]
	shardShapes["w"] = []int{4, 3}
	wrong := newLayout(t, 3, 1, true, fullValues())
	shardShapes["w"] = saved
	require.NoError(t, Save(odd, wrong.st))
	err = LoadShards([]string{paths[0], odd, paths[2]}, into().st)
	require.ErrorIs(t, err, ErrMismatch)
	require.ErrorContains(t, err, `"param/w" is part of a tensor of shape [4 3], the model wants [3 4]`)
	require.ErrorContains(t, err, "odd.safetensors")

	buf, err := os.ReadFile(paths[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(odd, buf[:len(buf)-3], 0o644))
	err = LoadShards([]string{paths[0], odd, paths[2]}, into().st)
	require.True(t, errors.Is(err, ErrCorrupt), "%v", err)
	require.ErrorContains(t, err, "odd.safetensors")

	require.ErrorContains(t, LoadShards(nil, into().st), "no files")
	bad := into()
	bad.st.Slices = map[string]Slice{"w": {Shape: []int{2, 2}}}
	require.ErrorContains(t, LoadShards(paths, bad.st), `do not fit its global shape [2 2]`)
}

// ReadMeta reads a file's metadata from its header alone.
func TestReadMeta(t *testing.T) {
	paths := saveLayout(t, t.TempDir(), 2, true)
	m, err := ReadMeta(paths[1])
	require.NoError(t, err)
	require.Equal(t, "7", m["octet.step"])
	require.Contains(t, m[slicesKey], `"w":{"shape":[3,4],"offset":6}`)
	_, err = ReadMeta(filepath.Join(t.TempDir(), "none"))
	require.Error(t, err)
	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte{200, 0, 0, 0, 0, 0, 0, 0, '{'}, 0o644))
	_, err = ReadMeta(short)
	require.ErrorIs(t, err, ErrCorrupt)
}
