package train_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// TestSGDSeesEveryScale: with SGD (unlike Adam, not blind to a gradient's
// scale) data-parallel, sharded, accumulated and clipped runs train as
// one process on the whole batch.
func TestSGDSeesEveryScale(t *testing.T) {
	ds := blobs(t, 96, 2)
	sgd := func(c *train.Config) { c.Model, c.Optimizer, c.LR, c.NoShuffle = mlpNoDropout, "sgd", 0.1, true }
	for _, clip := range []float64{0, 0.05} {
		one, err := trainer(t, "no", "", func(c *train.Config) { sgd(c); c.ClipGradNorm = clip }).Fit(ds, train.Run{Steps: 6})
		require.NoError(t, err)
		for name, mod := range map[string]func(*train.Config){
			"dp2":    func(c *train.Config) { c.DP = 2 },
			"dp5":    func(c *train.Config) { c.DP = 5 },
			"fsdp3":  func(c *train.Config) { c.FSDP = 3 },
			"accum2": func(c *train.Config) { c.BatchSize, c.GradientAccumulationSteps = 12, 2 },
		} {
			res, err := trainer(t, "no", "", func(c *train.Config) { sgd(c); c.ClipGradNorm = clip; mod(c) }).Fit(ds, train.Run{Steps: 6})
			require.NoError(t, err, name)
			for i := range one.Losses {
				require.InEpsilon(t, one.Losses[i], res.Losses[i], 1e-5, "%s clip %v step %d", name, clip, i)
			}
		}
	}
}

// TestEvaluationDetails: the first label field counts even when it comes
// first; Eval.String and Step say what was evaluated.
func TestEvaluationDetails(t *testing.T) {
	tr := trainer(t, "no", "", nil)
	_, err := tr.Fit(blobs(t, 100, 1), train.Run{Steps: 7})
	require.NoError(t, err)
	src := blobs(t, 8, 4)
	b := data.NewBatch(src.Fields(), 8)
	require.NoError(t, src.Fill(b, []int{0, 1, 2, 3, 4, 5, 6, 7}))
	// The same rows with the label column first.
	first, err := data.NewTensors(data.LabelColumn("label", b.Int32("label"), classes), data.Float32Column("x", b.Float32("x"), features))
	require.NoError(t, err)
	a, err := tr.Evaluate(src)
	require.NoError(t, err)
	c, err := tr.Evaluate(first)
	require.NoError(t, err)
	require.False(t, math.IsNaN(c.Accuracy))
	require.Equal(t, a.Accuracy, c.Accuracy)
	require.Equal(t, 7, c.Step)
	e := train.Eval{Step: 3, Loss: math.NaN(), Accuracy: 0.5, Examples: 2}
	require.Equal(t, "step 3: 2 examples, accuracy 50.00%", e.String())
}

// TestResultDetails: FSDP runs count their all-gathers (a data-parallel
// one none), a rank of a world given FSDP −1 is sharded, profiles and
// checkpoint names follow the configuration.
func TestResultDetails(t *testing.T) {
	ds := blobs(t, 100, 1)
	res, err := trainer(t, "no", "", func(c *train.Config) { c.FSDP = 2; c.Profile = true }).Fit(ds, train.Run{Steps: 2})
	require.NoError(t, err)
	require.Greater(t, res.AllGatherBytes, int64(0))
	require.NotNil(t, res.Profile)
	res, err = trainer(t, "no", "", func(c *train.Config) { c.DP = 2 }).Fit(ds, train.Run{Steps: 2})
	require.NoError(t, err)
	require.Zero(t, res.AllGatherBytes)
	require.Nil(t, res.Profile)
	// Checkpoint files: "state" or the Name, "-rankR-of-N" with ranks.
	for _, c := range []struct {
		mod  func(*train.Config)
		want []string
	}{
		{nil, []string{"state.safetensors"}},
		{func(c *train.Config) { c.Name = "mine" }, []string{"mine.safetensors"}},
		{func(c *train.Config) { c.FSDP = 2 }, []string{"state-rank0-of-2.safetensors", "state-rank1-of-2.safetensors"}},
	} {
		dir := t.TempDir()
		_, err := trainer(t, "no", "", c.mod).Fit(ds, train.Run{Steps: 2, SaveDir: dir, Flat: true})
		require.NoError(t, err)
		var names []string
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			names = append(names, e.Name())
		}
		require.Equal(t, c.want, names)
		// A flat directory resumes, every rank from its file.
		res, err := trainer(t, "no", "", c.mod).Fit(ds, train.Run{Steps: 4, Resume: dir})
		require.NoError(t, err)
		require.Equal(t, 2, res.First)
	}
	// A flat FSDP directory missing one rank's file is refused.
	dir := t.TempDir()
	fs2 := func(c *train.Config) { c.FSDP = 2 }
	_, err = trainer(t, "no", "", fs2).Fit(ds, train.Run{Steps: 2, SaveDir: dir, Flat: true})
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "state-rank1-of-2.safetensors")))
	_, err = trainer(t, "no", "", fs2).Fit(ds, train.Run{Steps: 4, Resume: dir})
	require.ErrorIs(t, err, train.ErrNoCheckpoint)
}

// TestConfigEdges: a batch of one and a batch as large as the world are
// taken; New reads the environment unless the precision was resolved.
func TestConfigEdges(t *testing.T) {
	_, err := train.New(train.Config{Model: mlp, BatchSize: 1})
	require.NoError(t, err)
	_, err = train.New(train.Config{Model: mlp, BatchSize: 3, DP: 3})
	require.NoError(t, err)
	t.Setenv("OCTET_FP8_MARGIN", "2")
	tr, err := train.New(train.Config{Model: mlp, BatchSize: 8, Precision: precision.Config{MixedPrecision: "fp8"}})
	require.NoError(t, err)
	require.Contains(t, strings.ToLower(precision.Label(tr.Recipe())), "te/hybrid")
	p := precision.Config{MixedPrecision: "fp8"}
	require.NoError(t, p.Resolve())
	require.Equal(t, 2, p.Margin)
	t.Setenv("OCTET_FP8_MARGIN", "3")
	p2 := p
	_, err = train.New(train.Config{Model: mlp, BatchSize: 8, Precision: p2})
	require.NoError(t, err)
	require.Equal(t, 2, p2.Margin, "a resolved precision is not read again")
	for _, v := range precision.EnvVars() {
		require.NotEqual(t, "OCTET_FP8_", v)
	}
}

// TestInputsMustMatchTheRows: an input of the right size but another
// leading axis is refused, naming it.
func TestInputsMustMatchTheRows(t *testing.T) {
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x := g.Input("x", graph.Float32, 1, rows*features)
		y := g.Input("label", graph.Int32, rows)
		fc := nn.NewLinear(b, "fc", rows*features, classes)
		l := ops.Reshape(fc.Forward(x), 1, classes)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.Mean(l)}, nil
	}
	tr, err := train.New(train.Config{Model: model, BatchSize: 4})
	require.NoError(t, err)
	_, err = tr.Fit(blobs(t, 20, 1), train.Run{Steps: 1})
	require.ErrorContains(t, err, `model input "x" is float32 [1 128]`)
}
