package train_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
)

// moeModel is a classifier with a Mixture-of-Experts layer between two
// linear layers (5 experts, top 2).
func moeModel(rows int, training bool) (*train.Model, error) {
	return moeModelOf(32, 32)(rows, training)
}

// moeModelOf is moeModel of another width and expert width.
func moeModelOf(width, inter int) train.ModelFunc {
	return func(rows int, training bool) (*train.Model, error) { return moeClassifier(rows, width, inter) }
}

func moeClassifier(rows, width, inter int) (*train.Model, error) {
	g := graph.New()
	b := nn.NewBuilder(g)
	x := g.Input("x", graph.Float32, rows, features)
	y := g.Input("label", graph.Int32, rows)
	in := nn.NewLinear(b, "in", features, width)
	moe, err := nn.NewMoE(b, "moe", nn.MoEConfig{Experts: 5, TopK: 2, Hidden: width, Intermediate: inter, NormTopKProb: true})
	if err != nil {
		return nil, err
	}
	out := nn.NewLinear(b, "out", width, classes)
	h := in.Forward(x)
	m, _ := moe.Forward(h)
	logits := out.Forward(ops.Add(h, m))
	return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(logits, y), Logits: logits}, nil
}

// Expert parallelism over 2 and 3 ranks trains what one process trains,
// bit for bit — every loss, every parameter after the run, the
// evaluation — in float32 and TE delayed FP8, with gradient clipping and
// accumulation (the clipping norm is one process's); and a checkpoint it
// saves resumes in one process and over another number of ranks, and
// one process's resumes under it, exactly.
func TestExpertParallelTrainsAsOneProcess(t *testing.T) {
	ds := blobs(t, 100, 2)
	for _, mp := range []struct{ mp, backend string }{{"no", ""}, {"fp8", "te"}} {
		mod := func(ep int) func(*train.Config) {
			return func(c *train.Config) {
				c.Model, c.EP, c.ClipGradNorm, c.GradientAccumulationSteps, c.LR = moeModel, ep, 0.5, 2, 1e-2
			}
		}
		one := trainer(t, mp.mp, mp.backend, mod(0))
		want, err := one.Fit(ds, train.Run{Steps: 8, Eval: blobs(t, 30, 5)})
		require.NoError(t, err)
		for _, ep := range []int{2, 3} {
			tr := trainer(t, mp.mp, mp.backend, mod(ep))
			got, err := tr.Fit(ds, train.Run{Steps: 8, Eval: blobs(t, 30, 5)})
			require.NoError(t, err, "%s EP %d", mp.mp, ep)
			require.Equal(t, bits(want.Losses), bits(got.Losses), "%s EP %d", mp.mp, ep)
			sameState(t, one.Store(), tr.Store(), "%s EP %d", mp.mp, ep)
			require.Equal(t, want.Eval.Loss, got.Eval.Loss)
			require.Greater(t, got.CommBytesPerStep, int64(0))
		}
		// EP 3 saves; one process and EP 2 resume; EP 2 resumes one
		// process's checkpoint.
		for _, c := range []struct{ from, to int }{{3, 0}, {3, 2}, {0, 2}} {
			dir := t.TempDir()
			_, err := trainer(t, mp.mp, mp.backend, mod(c.from)).Fit(ds, train.Run{Steps: 8, StopAfter: 4, SaveDir: dir})
			require.NoError(t, err)
			rest := trainer(t, mp.mp, mp.backend, mod(c.to))
			got, err := rest.Fit(ds, train.Run{Steps: 8, Resume: dir})
			require.NoError(t, err, "%s EP %d to %d", mp.mp, c.from, c.to)
			require.NotEmpty(t, got.Resharded)
			require.Equal(t, bits(want.Losses[4:]), bits(got.Losses), "%s EP %d to %d", mp.mp, c.from, c.to)
			sameState(t, one.Store(), rest.Store(), "%s EP %d to %d", mp.mp, c.from, c.to)
		}
	}
}

// Expert-parallel groups inside data parallelism (EP 3 × DP 2, EP 2 ×
// DP 2) train what DP 2 trains, bit for bit: each group runs its data
// rank's batch, and the ranks at the same place in each group average
// their gradients as DP's ranks do. A checkpoint of EP 3 × DP 2 resumes
// under DP 2 exactly.
func TestExpertParallelInsideDataParallel(t *testing.T) {
	ds := blobs(t, 100, 2)
	for _, mp := range []struct{ mp, backend string }{{"no", ""}, {"fp8", "te"}} {
		mod := func(ep, dp int) func(*train.Config) {
			return func(c *train.Config) { c.Model, c.EP, c.DP, c.ClipGradNorm, c.LR = moeModel, ep, dp, 0.5, 1e-2 }
		}
		dp := trainer(t, mp.mp, mp.backend, mod(0, 2))
		want, err := dp.Fit(ds, train.Run{Steps: 6})
		require.NoError(t, err)
		for _, ep := range []int{2, 3} {
			tr := trainer(t, mp.mp, mp.backend, mod(ep, 2))
			got, err := tr.Fit(ds, train.Run{Steps: 6})
			require.NoError(t, err, "%s EP %d × DP 2", mp.mp, ep)
			require.Equal(t, 2*ep, got.Ranks)
			require.Equal(t, bits(want.Losses), bits(got.Losses), "%s EP %d × DP 2", mp.mp, ep)
			sameState(t, dp.Store(), tr.Store(), "%s EP %d × DP 2", mp.mp, ep)
		}
		dir := t.TempDir()
		_, err = trainer(t, mp.mp, mp.backend, mod(3, 2)).Fit(ds, train.Run{Steps: 6, StopAfter: 3, SaveDir: dir})
		require.NoError(t, err)
		rest, err := trainer(t, mp.mp, mp.backend, mod(0, 2)).Fit(ds, train.Run{Steps: 6, Resume: dir})
		require.NoError(t, err)
		require.Equal(t, "EP 3 × DP 2 to DP 2", rest.Resharded)
		require.Equal(t, bits(want.Losses[3:]), bits(rest.Losses), mp.mp)
	}
}

// Expert-parallel groups inside FSDP (EP 3 × FSDP 2: the layers around
// the experts sharded over the data-parallel groups) train what FSDP 2
// trains, bit for bit, without gradient clipping (FSDP adds its norm's
// parts in float32 over its shards, which EP's slices are not); a
// checkpoint of EP 3 × FSDP 2 resumes under FSDP 2 exactly.
func TestExpertParallelInsideFSDP(t *testing.T) {
	ds := blobs(t, 100, 2)
	for _, mp := range []struct{ mp, backend string }{{"no", ""}, {"fp8", "te"}} {
		mod := func(ep, f int) func(*train.Config) {
			return func(c *train.Config) { c.Model, c.EP, c.FSDP, c.LR = moeModel, ep, f, 1e-2 }
		}
		fs := trainer(t, mp.mp, mp.backend, mod(0, 2))
		want, err := fs.Fit(ds, train.Run{Steps: 6})
		require.NoError(t, err)
		tr := trainer(t, mp.mp, mp.backend, mod(3, 2))
		got, err := tr.Fit(ds, train.Run{Steps: 6})
		require.NoError(t, err)
		require.Equal(t, bits(want.Losses), bits(got.Losses), "%s EP 3 × FSDP 2", mp.mp)
		sameState(t, fs.Store(), tr.Store(), "%s EP 3 × FSDP 2", mp.mp)
		dir := t.TempDir()
		_, err = trainer(t, mp.mp, mp.backend, mod(3, 2)).Fit(ds, train.Run{Steps: 6, StopAfter: 3, SaveDir: dir})
		require.NoError(t, err)
		rest, err := trainer(t, mp.mp, mp.backend, mod(0, 2)).Fit(ds, train.Run{Steps: 6, Resume: dir})
		require.NoError(t, err)
		require.Equal(t, "EP 3 × FSDP 2 to FSDP 2", rest.Resharded)
		require.Equal(t, bits(want.Losses[3:]), bits(rest.Losses), mp.mp)
	}
	// With clipping, every rank takes the same norm, whatever the number
	// of ranks holding the experts.
	clipped := func(ep int) []float32 {
		res, err := trainer(t, "no", "", func(c *train.Config) { c.Model, c.EP, c.FSDP, c.ClipGradNorm, c.LR = moeModel, ep, 2, 0.5, 1e-2 }).Fit(ds, train.Run{Steps: 6})
		require.NoError(t, err)
		return res.Losses
	}
	require.Equal(t, bits(clipped(2)), bits(clipped(3)))
	_, err := train.New(train.Config{Model: moeModel, BatchSize: 8, EP: 2, FSDP: 1})
	require.ErrorContains(t, err, "give more than one")
}

// With expert weights of whole clipping chunks (128 wide: 16,384 and
// 32,768 values an expert) the ranks exchange chunk sums, not gradients,
// and the clipped run still equals one process's bit for bit.
func TestExpertParallelClipsByChunkSums(t *testing.T) {
	ds := blobs(t, 60, 4)
	mod := func(ep int) func(*train.Config) {
		return func(c *train.Config) { c.Model, c.EP, c.ClipGradNorm, c.LR = moeModelOf(128, 128), ep, 0.05, 1e-2 }
	}
	one := trainer(t, "no", "", mod(0))
	want, err := one.Fit(ds, train.Run{Steps: 4})
	require.NoError(t, err)
	tr := trainer(t, "no", "", mod(3))
	got, err := tr.Fit(ds, train.Run{Steps: 4})
	require.NoError(t, err)
	require.Equal(t, bits(want.Losses), bits(got.Losses))
	sameState(t, one.Store(), tr.Store())
	// The exchange moved chunk sums: far less than the expert weights.
	require.Less(t, got.CommBytesPerStep, int64(4*5*3*128*128))
}

// Expert parallelism is refused, naming the reason, with data
// parallelism, on a model without experts, with more ranks than experts,
// and with MS-AMP.
func TestExpertParallelRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  train.Config
		says string
	}{
		{train.Config{Model: moeModel, BatchSize: 8, EP: 2, DP: 2, FSDP: 2}, "give DP or FSDP"},
		{train.Config{Model: moeModel, BatchSize: 8, EP: -1}, "needs Comm"},
	} {
		_, err := train.New(c.cfg)
		require.ErrorContains(t, err, c.says)
	}
	ds := blobs(t, 40, 1)
	_, err := trainer(t, "no", "", func(c *train.Config) { c.EP = 2 }).Fit(ds, train.Run{Steps: 1})
	require.ErrorContains(t, err, "no Mixture-of-Experts layer")
	_, err = trainer(t, "no", "", func(c *train.Config) { c.EP, c.Model = 6, moeModel }).Fit(ds, train.Run{Steps: 1})
	require.ErrorContains(t, err, "5 experts cannot be shared by 6")
	_, err = train.New(train.Config{Model: moeModel, BatchSize: 8, EP: 2, Precision: precision.Config{MixedPrecision: "fp8", Backend: "msamp"}})
	require.ErrorContains(t, err, "MS-AMP")
}

// sameState requires got's parameters to equal want's and each FP8
// scaling state got holds (an expert-parallel rank holds its experts')
// to equal want's, bit for bit.
func sameState(t *testing.T, want, got *graph.Store, msg ...any) {
	t.Helper()
	w, g := snapshot(t, want), snapshot(t, got)
	for _, name := range want.Names() {
		require.Equal(t, w[name], g[name], append([]any{"parameter " + name + ": "}, msg...)...)
	}
	for k, v := range g {
		require.Equal(t, w[k], v, append([]any{k + ": "}, msg...)...)
	}
}
