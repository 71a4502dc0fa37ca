package fusecheck

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fusedOp matches a fused multiply-add in the compiler's -S listing of
// arm64 code, with the source position it came from.
var fusedOp = regexp.MustCompile(`\((/[^)]+\.go):(\d+)\)\s+(FN?M(?:ADD|SUB)[SD])\s`)

// exempt lists packages whose arithmetic is not a result: float64
// oracles that tests compare within a tolerance.
var exempt = []string{"internal/llamaref/"}

// TestNoFusedMultiplyAdd builds the module for linux/arm64 with the
// compiler's assembly listing and fails on every fused multiply-add on a
// line that does not say "fused:".
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module for arm64")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	statSources(t, root) // so that go test's cache sees every source file
	cmd := exec.Command("go", "build", "-gcflags=-S", "-o", os.DevNull, "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build for arm64: %v\n%s", err, tail(out))
	}
	sites := fusedSites(t, out, root)
	if len(sites) == 0 && !bytes.Contains(out, []byte("FMADD")) {
		t.Fatal("the listing shows no fused multiply-add at all, not even the intended ones: is -S output missing?")
	}
	for _, s := range sites {
		t.Errorf("%s: the arm64 compiler fuses a multiply and an add here (%s); round the product explicitly (float32(x*y) + z, float64(…)), or say why fusing changes no bit with a \"fused:\" comment\n\t%s", s.pos, s.op, s.src)
	}
}

type site struct{ pos, op, src string }

// statSources stats every .go file under root: go test caches a test's
// result with the files it opened or stat'ed, and this test's real input
// is every source file the build compiles.
func statSources(t *testing.T, root string) {
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fusedSites returns the fused multiply-adds in the listing out on lines
// of files under root, once per line, without the lines marked
// "fused:" and the exempt packages.
func fusedSites(t *testing.T, out []byte, root string) []site {
	seen := map[string]bool{}
	lines := map[string][]string{}
	var sites []site
	for _, m := range fusedOp.FindAllSubmatch(out, -1) {
		file, line, op := string(m[1]), string(m[2]), string(m[3])
		rel, err := filepath.Rel(root, file)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // the standard library, inlined
		}
		rel = filepath.ToSlash(rel)
		pos := rel + ":" + line
		if seen[pos] || isExempt(rel) {
			continue
		}
		seen[pos] = true
		if lines[file] == nil {
			lines[file] = readLines(t, file)
		}
		n, _ := strconv.Atoi(line)
		src := ""
		if n >= 1 && n <= len(lines[file]) {
			src = strings.TrimSpace(lines[file][n-1])
		}
		if strings.Contains(src, "fused:") {
			continue
		}
		sites = append(sites, site{pos, op, src})
	}
	return sites
}

func isExempt(rel string) bool {
	for _, p := range exempt {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}

func readLines(t *testing.T, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// TestFusedSitesParse: the parser finds a fused line, skips one marked
// "fused:", the standard library and exempt packages.
func TestFusedSitesParse(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nfunc f(a, b, c float32) float32 {\n\treturn a*b + c\n}\n\nfunc g(a, b, c float32) float32 { return a*b + c } // fused: on purpose\n"
	file := filepath.Join(dir, "p.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	listing := "\t0x0000 00000 (" + file + ":4)\tFMADDS\tF1, F2, F0, F0\n" +
		"\t0x0004 00004 (" + file + ":4)\tFMADDS\tF1, F2, F0, F0\n" +
		"\t0x0008 00008 (" + file + ":7)\tFMSUBD\tF1, F2, F0, F0\n" +
		"\t0x000c 00012 (/usr/local/go/src/math/x.go:9)\tFNMADDD\tF1, F2, F0, F0\n" +
		"\t0x0010 00016 (" + filepath.Join(dir, "internal/llamaref/r.go") + ":3)\tFMADDD\tF1, F2, F0, F0\n" +
		"\t0x0014 00020 (" + file + ":4)\tFMULS\tF1, F2, F0\n"
	got := fusedSites(t, []byte(listing), dir)
	if len(got) != 1 || got[0].pos != "p.go:4" || got[0].op != "FMADDS" || got[0].src != "return a*b + c" {
		t.Fatalf("got %+v, want one site p.go:4 FMADDS", got)
	}
}
