package train_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

const regIn, regOut = 5, 2

// regressionSet is a noisy linear target of 5 features, 2 outputs; with
// unit targets in [0, 1] (for BCEWithLogits) and a 3-class label.
func regressionSet(t testing.TB, n int) *data.Tensors {
	rng := rand.New(rand.NewPCG(11, 2))
	x, y, u := make([]float32, n*regIn), make([]float32, n*regOut), make([]float32, n*regOut)
	lab := make([]int32, n)
	for i := range n {
		for j := range regIn {
			x[i*regIn+j] = float32(rng.NormFloat64())
		}
		for k := range regOut {
			s := 0.3 * rng.NormFloat64()
			for j := range regIn {
				s += float64(x[i*regIn+j]) * float64(j-k) * 0.4
			}
			y[i*regOut+k] = float32(s)
			u[i*regOut+k] = float32(1 / (1 + math.Exp(-s)))
		}
		lab[i] = int32(i % 3)
	}
	ds, err := data.NewTensors(data.Float32Column("x", x, regIn), data.Float32Column("y", y, regOut),
		data.Float32Column("u", u, regOut), data.LabelColumn("label", lab, 3))
	require.NoError(t, err)
	return ds
}

// regLoss names a loss of the regression model.
type regLoss string

// regModel is a linear layer 5 → 2 (3 for the class scores) with the
// named loss; "perrow" returns the squared error per row for the trainer
// to average, "mean" the unmasked ops.Mean of it.
func regModel(loss regLoss) train.ModelFunc {
	return func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x := g.Input("x", graph.Float32, rows, regIn)
		y := g.Input("y", graph.Float32, rows, regOut)
		u := g.Input("u", graph.Float32, rows, regOut)
		lab := g.Input("label", graph.Int32, rows)
		mask := g.Input("mask", graph.Float32, rows)
		out := regOut
		if loss == "ce" {
			out = 3
		}
		pred := nn.NewLinear(b, "fc", regIn, out).Forward(x)
		m := &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "y": y, "u": u, "label": lab}, Mask: mask}
		switch loss {
		case "mse":
			m.Loss = ops.MSELoss(pred, y, mask)
		case "l1":
			m.Loss = ops.L1Loss(pred, y, mask)
		case "huber":
			m.Loss = ops.HuberLoss(pred, y, mask, 0.5)
		case "bce":
			m.Loss = ops.BCEWithLogits(pred, u, mask)
		case "ce":
			m.Loss = ops.CrossEntropy(pred, lab)
		case "perrow":
			d := ops.Sub(pred, y)
			m.Loss, m.Mask = ops.Sum(ops.Mul(d, d), 1), nil
		case "mean":
			d := ops.Sub(pred, y)
			m.Loss, m.Mask = ops.Mean(ops.Mul(d, d)), nil
		default:
			return nil, fmt.Errorf("loss %q", loss)
		}
		if loss != "ce" && loss != "bce" {
			m.Predictions, m.Targets = pred, y
		}
		if m.Mask == nil {
			// An unused input: the trainer must not feed or require it.
			delete(m.Inputs, "mask")
		}
		return m, g.Err()
	}
}

// TestEvalLossWhateverTheBatch: the same trained weights give the same
// evaluation loss (and RMSE) with evaluation batches of 1, 7, 40, 48 and
// the whole set, for cross-entropy and every new loss, and a per-row loss.
func TestEvalLossWhateverTheBatch(t *testing.T) {
	ds := regressionSet(t, 100)
	for _, loss := range []regLoss{"mse", "l1", "huber", "bce", "ce", "perrow"} {
		var first *train.Eval
		for _, eb := range []int{100, 1, 7, 40, 48} {
			tr, err := train.New(train.Config{Model: regModel(loss), BatchSize: 10, EvalBatchSize: eb, Seed: 4, LR: 0.05, Optimizer: "sgd"})
			require.NoError(t, err)
			res, err := tr.Fit(ds, train.Run{Steps: 3, Eval: ds})
			require.NoError(t, err, "%s eval batch %d", loss, eb)
			ev := res.Eval
			require.Equal(t, 100, ev.Examples)
			if first == nil {
				first = ev
				continue
			}
			require.InEpsilon(t, first.Loss, ev.Loss, 2e-7, "%s: eval batch %d against the whole set", loss, eb)
			if !math.IsNaN(first.RMSE) {
				require.InEpsilon(t, first.RMSE, ev.RMSE, 2e-7, "%s: RMSE, eval batch %d", loss, eb)
				require.InEpsilon(t, first.R2, ev.R2, 2e-6, "%s: R², eval batch %d", loss, eb)
			}
		}
	}
}

// TestRegressionMetricsAgainstFloat64: RMSE and R² against a float64
// computation from the trained weights.
func TestRegressionMetricsAgainstFloat64(t *testing.T) {
	ds := regressionSet(t, 90)
	tr, err := train.New(train.Config{Model: regModel("mse"), BatchSize: 16, EvalBatchSize: 32, Seed: 4, LR: 0.05})
	require.NoError(t, err)
	res, err := tr.Fit(ds, train.Run{Steps: 20, Eval: ds})
	require.NoError(t, err)
	w, bias := tr.Store().Float32("fc.weight"), tr.Store().Float32("fc.bias")
	require.Len(t, w, regIn*regOut)
	b := data.NewBatch(ds.Fields(), 90)
	idx := make([]int, 90)
	for i := range idx {
		idx[i] = i
	}
	require.NoError(t, ds.Fill(b, idx))
	x, y := b.Float32("x"), b.Float32("y")
	var sse float64
	var mean [regOut]float64
	res1 := [regOut]float64{}
	for i := range 90 {
		for k := range regOut {
			p := float64(bias[k])
			for j := range regIn {
				p += float64(x[i*regIn+j]) * float64(w[k*regIn+j])
			}
			d := p - float64(y[i*regOut+k])
			sse += d * d
			res1[k] += d * d
			mean[k] += float64(y[i*regOut+k]) / 90
		}
	}
	var r2 float64
	for k := range regOut {
		var tot float64
		for i := range 90 {
			d := float64(y[i*regOut+k]) - mean[k]
			tot += d * d
		}
		r2 += (1 - res1[k]/tot) / regOut
	}
	require.InEpsilon(t, math.Sqrt(sse/(90*regOut)), res.Eval.RMSE, 1e-5)
	require.InEpsilon(t, r2, res.Eval.R2, 1e-5)
	require.InEpsilon(t, sse/(90*regOut), res.Eval.Loss, 1e-5, "the MSE loss is the RMSE squared")
	require.Contains(t, res.Eval.String(), "RMSE")
}

// TestPaddedTrainingEqualsUnpadded: one SGD step on 5 examples in a batch
// of 8 (3 rows padded) leaves the weights that a batch of the 5 leaves,
// to float32 rounding — one process, DP over 3 ranks (one of them holding
// only padding) and FSDP over 3 — for a masked loss, a per-row loss and
// cross-entropy.
func TestPaddedTrainingEqualsUnpadded(t *testing.T) {
	ds := regressionSet(t, 5)
	for _, loss := range []regLoss{"mse", "perrow", "huber", "ce"} {
		var want []float32
		for _, c := range []struct {
			name         string
			batch, dp, f int
		}{{"unpadded", 5, 0, 0}, {"padded", 8, 0, 0}, {"padded dp 3", 8, 3, 0}, {"padded fsdp 3", 8, 0, 3}, {"unpadded dp 3", 5, 3, 0}} {
			tr, err := train.New(train.Config{Model: regModel(loss), BatchSize: c.batch, DP: c.dp, FSDP: c.f, Seed: 4, LR: 0.5, Optimizer: "sgd", NoShuffle: true})
			require.NoError(t, err)
			_, err = tr.Fit(ds, train.Run{Steps: 1})
			require.NoError(t, err, "%s %s", loss, c.name)
			got := append(append([]float32(nil), tr.Store().Float32("fc.weight")...), tr.Store().Float32("fc.bias")...)
			if want == nil {
				want = got
				continue
			}
			for i := range want {
				require.InDelta(t, want[i], got[i], 1e-6, "%s %s: parameter %d", loss, c.name, i)
			}
		}
	}
}

// TestLossBlindToPaddingRefused: a scalar loss that reads neither the mask
// nor a label field is refused when a batch would be padded, naming the
// loss and the rows, in training and in evaluation; it trains when no
// batch is padded (DropLast, or a batch that divides the examples).
func TestLossBlindToPaddingRefused(t *testing.T) {
	ds := regressionSet(t, 30)
	tr, err := train.New(train.Config{Model: regModel("mean"), BatchSize: 8})
	require.NoError(t, err)
	_, err = tr.Fit(ds, train.Run{Steps: 1})
	require.ErrorIs(t, err, train.ErrConfig)
	require.ErrorContains(t, err, "training: the loss")
	require.ErrorContains(t, err, "the 30 examples in batches of 8 has 2 padded rows")
	require.ErrorContains(t, err, "Model.Mask")

	tr, err = train.New(train.Config{Model: regModel("mean"), BatchSize: 8, DropLast: true, EvalBatchSize: 7})
	require.NoError(t, err)
	_, err = tr.Fit(ds, train.Run{Steps: 1, Eval: ds})
	require.ErrorContains(t, err, "evaluation: the loss")
	require.ErrorContains(t, err, "batches of 7 has 5 padded rows")

	tr, err = train.New(train.Config{Model: regModel("mean"), BatchSize: 10})
	require.NoError(t, err)
	_, err = tr.Fit(ds, train.Run{Steps: 2, Eval: ds})
	require.NoError(t, err)
}

// TestModelMaskChecked: a Mask that is not a float32 input of one value a
// row, a per-row loss of another leading size, and Predictions without
// Targets are refused, naming them.
func TestModelMaskChecked(t *testing.T) {
	ds := regressionSet(t, 20)
	for _, c := range []struct {
		edit func(g *graph.Graph, m *train.Model, rows int)
		want string
	}{
		{func(g *graph.Graph, m *train.Model, rows int) { m.Mask = g.Input("m2", graph.Float32, rows, 1) }, `Mask "m2" is float32 [4 1]`},
		{func(g *graph.Graph, m *train.Model, rows int) { m.Mask = m.Inputs["x"] }, `Mask "x"`},
		{func(g *graph.Graph, m *train.Model, rows int) { m.Loss = ops.Reshape(m.Loss, 1) }, "want a scalar, or a loss per row [4 …]"},
		{func(g *graph.Graph, m *train.Model, rows int) { m.Targets = nil }, "set both Predictions and Targets"},
		{func(g *graph.Graph, m *train.Model, rows int) { m.Targets = m.Inputs["u"]; delete(m.Inputs, "u") }, "is not one of Inputs"},
	} {
		model := func(rows int, training bool) (*train.Model, error) {
			m, err := regModel("mse")(rows, training)
			if err != nil {
				return nil, err
			}
			c.edit(m.Builder.Graph(), m, rows)
			return m, nil
		}
		tr, err := train.New(train.Config{Model: model, BatchSize: 4})
		require.NoError(t, err)
		_, err = tr.Fit(ds, train.Run{Steps: 1})
		require.ErrorContains(t, err, c.want)
	}
}

// TestResumeAndStopSayWhere: the progress hook names the checkpoint a
// run resumed from and the step, and where a stopped run stopped; the
// Result says the same; a resume that changes the gradient accumulation
// (the effective batch) is refused, naming both.
func TestResumeAndStopSayWhere(t *testing.T) {
	ds := blobs(t, 96, 1)
	dir := t.TempDir()
	var out bytes.Buffer
	no := false
	hooks := []train.Hook{train.Progress(&out, train.ProgressOptions{Name: "run", Bar: &no, Every: time.Hour})}
	tr := trainer(t, "no", "", nil)
	res, err := tr.Fit(ds, train.Run{Steps: 8, StopAfter: 3, SaveDir: dir, Hooks: hooks})
	require.NoError(t, err)
	ck := filepath.Join(dir, "checkpoint-3")
	require.Equal(t, ck, res.Checkpoint)
	require.Equal(t, "run stopped after step 3 of 8; checkpoint "+ck+"\n", out.String())
	out.Reset()
	res, err = trainer(t, "no", "", nil).Fit(ds, train.Run{Steps: 8, Resume: dir, Hooks: hooks})
	require.NoError(t, err)
	require.Equal(t, ck, res.Resumed)
	require.Equal(t, "run resumed from "+ck+" after step 3 of 8\n", out.String())
	out.Reset()
	_, err = trainer(t, "no", "", nil).Fit(ds, train.Run{Steps: 8, StopAfter: 5, Hooks: hooks})
	require.NoError(t, err)
	require.Equal(t, "run stopped after step 5 of 8; no checkpoint (nothing to save it to)\n", out.String())

	_, err = trainer(t, "no", "", func(c *train.Config) { c.GradientAccumulationSteps = 2 }).Fit(ds, train.Run{Steps: 8, Resume: dir})
	require.ErrorIs(t, err, train.ErrResume)
	require.ErrorContains(t, err, "saved with gradient accumulation over 1 micro-batches, and this run accumulates 2")
	_, err = trainer(t, "no", "", func(c *train.Config) { c.BatchSize = 12 }).Fit(ds, train.Run{Steps: 8, Resume: dir})
	require.ErrorIs(t, err, train.ErrResume, "another batch size")
}

// TestCrossEntropyOnPlainIntsRefused: cross-entropy leaves padded rows
// out only when its labels are a label field (padded with IgnoreLabel);
// on a plain int32 field, padded with 0, it is refused like any loss
// blind to padding.
func TestCrossEntropyOnPlainIntsRefused(t *testing.T) {
	x := make([]float32, 30*regIn)
	y := make([]int32, 30)
	for i := range y {
		y[i] = int32(i % 3)
	}
	ds, err := data.NewTensors(data.Float32Column("x", x, regIn), data.Int32Column("label", y))
	require.NoError(t, err)
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		in, lab := g.Input("x", graph.Float32, rows, regIn), g.Input("label", graph.Int32, rows)
		logits := nn.NewLinear(b, "fc", regIn, 3).Forward(in)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": in, "label": lab}, Loss: ops.CrossEntropy(logits, lab)}, g.Err()
	}
	tr, err := train.New(train.Config{Model: model, BatchSize: 8})
	require.NoError(t, err)
	_, err = tr.Fit(ds, train.Run{Steps: 1})
	require.ErrorContains(t, err, "has 2 padded rows")
	tr, err = train.New(train.Config{Model: model, BatchSize: 10})
	require.NoError(t, err)
	_, err = tr.Fit(ds, train.Run{Steps: 1})
	require.NoError(t, err)
}
