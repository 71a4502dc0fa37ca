package trainloop

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		l    Loop
		says string
	}{
		{Loop{Total: 0, End: 0}, "no training steps"},
		{Loop{Total: 5, End: 5, First: 7}, "at step 7, past the 5 steps"},
		{Loop{Total: 5, End: 3, First: 3, Unit: "iteration"}, "at iteration 3, nothing left to train before iteration 3"},
	} {
		require.ErrorContains(t, c.l.Check(), c.says)
	}
	require.NoError(t, (&Loop{Total: 5, End: 5, First: 4}).Check())
}

// The loop runs [First, End), records each loss, saves every SaveEvery
// steps (not at End) and once at the end, and passes steps to its hooks
// in order.
func TestRun(t *testing.T) {
	var batches, steps, after []int
	saves := 0
	l := &Loop{Total: 10, First: 2, End: 9, SaveEvery: 3,
		Batch: func(s int) error { batches = append(batches, s); return nil },
		Step:  func(s int) (float32, error) { steps = append(steps, s); return float32(s) / 2, nil },
		After: func(s int, loss float32) error {
			require.Equal(t, float32(s)/2, loss)
			after = append(after, s)
			return nil
		},
		Save: func() error { saves++; return nil },
	}
	st, err := l.Run()
	require.NoError(t, err)
	want := []int{2, 3, 4, 5, 6, 7, 8}
	require.Equal(t, want, batches)
	require.Equal(t, want, steps)
	require.Equal(t, want, after)
	require.Equal(t, []float32{1, 1.5, 2, 2.5, 3, 3.5, 4}, st.Losses)
	require.Equal(t, 2, st.First)
	require.Equal(t, 9, st.End)
	require.Equal(t, 7, st.Ran())
	require.Equal(t, 3, saves, "after steps 3 and 6 (steps 2 and 5 ended), and at the end")
	require.GreaterOrEqual(t, st.MsPerStep(), 0.0)
}

func TestRunStopsAtNonFiniteLoss(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		saved := false
		l := &Loop{Total: 10, End: 10, Unit: "iteration", Hint: "learning rate 1 too high?",
			Step:     func(s int) (float32, error) { return map[bool]float32{true: bad, false: 1}[s == 4], nil },
			Diagnose: func() string { return "first non-finite gradient: w[3] = NaN" },
			Save:     func() error { saved = true; return nil },
		}
		st, err := l.Run()
		require.Error(t, err)
		require.Contains(t, err.Error(), "iteration 4: the loss is")
		require.Contains(t, err.Error(), "first non-finite gradient: w[3] = NaN")
		require.Contains(t, err.Error(), "(learning rate 1 too high?)")
		require.Len(t, st.Losses, 4)
		require.False(t, saved, "a diverged run saves nothing")
	}
}

func TestRunStopsAtErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, l := range []*Loop{
		{Total: 3, End: 3, Batch: func(int) error { return boom }, Step: func(int) (float32, error) { return 0, nil }},
		{Total: 3, End: 3, Step: func(int) (float32, error) { return 0, boom }},
		{Total: 3, End: 3, Step: func(int) (float32, error) { return 0, nil }, After: func(int, float32) error { return boom }},
		{Total: 3, End: 3, Step: func(int) (float32, error) { return 0, nil }, Save: func() error { return boom }},
	} {
		_, err := l.Run()
		require.ErrorIs(t, err, boom)
	}
}

func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	l := &Loop{Name: "demo", Total: 3, End: 3, Lines: &out, LineEvery: 1, Step: func(int) (float32, error) { return 0.5, nil }}
	_, err := l.Run()
	require.NoError(t, err)
	require.Contains(t, out.String(), "demo step 3/3 loss 0.5000")
}

func TestDiagnosis(t *testing.T) {
	params := []optim.Param{{Name: "a", W: []float32{1, 2}, G: []float32{0, 0}}, {Name: "b", W: []float32{3}, G: []float32{0}}}
	store := graph.NewStore()
	ls := &fp8.LayerState{FQN: "fc", Backend: fp8.BackendTE, Input: fp8.NewMeta(fp8.E4M3, 4, 0, fp8.MostRecent, 1)}
	store.SetState(fp8.LayerStateKey("fc"), ls)
	require.Equal(t, "gradients, weights and FP8 scales are all finite", Diagnosis(params, store))
	params[1].G[0] = float32(math.NaN())
	params[1].W[0] = float32(math.Inf(-1))
	ls.Input.History[3] = float32(math.Inf(1))
	require.Equal(t, "first non-finite gradient: b[0] = NaN; first non-finite weight: b[0] = -Inf; first non-finite FP8 state: fc input amax = +Inf", Diagnosis(params, store))
	ls.Input.Scale = float32(math.NaN())
	require.Contains(t, Diagnosis(params, nil), "gradient: b[0]")
	require.Contains(t, Diagnosis(params, store), "fc input scale = NaN")
}

// A checkpoint restores the store, the step and every RNG by name.
func TestCheckpointRoundTrip(t *testing.T) {
	g := graph.New()
	out := ops.Neg(g.Param("w", 3))
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("w", []float32{1, 2, 3}, 3))
	prog, err := graph.Compile(g, store, graph.Options{}, out)
	require.NoError(t, err)
	prog.SetStep(42)
	src := rand.NewPCG(1, 2)
	rand.New(src).Uint64()
	dir := t.TempDir()
	c := &Checkpoint{Name: "run", Store: store, Prog: prog, RNG: map[string]RNG{"data": src}, Meta: map[string]string{"model": "m"}}
	require.NoError(t, c.Save(filepath.Join(dir, "sub")))
	want := src.Uint64()

	store2 := graph.NewStore()
	require.NoError(t, store2.SetFloat32("w", []float32{0, 0, 0}, 3))
	prog2, err := graph.Compile(g, store2, graph.Options{}, out)
	require.NoError(t, err)
	src2 := rand.NewPCG(9, 9)
	c2 := &Checkpoint{Name: "run", Store: store2, Prog: prog2, RNG: map[string]RNG{"data": src2}, Meta: map[string]string{"model": "m"}}
	step, err := c2.Resume(filepath.Join(dir, "sub"))
	require.NoError(t, err)
	require.Equal(t, 42, step)
	require.Equal(t, int64(42), prog2.Step())
	require.Equal(t, []float32{1, 2, 3}, store2.Float32("w"))
	require.Equal(t, want, src2.Uint64())

	c2.Meta = map[string]string{"model": "other"}
	_, err = c2.Resume(filepath.Join(dir, "sub"))
	require.ErrorContains(t, err, "-resume")
	_, err = c2.Resume(dir)
	require.ErrorContains(t, err, "-resume")
}

// Run profiles Loop.Profile over the steps it runs and closes the debug
// log when it ends (its lines flushed).
func TestRunProfilesAndClosesTheLog(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 4)
	y := ops.Neg(x)
	prog, err := graph.Compile(g, nil, graph.Options{}, y)
	require.NoError(t, err)
	require.NoError(t, prog.FeedFloat32(x, []float32{1, 2, 3, 4}))
	dir := t.TempDir()
	log, err := inspect.OpenLog(dir, 0)
	require.NoError(t, err)
	l := &Loop{Total: 3, End: 3, Profile: prog, DebugLog: log, Step: func(s int) (float32, error) {
		log.Write(int64(s), "l", inspect.Activation, "max", 1)
		return 1, prog.Run()
	}}
	st, err := l.Run()
	require.NoError(t, err)
	require.NotNil(t, st.Profile)
	require.Equal(t, int64(3), st.Profile.Steps)
	require.Equal(t, "Neg", st.Profile.Ops[0].Name)
	require.Zero(t, prog.Profile().Steps, "profiling is off again")
	stats, err := inspect.ReadStats(dir)
	require.NoError(t, err)
	require.Len(t, stats, 3)
	require.Error(t, log.Close(), "already closed")
	st, err = (&Loop{Total: 1, End: 1, Step: func(int) (float32, error) { return 1, nil }}).Run()
	require.NoError(t, err)
	require.Nil(t, st.Profile)
}
