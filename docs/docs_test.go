// Package docs holds Octet's documentation pages; its test runs the
// commands they and the README show.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octetml/octet/recipe"
)

// command is one `go run` command a page shows.
type command struct {
	page string
	env  []string // VAR=value before it
	pkg  string   // ./examples/csv
	args []string
}

var (
	fenced = regexp.MustCompile("(?s)```sh\n(.*?)```")
	inline = regexp.MustCompile("`((?:[A-Z0-9_]+=\\S+ )*go run [^`]+)`")
	envVar = regexp.MustCompile(`^[A-Z0-9_]+=`)
	// A placeholder: FILE, DIR, N, IN.txt, CONFIG.yaml; or a choice
	// ("a|b", "[-flag]").
	placeholder = regexp.MustCompile(`^[A-Z]+(\.[a-z]+)?$|[|\[\]]|\.\.\.`)
	values      = []string{"E4M3", "E5M2", "HYBRID", "O1", "O2"}
)

// commands extracts the `go run` commands of a page: the lines of its sh
// blocks and its inline code, comments dropped.
func commands(t *testing.T, page string) []command {
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var lines []string
	for _, m := range fenced.FindAllStringSubmatch(text, -1) {
		lines = append(lines, strings.Split(m[1], "\n")...)
	}
	for _, m := range inline.FindAllStringSubmatch(text, -1) {
		lines = append(lines, m[1])
	}
	var out []command
	for _, l := range lines {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		f := strings.Fields(l)
		c := command{page: page}
		for len(f) > 0 && envVar.MatchString(f[0]) {
			c.env, f = append(c.env, f[0]), f[1:]
		}
		if len(f) < 3 || f[0] != "go" || f[1] != "run" {
			continue
		}
		c.pkg, c.args = f[2], f[3:]
		out = append(out, c)
	}
	return out
}

// runnable reports whether c can run as written: no placeholders.
func (c command) runnable() bool {
	for _, a := range c.args {
		if placeholder.MatchString(a) && !slices.Contains(values, a) {
			return false
		}
	}
	return true
}

// short are the flags that make a long program's run short (appended:
// the last value of a flag wins), by package.
var short = map[string][]string{
	"./examples/mnist":  {"-limit", "256", "-epochs", "1", "-hidden", "32,32"},
	"./examples/gpt":    {"-iters", "2", "-eval-batches", "1", "-sample", "8"},
	"./examples/llama":  {"-iters", "2", "-eval-batches", "1", "-sample", "8", "-layers", "1", "-hidden", "32", "-heads", "2", "-kv-heads", "1", "-intermediate", "64", "-block", "16", "-batch", "2"},
	"./examples/recipe": {"-limit", "512"},
	"./bench":           {"-reps", "1", "-no-gpt", "-gpt2=false", "-llama=false"},
}

// TestCommandsRunAsWritten runs every `go run` command of README.md and
// docs/*.md that has no placeholder, as written (long programs with
// flags that shorten them), from a directory where the repository's
// paths resolve, in each page's order (a -resume follows its -save): each
// must exit 0.
func TestCommandsRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob("*.md")
	pages = append([]string{"../README.md"}, pages...)
	bin := t.TempDir()
	built := map[string]string{}
	ran := 0
	for _, page := range pages {
		dir := t.TempDir()
		for _, name := range []string{"examples", "bench", "cmd"} {
			if err := os.Symlink(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range commands(t, page) {
			if !c.runnable() || strings.Contains(strings.Join(c.args, " "), "mpi") {
				continue
			}
			exe, ok := built[c.pkg]
			if !ok {
				exe = filepath.Join(bin, strings.ReplaceAll(strings.Trim(c.pkg, "./"), "/", "_"))
				build := exec.Command("go", "build", "-o", exe, c.pkg)
				build.Dir = root
				if out, err := build.CombinedOutput(); err != nil {
					t.Fatalf("%s: go build %s: %v\n%s", page, c.pkg, err, out)
				}
				built[c.pkg] = exe
			}
			args := append(append([]string(nil), c.args...), short[c.pkg]...)
			cmd := exec.Command(exe, args...)
			cmd.Dir = dir
			cmd.Env = append(cleanEnv(), c.env...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s: go run %s %s (as run: %s): %v\n%s", page, c.pkg, strings.Join(c.args, " "), strings.Join(args, " "), err, tail(out))
				continue
			}
			ran++
			t.Logf("%s: go run %s %s: %.1fs", page, c.pkg, strings.Join(c.args, " "), time.Since(start).Seconds())
		}
	}
	if ran < 10 {
		t.Errorf("only %d commands ran", ran)
	}
}

// cleanEnv is the test's environment without Octet's and Accelerate's
// variables, which a page's command sets itself.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OCTET_") && !strings.HasPrefix(kv, "ACCELERATE_") {
			out = append(out, kv)
		}
	}
	return out
}

func tail(b []byte) string {
	s := string(b)
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// TestCommandExtraction: the parser finds commands in both forms, with
// their variables, and knows a placeholder from a value.
func TestCommandExtraction(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.md")
	body := "Run `go run ./examples/gpt -profile` or\n`go run ./cmd/octet tokenize\n[-encoding r50k_base] IN.txt OUT.bin`.\n\n```sh\nX_1=2 go run ./examples/csv -format E4M3 # note\ngo test ./...\n```\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := commands(t, p)
	if len(cs) != 3 {
		t.Fatalf("%d commands: %+v", len(cs), cs)
	}
	if c := cs[0]; c.pkg != "./examples/csv" || !slices.Equal(c.env, []string{"X_1=2"}) || !slices.Equal(c.args, []string{"-format", "E4M3"}) || !c.runnable() {
		t.Errorf("sh line: %+v", c)
	}
	if c := cs[1]; c.pkg != "./examples/gpt" || !c.runnable() {
		t.Errorf("inline: %+v", c)
	}
	if c := cs[2]; c.pkg != "./cmd/octet" || c.runnable() {
		t.Errorf("placeholders: %+v", c)
	}
}

// TestREADMEProgram builds the README's FP8 training program, as a user
// copying it would, and runs it: it trains to a held-out accuracy above
// 90% and prints its conversion report.
func TestREADMEProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and trains")
	}
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## An FP8 training program")
	if !ok {
		t.Fatal(`README.md has no section "An FP8 training program"`)
	}
	_, src, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("no Go program in the section")
	}
	src, _, _ = strings.Cut(src, "```\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "program")
	build := exec.Command("go", "build", "-o", exe, filepath.Join(dir, "main.go"))
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(exe)
	run.Dir = dir
	run.Env = cleanEnv()
	out, err := run.Output()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`te/HYBRID: held-out accuracy ([0-9.]+)%`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("output:\n%s", out)
	}
	if acc, err := strconv.ParseFloat(m[1], 64); err != nil || acc < 90 {
		t.Fatalf("held-out accuracy %s%%, want above 90%%:\n%s", m[1], out)
	}
	if !strings.Contains(string(out), "mlp.fc2  [128 128]  FP8 fprop+dgrad+wgrad") {
		t.Errorf("no conversion report:\n%s", out)
	}
}

// TestPagesAndLinks: the README stays within 300 lines and links every
// page here; every relative link of the README and the pages reaches a
// file.
func TestPagesAndLinks(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 300 {
		t.Errorf("README.md has %d lines, want at most 300 (the rest belongs in docs/)", n)
	}
	pages, _ := filepath.Glob("*.md")
	for _, p := range pages {
		if !strings.Contains(string(readme), "](docs/"+p+")") {
			t.Errorf("README.md does not link docs/%s", p)
		}
	}
	link := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
	for _, p := range append([]string{"../README.md"}, pages...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), m[1])); err != nil {
				t.Errorf("%s links %s: %v", p, m[1], err)
			}
		}
	}
}

// TestRecipeMethodCount: docs/recipes.md says how many methods a recipe
// of one's own writes; recipe.Recipe has that many.
func TestRecipeMethodCount(t *testing.T) {
	b, err := os.ReadFile("recipes.md")
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	n := reflect.TypeOf((*recipe.Recipe)(nil)).Elem().NumMethod()
	if n >= len(words) || !strings.Contains(string(b), "write the "+words[n]+" methods") {
		t.Fatalf("recipe.Recipe has %d methods; docs/recipes.md does not say \"write the %s methods\"", n, words[min(n, len(words)-1)])
	}
}

// TestLayoutNamesEveryPackage: docs/contributing.md's Layout names every
// package directory of the module (examples/ as one), so it cannot go
// stale as packages come and go.
func TestLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("contributing.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Layout")
	if i < 0 {
		t.Fatal("contributing.md has no Layout section")
	}
	layout := doc[i:]
	if j := strings.Index(layout[1:], "\n## "); j >= 0 {
		layout = layout[:j+1]
	}
	var missing []string
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel != "." && strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", rel == "docs",
				strings.HasPrefix(rel, "examples/"):
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // a module of its own (a generator)
			}
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "." || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if !strings.Contains(layout, "`"+dir+"`") && !strings.Contains(layout, "`"+dir+"/`") && !slices.Contains(missing, dir) {
			missing = append(missing, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("contributing.md's Layout does not name %v", missing)
	}
}
