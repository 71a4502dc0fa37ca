package hf_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/nn"
)

// newLlama builds a Llama and initialises its parameters.
func newLlama(t *testing.T, cfg nn.LlamaConfig, seed uint64) (*nn.Llama, *nn.Builder, *graph.Store) {
	t.Helper()
	b := nn.NewBuilder(graph.New())
	m, err := nn.NewLlama(b, cfg)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, seed))
	return m, b, store
}

// TestLlamaHFRoundTrip: export then import gives every parameter bit for
// bit, the config back, and a second export byte-identical files, with
// tied and untied embeddings.
func TestLlamaHFRoundTrip(t *testing.T) {
	for _, tied := range []bool{false, true} {
		dir := t.TempDir()
		m, b, store := newLlama(t, tinyLlama(tied), 3)
		require.NoError(t, hf.SaveLlama(dir, m, store))
		cfg, err := hf.ReadLlamaConfig(dir)
		require.NoError(t, err)
		want := tinyLlama(tied)
		want.InitializerRange, want.ModelType = 0.02, "llama"
		require.Equal(t, want, cfg)
		m2, b2, _ := newLlama(t, cfg, 99)
		store2 := graph.NewStore()
		require.NoError(t, hf.LoadLlama(dir, m2, store2))
		for i, p := range b.Params() {
			require.Equal(t, p.Name(), b2.Params()[i].Name())
			require.Equal(t, bitsOf(store.Float32(p.Name())), bitsOf(store2.Float32(p.Name())), p.Name())
		}
		dir2 := t.TempDir()
		require.NoError(t, hf.SaveLlama(dir2, m2, store2))
		for _, f := range []string{hf.ConfigFile, hf.WeightsFile} {
			a, err := os.ReadFile(filepath.Join(dir, f))
			require.NoError(t, err)
			c, err := os.ReadFile(filepath.Join(dir2, f))
			require.NoError(t, err)
			require.Equal(t, a, c, f)
		}
		st := readST(t, filepath.Join(dir, hf.WeightsFile))
		_, hasHead := st.Tensor("lm_head.weight")
		require.Equal(t, !tied, hasHead, "lm_head.weight only when untied")
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

func readST(t *testing.T, path string) safetensors.SafeTensors {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := safetensors.Deserialize(data)
	require.NoError(t, err)
	return st
}

// writeST writes tensors (name → dtype, shape, raw little-endian data).
func writeST(t *testing.T, path string, tensors map[string]safetensors.TensorView) {
	data, err := safetensors.Serialize(tensors, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// TestLlamaHFLoadsBF16AndF16: bfloat16 and float16 tensors load exactly.
func TestLlamaHFLoadsBF16AndF16(t *testing.T) {
	dir := t.TempDir()
	m, _, store := newLlama(t, tinyLlama(true), 5)
	require.NoError(t, hf.SaveLlama(dir, m, store))
	path := filepath.Join(dir, hf.WeightsFile)
	st := readST(t, path)
	views := map[string]safetensors.TensorView{}
	for i, nt := range st.Tensors() {
		v := nt.TensorView
		f32 := v.Data()
		n := len(f32) / 4
		raw := make([]byte, 2*n)
		for j := 0; j < n; j++ {
			bits := binary.LittleEndian.Uint32(f32[4*j:])
			if i%2 == 0 {
				binary.LittleEndian.PutUint16(raw[2*j:], uint16(bits>>16)) // bf16: truncated, so exact in both
			} else {
				binary.LittleEndian.PutUint16(raw[2*j:], 0x3C00+uint16(j%7)) // f16: 1 + j%7 ulps
			}
		}
		dt := safetensors.BF16
		if i%2 == 1 {
			dt = safetensors.F16
		}
		nv, err := safetensors.NewTensorView(dt, v.Shape(), raw)
		require.NoError(t, err)
		views[nt.Name] = nv
	}
	writeST(t, path, views)
	store2 := graph.NewStore()
	require.NoError(t, hf.LoadLlama(dir, m, store2))
	for i, nt := range st.Tensors() {
		got := store2.Float32(nt.Name)
		f32 := nt.TensorView.Data()
		for j, v := range got {
			var want float32
			if i%2 == 0 {
				want = math.Float32frombits(binary.LittleEndian.Uint32(f32[4*j:]) &^ 0xFFFF)
			} else {
				want = 1 + float32(j%7)/1024
			}
			require.Equal(t, want, v, "%s[%d]", nt.Name, j)
		}
	}
}

// TestLlamaHFRefusals: hostile config.json and model.safetensors files
// are refused before anything is stored, naming the key or tensor.
func TestLlamaHFRefusals(t *testing.T) {
	good := t.TempDir()
	m, _, store := newLlama(t, tinyLlama(false), 5)
	require.NoError(t, hf.SaveLlama(good, m, store))
	conf, err := os.ReadFile(filepath.Join(good, hf.ConfigFile))
	require.NoError(t, err)
	for _, c := range []struct{ from, to, want string }{
		{`"hidden_size": 32`, `"hidden_size": -32`, "hidden_size"},
		{`"hidden_size": 32,`, ``, `key "hidden_size" is missing`},
		{`"hidden_size": 32`, `"hidden_size": "big"`, `key "hidden_size"`},
		{`"num_attention_heads": 4`, `"num_attention_heads": 3`, "num_attention_heads"},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 3`, "num_key_value_heads"},
		{`"rope_scaling": null`, `"rope_scaling": {"type": "linear", "factor": 2}`, "rope_scaling"},
		{`"hidden_act": "silu"`, `"hidden_act": "gelu"`, "hidden_act"},
		{`"vocab_size": 64`, `"vocab_size": 0`, "vocab_size"},
		{`"head_dim": 8`, `"head_dim": 7`, "head_dim"},
		{`"head_dim": 8`, `"head_dim": -8`, "head_dim"},
		{`"model_type": "llama"`, `"model_type": "deepseek_v3"`, "model_type"},
	} {
		dir := t.TempDir()
		edited := strings.Replace(string(conf), c.from, c.to, 1)
		require.NotEqual(t, string(conf), edited, c.from)
		require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), []byte(edited), 0o644))
		_, err := hf.ReadLlamaConfig(dir)
		require.Error(t, err, c.want)
		require.True(t, errors.Is(err, hf.ErrCheckpoint), "%v", err)
		require.Contains(t, err.Error(), c.want)
		require.Contains(t, err.Error(), hf.ConfigFile)
	}
	_, err = hf.ReadLlamaConfig(t.TempDir())
	require.ErrorIs(t, err, hf.ErrCheckpoint)

	weights, err := os.ReadFile(filepath.Join(good, hf.WeightsFile))
	require.NoError(t, err)
	st := readST(t, filepath.Join(good, hf.WeightsFile))
	edit := func(f func(views map[string]safetensors.TensorView)) []byte {
		views := map[string]safetensors.TensorView{}
		for _, nt := range st.Tensors() {
			views[nt.Name] = nt.TensorView
		}
		f(views)
		data, err := safetensors.Serialize(views, nil)
		require.NoError(t, err)
		return data
	}
	for _, c := range []struct {
		data []byte
		want string
	}{
		{edit(func(v map[string]safetensors.TensorView) { delete(v, "model.layers.1.mlp.up_proj.weight") }), `"model.layers.1.mlp.up_proj.weight" is missing`},
		{edit(func(v map[string]safetensors.TensorView) {
			v["model.layers.0.extra.weight"] = v["model.norm.weight"]
		}), `"model.layers.0.extra.weight" is not a parameter`},
		{edit(func(v map[string]safetensors.TensorView) {
			x, err := safetensors.NewTensorView(safetensors.F32, []uint64{16}, make([]byte, 64))
			require.NoError(t, err)
			v["model.norm.weight"] = x
		}), `"model.norm.weight" has shape [16], the model wants [32]`},
		{edit(func(v map[string]safetensors.TensorView) {
			x, err := safetensors.NewTensorView(safetensors.I32, []uint64{32}, make([]byte, 128))
			require.NoError(t, err)
			v["model.norm.weight"] = x
		}), `"model.norm.weight": dtype I32 is not supported`},
		{weights[:len(weights)-100], "not a valid safetensors file"},
		{[]byte("hello"), "not a valid safetensors file"},
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, hf.WeightsFile), c.data, 0o644))
		fresh := graph.NewStore()
		err := hf.LoadLlama(dir, m, fresh)
		require.Error(t, err, c.want)
		require.ErrorIs(t, err, hf.ErrCheckpoint)
		require.Contains(t, err.Error(), c.want)
		require.Nil(t, fresh.Float32("model.embed_tokens.weight"), "nothing stored on a refusal")
	}
}

// TestGPTHFRoundTrip: a GPT exported in GPT-2's layout (Conv1D weights
// transposed) imports bit for bit; with the head equal to the
// embeddings the file ties them and the import takes the head from
// wte; GPT-2's mask buffers are skipped.
func TestGPTHFRoundTrip(t *testing.T) {
	cfg := nn.GPTConfig{Layers: 2, Heads: 2, Embd: 16, Block: 8, Vocab: 40}
	for _, tied := range []bool{false, true} {
		g := graph.New()
		b := nn.NewBuilder(g)
		m, err := nn.NewGPT(b, "gpt", cfg)
		require.NoError(t, err)
		store := graph.NewStore()
		require.NoError(t, b.Init(store, 7))
		if tied {
			require.NoError(t, store.SetFloat32("gpt.lm_head.weight", append([]float32(nil), store.Float32("gpt.wte.weight")...), 40, 16))
		}
		dir := t.TempDir()
		require.NoError(t, hf.SaveGPT(dir, m, store))
		got, err := hf.ReadGPTConfig(dir)
		require.NoError(t, err)
		require.Equal(t, cfg, got)
		st := readST(t, filepath.Join(dir, hf.WeightsFile))
		_, hasHead := st.Tensor("lm_head.weight")
		require.Equal(t, !tied, hasHead)
		attn, ok := st.Tensor("transformer.h.0.attn.c_attn.weight")
		require.True(t, ok)
		require.Equal(t, []uint64{16, 48}, attn.Shape(), "Conv1D weights are [in out]")
		// GPT-2 files may carry the causal-mask buffers.
		views := map[string]safetensors.TensorView{}
		for _, nt := range st.Tensors() {
			views[nt.Name] = nt.TensorView
		}
		mask, err := safetensors.NewTensorView(safetensors.F32, []uint64{1}, make([]byte, 4))
		require.NoError(t, err)
		views["transformer.h.0.attn.bias"] = mask
		writeST(t, filepath.Join(dir, hf.WeightsFile), views)

		b2 := nn.NewBuilder(graph.New())
		m2, err := nn.NewGPT(b2, "gpt", got)
		require.NoError(t, err)
		store2 := graph.NewStore()
		require.NoError(t, hf.LoadGPT(dir, m2, store2))
		for _, p := range b.Params() {
			require.Equal(t, bitsOf(store.Float32(p.Name())), bitsOf(store2.Float32(p.Name())), p.Name())
		}
	}
}

// TestHFConfigEdges: a Llama config without head_dim or
// num_key_value_heads (older checkpoints) reads with their defaults; GPT-2
// configs with a missing or ill-typed key, another activation or
// epsilon, or a bad size are refused naming the key.
func TestHFConfigEdges(t *testing.T) {
	dir := t.TempDir()
	conf := `{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
		"num_attention_heads": 4, "vocab_size": 64, "max_position_embeddings": 16, "rms_norm_eps": 1e-5}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), []byte(conf), 0o644))
	cfg, err := hf.ReadLlamaConfig(dir)
	require.NoError(t, err)
	require.Equal(t, 4, cfg.NumKeyValueHeads, "num_key_value_heads defaults to num_attention_heads")
	require.Equal(t, 8, cfg.HeadDim())
	good := `{"model_type": "gpt2", "n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 8, "vocab_size": 40, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), []byte(good), 0o644))
	g, err := hf.ReadGPTConfig(dir)
	require.NoError(t, err)
	require.Equal(t, nn.GPTConfig{Layers: 2, Heads: 2, Embd: 16, Block: 8, Vocab: 40}, g)
	for _, c := range []struct{ from, to, want string }{
		{`"n_embd": 16,`, ``, `key "n_embd" is missing`},
		{`"n_head": 2`, `"n_head": "two"`, `key "n_head"`},
		{`"n_head": 2`, `"n_head": 3`, "multiple of 3 heads"},
		{`"gelu_new"`, `"gelu"`, "activation_function"},
		{`1e-05`, `1e-06`, "layer_norm_epsilon"},
		{`"gpt2"`, `"gpt_neo"`, "model_type"},
		{`{`, `[`, "not a JSON object"},
	} {
		edited := strings.Replace(good, c.from, c.to, 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, hf.ConfigFile), []byte(edited), 0o644))
		_, err := hf.ReadGPTConfig(dir)
		require.ErrorIs(t, err, hf.ErrCheckpoint, c.want)
		require.ErrorContains(t, err, c.want)
	}
}

// tinyLlama is a 2-layer grouped-query Llama whose widths are multiples
// of 16 (every projection converts to FP8).
func tinyLlama(tied bool) nn.LlamaConfig {
	return nn.LlamaConfig{HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 64, MaxPositionEmbeddings: 16, TieWordEmbeddings: tied, RopeTheta: 10000, RMSNormEps: 1e-5}
}
