package main

import (
	"bytes"
	"flag"
	"testing"

	"github.com/octetml/octet/examples/internal/fixedbits"
)

// TestFixedBits trains the default path (float32 and TE delayed-scaling
// FP8 side by side on the Go sources' GPT-2 tokens, validation
// estimates, then a sample) for 20 iterations of a narrow model and
// checks every reported figure, the sample and the saved parameters
// against hashes computed once: the same on every machine and kernel
// (CI: native, AVX2, pure Go, GOMAXPROCS=1, arm64 under qemu).
func TestFixedBits(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parse(flag.NewFlagSet("llama", flag.ContinueOnError), []string{"-json", "-save", dir, "-iters", "20",
		"-layers", "2", "-hidden", "16", "-intermediate", "32", "-heads", "2", "-kv-heads", "1", "-block", "16", "-batch", "1",
		"-eval-every", "10", "-eval-batches", "1", "-sample", "8"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(cfg, &out); err != nil {
		t.Fatal(err)
	}
	fixedbits.CheckJSON(t, out.String(), dir, "2e1702caee233827")
}
