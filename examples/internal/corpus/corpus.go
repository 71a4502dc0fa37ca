// Package corpus is the examples' default training text: the Go sources
// of a fixed list of standard-library packages of the installed
// toolchain, or a file the user names.
package corpus

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"
)

// StdlibPackages is the default corpus: the non-test .go files of these
// packages of the installed Go toolchain, in this order, each package's
// files sorted by name.
var StdlibPackages = []string{
	"bufio", "bytes", "container/heap", "container/list", "container/ring", "errors",
	"io", "path", "sort", "strconv", "strings", "text/tabwriter", "unicode/utf8",
}

// goroot returns the toolchain's GOROOT.
func goroot() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			return r
		}
	}
	return runtime.GOROOT()
}

// Load reads file (UTF-8 text; errors name the flag -data), or the
// default standard-library corpus when file is empty, and returns the
// text and a description of its source.
func Load(file string) (string, string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("-data: %w", err)
		}
		if !utf8.Valid(b) {
			return "", "", fmt.Errorf("-data %s: not UTF-8 text", file)
		}
		return string(b), file, nil
	}
	root := filepath.Join(goroot(), "src")
	var sb strings.Builder
	for _, pkg := range StdlibPackages {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			return "", "", err
		}
		sort.Strings(files)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return "", "", fmt.Errorf("corpus: %w", err)
			}
			sb.Write(b)
			sb.WriteByte('\n')
		}
	}
	if sb.Len() == 0 {
		return "", "", fmt.Errorf("corpus: no Go sources under %s (pass -data FILE)", root)
	}
	return sb.String(), fmt.Sprintf("Go %d standard-library packages under %s", len(StdlibPackages), root), nil
}
