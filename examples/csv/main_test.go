package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"
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

// writeLinearCSV writes 12,000 rows of five features and a linear target
// with noise of standard deviation 0.5.
func writeLinearCSV(t *testing.T) string {
	rng := rand.New(rand.NewPCG(3, 4))
	var sb strings.Builder
	sb.WriteString("a,b,c,d,e,y\n")
	for range 12000 {
		x := make([]float64, 5)
		for j := range x {
			x[j] = rng.NormFloat64()
		}
		y := 1.5*x[0] - 2*x[1] + 0.5*x[2] + 3 + 0.5*rng.NormFloat64()
		fmt.Fprintf(&sb, "%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", x[0], x[1], x[2], x[3], x[4], y)
	}
	p := filepath.Join(t.TempDir(), "linear.csv")
	require.NoError(t, os.WriteFile(p, []byte(sb.String()), 0o644))
	return p
}

// olsRMSE fits least squares in float64 to the program's training split
// of file and returns its RMSE on the held-out split.
func olsRMSE(t *testing.T, file, label string) float64 {
	tab, err := data.ReadCSV(file, data.CSVConfig{Label: label, Task: data.Regression})
	require.NoError(t, err)
	tr, te, err := tab.Split(0.2, 1)
	require.NoError(t, err)
	f := len(tab.Features)
	a := mat.NewDense(tr.Len(), f+1, nil)
	b := mat.NewVecDense(tr.Len(), nil)
	for r := range tr.Len() {
		for j := range f {
			a.Set(r, j, float64(tr.X[r*f+j]))
		}
		a.Set(r, f, 1)
		b.SetVec(r, float64(tr.T[r]))
	}
	var w mat.VecDense
	require.NoError(t, w.SolveVec(a, b))
	var sse float64
	for r := range te.Len() {
		p := w.AtVec(f)
		for j := range f {
			p += w.AtVec(j) * float64(te.X[r*f+j])
		}
		sse += (p - float64(te.T[r])) * (p - float64(te.T[r]))
	}
	return math.Sqrt(sse / float64(te.Len()))
}

var rmseRe = regexp.MustCompile(`held-out RMSE ([0-9.]+), R² ([0-9.]+) \(2400 rows\)`)

// TestRegression: a float label makes a regression (found, or asked for
// with -task), whose held-out RMSE is within 5% of a float64
// least-squares fit's in float32, bf16 and FP8 (10% with NVFP4 and
// MS-AMP), also over ranks.
func TestRegression(t *testing.T) {
	file := writeLinearCSV(t)
	ols := olsRMSE(t, file, "y")
	for _, args := range [][]string{
		{"-precision", "fp32"},
		{"-precision", "bf16"},
		{},
		{"-task", "regression", "-recipe", "block"},
		{"-recipe", "ao", "-fsdp", "3"},
		{"-precision", "fp32", "-dp", "3", "-batch", "127"},
		{"-recipe", "nvfp4"},
		{"-recipe", "msamp", "-dp", "2"},
	} {
		r := clitest.Run(t, nil, append([]string{"-data", file, "-label", "y", "-epochs", "20", "-hidden", "16", "-lr", "1e-2", "-batch", "128"}, args...)...)
		require.Equal(t, 0, r.Code, "%v: %s", args, r.Stderr)
		m := rmseRe.FindStringSubmatch(r.Stdout)
		require.NotNil(t, m, "%v: %s", args, r.Stdout)
		rmse, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		bound := 1.05
		if len(args) > 1 && (args[1] == "nvfp4" || args[1] == "msamp") {
			bound = 1.10 // 4-bit weights; MS-AMP's FP8 optimizer states
		}
		require.Less(t, rmse, bound*ols, "%v: RMSE %v against least squares' %v", args, rmse, ols)
		r2, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		require.Greater(t, r2, 0.95)
	}
	// Asked for a classification, the float label is refused, naming it.
	r := clitest.Run(t, nil, "-data", file, "-label", "y", "-task", "classification")
	require.Equal(t, 1, r.Code)
	require.Contains(t, r.Stderr, `is not an integer (a regression target?`)
}

// TestShippedData: the README's commands run on the data shipped beside
// the program (Iris, its species as classes 0–2).
func TestShippedData(t *testing.T) {
	iris, err := filepath.Abs("testdata/iris.csv")
	require.NoError(t, err)
	cfg, err := filepath.Abs("testdata/accelerate.yaml")
	require.NoError(t, err)
	r := clitest.Run(t, nil, "-data", iris, "-label", "species", "-epochs", "40")
	require.Equal(t, 0, r.Code, r.Stderr)
	m := regexp.MustCompile(`held-out accuracy ([0-9.]+)% \(30 rows\)`).FindStringSubmatch(r.Stdout)
	require.NotNil(t, m, r.Stdout)
	acc, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, acc, 90.0, r.Stdout)
	r = clitest.Run(t, []string{"ACCELERATE_FP8_MARGIN=1"}, "-data", iris, "-label", "petal_width", "-config", cfg, "-epochs", "5")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "held-out RMSE")
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
		{Name: "no file", Args: []string{"-label", "kind"}, Code: 1, Says: "give -data FILE"},
		{Name: "bad config key", Args: []string{"-data", file, "-label", "kind", "-config", cfg}, Code: 1, Says: cfg + `:3: fp8_config: unknown key "marign"`},
		{Name: "the two variable families disagree", Env: []string{"OCTET_FP8_FORMAT=E5M2", "ACCELERATE_FP8_FORMAT=E4M3"}, Args: []string{"-data", file, "-label", "kind"}, Code: 1,
			Says: "OCTET_FP8_FORMAT=E5M2 and ACCELERATE_FP8_FORMAT=E4M3 disagree"},
		{Name: "resume nothing", Args: []string{"-data", file, "-label", "kind", "-resume", t.TempDir()}, Code: 1, Says: "no checkpoint-<step> directory"},
		{Name: "batch below ranks", Args: []string{"-data", file, "-label", "kind", "-batch", "2", "-dp", "3"}, Code: 1, Says: "the batch of 2 leaves ranks without rows"},
	}, nil)
}

// TestREADMEShowsThisProgram: docs/training.md's "Train on your own
// data" section holds this program verbatim, in at most 90 lines of code
// (classification and regression).
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../docs/training.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## Train on your own data")
	require.True(t, ok, "docs/training.md has no section \"Train on your own data\"")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok)
	require.Equal(t, string(src), block, "docs/training.md's copy of examples/csv/main.go")
	code := 0
	for _, l := range strings.Split(string(src), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			code++
		}
	}
	require.LessOrEqual(t, code, 90)
}
