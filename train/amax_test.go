package train_test

import (
	"math"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// metas returns the delayed-scaling metas of a store by layer and role.
func metas(s *graph.Store) map[string]*fp8.Meta {
	out := map[string]*fp8.Meta{}
	for _, k := range s.StateKeys() {
		if ls, ok := s.State(k).(*fp8.LayerState); ok {
			for _, r := range fp8.Roles {
				if m := ls.Meta(r); m != nil {
					out[k+"/"+r.String()] = m
				}
			}
		}
	}
	return out
}

// TestDataParallelReducesAmaxes: with TE delayed scaling, data-parallel
// and FSDP ranks all-reduce their amaxes (TE's reduce_amax), so after a
// step every forward scale equals one process's on the whole batch bit
// for bit, and the gradients' scales are one process's divided by the
// ranks exactly where that is a power of two (each rank's loss is its
// rows' mean, so its gradients are n times one process's); a rank that
// keeps its own amaxes (ReduceAmax false) does not match. Over ten steps
// the losses stay within 1% of one process's (the gradients' sums over
// the ranks round differently from one process's, and FP8 casts turn a
// last-bit difference into a code step now and then).
func TestDataParallelReducesAmaxes(t *testing.T) {
	ds := blobs(t, 240, 2)
	fit := func(steps int, mod func(*train.Config)) (*train.Trainer, *train.Result) {
		tr := trainer(t, "fp8", "te", func(c *train.Config) {
			c.Model = mlpNoDropout
			if mod != nil {
				mod(c)
			}
		})
		res, err := tr.Fit(ds, train.Run{Steps: steps})
		require.NoError(t, err)
		return tr, res
	}
	one, res := fit(1, nil)
	require.Zero(t, res.AmaxAllReduceBytes)
	want := metas(one.Store())
	require.NotEmpty(t, want)
	for _, c := range []struct {
		name      string
		dp, fsdp  int
		gradRatio float32 // one process's gradient scale over the ranks'
	}{{"DP 2", 2, 0, 2}, {"DP 3", 3, 0, 0}, {"FSDP 2", 0, 2, 2}, {"FSDP 3", 0, 3, 0}} {
		tr, res := fit(1, func(cfg *train.Config) { cfg.DP, cfg.FSDP = c.dp, c.fsdp })
		got := metas(tr.Store())
		require.Equal(t, int64(4*len(want)), res.AmaxAllReduceBytes, c.name)
		for k, m := range want {
			if m.Format == fp8.E5M2 {
				if c.gradRatio != 0 {
					require.Equal(t, m.Scale, got[k].Scale*c.gradRatio, "%s: %s", c.name, k)
				}
				continue
			}
			require.Equal(t, math.Float32bits(m.Scale), math.Float32bits(got[k].Scale), "%s: %s scale %v, one process %v", c.name, k, got[k].Scale, m.Scale)
		}
	}
	// Each rank's own amaxes: some forward scale differs.
	tr, res := fit(1, func(cfg *train.Config) { cfg.DP = 2; f := false; cfg.Precision.ReduceAmax = &f })
	require.Zero(t, res.AmaxAllReduceBytes)
	differs := 0
	for k, m := range metas(tr.Store()) {
		if m.Format == fp8.E4M3 && m.Scale != want[k].Scale {
			differs++
		}
	}
	require.Positive(t, differs, "ranks that keep their own amaxes")

	_, oneRes := fit(10, nil)
	for _, mod := range []func(*train.Config){
		func(c *train.Config) { c.DP = 2 }, func(c *train.Config) { c.FSDP = 3 },
	} {
		_, res := fit(10, mod)
		for i := range oneRes.Losses {
			require.InEpsilon(t, oneRes.Losses[i], res.Losses[i], 0.01, "step %d", i)
		}
	}
}
