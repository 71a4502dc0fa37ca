package main

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/octetml/octet/examples/internal/output"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/internal/llamaref"
	"github.com/octetml/octet/internal/stfile"
	"github.com/octetml/octet/nn"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// runArgs runs the command in this process and returns its output.
func runArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cfg, err := parse(flag.NewFlagSet("llama", flag.ContinueOnError), args)
	require.NoError(t, err)
	var out bytes.Buffer
	err = run(cfg, &out)
	return out.String(), err
}

// hfLlama writes a random 2-layer grouped-query Llama in the Hugging
// Face layout (norm weights away from 1) and returns its config.
func hfLlama(t *testing.T, dir string, tied bool) nn.LlamaConfig {
	cfg := nn.LlamaConfig{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 40, MaxPositionEmbeddings: 16, TieWordEmbeddings: tied, RopeTheta: 10000, RMSNormEps: 1e-5, InitializerRange: 0.3}
	return hfDecoder(t, dir, cfg, false)
}

// hfDecoder writes a random model of cfg in the Hugging Face layout
// (norm weights away from 1, biases away from 0; experts stacked or one
// tensor per expert) and returns its config as read back.
func hfDecoder(t *testing.T, dir string, cfg nn.LlamaConfig, stacked bool) nn.LlamaConfig {
	b := nn.NewBuilder(graph.New())
	m, err := nn.NewLlama(b, cfg)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 21))
	for _, p := range b.Params() {
		if len(p.Shape()) == 1 {
			v := store.Float32(p.Name())
			for i := range v {
				v[i] = 1 + 0.3*float32(math.Cos(float64(3*i+len(p.Name()))))
			}
		}
	}
	require.NoError(t, hf.ExportLlama(dir, m, store, hf.Export{StackedExperts: stacked}))
	back, err := hf.ReadLlamaConfig(dir)
	require.NoError(t, err)
	return back
}

// gradsRun is a -grads-out run from -init of the model in dir on
// llm.c's first batch of a token file: the file's tensors as float32,
// and the model (loaded from dir) with its float64 reference on the same
// batch.
type gradsRun struct {
	got         map[string][]float32
	model       *nn.Llama
	params      []*graph.Node
	ref         *llamaref.Model
	ids, labels []int32
}

const gradsB, gradsT = 2, 6

// runGradsOut runs -grads-out of dir's model of cfg with extra flags.
func runGradsOut(t *testing.T, dir string, cfg nn.LlamaConfig, extra ...string) gradsRun {
	t.Helper()
	toks := make([]uint16, 400)
	for i := range toks {
		toks[i] = uint16((i*13 + i*i%7) % 40)
	}
	bin := filepath.Join(dir, "tokens.bin")
	require.NoError(t, data.WriteTokenFile(bin, toks))
	out := filepath.Join(dir, "grads.safetensors")
	say, err := runArgs(t, append([]string{"-init", dir, "-data", bin, "-sequential", "-batch", "2", "-block", "6", "-precision", "fp32", "-grads-out", out}, extra...)...)
	require.NoError(t, err)
	require.Contains(t, say, "after the first forward and backward")
	f, err := stfile.Read(out)
	require.NoError(t, err)
	r := gradsRun{got: map[string][]float32{}}
	for name, v := range f.Tensors {
		require.Equal(t, "F32", v.DType, name)
		o := make([]float32, len(v.Data)/4)
		for i := range o {
			o[i] = math.Float32frombits(uint32(v.Data[4*i]) | uint32(v.Data[4*i+1])<<8 | uint32(v.Data[4*i+2])<<16 | uint32(v.Data[4*i+3])<<24)
		}
		r.got[name] = o
	}
	gb := nn.NewBuilder(graph.New())
	r.model, err = nn.NewLlama(gb, cfg)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, hf.LoadLlama(dir, r.model, store))
	r.params = gb.Params()
	r.ref = llamaref.FromStore(cfg, store, r.params)
	r.ids, r.labels = make([]int32, gradsB*gradsT), make([]int32, gradsB*gradsT)
	for i := range r.ids {
		r.ids[i], r.labels[i] = int32(toks[i]), int32(toks[i+1])
	}
	require.InEpsilon(t, r.ref.Loss(r.ids, r.labels, gradsB, gradsT), float64(r.got["loss"][0]), 1e-5, "the loss")
	return r
}

// grad is the reference gradient of a parameter.
func (r gradsRun) grad(param string) []float64 {
	return r.ref.Grad(param, r.ids, r.labels, gradsB, gradsT)
}

// TestGradsOutMatchesFloat64: -grads-out from -init of a random
// Hugging Face Llama (tied and untied) on llm.c's first batch of a token
// file gives the loss and every gradient, under Hugging Face's names,
// of the model evaluated in float64, to 1e-4 relative per tensor.
func TestGradsOutMatchesFloat64(t *testing.T) {
	for _, tied := range []bool{false, true} {
		dir := t.TempDir()
		r := runGradsOut(t, dir, hfLlama(t, dir, tied))
		require.Len(t, r.got, len(r.params)+1, "the loss and one gradient per parameter")
		for _, p := range r.params {
			require.Less(t, llamaref.RelErr(r.got[p.Name()], r.grad(p.Name())), 1e-4, "tied=%v %s", tied, p.Name())
		}
	}
}

// TestGradsOutMoEMatchesFloat64: -grads-out from -init of random
// Hugging Face Mixtures of Experts — Mixtral with its balancing loss,
// Qwen3-MoE in the stacked layout with a dense mlp_only_layers layer,
// Qwen2-MoE with the shared expert and a tied head — gives the loss
// (transformers' training loss) and every gradient under Hugging Face's
// names, in the layout asked for, of the model evaluated in float64, to
// 1e-4 relative per tensor.
func TestGradsOutMoEMatchesFloat64(t *testing.T) {
	base := nn.LlamaConfig{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		VocabSize: 40, MaxPositionEmbeddings: 16, RopeTheta: 10000, RMSNormEps: 1e-5, InitializerRange: 0.3}
	mixtral := base
	mixtral.NumExperts, mixtral.NumExpertsPerTok, mixtral.NormTopKProb, mixtral.IntermediateSize = 4, 2, true, 8
	mixtral.OutputRouterLogits, mixtral.RouterAuxLossCoef = true, 0.3
	qwen3 := base
	qwen3.QKNorm, qwen3.HeadDimension, qwen3.NumExperts, qwen3.NumExpertsPerTok, qwen3.MoEIntermediateSize = true, 6, 5, 2, 8
	qwen3.MLPOnlyLayers, qwen3.NormTopKProb, qwen3.OutputRouterLogits, qwen3.RouterAuxLossCoef = []int{1}, true, true, 0.2
	qwen2 := base
	qwen2.QKVBias, qwen2.NumExperts, qwen2.NumExpertsPerTok, qwen2.MoEIntermediateSize, qwen2.SharedExpertIntermediateSize = true, 4, 3, 8, 12
	qwen2.TieWordEmbeddings, qwen2.RouterAuxLossCoef = true, 0.001
	for _, c := range []struct {
		name    string
		cfg     nn.LlamaConfig
		stacked bool
		tensor  string // one tensor of the layout
	}{
		{"mixtral", mixtral, false, "model.layers.1.block_sparse_moe.experts.3.w3.weight"},
		{"qwen3_moe", qwen3, true, "model.layers.0.mlp.experts.gate_up_proj"},
		{"qwen2_moe", qwen2, false, "model.layers.0.mlp.shared_expert_gate.weight"},
	} {
		dir := t.TempDir()
		cfg := hfDecoder(t, dir, c.cfg, c.stacked)
		require.Equal(t, c.name, cfg.ModelType)
		var extra []string
		if c.stacked {
			extra = append(extra, "-stacked-experts")
		}
		r := runGradsOut(t, dir, cfg, extra...)
		layout, err := hf.LlamaTensors(r.model, c.stacked)
		require.NoError(t, err)
		require.Len(t, r.got, len(layout)+1, "the loss and one gradient per tensor of the layout")
		require.Contains(t, r.got, c.tensor)
		want := map[string][]float64{}
		for _, p := range r.params {
			want[p.Name()] = r.grad(p.Name())
		}
		for _, ht := range layout {
			w := want[ht.Param.Name()][ht.Offset : ht.Offset+ht.Shape.Numel()]
			require.Less(t, llamaref.RelErr(r.got[ht.Name], w), 1e-4, "%s %s", c.name, ht.Name)
		}
	}
}

// TestTrainExportInit: a short run in every precision exports each
// trained model, which -init then starts from; the JSON names what was
// exported.
func TestTrainExportInit(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)), 0o644))
	exp := filepath.Join(dir, "out")
	quick := []string{"-text", text, "-hidden", "32", "-intermediate", "48", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-block", "16", "-batch", "2",
		"-iters", "3", "-eval-batches", "1", "-eval-every", "0", "-sample", "4"}
	out, err := runArgs(t, append(quick, "-precision", "all", "-export", exp, "-json")...)
	require.NoError(t, err)
	var summary struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, output.DecodeLast(out, &summary))
	runs := summary.Runs
	require.Len(t, runs, 3)
	for _, r := range runs {
		p := r["precision"].(string)
		require.Equal(t, filepath.Join(exp, p), r["exported"])
		cfg, err := hf.ReadLlamaConfig(filepath.Join(exp, p))
		require.NoError(t, err)
		require.Equal(t, 50304, cfg.VocabSize)
	}
	require.Len(t, runs[2]["converted_layers"], 5, "FP8: qkv_proj, o_proj, gate_up_proj, down_proj and the head")
	out, err = runArgs(t, "-text", text, "-init", filepath.Join(exp, "fp8"), "-block", "16", "-batch", "2", "-iters", "2", "-eval-batches", "1",
		"-eval-every", "0", "-sample", "0", "-precision", "fp8")
	require.NoError(t, err, out)
}

// TestMoETrainExportInit: a Mixtral-style MoE trains in every
// precision (its experts' grouped GEMMs converted, the router not),
// reports its expert load, exports (float32 and the FP8 layout; experts
// one tensor per expert, quantized) and fine-tunes from the exports.
func TestMoETrainExportInit(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)), 0o644))
	exp, exp8 := filepath.Join(dir, "out"), filepath.Join(dir, "fp8")
	quick := []string{"-text", text, "-block", "16", "-batch", "2", "-eval-batches", "2", "-eval-every", "0", "-sample", "0"}
	out, err := runArgs(t, append(quick, "-hidden", "32", "-intermediate", "32", "-layers", "2", "-heads", "2", "-kv-heads", "1", "-iters", "3",
		"-experts", "4", "-top-k", "2", "-precision", "all", "-export", exp, "-export-fp8", exp8, "-json")...)
	require.NoError(t, err, out)
	var summary struct {
		Runs []map[string]any `json:"runs"`
	}
	require.NoError(t, output.DecodeLast(out, &summary))
	require.Len(t, summary.Runs, 3)
	for _, r := range summary.Runs {
		load := r["expert_load"].([]any)
		require.Len(t, load, 2, "two sparse layers")
		l := load[1].(map[string]any)
		require.EqualValues(t, 1, l["layer"])
		lo, hi := l["min_share"].(float64), l["max_share"].(float64)
		require.True(t, lo >= 0 && lo <= 0.25 && hi >= 0.25 && hi <= 1, "%v %v", lo, hi)
		require.Greater(t, r["balancing_loss"].(float64), 1.0, "≈ top-k when balanced")
	}
	cfg, err := hf.ReadLlamaConfig(filepath.Join(exp, "fp32"))
	require.NoError(t, err)
	require.Equal(t, "mixtral", cfg.ModelType)
	require.Equal(t, 4, cfg.NumExperts)
	require.True(t, cfg.OutputRouterLogits)
	f, err := stfile.Read(filepath.Join(exp, "fp32", hf.WeightsFile))
	require.NoError(t, err)
	require.Contains(t, f.Names(), "model.layers.1.block_sparse_moe.experts.3.w2.weight")
	f, err = stfile.Read(filepath.Join(exp8, hf.WeightsFile))
	require.NoError(t, err)
	require.Equal(t, "F8_E4M3", f.Tensors["model.layers.1.block_sparse_moe.experts.3.w2.weight"].DType, "the experts trained in FP8")
	require.Contains(t, f.Names(), "model.layers.1.block_sparse_moe.experts.3.w2.weight_scale_inv")
	require.Equal(t, "F32", f.Tensors["model.layers.1.block_sparse_moe.gate.weight"].DType, "the router stays float32")
	require.Contains(t, summary.Runs[2]["converted_layers"], "model.layers.1.mlp.experts.gate_up")
	require.Equal(t, "F8_E4M3", f.Tensors["model.layers.1.self_attn.q_proj.weight"].DType)
	out, err = runArgs(t, append(quick, "-init", filepath.Join(exp, "fp32"), "-iters", "2", "-precision", "fp8")...)
	require.NoError(t, err, out)
	require.Contains(t, out, "expert load")
	out, err = runArgs(t, append(quick, "-init", exp8, "-iters", "2", "-precision", "fp32")...)
	require.NoError(t, err, out)
}

// TestExportFP8Init: -export-fp8 writes the FP8 run in Hugging Face's
// fine-grained FP8 layout (the trained layers' weights F8_E4M3, the head
// float32), reports the checkpoint's validation loss beside the trained
// model's, and -init fine-tunes from it.
func TestExportFP8Init(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)), 0o644))
	exp := filepath.Join(dir, "fp8")
	quick := []string{"-text", text, "-block", "16", "-batch", "2", "-eval-batches", "1", "-eval-every", "0", "-sample", "0", "-precision", "fp8"}
	out, err := runArgs(t, append(quick, "-hidden", "32", "-intermediate", "48", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-iters", "3",
		"-export-fp8", exp, "-json")...)
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, output.DecodeLast(out, &r))
	require.Equal(t, exp, r["exported_fp8"])
	got, want := r["exported_fp8_val_loss"].(float64), r["val_loss"].(float64)
	require.InEpsilon(t, want, got, 0.05, "the FP8 checkpoint's loss is the trained model's within the quantization error")
	require.NotEqual(t, want, got, "the checkpoint holds quantized weights")
	f, err := stfile.Read(filepath.Join(exp, hf.WeightsFile))
	require.NoError(t, err)
	require.Equal(t, "F8_E4M3", f.Tensors["model.layers.0.self_attn.q_proj.weight"].DType)
	require.Equal(t, "F32", f.Tensors["model.layers.0.self_attn.q_proj.weight_scale_inv"].DType)
	require.Equal(t, "F32", f.Tensors["lm_head.weight"].DType)
	out, err = runArgs(t, append(quick, "-init", exp, "-iters", "2")...)
	require.NoError(t, err, out)
	require.Contains(t, out, "val loss")
}

// TestCommandLines: hostile and careless command lines are refused
// before training, naming the flag, file, key or tensor.
func TestCommandLines(t *testing.T) {
	tmp := t.TempDir()
	hfDir := filepath.Join(tmp, "hfDir")
	hfLlama(t, hfDir, false)
	big := filepath.Join(tmp, "big.bin")
	toks := make([]uint16, 300)
	toks[123] = 41 // vocabulary 40
	require.NoError(t, data.WriteTokenFile(big, toks))
	broken := filepath.Join(tmp, "broken")
	hfLlama(t, broken, false)
	st, err := os.ReadFile(filepath.Join(broken, hf.WeightsFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(broken, hf.WeightsFile), st[:len(st)/2], 0o644))
	quick := []string{"-hidden", "32", "-intermediate", "48", "-layers", "1", "-heads", "2", "-kv-heads", "1", "-block", "16", "-batch", "2", "-iters", "2", "-eval-batches", "1", "-eval-every", "0", "-sample", "0"}
	clitest.Table(t, "llama", quick, []clitest.Case{
		{Name: "kv heads not dividing", Args: []string{"-heads", "4", "-kv-heads", "3"}, Code: 1, Says: "num_key_value_heads"},
		{Name: "heads not dividing width", Args: []string{"-heads", "5"}, Code: 1, Says: "num_attention_heads"},
		{Name: "sequential without data", Args: []string{"-sequential"}, Code: 1, Says: "-sequential"},
		{Name: "export-fp8 without an FP8 run", Args: []string{"-precision", "fp32", "-export-fp8", filepath.Join(tmp, "x")}, Code: 1, Says: "-export-fp8 writes the FP8 run"},
		{Name: "export-format f32", Args: []string{"-export-fp8", filepath.Join(tmp, "x"), "-export-format", "f32"}, Code: 1, Says: "-export-format \"f32\""},
		{Name: "export-format alone", Args: []string{"-export-format", "nvfp4"}, Code: 1, Says: "give -export-fp8 DIR"},
		{Name: "text and data", Args: []string{"-text", "a.txt", "-data", "b.bin"}, Code: 1, Says: "-text and -data"},
		{Name: "missing data", Args: []string{"-data", "/nonexistent.bin"}, Code: 1, Says: "/nonexistent.bin"},
		{Name: "init and a size flag", Args: []string{"-init", hfDir, "-hidden", "32", "-block", "8"}, Code: 1, Says: "-hidden conflicts with -init"},
		{Name: "grads-out with two precisions", Args: []string{"-grads-out", filepath.Join(tmp, "g.st")}, Code: 1, Says: "-grads-out writes one precision"},
		{Name: "bad encoding", Args: []string{"-encoding", "o300k"}, Code: 1, Says: "-encoding"},
		{Name: "top-k without experts", Args: []string{"-top-k", "2"}, Code: 1, Says: "-top-k configures experts"},
		{Name: "top-k above experts", Args: []string{"-experts", "4", "-top-k", "5"}, Code: 1, Says: "num_experts_per_tok"},
		{Name: "zero top-k", Args: []string{"-experts", "4", "-top-k", "0"}, Code: 1, Says: "num_experts_per_tok"},
		{Name: "shared expert in mixtral", Args: []string{"-experts", "4", "-shared-expert", "16"}, Code: 1, Says: "shared_expert_intermediate_size"},
		{Name: "experts in a dense type", Args: []string{"-experts", "4", "-model-type", "qwen3"}, Code: 1, Says: "-model-type"},
		{Name: "unknown model type", Args: []string{"-model-type", "deepseek_v3"}, Code: 1, Says: "deepseek_v3"},
		{Name: "negative aux loss", Args: []string{"-experts", "4", "-aux-loss-coef", "-1"}, Code: 1, Says: "-aux-loss-coef"},
		{Name: "init and experts", Args: []string{"-init", hfDir, "-experts", "4", "-block", "8"}, Code: 1, Says: "-experts conflicts with -init"},
	}, nil)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-init", hfDir, "-data", big, "-block", "8", "-batch", "2"}, "token 41 at position 123 is outside the model's vocabulary of 40"},
		{[]string{"-init", broken, "-block", "8"}, "not a valid safetensors file"},
		{[]string{"-init", filepath.Join(tmp, "none")}, "config.json"},
		{[]string{"-init", hfDir, "-block", "32"}, "-block 32 is longer than the model's max_position_embeddings 16"},
	} {
		r := clitest.Run(t, nil, c.args...)
		require.Equal(t, 1, r.Code, "%v: %s", c.args, r.Stdout)
		require.Contains(t, r.Stderr, c.says)
		require.False(t, r.Panicked())
	}
}

// An MoE decoder trains data-parallel (-dp 2) and sharded (-fsdp 3) as
// one process does (float32: losses within 1e-5), reports the bytes its
// collectives move per iteration, and a checkpoint of -fsdp 3 resumes
// with -dp 2 and in one process.
func TestParallelMoE(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)), 0o644))
	quick := []string{"-text", text, "-block", "16", "-batch", "6", "-eval-batches", "2", "-eval-every", "0", "-sample", "0", "-hidden", "32",
		"-intermediate", "32", "-layers", "2", "-heads", "2", "-kv-heads", "1", "-iters", "6", "-experts", "4", "-top-k", "2", "-precision", "fp32", "-json"}
	runJSON := func(args ...string) map[string]any {
		out, err := runArgs(t, append(append([]string(nil), quick...), args...)...)
		require.NoError(t, err, out)
		var m map[string]any
		require.NoError(t, output.DecodeLast(out, &m))
		return m
	}
	one := runJSON()
	require.NotContains(t, one, "comm_bytes_per_iter")
	for _, par := range [][]string{{"-dp", "2"}, {"-fsdp", "3"}} {
		got := runJSON(par...)
		require.InEpsilon(t, one["val_loss"], got["val_loss"], 1e-5, "%v", par)
		require.InEpsilon(t, one["train_loss"], got["train_loss"], 1e-5, "%v", par)
		require.Greater(t, got["comm_bytes_per_iter"].(float64), 4.0*one["params"].(float64), "%v: at least the gradients", par)
	}
	ck := filepath.Join(dir, "ck")
	straight := runJSON("-fsdp", "3")
	runJSON("-fsdp", "3", "-stop-after", "3", "-save", ck)
	for _, par := range [][]string{{"-dp", "2"}, {}} {
		got := runJSON(append(par, "-resume", ck)...)
		require.InEpsilon(t, straight["val_loss"], got["val_loss"], 1e-5, "%v", par)
		require.Contains(t, got["resharded"], "FSDP 3 to ")
	}
	_, err := runArgs(t, append(append([]string(nil), quick...), "-dp", "2", "-fsdp", "2")...)
	require.ErrorContains(t, err, "choose one")
}

// -ep 2 and -ep 3 train an MoE decoder to one process's losses bit for
// bit, in float32 and FP8 block scaling, and report what the expert
// exchange moves per iteration; -ep 3 -dp 2 trains -dp 2's.
func TestExpertParallelMatchesOneProcess(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)), 0o644))
	quick := []string{"-text", text, "-block", "16", "-batch", "3", "-eval-batches", "2", "-eval-every", "0", "-sample", "0", "-hidden", "32",
		"-intermediate", "32", "-layers", "2", "-heads", "2", "-kv-heads", "1", "-iters", "5", "-experts", "4", "-top-k", "2", "-json"}
	for _, prec := range [][]string{{"-precision", "fp32"}, {"-precision", "fp8", "-recipe", "block"}} {
		runJSON := func(args ...string) map[string]any {
			out, err := runArgs(t, append(append(append([]string(nil), quick...), prec...), args...)...)
			require.NoError(t, err, out)
			var m map[string]any
			require.NoError(t, output.DecodeLast(out, &m))
			return m
		}
		one := runJSON()
		for _, ep := range []string{"2", "3"} {
			got := runJSON("-ep", ep)
			for _, k := range []string{"train_loss", "val_loss"} {
				require.Equal(t, one[k], got[k], "%v -ep %s: %s", prec, ep, k)
			}
			require.Greater(t, got["comm_bytes_per_iter"].(float64), 0.0)
		}
		// Expert-parallel groups inside data parallelism train as -dp 2.
		dp := runJSON("-dp", "2")
		got := runJSON("-ep", "3", "-dp", "2")
		require.Equal(t, 6.0, got["ranks"])
		for _, k := range []string{"train_loss", "val_loss"} {
			require.Equal(t, dp[k], got[k], "%v -ep 3 -dp 2: %s", prec, k)
		}
	}
}
