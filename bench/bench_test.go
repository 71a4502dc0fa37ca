package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/recipe"
)

// The same figures as the command, as Go benchmarks:
//
//	go test -run xxx -bench . ./bench/
func benchStep(b *testing.B, step func() error) {
	for i := 0; i < 2; i++ {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMLPStep(b *testing.B) {
	for _, rec := range smallRecipes {
		b.Run(recipeName(rec), func(b *testing.B) {
			step, err := octetMLP(128, rec)
			if err != nil {
				b.Fatal(err)
			}
			benchStep(b, step)
		})
	}
}

// BenchmarkMLPStepFP8Debug is the FP8 (TE HYBRID) MLP step without a
// debug config and with LogFp8TensorStats on every layer every 10 steps
// (the statistics written to a temporary directory).
func BenchmarkMLPStepFP8Debug(b *testing.B) {
	cfg, err := inspect.ParseConfig(strings.NewReader(`
all:
  enabled: True
  layers: {layer_name_regex_pattern: .*}
  transformer_engine:
    LogFp8TensorStats:
      enabled: True
      tensors: [activation, weight, gradient]
      stats: [underflows%, overflows%, scale_inv_min, scale_inv_max, mse]
      freq: 10
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, debug := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "every10"}[debug], func(b *testing.B) {
			var dbg *inspect.Config
			if debug {
				dbg = cfg
			}
			step, err := octetMLPDebug(128, recipe.TE{}, dbg, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			benchStep(b, step)
		})
	}
}

func BenchmarkGPTIteration(b *testing.B) {
	for _, rec := range smallRecipes {
		b.Run(recipeName(rec), func(b *testing.B) {
			step, err := octetGPT(rec)
			if err != nil {
				b.Fatal(err)
			}
			benchStep(b, step)
		})
	}
}

func recipeName(r recipe.Recipe) string {
	if r == nil {
		return "fp32"
	}
	if r.Backend() == fp8.BackendBF16 {
		return "bf16"
	}
	if _, ok := r.(recipe.Float8Block); ok {
		return "fp8block"
	}
	if _, ok := r.(recipe.NVFP4); ok {
		return "nvfp4"
	}
	if te, ok := r.(recipe.TE); ok && te.UseMXFP8BlockScaling {
		return "mxfp8"
	}
	return "fp8"
}

func BenchmarkMLPStepGorgonia(b *testing.B) {
	step, cleanup, err := gorgoniaMLP(128)
	if err != nil {
		b.Fatal(err)
	}
	defer cleanup()
	benchStep(b, step)
}

// TestRunSmall runs the whole command on small sizes: every figure is
// measured and positive, and the JSON has the documented keys.
func TestRunSmall(t *testing.T) {
	r, err := run(128, 16, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"gemm_gflops_fp32", "gemm_gflops_bf16", "gemm_gflops_fp8", "gemm_gflops_gonum", "mlp_step_ms_fp32", "mlp_step_ms_bf16", "mlp_step_ms_fp8",
		"mlp_step_ms_gorgonia", "gpt_iter_ms_fp32", "gpt_iter_ms_bf16", "gpt_iter_ms_fp8", "ratio_gemm_fp32_over_gonum", "ratio_gemm_bf16_over_fp32",
		"ratio_gemm_fp8_over_fp32", "ratio_mlp_gorgonia_over_fp32", "ratio_mlp_bf16_over_fp32", "ratio_mlp_fp8_over_fp32", "ratio_gpt_bf16_over_fp32", "ratio_gpt_fp8_over_fp32",
		"mlp_step_ms_fp8block", "mlp_step_ms_nvfp4", "mlp_step_ms_mxfp8", "ratio_mlp_mxfp8_over_fp8", "gpt_iter_ms_mxfp8", "ratio_gpt_mxfp8_over_fp8"} {
		v, ok := m[k].(float64)
		if !ok || !(v > 0) {
			t.Errorf("%s = %v", k, m[k])
		}
	}
}

// TestFusedAttentionTrainsLikeUnfused trains the baby GPT for 50 steps
// (one fixed batch) with the fused attention and with the unfused graph
// (slices, permutes, batched GEMMs, mask, softmax), in float32 and FP8,
// and compares the losses step by step. The two round differently (the
// online softmax rescales partial sums; the products are summed in
// another order), and training on one batch amplifies any difference:
// in float32 the losses agree to float32 rounding for the first ten
// steps and drift apart slowly after; FP8 amplifies a rounding
// difference into a different cast as soon as it crosses a rounding
// boundary, so it gets looser bounds (measured: 6e-7 at step 1, 1.7e-2
// at step 50).
func TestFusedAttentionTrainsLikeUnfused(t *testing.T) {
	if testing.Short() || pureGo || !longTests {
		t.Skip("50 steps of the baby GPT, twice per precision: run with -tags long (not with -short, or every kernel a Go twin)")
	}
	for _, c := range []struct {
		rec             recipe.Recipe
		first, ten, all float64
	}{{nil, 1e-6, 1e-6, 5e-4}, {recipe.TE{}, 1e-5, 1e-3, 5e-2}} {
		losses := [2][]float64{}
		for i, unfused := range []bool{false, true} {
			cfg := gptConfig
			cfg.UnfusedAttention = unfused
			step, prog, loss, err := gptTraining(cfg, gptBatch, c.rec, false)
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				if err := step(); err != nil {
					t.Fatal(err)
				}
				losses[i] = append(losses[i], float64(prog.Float32(loss)[0]))
			}
		}
		worst := func(steps int) float64 {
			w := 0.0
			for s := range losses[0][:steps] {
				w = max(w, math.Abs(losses[0][s]-losses[1][s])/math.Abs(losses[1][s]))
			}
			return w
		}
		name := recipeName(c.rec)
		t.Logf("%s: relative loss difference at step 1 %.3g, over 10 steps %.3g, over 50 %.3g (loss %.4f → %.4f)", name, worst(1), worst(10), worst(50), losses[1][0], losses[1][49])
		for _, b := range []struct {
			steps int
			bound float64
		}{{1, c.first}, {10, c.ten}, {50, c.all}} {
			if w := worst(b.steps); !(w <= b.bound) {
				t.Errorf("%s: over %d steps fused and unfused losses differ by %.3g (relative), want ≤ %g", name, b.steps, w, b.bound)
			}
		}
		if !(losses[0][49] < 0.5*losses[0][0]) {
			t.Errorf("%s: the fused model did not learn (%.4f → %.4f)", name, losses[0][0], losses[0][49])
		}
	}
}

// TestFusionTrainsBitForBit trains the baby GPT (with dropout, so that
// dropout masks join the chains) for 50 steps with and without the Fuse
// stage, in float32, bf16 and FP8: the fused chains and GEMM epilogues
// compute exactly what the separate ops do, so every loss is the same
// to the bit.
func TestFusionTrainsBitForBit(t *testing.T) {
	if testing.Short() || pureGo || !longTests {
		t.Skip("50 steps of the baby GPT, twice per precision: run with -tags long (not with -short, or every kernel a Go twin)")
	}
	for _, rec := range precisions {
		cfg := gptConfig
		cfg.Dropout = 0.1
		var losses [2][]float32
		var fused int
		for i, noFusion := range []bool{false, true} {
			step, prog, loss, err := gptTraining(cfg, gptBatch, rec, noFusion)
			if err != nil {
				t.Fatal(err)
			}
			if !noFusion {
				for _, n := range graph.Live(graph.Options{Training: true}, loss) {
					if strings.Contains(n.Op().Type(), "+") || n.Op().Type() == "FusedElementwise" {
						fused++
					}
				}
			}
			for range 50 {
				if err := step(); err != nil {
					t.Fatal(err)
				}
				losses[i] = append(losses[i], prog.Float32(loss)[0])
			}
		}
		if fused == 0 && rec == nil {
			t.Errorf("%s: nothing fused", recipeName(rec))
		}
		for s := range losses[0] {
			if losses[0][s] != losses[1][s] {
				t.Fatalf("%s step %d: fused loss %v, unfused %v", recipeName(rec), s+1, losses[0][s], losses[1][s])
			}
		}
		t.Logf("%s: %d fused node(s) in the loss's graph; 50 losses equal (%.7f → %.7f)", recipeName(rec), fused, losses[0][0], losses[0][49])
	}
}

// TestStepsAllocateNothing checks that a whole training step — program
// (fused attention, fused chains, GEMM epilogues) and AdamW — allocates
// nothing after the first, for the MLP, the baby GPT, a small Llama and
// a small Mixture of Experts in every precision.
func TestStepsAllocateNothing(t *testing.T) {
	recs := smallRecipes // the precisions, Float8BlockScaling, NVFP4 and MXFP8
	if pureGo {
		recs = recs[:1] // float32: the bf16 twin is slow, and allocates nothing either way
	}
	for _, rec := range recs {
		mlp, err := octetMLP(128, rec)
		if err != nil {
			t.Fatal(err)
		}
		cfg := gptConfig
		cfg.Dropout = 0.1 // dropout masks in the fused chains too
		gpt, _, _, err := gptTraining(cfg, gptBatch, rec, false)
		if err != nil {
			t.Fatal(err)
		}
		llama, _, err := llamaTraining(smallLlama, 2, rec)
		if err != nil {
			t.Fatal(err)
		}
		moeCfg := smallLlama
		moeCfg.NumExperts, moeCfg.NumExpertsPerTok, moeCfg.NormTopKProb = 4, 2, true
		moe, _, err := llamaTraining(moeCfg, 2, rec)
		if err != nil {
			t.Fatal(err)
		}
		for name, step := range map[string]func() error{"mlp": mlp, "gpt": gpt, "llama": llama, "moe": moe} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(3, func() { _ = step() }); a != 0 {
				t.Errorf("%s %s: %v allocations per step", name, recipeName(rec), a)
			}
		}
	}
}

// TestGPT2FiguresSmall runs the GPT-2 section of the bench on a small
// model of the same kind (a vocabulary the FP8 filter converts, so the
// classifier's gradient is fused into its cast): every figure is set,
// the GEMM FLOPs are the model's, and FP8 plans fewer activation bytes
// than float32.
func TestGPT2FiguresSmall(t *testing.T) {
	cfg := nn.GPTConfig{Layers: 2, Heads: 2, Embd: 64, Block: 16, Vocab: 512, Seed: 1}
	r := &Results{GemmFP32: 10}
	require.NoError(t, runGPT2Config(r, 1, cfg, 2))
	for _, v := range []float64{r.GPT2FP32, r.GPT2BF16, r.GPT2FP8, r.GPT2RooflineFP32, r.GPT2BF16OverFP32, r.GPT2FP8OverFP32} {
		require.Greater(t, v, 0.0)
	}
	// Forward GEMMs per layer 2·BT·12C², the classifier 2·BT·C·V; the
	// backward twice that.
	bt, c := 2*16, 64
	want := 3 * (cfg.Layers*24*bt*c*c + 2*bt*c*cfg.Vocab)
	require.InDelta(t, float64(want)/1e9, r.GPT2GEMMGFLOP, 1e-12)
	require.Less(t, r.GPT2T512ArenaFP8, r.GPT2T512ArenaFP32)
	require.InDelta(t, float64(r.GPT2T512ArenaFP8)/float64(r.GPT2T512ArenaFP32), r.GPT2T512ArenaRatio, 1e-12)
}

// smallLlama is a Llama of the bench's kind small enough for tests (its
// widths multiples of 16, so every projection converts).
var smallLlama = nn.LlamaConfig{HiddenSize: 64, IntermediateSize: 96, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
	VocabSize: 256, MaxPositionEmbeddings: 32, RopeTheta: 10000}

// TestLlamaFiguresSmall runs the Llama section of the bench on a small
// model: every figure is set, and with one round the paired ratios are
// that round's, the figures' ratios up to the figures' rounding to the
// microsecond.
func TestLlamaFiguresSmall(t *testing.T) {
	r := &Results{}
	require.NoError(t, runLlama(r, 1, smallLlama, 2))
	for _, v := range []float64{r.LlamaFP32, r.LlamaBF16, r.LlamaFP8} {
		require.Greater(t, v, 0.0)
	}
	require.InEpsilon(t, r.LlamaFP8/r.LlamaFP32, r.LlamaFP8OverFP32, 0.01)
	require.InEpsilon(t, r.LlamaBF16/r.LlamaFP32, r.LlamaBF16OverFP32, 0.01)
}

// TestPairedRatio: the recipes' ratios pair each round's samples, so a
// busy round slows both; the ratio of the medians would pair a quiet
// round of one with a busy round of the other.
func TestPairedRatio(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x * float64(time.Millisecond))
		}
		return d
	}
	te, block := ms(1, 3, 1.1), ms(1.1, 3.3, 2.9)
	if got := pairedRatio(block, te); math.Abs(got-1.1) > 1e-9 {
		t.Fatalf("paired ratio %v, want 1.1 (the ratio of the medians is %v)", got, float64(median([][]time.Duration{block})[0])/float64(median([][]time.Duration{te})[0]))
	}
}
