package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/internal/stfile"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/recipe"
)

// exportLlama writes a random Llama (widths with ragged 128×128 tiles)
// as a Hugging Face directory and returns it, its model and store.
func exportLlama(t *testing.T) (string, *nn.Llama, *graph.Store) {
	cfg := nn.LlamaConfig{HiddenSize: 160, IntermediateSize: 288, NumHiddenLayers: 1, NumAttentionHeads: 5, NumKeyValueHeads: 5,
		VocabSize: 64, MaxPositionEmbeddings: 16}
	b := nn.NewBuilder(graph.New())
	m, err := nn.NewLlama(b, cfg)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 3))
	dir := t.TempDir()
	require.NoError(t, hf.SaveLlama(dir, m, store))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644))
	return dir, m, store
}

// TestExportMatchesQuantize: octet export's fp8-block codes and scales
// are octet quantize's (-recipe fp8-block -block-dim 2) on the master
// weights, byte for byte, and the directory is hf.ExportLlama's; the
// tokenizer is copied.
func TestExportMatchesQuantize(t *testing.T) {
	in, m, store := exportLlama(t)
	out, q := t.TempDir(), filepath.Join(t.TempDir(), "q.safetensors")
	var so, se bytes.Buffer
	require.NoError(t, run([]string{"export", "-format", "fp8-block", in, out}, &so, &se))
	require.Contains(t, so.String(), "7 linear weight(s) quantized; kept in high precision: lm_head")
	require.NoError(t, run([]string{"quantize", "-recipe", "fp8-block", "-block-dim", "2", filepath.Join(in, hf.WeightsFile), q}, &so, &se))
	got, err := stfile.Read(filepath.Join(out, hf.WeightsFile))
	require.NoError(t, err)
	ref, err := stfile.Read(q)
	require.NoError(t, err)
	for _, name := range got.Names() {
		if !strings.HasSuffix(name, "_proj.weight") {
			continue
		}
		mod := strings.TrimSuffix(name, ".weight")
		require.Equal(t, ref.Tensors[name+".data"].Data, got.Tensors[name].Data, name)
		require.Equal(t, ref.Tensors[name+".scale_inv"].Data, got.Tensors[mod+".weight_scale_inv"].Data, name)
	}
	direct := t.TempDir()
	require.NoError(t, hf.ExportLlama(direct, m, store, hf.Export{Format: hf.FP8Block}))
	for _, f := range []string{hf.WeightsFile, hf.ConfigFile} {
		a, _ := os.ReadFile(filepath.Join(out, f))
		b, _ := os.ReadFile(filepath.Join(direct, f))
		require.Equal(t, b, a, f)
	}
	_, err = os.Stat(filepath.Join(out, "tokenizer.json"))
	require.NoError(t, err)
	so.Reset()
	require.NoError(t, run([]string{"inspect", filepath.Join(out, hf.WeightsFile)}, &so, &se))
	require.Contains(t, so.String(), "model.layers.0.self_attn.q_proj.weight")
	require.Contains(t, so.String(), "F8_E4M3")
	// Export of the export (FP8 in, FP8 out) gives the same files.
	again := t.TempDir()
	require.NoError(t, run([]string{"export", "-format", "fp8-block", out, again}, &so, &se))
	for _, f := range []string{hf.WeightsFile, hf.ConfigFile} {
		a, _ := os.ReadFile(filepath.Join(out, f))
		b, _ := os.ReadFile(filepath.Join(again, f))
		require.Equal(t, a, b, f)
	}
}

// TestExportMatchesQuantizeEveryFormat: the other layouts' codes and
// scales are octet quantize's too (mxfp8; current for fp8-tensor; nvfp4
// -2d, each 16×16 tile's scale repeated over its rows).
func TestExportMatchesQuantizeEveryFormat(t *testing.T) {
	in, _, _ := exportLlama(t)
	var so, se bytes.Buffer
	name := "model.layers.0.mlp.down_proj.weight"
	mod := strings.TrimSuffix(name, ".weight")
	for _, c := range []struct {
		format string
		recipe []string
		pairs  [][2]string // quantize suffix, export tensor suffix
	}{
		{"mxfp8", []string{"-recipe", "mxfp8"}, [][2]string{{".data", ".weight"}, {".scale", ".weight_scale"}}},
		{"fp8-tensor", []string{"-recipe", "current"}, [][2]string{{".data", ".weight"}, {".scale_inv", ".weight_scale"}}},
		{"nvfp4", []string{"-recipe", "nvfp4", "-2d"}, [][2]string{{".data", ".weight"}}},
	} {
		out, q := t.TempDir(), filepath.Join(t.TempDir(), "q.safetensors")
		require.NoError(t, run([]string{"export", "-format", c.format, in, out}, &so, &se))
		require.NoError(t, run(append(append([]string{"quantize"}, c.recipe...), filepath.Join(in, hf.WeightsFile), q), &so, &se))
		got, err := stfile.Read(filepath.Join(out, hf.WeightsFile))
		require.NoError(t, err)
		ref, err := stfile.Read(q)
		require.NoError(t, err)
		for _, p := range c.pairs {
			require.Equal(t, ref.Tensors[name+p[0]].Data, got.Tensors[mod+p[1]].Data, "%s %s", c.format, p[1])
		}
		if c.format == "nvfp4" {
			tiles, rows := ref.Tensors[name+".block_scale"], got.Tensors[mod+".weight_scale"]
			nb := rows.Shape[1]
			for r := 0; r < rows.Shape[0]; r++ {
				require.Equal(t, tiles.Data[(r/16)*nb:(r/16+1)*nb], rows.Data[r*nb:(r+1)*nb], "row %d", r)
			}
		}
	}
}

// TestExportCheckpoint: from an Octet checkpoint, the layers holding FP8
// scaling state are quantized and the others kept; bad command lines
// are refused naming the flag.
func TestExportCheckpoint(t *testing.T) {
	in, _, store := exportLlama(t)
	te := recipe.TE{AmaxHistoryLen: 2}
	for _, l := range []string{"model.layers.0.self_attn.qkv_proj", "model.layers.0.mlp.down_proj"} {
		store.SetState(fp8.LayerStateKey(l), &fp8.LayerState{FQN: l, Backend: fp8.BackendTE, Input: te.NewMeta(false), Weight: te.NewMeta(false), GradOutput: te.NewMeta(true)})
	}
	ck := filepath.Join(t.TempDir(), "run.safetensors")
	require.NoError(t, checkpoint.Save(ck, &checkpoint.State{Store: store, Step: 5}))
	out := t.TempDir()
	var so, se bytes.Buffer
	require.NoError(t, run([]string{"export", "-format", "fp8-tensor", "-config", filepath.Join(in, hf.ConfigFile), ck, out}, &so, &se))
	require.Contains(t, so.String(), "2 layers trained in FP8")
	require.Contains(t, so.String(), "4 linear weight(s) quantized")
	f, err := stfile.Read(filepath.Join(out, hf.WeightsFile))
	require.NoError(t, err)
	require.Equal(t, "F8_E4M3", f.Tensors["model.layers.0.self_attn.k_proj.weight"].DType)
	require.Equal(t, "F32", f.Tensors["model.layers.0.mlp.up_proj.weight"].DType)

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, c := range []struct {
		args  []string
		says  string
		usage bool
	}{
		{[]string{"export", in}, "got 1 argument", true},
		{[]string{"export", "-format", "int4", in, out}, `-format "int4": want one of f32, bf16, fp8-block`, true},
		{[]string{"export", "-format", "mxfp8", "-fp32-scales", in, out}, "-fp32-scales applies to -format fp8-block", true},
		{[]string{"export", "-shard-mb", "-1", in, out}, "-shard-mb -1", true},
		{[]string{"export", "-config", in, in, out}, "-config is for an Octet checkpoint", true},
		{[]string{"export", ck, out}, "wants -config", true},
		{[]string{"export", in, file}, "is a file", true},
		{[]string{"export", "-keep", "model.layers.0.mlp", in, out}, `Keep names "model.layers.0.mlp"`, false},
		{[]string{"export", "-config", in, filepath.Join(in, hf.WeightsFile), out}, "not an Octet checkpoint", false},
		{[]string{"export", "-config", file, ck, out}, "-config", false},
		{[]string{"export", filepath.Join(in, "missing"), out}, "missing", false},
	} {
		err := run(c.args, &so, &se)
		require.Error(t, err, "%v", c.args)
		require.Contains(t, err.Error(), c.says, "%v", c.args)
		_, isUsage := err.(usageError)
		require.Equal(t, c.usage, isUsage, "%v: %v", c.args, err)
	}
}
