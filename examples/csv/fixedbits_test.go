package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/octetml/octet/examples/internal/fixedbits"
)

// TestFixedBits trains the default path (TE delayed-scaling FP8, 20
// epochs, evaluation on the held-out rows) on the Iris file and checks
// every reported figure and the saved parameters against a hash
// computed once: the same on every machine and kernel (CI: native,
// AVX2, pure Go, GOMAXPROCS=1, arm64 under qemu, where
// OCTET_TEST_EXEC_WRAPPER runs the program).
func TestFixedBits(t *testing.T) {
	iris, err := filepath.Abs("testdata/iris.csv")
	if err != nil {
		t.Fatal(err)
	}
	r := clitest.Run(t, nil, "-data", iris, "-label", "species", "-save", "ckpt")
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	fig := fixedbits.Lines(r.Stdout, regexp.MustCompile(`accuracy|loss`), regexp.MustCompile(`, [0-9.]+ ms/step`))
	fixedbits.Check(t, fig, filepath.Join(r.Dir, "ckpt"), "216ec0d018031763")
}
