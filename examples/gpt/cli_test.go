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
	for _, c := range []struct {
		name  string
		env   []string
		args  []string
		code  int
		says  string
		quick bool
	}{
		{name: "zero iterations", args: []string{"-iters", "0"}, code: 1, says: "-iters 0: want at least 1"},
		{name: "zero eval batches", args: []string{"-eval-batches", "0"}, code: 1, says: "-eval-batches 0"},
		{name: "negative sample", args: []string{"-sample", "-5"}, code: 1, says: "-sample -5"},
		{name: "dropout of one", args: []string{"-dropout", "1"}, code: 1, says: "-dropout 1"},
		{name: "NaN lr", args: []string{"-lr", "nan"}, code: 1, says: "-lr NaN"},
		{name: "no layers", args: []string{"-layers", "0"}, code: 1, says: "-layers 0"},
		{name: "huge model", args: []string{"-embd", "65536", "-layers", "64", "-block", "4096"}, code: 1, says: "GiB are available"},
		{name: "ao with te", args: []string{"-ao", "rowwise"}, code: 1, says: "-ao applies to -recipe ao only"},
		{name: "format with msamp", args: []string{"-recipe", "msamp", "-format", "E4M3"}, code: 1, says: "-format applies to -recipe te only"},
		{name: "env and flag disagree", env: []string{"OCTET_FP8_FORMAT=E5M2"}, args: []string{"-format", "E4M3"}, code: 1, says: "disagree"},
		{name: "bogus GEMM kernel", env: []string{"OCTET_GEMM_KERNEL=bogus"}, code: 1, says: "OCTET_GEMM_KERNEL"},
		{name: "huge amax history", env: []string{"OCTET_FP8_AMAX_HISTORY_LEN=100000000000"}, code: 1, says: "OCTET_FP8_AMAX_HISTORY_LEN"},
		{name: "margin beyond range", env: []string{"OCTET_FP8_MARGIN=1000"}, code: 1, says: "margin 1000"},
		{name: "missing corpus", args: []string{"-data", "/nonexistent.txt"}, code: 1, says: "/nonexistent.txt"},
		{name: "resume missing file", args: []string{"-resume", filepath.Join(tmp, "none")}, code: 1, says: "gpt-fp32.safetensors"},
		{name: "plot into a missing dir", args: []string{"-plot", "/no-such-dir/loss.png"}, code: 1, says: "-plot /no-such-dir/loss.png"},
		{name: "diverging run", args: []string{"-lr", "1e30", "-precision", "fp8"}, quick: true, code: 1, says: "the loss is NaN; first non-finite gradient"},
		{name: "plot says where", args: []string{"-plot", plot, "-precision", "fp32"}, quick: true, code: 0, says: "loss curves written to " + plot},
		{name: "FP8 debug statistics", args: []string{"-fp8-debug", shipped, "-fp8-log", logs, "-precision", "fp8"}, quick: true, code: 0,
			says: "FP8 debug statistics: " + filepath.Join(logs, "fp8", "octet_fp8_stats.jsonl")},
		{name: "debug log without config", args: []string{"-fp8-log", logs}, code: 1, says: "it needs -fp8-debug"},
		{name: "stop early reports iterations run", args: []string{"-stop-after", "2", "-precision", "fp32"}, quick: true, code: 0, says: "ran iterations 1–2 of 4"},
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
				require.True(t, strings.HasPrefix(r.Stderr, "gpt: "), "stderr: %s", r.Stderr)
				require.NotContains(t, r.Stderr, "gpt: gpt:")
				if !c.quick {
					require.NotContains(t, r.Stdout, "corpus:", "refused before reading the corpus")
				}
			}
			require.Contains(t, out, c.says)
			require.Empty(t, r.Left(t), "files left behind")
		})
	}
}

// The margin diagnosis through the run report: with OCTET_FP8_MARGIN=17
// more than half of the first attention GEMM's input is flushed to zero
// by its FP8 cast, and the report's layer table says so.
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
	m := regexp.MustCompile(`<tr><td>gpt\.h\.0\.attn\.qkv</td><td>activation</td><td>([0-9.]+)</td>`).FindStringSubmatch(string(b))
	require.Len(t, m, 2, "the layer table has the row")
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.Greater(t, v, 50.0, "underflows%% of the activation")
}
