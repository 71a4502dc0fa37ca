package main

import (
	"fmt"
	"math/rand/v2"
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

// writeCSV writes a 3-class task of 500 rows: four features, the class
// moving two of them.
func writeCSV(t *testing.T) string {
	rng := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	sb.WriteString("width,height,depth,noise,kind\n")
	for i := 0; i < 500; i++ {
		c := rng.IntN(3)
		fmt.Fprintf(&sb, "%.3f,%.3f,%.3f,%.3f,%d\n", float64(c)+0.3*rng.NormFloat64(), 2*float64(c%2)+0.3*rng.NormFloat64(),
			rng.NormFloat64(), 5+rng.NormFloat64(), c)
	}
	p := filepath.Join(t.TempDir(), "shapes.csv")
	require.NoError(t, os.WriteFile(p, []byte(sb.String()), 0o644))
	return p
}

var accuracyRe = regexp.MustCompile(`held-out accuracy ([0-9.]+)% \(100 rows\)`)

func accuracy(t *testing.T, out string) float64 {
	m := accuracyRe.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	a, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return a
}

// TestTrainsOnACSV runs the program as a user would, in every precision
// and over ranks: it learns the task.
func TestTrainsOnACSV(t *testing.T) {
	file := writeCSV(t)
	for _, args := range [][]string{
		{},
		{"-precision", "fp32"},
		{"-precision", "bf16", "-dp", "2"},
		{"-recipe", "ao", "-fsdp", "3"},
		{"-recipe", "msamp", "-opt-level", "O1", "-dp", "3"},
	} {
		r := clitest.Run(t, nil, append([]string{"-data", file, "-label", "kind", "-epochs", "8", "-hidden", "32"}, args...)...)
		require.Equal(t, 0, r.Code, "%v: %s", args, r.Stderr)
		require.Greater(t, accuracy(t, r.Stdout), 90.0, "%v: %s", args, r.Stdout)
		require.False(t, r.Panicked())
	}
}

// TestSaveAndResume: a run stopped after a few epochs and resumed from its
// checkpoint ends as the run that was never stopped.
func TestSaveAndResume(t *testing.T) {
	file := writeCSV(t)
	dir := t.TempDir()
	base := []string{"-data", file, "-label", "kind", "-hidden", "16"}
	straight := clitest.Run(t, nil, append(base, "-epochs", "4")...)
	require.Equal(t, 0, straight.Code, straight.Stderr)
	first := clitest.Run(t, nil, append(base, "-epochs", "2", "-save", dir)...)
	require.Equal(t, 0, first.Code, first.Stderr)
	// The 4-epoch schedule has another learning-rate horizon only if a
	// schedule is used; this example's rate is constant, so 2 + 2 epochs
	// are 4.
	second := clitest.Run(t, nil, append(base, "-epochs", "4", "-resume", dir, "-save", dir)...)
	require.Equal(t, 0, second.Code, second.Stderr)
	require.Contains(t, second.Stdout, "steps 27–52 of 52")
	line := func(s string) string {
		return strings.SplitN(accuracyRe.FindString(s)+strings.Split(s, "loss ")[len(strings.Split(s, "loss "))-1], ";", 2)[0]
	}
	require.Equal(t, line(straight.Stdout), line(second.Stdout))
}

// TestRefusals: bad input is refused with a message naming it.
func TestRefusals(t *testing.T) {
	file := writeCSV(t)
	bad := filepath.Join(t.TempDir(), "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("a,kind\n1,0\nx,1\n"), 0o644))
	cfg := filepath.Join(t.TempDir(), "accelerate.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("mixed_precision: fp8\nfp8_config:\n  marign: 1\n"), 0o644))
	clitest.Table(t, "csv", nil, []clitest.Case{
		{Name: "bad cell", Args: []string{"-data", bad, "-label", "kind"}, Code: 1, Says: bad + `:3: column 1 ("a"): "x" is not a number`},
		{Name: "no label column", Args: []string{"-data", file, "-label", "colour"}, Code: 1, Says: `no label column "colour"`},
		{Name: "missing file", Args: []string{"-data", "/no/such.csv"}, Code: 1, Says: "/no/such.csv"},
		{Name: "bad config key", Args: []string{"-data", file, "-label", "kind", "-config", cfg}, Code: 1, Says: cfg + `:3: fp8_config: unknown key "marign"`},
		{Name: "env and flag disagree", Env: []string{"ACCELERATE_FP8_FORMAT=E5M2"}, Args: []string{"-data", file, "-label", "kind", "-format", "E4M3"}, Code: 1,
			Says: "-format E4M3 and ACCELERATE_FP8_FORMAT=E5M2 disagree"},
		{Name: "resume nothing", Args: []string{"-data", file, "-label", "kind", "-resume", t.TempDir()}, Code: 1, Says: "no checkpoint-<step> directory"},
		{Name: "batch below ranks", Args: []string{"-data", file, "-label", "kind", "-batch", "2", "-dp", "3"}, Code: 1, Says: "the batch of 2 leaves ranks without rows"},
	}, nil)
}

// TestREADMEShowsThisProgram: the README's "Train on your own data"
// section holds this program verbatim, in at most 80 lines of code.
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## Train on your own data")
	require.True(t, ok, "README has no section \"Train on your own data\"")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	require.Equal(t, string(src), block, "the README's copy of examples/csv/main.go")
	code := 0
	for _, l := range strings.Split(string(src), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			code++
		}
	}
	require.LessOrEqual(t, code, 80)
}
