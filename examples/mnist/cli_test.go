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
	clitest.Table(t, "mnist", quick, []clitest.Case{
		{Name: "negative epochs", Args: []string{"-epochs", "-1"}, Code: 1, Says: "-epochs -1: want at least 1"},
		{Name: "zero epochs", Args: []string{"-epochs", "0"}, Code: 1, Says: "-epochs 0"},
		{Name: "huge hidden layer", Args: []string{"-hidden", "100000000"}, Code: 1, Says: "GiB are available"},
		{Name: "huge amax history", Env: []string{"OCTET_FP8_AMAX_HISTORY_LEN=100000000000"}, Args: []string{"-precision", "fp8"}, Code: 1, Says: "OCTET_FP8_AMAX_HISTORY_LEN"},
		{Name: "empty hidden", Args: []string{"-hidden", ""}, Code: 1, Says: "-hidden"},
		{Name: "comma hidden", Args: []string{"-hidden", ","}, Code: 1, Says: "-hidden"},
		{Name: "empty hidden entry", Args: []string{"-hidden", "512,,512"}, Code: 1, Says: "an empty layer size"},
		{Name: "negative lr", Args: []string{"-lr", "-1"}, Code: 1, Says: "-lr -1"},
		{Name: "NaN lr", Args: []string{"-lr", "nan"}, Code: 1, Says: "-lr NaN"},
		{Name: "NaN wd", Args: []string{"-wd", "nan"}, Code: 1, Says: "-wd NaN"},
		{Name: "opt-level with te", Args: []string{"-opt-level", "O1"}, Code: 1, Says: "-opt-level applies to -recipe msamp only"},
		{Name: "ao with te", Args: []string{"-ao", "rowwise"}, Code: 1, Says: "-ao applies to -recipe ao only"},
		{Name: "format with ao", Args: []string{"-recipe", "ao", "-format", "E4M3"}, Code: 1, Says: "-format applies to -recipe te or block only"},
		{Name: "dp 0", Args: []string{"-dp", "0"}, Code: 1, Says: "-dp 0"},
		{Name: "dp negative", Args: []string{"-dp", "-2"}, Code: 1, Says: "-dp -2"},
		{Name: "dp and fsdp", Args: []string{"-dp", "2", "-fsdp", "2"}, Code: 1, Says: "-dp 2 and -fsdp 2: choose one"},
		{Name: "dp mpi without the build", Args: []string{"-dp", "mpi"}, Code: 1, Says: "-dp mpi: this program was built without MPI"},
		{Name: "dp with zero epochs", Args: []string{"-dp", "2", "-epochs", "0"}, Code: 1, Says: "-epochs 0"},
		{Name: "dp with negative epochs", Args: []string{"-dp", "2", "-epochs", "-1"}, Code: 1, Says: "-epochs -1"},
		{Name: "fsdp with zero epochs", Args: []string{"-fsdp", "2", "-epochs", "0"}, Code: 1, Says: "-epochs 0"},
		{Name: "fsdp not a number", Args: []string{"-fsdp", "two"}, Code: 1, Says: `-fsdp "two"`},
		{Name: "bogus GEMM kernel", Env: []string{"OCTET_GEMM_KERNEL=bogus"}, Code: 1, Says: `OCTET_GEMM_KERNEL="bogus"`},
		{Name: "env and flag disagree: the flag wins, said", Env: []string{"OCTET_FP8_FORMAT=E5M2"}, Args: []string{"-format", "E4M3", "-precision", "fp8", "-epochs", "1", "-limit", "128", "-batch", "64"}, Code: 0, Says: "OCTET_FP8_FORMAT=E5M2 is not applied: -format E4M3 wins"},
		{Name: "opt level O3 from env", Env: []string{"OCTET_FP8_OPT_LEVEL=O3"}, Args: []string{"-recipe", "msamp", "-precision", "fp8"}, Code: 1, Says: "OCTET_FP8_OPT_LEVEL"},
		{Name: "margin beyond range", Env: []string{"OCTET_FP8_MARGIN=1000"}, Args: []string{"-precision", "fp8"}, Code: 1, Says: "margin 1000"},
		{Name: "bad env format", Env: []string{"OCTET_FP8_FORMAT=E3M4"}, Code: 1, Says: "OCTET_FP8_FORMAT"},
		{Name: "plot into a missing dir", Args: []string{"-plot", "/no-such-dir/loss.png"}, Code: 1, Says: "-plot /no-such-dir/loss.png"},
		{Name: "plot is a dir", Args: []string{"-plot", tmp}, Code: 1, Says: "is a directory"},
		{Name: "save under a file", Args: []string{"-save", filepath.Join(notDir, "ckpt")}, Code: 1, Says: "-save"},
		{Name: "resume missing file", Args: []string{"-resume", filepath.Join(tmp, "none"), "-precision", "both"}, Code: 1, Says: "mnist-fp32.safetensors"},
		{Name: "missing data", Args: []string{"-data", "/nonexistent"}, Code: 1, Says: "/nonexistent/" + mnist.TrainImages},
		{Name: "unknown precision", Args: []string{"-precision", "fp16"}, Code: 1, Says: "-precision"},
		{Name: "unknown recipe", Args: []string{"-recipe", "xx"}, Code: 1, Says: "-recipe"},
		{Name: "msamp with fsdp", Args: []string{"-recipe", "msamp", "-fsdp", "2"}, Code: 1, Quick: true, Says: "-recipe msamp does not combine with -fsdp"},
		{Name: "batch above examples", Args: []string{"-limit", "64", "-precision", "fp8"}, Code: 1, Says: "-batch 128 is larger than the 64 training examples (-limit)"},
		{Name: "batch below ranks", Args: []string{"-fsdp", "3", "-batch", "2", "-recipe", "ao"}, Code: 1, Says: "-fsdp 3: the batch of 2 leaves ranks without rows"},
		{Name: "diverging run", Args: []string{"-lr", "1e30", "-precision", "fp8"}, Quick: true, Code: 1, Says: "first non-finite gradient"},
		{Name: "diverging dp run", Args: []string{"-lr", "1e30", "-precision", "fp32", "-dp", "2"}, Quick: true, Code: 1, Says: "the loss is"},
		{Name: "uneven fsdp split", Args: []string{"-fsdp", "3", "-precision", "fp32"}, Quick: true, Code: 0, Says: "sharded: each of the 3 ranks"},
		{Name: "uneven dp split", Args: []string{"-dp", "3", "-precision", "fp32"}, Quick: true, Code: 0, Says: "fp32 optimizer memory"},
		{Name: "stop early reports steps run", Args: []string{"-stop-after", "2", "-precision", "fp32"}, Quick: true, Code: 0, Says: "ran steps 1–2 of 4"},
		{Name: "settings say where they came from", Env: []string{"OCTET_FP8_MARGIN=2"}, Args: []string{"-precision", "fp8", "-format", "E4M3"}, Quick: true, Code: 0,
			Says: "recipe settings: margin 2 (OCTET_FP8_MARGIN), fp8_format E4M3 (-format); the rest defaults"},
		{Name: "default settings", Args: []string{"-precision", "fp8"}, Quick: true, Code: 0, Says: "recipe settings: defaults"},
		{Name: "bad debug config names the line", Args: []string{"-fp8-debug", badDebug, "-fp8-log", debugDir}, Code: 1, Says: badDebug + `:5: section s: LogTensorStats: stats: unknown name "median"`},
		{Name: "missing debug config", Args: []string{"-fp8-debug", filepath.Join(tmp, "none.yaml"), "-fp8-log", debugDir}, Code: 1, Says: "-fp8-debug: open"},
		{Name: "debug log without config", Args: []string{"-fp8-log", debugDir}, Code: 1, Says: "-fp8-log " + debugDir + ": it needs -fp8-debug"},
		{Name: "debug config without log", Args: []string{"-fp8-debug", shipped}, Code: 1, Says: "give -fp8-log DIR"},
		{Name: "run report", Args: []string{"-precision", "both", "-report", filepath.Join(tmp, "run.html")}, Quick: true, Code: 0, Says: "run report written to " + filepath.Join(tmp, "run.html")},
		{Name: "report into a missing dir", Args: []string{"-report", "/no-such-dir/r.html"}, Code: 1, Says: "-report /no-such-dir/r.html"},
		{Name: "kept layer says why", Args: []string{"-precision", "fp8"}, Quick: true, Code: 0, Says: "kept float32: mlp.fc2: weight dims [10 32]"},
	}, func(t *testing.T, r clitest.Result) {
		require.NotContains(t, r.Stderr, " step ", "refused before training")
	})
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
	require.Contains(t, r.Stdout, "ran steps 4–4 of 4; final loss: mean of steps 1–4") // the checkpoint keeps the earlier losses
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
		args := append([]string{"-data", dataDir, "-limit", "256", "-epochs", "1", "-batch", "64", "-hidden", "32", "-precision", "fp32",
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
