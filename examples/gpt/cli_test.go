package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestCommandLines runs the program as a user does, once per row (the
// hostile and careless inputs found so far): exit status, a substring of
// what it says, no panic, no file left in the working directory, and
// every refusal before training.
func TestCommandLines(t *testing.T) {
	tmp := t.TempDir()
	corpus := filepath.Join(tmp, "corpus.txt")
	require.NoError(t, os.WriteFile(corpus, []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 60)), 0o644))
	quick := []string{"-data", corpus, "-layers", "1", "-heads", "2", "-embd", "16", "-block", "16", "-batch", "2", "-iters", "4", "-eval-batches", "1", "-sample", "5", "-eval-every", "0"}
	plot := filepath.Join(tmp, "loss.png")
	shipped, err := filepath.Abs("../fp8-debug.yaml")
	require.NoError(t, err)
	logs := filepath.Join(tmp, "fp8logs")
	clitest.Table(t, "gpt", quick, []clitest.Case{
		{Name: "zero iterations", Args: []string{"-iters", "0"}, Code: 1, Says: "-iters 0: want at least 1"},
		{Name: "zero eval batches", Args: []string{"-eval-batches", "0"}, Code: 1, Says: "-eval-batches 0"},
		{Name: "negative sample", Args: []string{"-sample", "-5"}, Code: 1, Says: "-sample -5"},
		{Name: "dropout of one", Args: []string{"-dropout", "1"}, Code: 1, Says: "-dropout 1"},
		{Name: "NaN lr", Args: []string{"-lr", "nan"}, Code: 1, Says: "-lr NaN"},
		{Name: "no layers", Args: []string{"-layers", "0"}, Code: 1, Says: "-layers 0"},
		{Name: "huge model", Args: []string{"-embd", "65536", "-layers", "64", "-block", "4096"}, Code: 1, Says: "GiB are available"},
		{Name: "ao with te", Args: []string{"-ao", "rowwise"}, Code: 1, Says: "-ao applies to -recipe ao only"},
		{Name: "format with msamp", Args: []string{"-recipe", "msamp", "-format", "E4M3"}, Code: 1, Says: "-format applies to -recipe te or block only"},
		{Name: "the two variable families disagree", Env: []string{"OCTET_FP8_FORMAT=E5M2", "ACCELERATE_FP8_FORMAT=E4M3"}, Code: 1, Says: "OCTET_FP8_FORMAT=E5M2 and ACCELERATE_FP8_FORMAT=E4M3 disagree"},
		{Name: "bogus GEMM kernel", Env: []string{"OCTET_GEMM_KERNEL=bogus"}, Code: 1, Says: "OCTET_GEMM_KERNEL"},
		{Name: "huge amax history", Env: []string{"OCTET_FP8_AMAX_HISTORY_LEN=100000000000"}, Code: 1, Says: "OCTET_FP8_AMAX_HISTORY_LEN"},
		{Name: "margin beyond range", Env: []string{"OCTET_FP8_MARGIN=1000"}, Code: 1, Says: "margin 1000"},
		{Name: "missing corpus", Args: []string{"-data", "/nonexistent.txt"}, Code: 1, Says: "/nonexistent.txt"},
		{Name: "resume missing file", Args: []string{"-resume", filepath.Join(tmp, "none")}, Code: 1, Says: "gpt-fp32.safetensors"},
		{Name: "plot into a missing dir", Args: []string{"-plot", "/no-such-dir/loss.png"}, Code: 1, Says: "-plot /no-such-dir/loss.png"},
		{Name: "diverging run", Args: []string{"-lr", "1e30", "-precision", "fp8"}, Quick: true, Code: 1, Says: "the loss is NaN; first non-finite gradient"},
		{Name: "plot says where", Args: []string{"-plot", plot, "-precision", "fp32"}, Quick: true, Code: 0, Says: "loss curves written to " + plot},
		{Name: "FP8 debug statistics", Args: []string{"-fp8-debug", shipped, "-fp8-log", logs, "-precision", "fp8"}, Quick: true, Code: 0,
			Says: "FP8 debug statistics: " + filepath.Join(logs, "fp8", "octet_fp8_stats.jsonl")},
		{Name: "debug log without config", Args: []string{"-fp8-log", logs}, Code: 1, Says: "it needs -fp8-debug"},
		{Name: "stop early reports iterations run", Args: []string{"-stop-after", "2", "-precision", "fp32"}, Quick: true, Code: 0, Says: "ran iterations 1–2 of 4"},
	}, func(t *testing.T, r clitest.Result) {
		require.NotContains(t, r.Stdout, "corpus:", "refused before reading the corpus")
	})
}

// The margin diagnosis through the run report: with OCTET_FP8_MARGIN=17
// more than half of the first attention GEMM's input is flushed to zero
// by its FP8 cast, and the report's layer table says so (flushed%;
// Transformer Engine's underflows% counts only the positive zeros).
func TestReportShowsUnderflow(t *testing.T) {
	tmp := t.TempDir()
	corpus := filepath.Join(tmp, "corpus.txt")
	require.NoError(t, os.WriteFile(corpus, []byte(strings.Repeat("the quick brown fox jumps over the lazy dog. ", 60)), 0o644))
	page := filepath.Join(tmp, "run.html")
	r := clitest.Run(t, []string{"OCTET_FP8_MARGIN=17"}, "-data", corpus, "-layers", "1", "-heads", "2", "-embd", "16", "-block", "16", "-batch", "2",
		"-iters", "12", "-eval-batches", "1", "-sample", "0", "-eval-every", "0", "-precision", "fp8", "-report", page)
	require.Equal(t, 0, r.Code, r.Stderr)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	m := regexp.MustCompile(`<tr><td>gpt\.h\.0\.attn\.qkv</td><td>activation</td><td>([0-9.]+)</td><td>([0-9.]+)</td>`).FindStringSubmatch(string(b))
	require.Len(t, m, 3, "the layer table has the row")
	under, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	flushed, err := strconv.ParseFloat(m[2], 64)
	require.NoError(t, err)
	require.Greater(t, flushed, 50.0, "flushed%% of the activation")
	require.Greater(t, under, 20.0, "underflows%% of the activation (positive zeros)")
}
