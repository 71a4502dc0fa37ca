// Package fixedbits checks that an example's run gives the same numbers
// on every machine: its tests train the example's default path for a
// few tens of steps and compare what the run reported (its JSON
// figures, timings left out) and the parameters it saved with hashes
// fixed in the source. CI runs them on the native kernels, the AVX2
// kernels, the pure-Go build, GOMAXPROCS=1 and linux/arm64 under qemu.
package fixedbits

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/internal/stfile"
)

// timing reports whether a JSON key holds a measurement of time (which
// no two runs share).
func timing(key string) bool {
	for _, s := range []string{"ms_per_", "per_s", "seconds"} {
		if strings.Contains(key, s) {
			return true
		}
	}
	return false
}

// dropTiming deletes the timing keys from v, in nested objects too.
func dropTiming(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if timing(k) {
				delete(v, k)
				continue
			}
			dropTiming(x)
		}
	case []any:
		for _, x := range v {
			dropTiming(x)
		}
	}
}

// Figures returns the last JSON object printed in out without its
// timings, re-encoded with sorted keys (float64s in their shortest
// exact form).
func Figures(out string) (string, error) {
	var m map[string]any
	if err := output.DecodeLast(out, &m); err != nil {
		return "", err
	}
	dropTiming(m)
	b, err := json.Marshal(m)
	return string(b), err
}

// Params hashes every tensor (name, dtype, shape and bytes; not the
// files' metadata) of every .safetensors file under dir, in name order.
func Params(dir string) (uint64, int, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".safetensors") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	sort.Strings(files)
	h := fnv.New64a()
	n := 0
	for _, path := range files {
		f, err := stfile.Read(path)
		if err != nil {
			return 0, 0, err
		}
		rel, _ := filepath.Rel(dir, path)
		for _, name := range f.Names() {
			ts := f.Tensors[name]
			fmt.Fprintf(h, "%s/%s %s %v\n", filepath.ToSlash(rel), name, ts.DType, ts.Shape)
			h.Write(ts.Data)
			n++
		}
	}
	if n == 0 {
		return 0, 0, fmt.Errorf("no tensor in a .safetensors file under %s", dir)
	}
	return h.Sum64(), n, nil
}

// Lines returns the lines of out that match keep, each with the matches
// of drop (timings) removed: the figures of an example that prints no
// JSON.
func Lines(out string, keep, drop *regexp.Regexp) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if keep.MatchString(l) {
			b.WriteString(drop.ReplaceAllString(l, ""))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// CheckJSON checks the figures of the last JSON object in out (see
// Figures) and the parameters saved under dir (see Check).
func CheckJSON(t *testing.T, out, dir, want string) {
	t.Helper()
	fig, err := Figures(out)
	if err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	Check(t, fig, dir, want)
}

// Check compares a run's figures (its reported numbers as text) and the
// parameters it saved under dir with want, the hash of both fixed in the
// caller's source; on a difference it prints what this machine gives.
func Check(t *testing.T, fig, dir, want string) {
	t.Helper()
	if strings.TrimSpace(fig) == "" {
		t.Fatal("no figures to check")
	}
	params, n, err := Params(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\n%016x", fig, params)
	if got := fmt.Sprintf("%016x", h.Sum64()); got != want {
		t.Errorf("the run's figures or its %d saved tensors differ from the fixed hash %s: this machine gives %s\nfigures: %s\nparameters: %016x", n, want, got, fig, params)
	}
}
