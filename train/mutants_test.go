package train_test

import (
	"bytes"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/recipe"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// Tests of edges a mutation run found untested.

// TestGenerateSamplesTheSoftmax: tokens are drawn with the softmax of the
// last position's logits at the temperature.
func TestGenerateSamplesTheSoftmax(t *testing.T) {
	g := graph.New()
	ids := g.Input("ids", graph.Int32, 1, 2)
	w := g.Param("w", 2, 2)
	logits := ops.Embedding("emb", w, ids)
	store := graph.NewStore()
	// Whatever the token, the next is 1 with odds 3:1 at temperature 1
	// (logits 0 and ln 3); the first position's logits (token 0's row is
	// read only there after the prompt) would say the opposite.
	require.NoError(t, store.SetFloat32("w", []float32{0, float32(math.Log(3)), 0, float32(math.Log(3))}, 2, 2))
	p, err := graph.Compile(g, store, graph.Options{}, logits)
	require.NoError(t, err)
	for _, c := range []struct {
		temp, p1 float64
	}{{1, 0.75}, {0.5, 0.9}, {2, math.Sqrt(3) / (1 + math.Sqrt(3))}} { // odds 3^(1/T) : 1
		out, err := train.Generate(p, ids, logits, []int32{0, 0}, 4000, c.temp, rand.New(rand.NewPCG(2, 3)))
		require.NoError(t, err)
		ones := 0
		for _, v := range out {
			ones += int(v)
		}
		require.InDelta(t, c.p1, float64(ones)/4000, 0.025, "temperature %v", c.temp)
	}
}

// TestDiagnose names the first non-finite gradient, weight and FP8
// state, and says when all are finite.
func TestDiagnose(t *testing.T) {
	params := []optim.Param{{Name: "a", W: []float32{1, 2}, G: []float32{0, 0}}, {Name: "b", W: []float32{1, float32(math.Inf(1))}, G: []float32{3, float32(math.NaN())}}}
	d := train.Diagnose(params, nil)
	require.Contains(t, d, "first non-finite gradient: b[1] = NaN")
	require.Contains(t, d, "first non-finite weight: b[1] = +Inf")
	require.Equal(t, "gradients, weights and FP8 scales are all finite", train.Diagnose(params[:1], graph.NewStore()))
	store := graph.NewStore()
	meta := recipe.TE{}.NewMeta(false)
	meta.Scale = float32(math.NaN())
	ls := &fp8.LayerState{FQN: "fc", Backend: fp8.BackendTE, Input: meta}
	store.SetState(fp8.LayerStateKey("fc"), ls)
	d = train.Diagnose(params[:1], store)
	require.Contains(t, d, "first non-finite FP8 state: fc input scale = NaN")
	require.NotContains(t, d, "gradient")
}

// TestEvaluateCountsLabelledPositions: padded rows and IgnoreLabel
// positions are left out of the accuracy; a padded last batch weights the
// loss by its rows.
func TestEvaluateCountsLabelledPositions(t *testing.T) {
	tr := trainer(t, "no", "", func(c *train.Config) { c.EvalBatchSize = 16 })
	_, err := tr.Fit(blobs(t, 100, 1), train.Run{Steps: 30})
	require.NoError(t, err)
	ev, err := tr.Evaluate(blobs(t, 40, 9)) // 16 + 16 + 8 (padded)
	require.NoError(t, err)
	require.Equal(t, 40, ev.Examples)
	// A trainer that has not started has no model to evaluate.
	_, err = trainer(t, "no", "", nil).Evaluate(blobs(t, 40, 9)) // before Fit: the initial parameters
	require.NoError(t, err)
	one := blobs(t, 1, 9)
	ev1, err := tr.Evaluate(one)
	require.NoError(t, err)
	require.Equal(t, 1, ev1.Examples)
	require.True(t, ev1.Accuracy == 0 || ev1.Accuracy == 1)
	require.False(t, math.IsNaN(ev.Loss))
	require.Contains(t, ev.String(), "40 examples, loss ")
	require.Contains(t, ev.String(), "accuracy ")
	// The loss over 40 rows in padded batches is the row-weighted mean:
	// equal to the mean of the 40 per-row evaluations.
	var sum float64
	x := make([]float32, features)
	for i := 0; i < 40; i++ {
		row, _ := data.NewTensors(data.Float32Column("x", append(x[:0:0], blobsRow(t, 40, 9, i)...), features), data.LabelColumn("label", []int32{blobsLabel(t, 40, 9, i)}, classes))
		e, err := tr.Evaluate(row)
		require.NoError(t, err)
		sum += e.Loss
	}
	require.InDelta(t, sum/40, ev.Loss, 1e-5)
}

func blobsRow(t *testing.T, n int, seed uint64, i int) []float32 {
	ds := blobs(t, n, seed)
	b := data.NewBatch(ds.Fields(), 1)
	require.NoError(t, ds.Fill(b, []int{i}))
	return b.Float32("x")
}

func blobsLabel(t *testing.T, n int, seed uint64, i int) int32 {
	ds := blobs(t, n, seed)
	b := data.NewBatch(ds.Fields(), 1)
	require.NoError(t, ds.Fill(b, []int{i}))
	return b.Int32("label")[0]
}

// TestClippingAcrossShards: with FSDP the norm is the global one, so a
// clipped sharded run trains as a clipped single process.
func TestClippingAcrossShards(t *testing.T) {
	ds := blobs(t, 100, 2)
	clip := func(c *train.Config) { c.Model, c.ClipGradNorm = mlpNoDropout, 0.05 }
	one, err := trainer(t, "no", "", clip).Fit(ds, train.Run{Steps: 8})
	require.NoError(t, err)
	unclipped, err := trainer(t, "no", "", func(c *train.Config) { c.Model = mlpNoDropout }).Fit(ds, train.Run{Steps: 8})
	require.NoError(t, err)
	require.NotEqual(t, one.Losses[7], unclipped.Losses[7], "the clip bites")
	for _, ranks := range []func(*train.Config){func(c *train.Config) { clip(c); c.FSDP = 3 }, func(c *train.Config) { clip(c); c.DP = 2 }} {
		res, err := trainer(t, "no", "", ranks).Fit(ds, train.Run{Steps: 8})
		require.NoError(t, err)
		for i := range one.Losses {
			require.InEpsilon(t, one.Losses[i], res.Losses[i], 1e-5, "step %d", i)
		}
	}
}

// TestHookEveryAndSchedules: OnStep with Every runs every N steps and at
// the last; evaluation and saves follow EvalEvery and SaveEvery; the
// learning rate comes from the schedule.
func TestHookEveryAndSchedules(t *testing.T) {
	var steps []int
	var lrs []float32
	h := train.Hook{Name: "every3", Every: 3, OnStep: func(s *train.Status) error {
		steps, lrs = append(steps, s.Step), append(lrs, s.LR)
		return nil
	}}
	var evals, saves []int
	rec := train.Hook{Name: "rec", OnEval: func(s *train.Status) error { evals = append(evals, s.Step); return nil },
		OnSave: func(s *train.Status) error { saves = append(saves, s.Step); return nil }}
	dir := t.TempDir()
	_, err := trainer(t, "no", "", func(c *train.Config) { c.Schedule = optim.StepDecay{Base: 1, Gamma: 0.5, Every: 4} }).Fit(blobs(t, 100, 1),
		train.Run{Steps: 10, Eval: blobs(t, 20, 3), EvalEvery: 4, SaveDir: dir, SaveEvery: 5, Keep: 0, Hooks: []train.Hook{h, rec}})
	require.NoError(t, err)
	require.Equal(t, []int{3, 6, 9, 10}, steps)
	require.Equal(t, []float32{1, 0.5, 0.25, 0.25}, lrs)
	require.Equal(t, []int{4, 8, 10}, evals)
	require.Equal(t, []int{5, 10}, saves)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 2, "Keep 0 keeps every checkpoint")
	// The newest is found by step, not by name.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "checkpoint-9x"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "checkpoint-05"), 0o755))
	res, err := trainer(t, "no", "", func(c *train.Config) { c.Schedule = optim.StepDecay{Base: 1, Gamma: 0.5, Every: 4} }).Fit(blobs(t, 100, 1),
		train.Run{Steps: 12, Resume: dir})
	require.NoError(t, err)
	require.Equal(t, 10, res.First)
	// Resuming one checkpoint directory directly.
	res, err = trainer(t, "no", "", func(c *train.Config) { c.Schedule = optim.StepDecay{Base: 1, Gamma: 0.5, Every: 4} }).Fit(blobs(t, 100, 1),
		train.Run{Steps: 12, Resume: filepath.Join(dir, "checkpoint-5")})
	require.NoError(t, err)
	require.Equal(t, 5, res.First)
	_, err = trainer(t, "no", "", nil).Fit(blobs(t, 100, 1), train.Run{Steps: 12, Resume: filepath.Join(dir, "checkpoint-5", "state.safetensors")})
	require.ErrorIs(t, err, train.ErrNoCheckpoint)
}

// TestSettingBounds: each numeric setting's smallest and largest values
// are taken and the next ones refused.
func TestSettingBounds(t *testing.T) {
	ok := func(kv ...string) error {
		p := precision.Config{MixedPrecision: "fp8"}
		for i := 0; i+1 < len(kv); i += 2 {
			t.Setenv(kv[i], kv[i+1])
		}
		return p.Resolve()
	}
	require.NoError(t, ok("OCTET_FP8_MARGIN", "0"))
	require.Error(t, ok("OCTET_FP8_MARGIN", "-1"))
	require.NoError(t, ok("OCTET_FP8_MARGIN", "0", "OCTET_FP8_INTERVAL", "1"))
	require.Error(t, ok("OCTET_FP8_INTERVAL", "0"))
	require.NoError(t, ok("OCTET_FP8_INTERVAL", "1", "OCTET_FP8_AMAX_HISTORY_LEN", "65536"))
	require.Error(t, ok("OCTET_FP8_AMAX_HISTORY_LEN", "65537"))
	require.Error(t, ok("OCTET_FP8_AMAX_HISTORY_LEN", "0"))
}

// TestFlagDefaults: the precision flags print their defaults.
func TestFlagDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	p := precision.Config{MixedPrecision: "fp8", Backend: "ao"}
	p.RegisterFlags(fs)
	fs.PrintDefaults()
	require.Contains(t, out.String(), "(default fp8)")
	require.Contains(t, out.String(), "(default ao)")
	require.Contains(t, out.String(), "-config FILE")
	require.NoError(t, fs.Parse([]string{"-config", "a.yaml"}))
	require.Equal(t, "a.yaml", p.ConfigFile())
	require.True(t, p.Given("config"))
	require.False(t, strings.Contains(out.String(), "panic"))
}
