package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/octetml/octet/inspect"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestCommandLines runs the program as a user does, once per row: the
// arguments and environment of every hostile or careless input found so
// far, with the exit status and a substring of what it must say. No row
// may panic or leave a file behind in its working directory, and every
// refusal comes before training (no progress line).
func TestCommandLines(t *testing.T) {
	dataDir, err := mnist.ModuleDir()
	require.NoError(t, err)
	quick := []string{"-data", dataDir, "-limit", "256", "-epochs", "1", "-batch", "64", "-hidden", "32"}
	tmp := t.TempDir()
	notDir := filepath.Join(tmp, "file")
	require.NoError(t, os.WriteFile(notDir, []byte("x"), 0o644))
	badDebug := filepath.Join(tmp, "bad.yaml")
	require.NoError(t, os.WriteFile(badDebug, []byte("s:\n  enabled: True\n  layers: {layer_types: [fc]}\n  transformer_engine:\n    LogTensorStats: {enabled: True, tensors: [activation], stats: [median]}\n"), 0o644))
	debugDir := filepath.Join(tmp, "fp8logs")
	shipped, err := filepath.Abs("../fp8-debug.yaml")
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		code  int
		says  string // on stderr for a refusal, on stdout for a run
		quick bool   // add the quick-run flags
	}{
		{name: "negative epochs", args: []string{"-epochs", "-1"}, code: 1, says: "-epochs -1: want at least 1"},
		{name: "zero epochs", args: []string{"-epochs", "0"}, code: 1, says: "-epochs 0"},
		{name: "huge hidden layer", args: []string{"-hidden", "100000000"}, code: 1, says: "GiB are available"},
		{name: "huge amax history", env: []string{"OCTET_FP8_AMAX_HISTORY_LEN=100000000000"}, args: []string{"-precision", "fp8"}, code: 1, says: "OCTET_FP8_AMAX_HISTORY_LEN"},
		{name: "empty hidden", args: []string{"-hidden", ""}, code: 1, says: "-hidden"},
		{name: "comma hidden", args: []string{"-hidden", ","}, code: 1, says: "-hidden"},
		{name: "empty hidden entry", args: []string{"-hidden", "512,,512"}, code: 1, says: "an empty layer size"},
		{name: "negative lr", args: []string{"-lr", "-1"}, code: 1, says: "-lr -1"},
		{name: "NaN lr", args: []string{"-lr", "nan"}, code: 1, says: "-lr NaN"},
		{name: "NaN wd", args: []string{"-wd", "nan"}, code: 1, says: "-wd NaN"},
		{name: "opt-level with te", args: []string{"-opt-level", "O1"}, code: 1, says: "-opt-level applies to -recipe msamp only"},
		{name: "ao with te", args: []string{"-ao", "rowwise"}, code: 1, says: "-ao applies to -recipe ao only"},
		{name: "format with ao", args: []string{"-recipe", "ao", "-format", "E4M3"}, code: 1, says: "-format applies to -recipe te only"},
		{name: "dp 0", args: []string{"-dp", "0"}, code: 1, says: "-dp 0"},
		{name: "dp negative", args: []string{"-dp", "-2"}, code: 1, says: "-dp -2"},
		{name: "dp with stop-after", args: []string{"-dp", "2", "-stop-after", "3"}, code: 1, says: "-stop-after does not combine with -dp"},
		{name: "dp with zero epochs", args: []string{"-dp", "2", "-epochs", "0"}, code: 1, says: "-epochs 0"},
		{name: "dp with negative epochs", args: []string{"-dp", "2", "-epochs", "-1"}, code: 1, says: "-epochs -1"},
		{name: "fsdp with zero epochs", args: []string{"-fsdp", "2", "-epochs", "0"}, code: 1, says: "-epochs 0"},
		{name: "fsdp not a number", args: []string{"-fsdp", "two"}, code: 1, says: `-fsdp "two"`},
		{name: "bogus GEMM kernel", env: []string{"OCTET_GEMM_KERNEL=bogus"}, code: 1, says: `OCTET_GEMM_KERNEL="bogus"`},
		{name: "env and flag disagree", env: []string{"OCTET_FP8_FORMAT=E5M2"}, args: []string{"-format", "E4M3"}, code: 1, says: "-format E4M3 and OCTET_FP8_FORMAT=E5M2 disagree"},
		{name: "opt level O3 from env", env: []string{"OCTET_FP8_OPT_LEVEL=O3"}, args: []string{"-recipe", "msamp", "-precision", "fp8"}, code: 1, says: "OCTET_FP8_OPT_LEVEL"},
		{name: "margin beyond range", env: []string{"OCTET_FP8_MARGIN=1000"}, args: []string{"-precision", "fp8"}, code: 1, says: "margin 1000"},
		{name: "bad env format", env: []string{"OCTET_FP8_FORMAT=E3M4"}, code: 1, says: "OCTET_FP8_FORMAT"},
		{name: "plot into a missing dir", args: []string{"-plot", "/no-such-dir/loss.png"}, code: 1, says: "-plot /no-such-dir/loss.png"},
		{name: "plot is a dir", args: []string{"-plot", tmp}, code: 1, says: "is a directory"},
		{name: "save under a file", args: []string{"-save", filepath.Join(notDir, "ckpt")}, code: 1, says: "-save"},
		{name: "resume missing file", args: []string{"-resume", filepath.Join(tmp, "none"), "-precision", "both"}, code: 1, says: "mnist-fp32.safetensors"},
		{name: "missing data", args: []string{"-data", "/nonexistent"}, code: 1, says: "/nonexistent/" + mnist.TrainImages},
		{name: "unknown precision", args: []string{"-precision", "fp16"}, code: 1, says: "-precision"},
		{name: "unknown recipe", args: []string{"-recipe", "xx"}, code: 1, says: "-recipe"},
		{name: "msamp with fsdp", args: []string{"-recipe", "msamp", "-fsdp", "2"}, code: 1, quick: true, says: "-recipe msamp does not combine with -fsdp"},
		{name: "batch below ranks", args: []string{"-fsdp", "3", "-batch", "2", "-recipe", "ao"}, code: 1, says: "-fsdp 3: the batch of 2 leaves ranks without rows"},
		{name: "diverging run", args: []string{"-lr", "1e30", "-precision", "fp8"}, quick: true, code: 1, says: "first non-finite gradient"},
		{name: "diverging dp run", args: []string{"-lr", "1e30", "-precision", "fp32", "-dp", "2"}, quick: true, code: 1, says: "the loss is"},
		{name: "uneven fsdp split", args: []string{"-fsdp", "3", "-recipe", "ao", "-precision", "fp32"}, quick: true, code: 0, says: "sharded: each of the 3 ranks"},
		{name: "uneven dp split", args: []string{"-dp", "3", "-precision", "fp32"}, quick: true, code: 0, says: "fp32 optimizer memory"},
		{name: "stop early reports steps run", args: []string{"-stop-after", "2", "-precision", "fp32"}, quick: true, code: 0, says: "ran steps 1–2 of 4"},
		{name: "settings say where they came from", env: []string{"OCTET_FP8_MARGIN=2"}, args: []string{"-precision", "fp8", "-format", "E4M3"}, quick: true, code: 0,
			says: "recipe settings: margin 2 (OCTET_FP8_MARGIN), fp8_format E4M3 (-format); the rest defaults"},
		{name: "default settings", args: []string{"-precision", "fp8"}, quick: true, code: 0, says: "recipe settings: defaults"},
		{name: "bad debug config names the line", args: []string{"-fp8-debug", badDebug, "-fp8-log", debugDir}, code: 1, says: badDebug + `:5: section s: LogTensorStats: stats: unknown name "median"`},
		{name: "missing debug config", args: []string{"-fp8-debug", filepath.Join(tmp, "none.yaml"), "-fp8-log", debugDir}, code: 1, says: "-fp8-debug: open"},
		{name: "debug log without config", args: []string{"-fp8-log", debugDir}, code: 1, says: "-fp8-log " + debugDir + ": it needs -fp8-debug"},
		{name: "debug config without log", args: []string{"-fp8-debug", shipped}, code: 1, says: "give -fp8-log DIR"},
		{name: "run report", args: []string{"-precision", "both", "-report", filepath.Join(tmp, "run.html")}, quick: true, code: 0, says: "run report written to " + filepath.Join(tmp, "run.html")},
		{name: "report into a missing dir", args: []string{"-report", "/no-such-dir/r.html"}, code: 1, says: "-report /no-such-dir/r.html"},
		{name: "kept layer says why", args: []string{"-precision", "fp8"}, quick: true, code: 0, says: "kept float32: mlp.fc2: weight dims [10 32]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.quick {
				args = append(append([]string{}, quick...), args...)
			}
			r := clitest.Run(t, c.env, args...)
			require.False(t, r.Panicked(), "panicked:\n%s", r.Stderr)
			require.Equal(t, c.code, r.Code, "stderr:\n%s", r.Stderr)
			out := r.Stdout
			if c.code != 0 {
				out = r.Stderr
				require.True(t, strings.HasPrefix(r.Stderr, "mnist: "), "stderr: %s", r.Stderr)
				require.NotContains(t, r.Stderr, "mnist: mnist:")
				if !c.quick {
					require.NotContains(t, r.Stderr, " step ", "refused before training")
				}
			}
			require.Contains(t, out, c.says)
			require.Empty(t, r.Left(t), "files left behind")
		})
	}
}

// A run that saves, stops early and is resumed leaves exactly its
// checkpoint files (no temporaries), and a resume with nothing left to
// train says so.
func TestCommandLineCheckpoints(t *testing.T) {
	dataDir, err := mnist.ModuleDir()
	require.NoError(t, err)
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	quick := []string{"-data", dataDir, "-limit", "256", "-epochs", "1", "-batch", "64", "-hidden", "32", "-precision", "both"}
	r := clitest.Run(t, nil, append(quick, "-save", ckpt, "-save-every", "1", "-stop-after", "3")...)
	require.Equal(t, 0, r.Code, r.Stderr)
	ents, err := os.ReadDir(ckpt)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"mnist-fp32.safetensors", "mnist-fp8.safetensors"}, names)
	r = clitest.Run(t, nil, append(quick, "-resume", ckpt)...)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "ran steps 4–4 of 4; final loss: mean of steps 4–4")
	r = clitest.Run(t, nil, append(quick, "-resume", ckpt, "-stop-after", "2")...)
	require.Equal(t, 1, r.Code)
	require.Contains(t, r.Stderr, "-resume: the checkpoint is at step 3, nothing left to train before step 2")
}

// -fp8-debug with the shipped config writes statistics under -fp8-log,
// one file per precision, that inspect.ReadStats reads back.
func TestCommandLineFP8Debug(t *testing.T) {
	dataDir, err := mnist.ModuleDir()
	require.NoError(t, err)
	cfgPath, err := filepath.Abs("../fp8-debug.yaml")
	require.NoError(t, err)
	logs := filepath.Join(t.TempDir(), "logs")
	r := clitest.Run(t, nil, "-data", dataDir, "-limit", "256", "-epochs", "1", "-batch", "64", "-hidden", "32", "-precision", "fp8",
		"-fp8-debug", cfgPath, "-fp8-log", logs)
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "FP8 debug statistics: "+filepath.Join(logs, "fp8", inspect.LogFile))
	stats, err := inspect.ReadStats(filepath.Join(logs, "fp8"))
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, s := range stats {
		require.Zero(t, s.Step, "freq 50: step 0 of 4")
		seen[s.Layer+" "+string(s.Tensor)+" "+s.Stat] = true
	}
	require.True(t, seen["mlp.fc1 activation underflows%"])
	require.True(t, seen["mlp.fc2 output dynamic_range"])
	require.Empty(t, r.Left(t))
}

// Statistics of a data-parallel or sharded run are those of the global
// batch: the ranks' partial statistics are merged, and rank 0 writes one
// file, equal (to float32 rounding) to a single process's.
func TestFP8DebugAcrossRanks(t *testing.T) {
	dataDir, err := mnist.ModuleDir()
	require.NoError(t, err)
	tmp := t.TempDir()
	cfgPath := filepath.Join(tmp, "d.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
s:
  enabled: True
  layers: {layer_types: [fc1]}
  transformer_engine:
    LogTensorStats: {enabled: True, tensors: [activation, weight, gradient], stats: [min, max, mean, std, l1_norm, l2_norm, dynamic_range], start_step: 0, end_step: 0}
`), 0o644))
	run := func(extra ...string) map[string]float64 {
		logs := filepath.Join(tmp, strings.Join(extra, "_")+"logs")
		args := append([]string{"-data", dataDir, "-limit", "256", "-epochs", "1", "-batch", "64", "-hidden", "32", "-precision", "fp32", "-recipe", "ao",
			"-fp8-debug", cfgPath, "-fp8-log", logs}, extra...)
		r := clitest.Run(t, nil, args...)
		require.Equal(t, 0, r.Code, r.Stderr)
		stats, err := inspect.ReadStats(filepath.Join(logs, "fp32"))
		require.NoError(t, err)
		out := map[string]float64{}
		for _, s := range stats {
			out[string(s.Tensor)+" "+s.Stat] = s.Value
		}
		return out
	}
	one := run()
	require.Len(t, one, 3*7)
	for _, par := range [][]string{{"-dp", "2"}, {"-fsdp", "3"}} {
		got := run(par...)
		require.Len(t, got, len(one), "%v", par)
		for k, v := range one {
			if strings.HasPrefix(k, "gradient") {
				continue // each rank's gradient is of its own loss (below)
			}
			require.InDelta(t, v, got[k], 1e-5*math.Max(1, math.Abs(v)), "%v %s", par, k)
		}
		if par[0] == "-dp" {
			// Two ranks of 32 rows: each rank's loss is the mean over its
			// rows, so its gradient is twice the global batch's.
			require.InDelta(t, 2*one["gradient max"], got["gradient max"], 1e-5)
			require.InDelta(t, 2*one["gradient l1_norm"], got["gradient l1_norm"], 1e-4*one["gradient l1_norm"])
		}
	}
}

// The -report page holds the runs, the layer table and one plot per FP8
// layer that logged statistics, and leaves no temporary directory.
func TestCommandLineReport(t *testing.T) {
	dataDir, err := mnist.ModuleDir()
	require.NoError(t, err)
	page := filepath.Join(t.TempDir(), "run.html")
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "octet-report-*"))
	r := clitest.Run(t, nil, "-data", dataDir, "-limit", "256", "-epochs", "1", "-batch", "64", "-hidden", "32", "-precision", "fp8", "-report", page)
	require.Equal(t, 0, r.Code, r.Stderr)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	html := string(b)
	for _, want := range []string{`<table class="layers">`, `data-layer="mlp.fc1"`, "te/HYBRID"} {
		require.True(t, strings.Contains(html, want), want)
	}
	require.True(t, strings.Contains(html, "weight dims [10 32] are not both divisible by 16"), "the conversion report")
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "octet-report-*"))
	require.Equal(t, len(before), len(after), "the report's temporary statistics are removed")
}
