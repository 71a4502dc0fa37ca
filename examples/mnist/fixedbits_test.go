package main

import (
	"bytes"
	"testing"

	"github.com/octetml/octet/examples/internal/fixedbits"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
)

// TestFixedBits trains the default path (float32 and TE delayed-scaling
// FP8 side by side, AdamW with warmup and cosine decay, dropout-free MLP,
// evaluation on the test set) for 20 steps of a smaller model and
// checks every reported figure and the saved parameters against hashes
// computed once: the same on every machine and kernel (CI: native, AVX2,
// pure Go, GOMAXPROCS=1, arm64 under qemu).
func TestFixedBits(t *testing.T) {
	dir := t.TempDir()
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "both"}, Batch: 64, LR: 1e-3, Seed: 1, JSON: true, Save: dir},
		epochs: 1, hidden: []int{64, 32}, weightDecay: 0.01, limit: 20 * 64, testLimit: 1000}
	var out bytes.Buffer
	if err := run(cfg, &out); err != nil {
		t.Fatal(err)
	}
	fixedbits.CheckJSON(t, out.String(), dir, "7b3fbb2dd4753887")
}
