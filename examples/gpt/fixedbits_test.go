package main

import (
	"bytes"
	"testing"

	"github.com/octetml/octet/examples/internal/fixedbits"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
)

// TestFixedBits trains the default path (float32 and TE delayed-scaling
// FP8 side by side on the Go sources' characters, validation estimates,
// then a sample) for 20 iterations of a smaller model and checks every
// reported figure, the sample and the saved parameters against hashes
// computed once: the same on every machine and kernel (CI: native,
// AVX2, pure Go, GOMAXPROCS=1, arm64 under qemu).
func TestFixedBits(t *testing.T) {
	dir := t.TempDir()
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "both"}, Batch: 4, LR: 1e-3, Seed: 1, Unit: "iteration", JSON: true, Save: dir},
		layers: 2, heads: 2, embd: 32, block: 16, iters: 20, sample: 24, evalEvery: 10, evalBatches: 2}
	var out bytes.Buffer
	if err := run(cfg, &out); err != nil {
		t.Fatal(err)
	}
	fixedbits.CheckJSON(t, out.String(), dir, "e64eed30ece3896d")
}
