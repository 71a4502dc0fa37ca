package main

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// A few hundred steps on a subset: the loss falls, held-out accuracy
// passes a bar in float32, bf16 and FP8, the plot is a PNG and the last
// line is the JSON summary.
func TestShortTraining(t *testing.T) {
	plotPath := filepath.Join(t.TempDir(), "loss.png")
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "all", Backend: "te", FP8Format: "HYBRID", AORecipe: "tensorwise"}, Batch: 64, LR: 3e-3, Seed: 3, Plot: plotPath, JSON: true}, epochs: 5, hidden: []int{128, 64}, weightDecay: 0.01, limit: 4000}
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	var summary struct {
		Precision       string   `json:"precision"`
		Recipe          string   `json:"recipe"`
		TestAccuracy    float64  `json:"test_accuracy"`
		FinalLoss       float64  `json:"final_loss"`
		MsPerStep       float64  `json:"ms_per_step"`
		Steps           int      `json:"steps"`
		ConvertedLayers []string `json:"converted_layers"`
		Runs            []struct {
			Precision       string   `json:"precision"`
			Recipe          string   `json:"recipe"`
			TestAccuracy    float64  `json:"test_accuracy"`
			FinalLoss       float64  `json:"final_loss"`
			ConvertedLayers []string `json:"converted_layers"`
		} `json:"runs"`
	}
	require.NoError(t, output.DecodeLast(out.String(), &summary))
	require.Equal(t, "fp8", summary.Precision)
	require.Equal(t, "te/HYBRID", summary.Recipe)
	require.Equal(t, 5*(4000/64), summary.Steps)
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2"}, summary.ConvertedLayers, "the 64→10 head stays float32")
	require.Len(t, summary.Runs, 3)
	for _, r := range summary.Runs {
		require.GreaterOrEqual(t, r.TestAccuracy, 0.9, r.Precision)
		require.Less(t, r.FinalLoss, 0.5, r.Precision)
		require.InDelta(t, summary.Runs[0].TestAccuracy, r.TestAccuracy, 0.02, r.Precision)
	}
	require.Equal(t, "bf16", summary.Runs[1].Precision)
	require.Equal(t, "bf16", summary.Runs[1].Recipe)
	require.Equal(t, []string{"mlp.fc1", "mlp.fc2", "mlp.fc3"}, summary.Runs[1].ConvertedLayers, "bf16 converts every layer")
	require.NotEqual(t, summary.Runs[0].FinalLoss, summary.Runs[1].FinalLoss, "bf16 is not float32")
	require.Greater(t, summary.MsPerStep, 0.0)

	f, err := os.Open(plotPath)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dx(), 300)
}

func TestLossFalls(t *testing.T) {
	set, test, err := mnist.Load("")
	require.NoError(t, err)
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{Backend: "ao", AORecipe: "tensorwise"}, Batch: 64, LR: 3e-3, Seed: 5}, epochs: 3, hidden: []int{64}}
	p := cfg.Precision
	p.MixedPrecision = "fp8"
	r, err := trainOne(cfg, p, set.Subset(4000), test)
	require.NoError(t, err)
	mean := func(s []float32) float64 {
		var m float64
		for _, v := range s {
			m += float64(v)
		}
		return m / float64(len(s))
	}
	first, last := mean(r.Losses[:20]), mean(r.Losses[len(r.Losses)-20:])
	require.Less(t, last, first/3, "loss falls: %.3f → %.3f", first, last)
	require.Empty(t, r.Report.Converted(), "AO's default filter keeps the first and last (here: only) linear layers high precision")
	require.GreaterOrEqual(t, r.TestAccuracy, 0.88)
}

func TestBadFlags(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: "te", FP8Format: "HYBRID"}, Batch: 8, LR: 1e-3}, epochs: 1, hidden: []int{8}}
	for _, c := range []struct {
		mut  func(*config)
		says string
	}{
		{func(c *config) { c.Precision.MixedPrecision = "fp16" }, "-precision"},
		{func(c *config) { c.Precision.Backend, c.FSDP = "msamp", train.Ranks{N: 2} }, "msamp"},
		{func(c *config) { c.Precision.Backend, c.Precision.OptLevel = "msamp", "O3" }, "DeepSpeed"},
		{func(c *config) { c.Precision.Backend = "xx" }, "-recipe"},
		{func(c *config) { c.Precision.FP8Format = "E3M4" }, "E3M4"},
		{func(c *config) { c.dataDir = "/nonexistent" }, mnist.TrainImages},
	} {
		cfg := base
		c.mut(&cfg)
		err := run(cfg, &bytes.Buffer{})
		require.Error(t, err)
		require.Contains(t, err.Error(), c.says)
	}
	_, err := parseHidden("512,x")
	require.ErrorContains(t, err, "x")
	h, err := parseHidden("512, 256")
	require.NoError(t, err)
	require.Equal(t, []int{512, 256}, h)
}

// Training N steps, checkpointing, and resuming to the end gives the run
// an uninterrupted one gives, to the bit.
func TestSaveResume(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: "te", FP8Format: "HYBRID", AORecipe: "tensorwise"}, Batch: 64, LR: 3e-3, Seed: 4, JSON: true}, epochs: 2, hidden: []int{64, 32}, weightDecay: 0.01, limit: 640}
	var straight bytes.Buffer
	require.NoError(t, run(base, &straight))

	dir := t.TempDir()
	half := base
	half.StopAfter, half.Save = 7, dir
	require.NoError(t, run(half, &bytes.Buffer{}))
	_, err := os.Stat(filepath.Join(dir, "mnist-fp8.safetensors"))
	require.NoError(t, err)
	rest := base
	rest.Resume = dir
	var resumed bytes.Buffer
	require.NoError(t, run(rest, &resumed))
	last := func(b *bytes.Buffer) map[string]any {
		var m map[string]any
		require.NoError(t, output.DecodeLast(b.String(), &m))
		return m
	}
	s, r := last(&straight), last(&resumed)
	require.Equal(t, s["test_accuracy"], r["test_accuracy"])
	// final_loss averages the last 100 steps; the resumed run only saw the
	// second half, so compare the accuracy and the step count.
	require.Equal(t, s["steps"], r["steps"])

	// A checkpoint from a float32 run does not resume an FP8 one.
	fp32 := half
	fp32.Precision.MixedPrecision, fp32.Save = "fp32", dir
	require.NoError(t, run(fp32, &bytes.Buffer{}))
	require.NoError(t, os.Rename(filepath.Join(dir, "mnist-fp32.safetensors"), filepath.Join(dir, "mnist-fp8.safetensors")))
	err = run(rest, &bytes.Buffer{})
	require.ErrorContains(t, err, "-resume")
}

func TestFSDPFlag(t *testing.T) {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: "ao", FP8Format: "HYBRID", AORecipe: "tensorwise"}, Batch: 64, LR: 3e-3, Seed: 3, JSON: true}, epochs: 1, hidden: []int{64, 64}, weightDecay: 0.01, limit: 1280}
	cfg.FSDP = train.Ranks{N: 2}
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	var s map[string]any
	require.NoError(t, output.DecodeLast(out.String(), &s))
	// AO's default filter converts only the middle layer (64×64): its
	// weight is gathered at one byte per element, the rest at four.
	require.Equal(t, float64(64*64), s["fp8_allgather_bytes_per_step"])
	total := 4*(784*64+64+64*64+64+64*10+10) - 3*64*64
	require.Equal(t, float64(total), s["allgather_bytes_per_step"])
	require.Greater(t, s["test_accuracy"].(float64), 0.7)
	cfg.Batch = 1
	require.ErrorContains(t, run(cfg, &bytes.Buffer{}), "-fsdp 2: the batch of 1 leaves ranks without rows")
}

// A batch that does not split evenly over the ranks (64 rows over 3: 22,
// 21, 21) trains as one process does on the whole batch: each rank's
// gradients and loss are weighted by its rows.
func TestUnevenSplits(t *testing.T) {
	set, test, err := mnist.Load("")
	require.NoError(t, err)
	set = set.Subset(640)
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32", Backend: "te"}, Batch: 64, LR: 3e-3, Seed: 5}, epochs: 1, hidden: []int{32}, weightDecay: 0.01}
	one, err := trainOne(base, base.Precision, set, test)
	require.NoError(t, err)
	for _, mut := range []func(*config){func(c *config) { c.FSDP = train.Ranks{N: 3} }, func(c *config) { c.DP = train.Ranks{N: 3} }} {
		cfg := base
		mut(&cfg)
		r, err := trainOne(cfg, cfg.Precision, set, test)
		require.NoError(t, err)
		require.Equal(t, 3, r.Ranks)
		require.Len(t, r.Losses, len(one.Losses))
		for i := range one.Losses {
			require.InEpsilon(t, one.Losses[i], r.Losses[i], 1e-5, "step %d", i)
		}
	}
	for _, c := range [][4]int{{3, 0, 0, 22}, {3, 1, 22, 43}, {3, 2, 43, 64}, {2, 1, 32, 64}} {
		lo, hi := data.Shard(64, c[0], c[1])
		require.Equal(t, [2]int{c[2], c[3]}, [2]int{lo, hi})
	}
}

// MS-AMP O1 and O2 train on a subset in step with float32 AdamW and report
// their state size: 8 and 3 bytes per parameter.
func TestMSAMPLevels(t *testing.T) {
	acc := map[string]float64{}
	for _, c := range []struct{ precision, level string }{{"fp32", ""}, {"fp8", "O1"}, {"fp8", "O2"}} {
		cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: c.precision, Backend: "msamp", FP8Format: "HYBRID", OptLevel: c.level}, Batch: 64, LR: 3e-3, Seed: 3, JSON: true}, epochs: 3, hidden: []int{128, 64}, weightDecay: 0.01, limit: 3200}
		var out bytes.Buffer
		require.NoError(t, run(cfg, &out))
		var s map[string]any
		require.NoError(t, output.DecodeLast(out.String(), &s))
		acc[c.precision+c.level] = s["test_accuracy"].(float64)
		want := map[string]float64{"": 8, "O1": 8, "O2": 3}[c.level]
		require.Equal(t, want, s["optimizer_state_bytes_per_param"], c.level)
		if c.level != "" {
			require.Equal(t, 2.0, s["weight_bytes_per_param"])
		}
	}
	for _, l := range []string{"fp8O1", "fp8O2"} {
		require.InDelta(t, acc["fp32"], acc[l], 0.02, l)
	}
}

// A sharded run checkpoints one file per rank and resumes exactly.
func TestFSDPSaveResume(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: "ao", FP8Format: "HYBRID", AORecipe: "tensorwise"}, Batch: 64, LR: 3e-3, Seed: 3, JSON: true}, epochs: 2, hidden: []int{64, 64}, weightDecay: 0.01, limit: 640}
	base.FSDP = train.Ranks{N: 2}
	var straight bytes.Buffer
	require.NoError(t, run(base, &straight))
	dir := t.TempDir()
	half := base
	half.StopAfter, half.Save = 9, dir
	require.NoError(t, run(half, &bytes.Buffer{}))
	for r := 0; r < 2; r++ {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("mnist-fp8-rank%d-of-2.safetensors", r)))
		require.NoError(t, err)
	}
	rest := base
	rest.Resume = dir
	var resumed bytes.Buffer
	require.NoError(t, run(rest, &resumed))
	last := func(b *bytes.Buffer) map[string]any {
		var m map[string]any
		require.NoError(t, output.DecodeLast(b.String(), &m))
		return m
	}
	require.Equal(t, last(&straight)["test_accuracy"], last(&resumed)["test_accuracy"])
}

// Data-parallel MS-AMP: gradients averaged by the FP8 all-reduce keep the
// replicas identical, and the casts' overflows and underflows are
// reported.
func TestDataParallelMSAMP(t *testing.T) {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: "msamp", FP8Format: "HYBRID", OptLevel: "O2"}, Batch: 64, LR: 3e-3, Seed: 3, JSON: true}, epochs: 1, hidden: []int{64, 64}, weightDecay: 0.01, limit: 1280}
	cfg.DP = train.Ranks{N: 4}
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	var s map[string]any
	require.NoError(t, output.DecodeLast(out.String(), &s))
	require.Contains(t, s, "fp8_allreduce_overflows")
	require.Contains(t, s, "fp8_allreduce_underflows")
	require.Greater(t, s["test_accuracy"].(float64), 0.6)
	cfg.FSDP = train.Ranks{N: 2}
	require.ErrorContains(t, run(cfg, &bytes.Buffer{}), "-dp 4 and -fsdp 2: choose one")
}

// TestBadNumbersAreRefusedBeforeWork runs the example with values that
// used to crash it or train nonsense: each is refused with a message
// naming the flag, before any data is read.
func TestBadNumbersAreRefusedBeforeWork(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32", Backend: "te", FP8Format: "HYBRID"}, Batch: 8, LR: 1e-3}, epochs: 1, hidden: []int{8}, dataDir: "/nonexistent"}
	nan := math.NaN()
	for _, c := range []struct {
		mut  func(*config)
		says string
	}{
		{func(c *config) { c.epochs = -1 }, "-epochs -1"},
		{func(c *config) { c.epochs = 0 }, "-epochs 0"},
		{func(c *config) { c.Batch = 0 }, "-batch 0"},
		{func(c *config) { c.LR = -1 }, "-lr -1"},
		{func(c *config) { c.LR = nan }, "-lr NaN"},
		{func(c *config) { c.weightDecay = nan }, "-wd NaN"},
		{func(c *config) { c.limit = -5 }, "-limit -5"},
		{func(c *config) { c.hidden = nil }, "-hidden"},
		{func(c *config) { c.hidden = []int{100000000} }, "GiB are available"},
		{func(c *config) { c.Plot = "/no-such-dir/loss.png" }, "-plot /no-such-dir/loss.png: directory"},
		{func(c *config) { c.Plot = os.TempDir() }, "is a directory"},
		{func(c *config) { c.Resume = filepath.Join(os.TempDir(), "no-such-octet-ckpt") }, "mnist-fp32.safetensors"},
		{func(c *config) { c.Save = "/proc/no-such" }, "-save /proc/no-such"},
	} {
		cfg := base
		c.mut(&cfg)
		err := run(cfg, &bytes.Buffer{})
		require.Error(t, err)
		require.Contains(t, err.Error(), c.says)
		require.NotContains(t, err.Error(), "/nonexistent", "refused before reading data")
	}
	for _, s := range []string{"", ",", "512,,512", " "} {
		_, err := parseHidden(s)
		require.ErrorContains(t, err, "-hidden", "%q", s)
	}
}

// TestParallelRunsStopOnNaN: a data-parallel or sharded run whose loss
// turns NaN stops with an error naming the step, instead of exiting 0
// with a NaN final loss.
func TestParallelRunsStopOnNaN(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32", Backend: "te", FP8Format: "HYBRID"}, Batch: 16, LR: 1e30, Seed: 1}, epochs: 1, hidden: []int{16}, limit: 640}
	for _, mut := range []func(*config){func(c *config) { c.DP = train.Ranks{N: 2} }, func(c *config) { c.FSDP = train.Ranks{N: 2} }} {
		cfg := base
		mut(&cfg)
		err := run(cfg, &bytes.Buffer{})
		require.Error(t, err)
		require.Contains(t, err.Error(), "the loss is")
	}
}

// TestAmaxAllReduceBytes: a data-parallel TE delayed-scaling run reports
// its amax all-reduce, 4 bytes for each of the converted layers' three
// casts (input, weight, output gradient); with reduce_amax off, none.
func TestAmaxAllReduceBytes(t *testing.T) {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", FP8Format: "HYBRID"}, Batch: 64, LR: 3e-3, Seed: 3, JSON: true}, epochs: 1, hidden: []int{64, 64}, limit: 256}
	cfg.DP = train.Ranks{N: 2}
	for _, reduce := range []bool{true, false} {
		cfg.Precision.ReduceAmax = &reduce
		var out bytes.Buffer
		require.NoError(t, run(cfg, &out))
		var s map[string]any
		require.NoError(t, output.DecodeLast(out.String(), &s))
		require.Equal(t, []any{"mlp.fc1", "mlp.fc2"}, s["converted_layers"])
		if reduce {
			require.Equal(t, float64(2*3*4), s["amax_allreduce_bytes_per_step"])
		} else {
			require.NotContains(t, s, "amax_allreduce_bytes_per_step")
		}
	}
}

// A run saved by -fsdp 3 resumes with -fsdp 2, -dp 2 and in one process
// (float32: the final loss, over the steps before the resume too, within
// 1e-5 of the uninterrupted run's); -dp 2 saves and resumes exactly; a
// removed shard is refused by name.
func TestReshardedResume(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32"}, Batch: 64, LR: 3e-3, Seed: 3, JSON: true}, epochs: 1, hidden: []int{32}, weightDecay: 0.01, limit: 1280, testLimit: 500}
	last := func(b *bytes.Buffer) map[string]any {
		var m map[string]any
		require.NoError(t, output.DecodeLast(b.String(), &m))
		return m
	}
	with := func(c config, dp, fsdp int) config {
		c.DP, c.FSDP = train.Ranks{N: dp}, train.Ranks{N: fsdp}
		return c
	}
	var straight bytes.Buffer
	require.NoError(t, run(with(base, 0, 3), &straight))
	dir := t.TempDir()
	half := with(base, 0, 3)
	half.StopAfter, half.Save = 10, dir
	require.NoError(t, run(half, &bytes.Buffer{}))
	for _, to := range [][2]int{{0, 2}, {2, 0}, {0, 0}} {
		rest := with(base, to[0], to[1])
		rest.Resume = dir
		var out bytes.Buffer
		require.NoError(t, run(rest, &out))
		got := last(&out)
		require.InEpsilon(t, last(&straight)["final_loss"], got["final_loss"], 1e-5, "%v", to)
		require.Contains(t, got["resharded"], "FSDP 3 to ")
	}

	// DP 2: save and resume are exact.
	var dpStraight bytes.Buffer
	require.NoError(t, run(with(base, 2, 0), &dpStraight))
	dpDir := t.TempDir()
	half = with(base, 2, 0)
	half.StopAfter, half.Save = 10, dpDir
	require.NoError(t, run(half, &bytes.Buffer{}))
	rest := with(base, 2, 0)
	rest.Resume = dpDir
	var out bytes.Buffer
	require.NoError(t, run(rest, &out))
	require.Equal(t, last(&dpStraight)["final_loss"], last(&out)["final_loss"])
	require.Equal(t, last(&dpStraight)["test_accuracy"], last(&out)["test_accuracy"])
	require.NotContains(t, last(&out), "resharded")

	require.NoError(t, os.Remove(filepath.Join(dir, "mnist-fp32-rank1-of-3.safetensors")))
	rest = with(base, 0, 2)
	rest.Resume = dir
	require.ErrorContains(t, run(rest, &bytes.Buffer{}), "mnist-fp32-rank1-of-3.safetensors")
}
