package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/precision"

	"github.com/octetml/octet/examples/internal/corpus"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// A CI-sized run on the Go-source corpus: the loss falls well below its
// starting value in all three precisions (bf16 within 5% of float32),
// the JSON summary is the last line, and the sample has the requested
// length.
func TestShortTraining(t *testing.T) {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "all", Backend: "te", FP8Format: "HYBRID", AORecipe: "tensorwise"}, Batch: 8, LR: 3e-3, Seed: 2, JSON: true, Plot: filepath.Join(t.TempDir(), "loss.png")}, layers: 1, heads: 2, embd: 32, block: 16, iters: 500, sample: 40, evalBatches: 5}
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	var s struct {
		Precision string  `json:"precision"`
		TrainLoss float64 `json:"train_loss"`
		ValLoss   float64 `json:"val_loss"`
		TokensPS  float64 `json:"tokens_per_s"`
		Params    int     `json:"params"`
		Runs      []struct {
			Precision string  `json:"precision"`
			ValLoss   float64 `json:"val_loss"`
		} `json:"runs"`
	}
	require.NoError(t, output.DecodeLast(out.String(), &s))
	require.Equal(t, "fp8", s.Precision)
	require.Len(t, s.Runs, 3)
	for _, r := range s.Runs {
		require.Less(t, r.ValLoss, 3.0, r.Precision) // from ln(vocab) ≈ 4.6 at the start
	}
	require.Equal(t, "bf16", s.Runs[1].Precision)
	require.InEpsilon(t, s.Runs[0].ValLoss, s.Runs[1].ValLoss, 0.05)
	require.Greater(t, s.TokensPS, 0.0)
	require.Greater(t, s.Params, 10000)
	_, err := os.Stat(cfg.Plot)
	require.NoError(t, err)
}

func TestDumpShowsLayerNormFusion(t *testing.T) {
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: "te", FP8Format: "HYBRID"}, Batch: 2, LR: 1e-3, Seed: 1}, layers: 2, heads: 2, embd: 32, block: 16, iters: 1, dump: true, evalBatches: 1}
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	dump := out.String()
	// Each pre-attention and pre-MLP LayerNorm writes FP8 straight into the
	// following linear: 2 per block.
	require.Equal(t, 4, strings.Count(dump, "= LayerNormQuantize"))
	require.Contains(t, dump, `"gpt.h.0.ln1/fp8"`)
	require.Contains(t, dump, `"gpt.h.1.ln2/fp8"`)
	// The LM head's vocabulary is not a multiple of 16: it stays float32.
	require.Contains(t, dump, "gpt.lm_head")
	require.Regexp(t, `gpt\.lm_head +\[\d+ 32\] +kept float32`, dump)
}

func TestCorpusAndFlags(t *testing.T) {
	text, src, err := corpus.Load("")
	require.NoError(t, err)
	require.Contains(t, src, "standard-library")
	require.Contains(t, text, "package strings")
	v := data.NewChars("hello, gopher")
	ids, err := v.Encode("gopher")
	require.NoError(t, err)
	back, err := v.Decode(ids)
	require.NoError(t, err)
	require.Equal(t, "gopher", back)
	_, _, err = corpus.Load("/nonexistent/file.txt")
	require.ErrorContains(t, err, "/nonexistent/file.txt")
	bad := filepath.Join(t.TempDir(), "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte{0xff, 0xfe, 0x00}, 0o644))
	_, _, err = corpus.Load(bad)
	require.ErrorContains(t, err, "UTF-8")
	for _, c := range []struct {
		mut  func(*config)
		says string
	}{
		{func(c *config) { c.Precision.MixedPrecision = "fp16" }, "-precision"},
		{func(c *config) { c.Precision.Backend, c.Precision.OptLevel = "msamp", "O3" }, "DeepSpeed"},
		{func(c *config) { c.heads = 3 }, "heads"},
	} {
		cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32", Backend: "te", FP8Format: "HYBRID"}, Batch: 2, LR: 1e-3}, layers: 1, heads: 2, embd: 32, block: 16, iters: 1, evalBatches: 1}
		c.mut(&cfg)
		err := run(cfg, &bytes.Buffer{})
		require.Error(t, err)
		require.Contains(t, err.Error(), c.says)
	}
}

// Stopping, checkpointing and resuming reproduces the uninterrupted run.
func TestSaveResume(t *testing.T) {
	for _, recipe := range []string{"te", "msamp"} {
		testSaveResume(t, recipe)
	}
}

func testSaveResume(t *testing.T, recipe string) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp8", Backend: recipe, FP8Format: "HYBRID", OptLevel: "O2"}, Batch: 4, LR: 3e-3, Seed: 2, JSON: true}, layers: 1, heads: 2, embd: 32, block: 16, iters: 30, evalBatches: 3}
	var straight bytes.Buffer
	require.NoError(t, run(base, &straight))
	dir := t.TempDir()
	half := base
	half.StopAfter, half.Save = 13, dir
	require.NoError(t, run(half, &bytes.Buffer{}))
	rest := base
	rest.Resume = dir
	var resumed bytes.Buffer
	require.NoError(t, run(rest, &resumed))
	last := func(b *bytes.Buffer) map[string]any {
		var m map[string]any
		require.NoError(t, output.DecodeLast(b.String(), &m))
		return m
	}
	require.Equal(t, last(&straight)["val_loss"], last(&resumed)["val_loss"])
	require.Equal(t, last(&straight)["train_loss"], last(&resumed)["train_loss"])
}

// TestBadNumbersAreRefusedBeforeWork: values that used to print NaN
// losses, nothing at all, or crash are refused naming the flag.
func TestBadNumbersAreRefusedBeforeWork(t *testing.T) {
	base := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32", Backend: "te", FP8Format: "HYBRID"}, Batch: 2, LR: 1e-3}, layers: 1, heads: 2, embd: 32, block: 16, iters: 1, evalBatches: 1, data: "/nonexistent"}
	for _, c := range []struct {
		mut  func(*config)
		says string
	}{
		{func(c *config) { c.iters = 0 }, "-iters 0"},
		{func(c *config) { c.evalBatches = 0 }, "-eval-batches 0"},
		{func(c *config) { c.sample = -5 }, "-sample -5"},
		{func(c *config) { c.evalEvery = -1 }, "-eval-every -1"},
		{func(c *config) { c.LR = math.Inf(1) }, "-lr +Inf"},
		{func(c *config) { c.dropout = 1 }, "-dropout 1"},
		{func(c *config) { c.Batch = -3 }, "-batch -3"},
		{func(c *config) { c.embd, c.layers, c.block = 1<<16, 64, 4096 }, "GiB are available"},
		{func(c *config) { c.Plot = "/no-such-dir/loss.png" }, "-plot /no-such-dir/loss.png: directory"},
		{func(c *config) { c.Resume = filepath.Join(os.TempDir(), "no-such-octet-ckpt") }, "gpt-fp32.safetensors"},
	} {
		cfg := base
		c.mut(&cfg)
		err := run(cfg, &bytes.Buffer{})
		require.Error(t, err)
		require.Contains(t, err.Error(), c.says)
		require.NotContains(t, err.Error(), "/nonexistent", "refused before reading data")
	}
}

// TestResumeRefusesAnotherVocabulary: a checkpoint trained on one corpus
// does not resume on another whose vocabulary has as many characters.
func TestResumeRefusesAnotherVocabulary(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	require.NoError(t, os.WriteFile(a, []byte(strings.Repeat("abcdefgh ", 400)), 0o644))
	require.NoError(t, os.WriteFile(b, []byte(strings.Repeat("abcdefgx ", 400)), 0o644))
	cfg := config{CommandFlags: train.CommandFlags{Precision: precision.Config{MixedPrecision: "fp32", Backend: "te", FP8Format: "HYBRID"}, Batch: 2, LR: 1e-3, Seed: 1, JSON: true}, layers: 1, heads: 2, embd: 32, block: 16, iters: 4, evalBatches: 1}
	save := cfg
	save.data, save.Save, save.StopAfter = a, filepath.Join(dir, "ckpt"), 2
	require.NoError(t, run(save, &bytes.Buffer{}))
	resume := cfg
	resume.data, resume.Resume = b, save.Save
	err := run(resume, &bytes.Buffer{})
	require.ErrorContains(t, err, "model")
	resume.data = a
	require.NoError(t, run(resume, &bytes.Buffer{}), "the same corpus resumes")
}
