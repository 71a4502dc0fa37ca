// Command bench measures Octet against gonum and gorgonia in one run and
// prints a table (or, with -json, one JSON object):
//
//	go run ./bench          # table
//	go run ./bench -json    # {"gemm_gflops_fp32": …, …}
//
// GEMMs are square (n = 1024 by default), C = A·B. The FP8 GEMM includes
// casting both inputs (delayed scaling: scale known, cast and amax in one
// pass); the bf16 GEMM reads float32 operands and rounds them to bf16 as
// it packs them. The MLP step is 784-512-512-10 with ReLU, softmax
// cross-entropy and one Adam(W) update at batch 128: feed, forward,
// backward, update. The GPT iteration is examples/gpt's baby GPT (4
// layers, 4 heads, width 128, context 64, batch 12, vocabulary 104):
// feed, forward, backward, AdamW. The GPT-2 124M iteration (-gpt2, on by
// default) is the same at GPT-2 small's shape: 12 layers, 12 heads,
// width 768, vocabulary 50,304, context 64, batch 4, with its GEMM FLOPs,
// the fraction of the float32 GEMM rate it reaches and the planned
// activation arena at context 512. Each precision runs the same model:
// float32, bf16 mixed precision (recipe.BF16) and FP8 (TE, HYBRID);
// the MLP step and the baby GPT also run Transformer Engine's
// Float8BlockScaling (recipe.Float8Block's defaults).
// Each figure is the median of -reps timed runs after warm-up, the
// contenders of a table section interleaved so they share machine
// conditions.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/recipe"
	"github.com/octetml/octet/train"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

func main() {
	n := flag.Int("n", 1024, "GEMM size")
	batch := flag.Int("batch", 128, "MLP batch size")
	reps := flag.Int("reps", 15, "timed repetitions per figure (median reported)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	noGPT := flag.Bool("no-gpt", false, "skip the baby-GPT iterations")
	gpt2 := flag.Bool("gpt2", true, "measure the GPT-2 124M iteration and plan its context-512 programs")
	gpt2Reps := flag.Int("gpt2-reps", 3, "timed repetitions of each GPT-2 124M figure (median reported)")
	llama := flag.Bool("llama", true, "measure an iteration of examples/llama's default model")
	moe := flag.Bool("moe", true, "measure an iteration of a Mixtral-style Mixture of Experts and its grouped GEMM")
	flag.Parse()
	if *reps < 1 || *gpt2Reps < 1 {
		fmt.Fprintln(os.Stderr, "bench: -reps and -gpt2-reps must be at least 1")
		os.Exit(2)
	}
	res, err := run(*n, *batch, *reps, !*noGPT)
	if err == nil && *gpt2 {
		err = runGPT2(res, *gpt2Reps)
	}
	if err == nil && *llama {
		err = runLlama(res, *gpt2Reps, llamaConfig, llamaBatch)
	}
	if err == nil && *moe {
		err = runMoE(res, *gpt2Reps)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	printTable(res)
}

// Results are the figures of one run.
type Results struct {
	Kernel     string  `json:"gemm_kernel"`
	KernelBF16 string  `json:"gemm_kernel_bf16"`
	N          int     `json:"gemm_n"`
	GemmFP32   float64 `json:"gemm_gflops_fp32"`
	GemmBF16   float64 `json:"gemm_gflops_bf16"`
	GemmFP8    float64 `json:"gemm_gflops_fp8"`
	GemmGonum  float64 `json:"gemm_gflops_gonum"`
	Batch      int     `json:"mlp_batch"`
	MLPFP32    float64 `json:"mlp_step_ms_fp32"`
	MLPBF16    float64 `json:"mlp_step_ms_bf16"`
	MLPFP8     float64 `json:"mlp_step_ms_fp8"`
	// Float8BlockScaling (recipe.Float8Block{}), and its ratio to
	// delayed scaling (TE HYBRID): the median over the rounds of the
	// ratio of the two samples each round takes back to back (see
	// pairedRatio), so that a change in the machine's load between
	// rounds moves both.
	MLPFP8Block        float64 `json:"mlp_step_ms_fp8block"`
	MLPFP8BlockOverFP8 float64 `json:"ratio_mlp_fp8block_over_fp8"`
	// NVFP4BlockScaling (recipe.NVFP4{}: the transform, stochastic
	// rounding, 2-D weights), and its ratio to delayed scaling (paired
	// as Float8BlockScaling's; the baby GPT's ratios likewise).
	MLPNVFP4        float64 `json:"mlp_step_ms_nvfp4"`
	MLPNVFP4OverFP8 float64 `json:"ratio_mlp_nvfp4_over_fp8"`
	// MXFP8BlockScaling (recipe.TE{UseMXFP8BlockScaling: true}: E8M0
	// scales per block of 32), paired as Float8BlockScaling's.
	MLPMXFP8           float64 `json:"mlp_step_ms_mxfp8"`
	MLPMXFP8OverFP8    float64 `json:"ratio_mlp_mxfp8_over_fp8"`
	MLPGorgonia        float64 `json:"mlp_step_ms_gorgonia"`
	GPTFP32            float64 `json:"gpt_iter_ms_fp32"`
	GPTBF16            float64 `json:"gpt_iter_ms_bf16"`
	GPTFP8             float64 `json:"gpt_iter_ms_fp8"`
	GPTFP8Block        float64 `json:"gpt_iter_ms_fp8block,omitempty"`
	GPTFP8BlockOverFP8 float64 `json:"ratio_gpt_fp8block_over_fp8,omitempty"`
	GPTNVFP4           float64 `json:"gpt_iter_ms_nvfp4,omitempty"`
	GPTNVFP4OverFP8    float64 `json:"ratio_gpt_nvfp4_over_fp8,omitempty"`
	GPTMXFP8           float64 `json:"gpt_iter_ms_mxfp8,omitempty"`
	GPTMXFP8OverFP8    float64 `json:"ratio_gpt_mxfp8_over_fp8,omitempty"`
	// The ratios below (and the GPT-2 and Llama ones) are paired too:
	// each the median over the rounds of one round's ratio. A ratio of
	// rates (GFLOP/s) is float32's time over the other's.
	FP32OverGonum     float64 `json:"ratio_gemm_fp32_over_gonum"`
	BF16OverFP32      float64 `json:"ratio_gemm_bf16_over_fp32"`
	FP8OverFP32       float64 `json:"ratio_gemm_fp8_over_fp32"`
	GorgoniaOverOctet float64 `json:"ratio_mlp_gorgonia_over_fp32"`
	StepBF16OverFP32  float64 `json:"ratio_mlp_bf16_over_fp32"`
	StepFP8OverFP32   float64 `json:"ratio_mlp_fp8_over_fp32"`
	GPTBF16OverFP32   float64 `json:"ratio_gpt_bf16_over_fp32"`
	GPTFP8OverFP32    float64 `json:"ratio_gpt_fp8_over_fp32"`
	// The share of a GPT iteration spent in GEMM ops (graph.Profile).
	GPTGEMMShareFP32 float64 `json:"gpt_gemm_share_fp32"`
	GPTGEMMShareBF16 float64 `json:"gpt_gemm_share_bf16"`
	GPTGEMMShareFP8  float64 `json:"gpt_gemm_share_fp8"`

	// The GPT-2 124M iteration (see runGPT2); zero with -gpt2=false.
	GPT2FP32           float64 `json:"gpt2_iter_ms_fp32,omitempty"`
	GPT2BF16           float64 `json:"gpt2_iter_ms_bf16,omitempty"`
	GPT2FP8            float64 `json:"gpt2_iter_ms_fp8,omitempty"`
	GPT2GEMMGFLOP      float64 `json:"gpt2_gemm_gflop,omitempty"`
	GPT2RooflineFP32   float64 `json:"gpt2_roofline_fp32,omitempty"`
	GPT2BF16OverFP32   float64 `json:"ratio_gpt2_bf16_over_fp32,omitempty"`
	GPT2FP8OverFP32    float64 `json:"ratio_gpt2_fp8_over_fp32,omitempty"`
	GPT2T512ArenaFP32  int64   `json:"gpt2_t512_arena_bytes_fp32,omitempty"`
	GPT2T512ArenaFP8   int64   `json:"gpt2_t512_arena_bytes_fp8,omitempty"`
	GPT2T512ArenaRatio float64 `json:"ratio_gpt2_t512_arena_fp8_over_fp32,omitempty"`

	// One iteration of examples/llama's default model (see runLlama);
	// zero with -llama=false.
	LlamaFP32         float64 `json:"llama_iter_ms_fp32,omitempty"`
	LlamaBF16         float64 `json:"llama_iter_ms_bf16,omitempty"`
	LlamaFP8          float64 `json:"llama_iter_ms_fp8,omitempty"`
	LlamaBF16OverFP32 float64 `json:"ratio_llama_bf16_over_fp32,omitempty"`
	LlamaFP8OverFP32  float64 `json:"ratio_llama_fp8_over_fp32,omitempty"`
	// One iteration of a Mixtral-style MoE (see runMoE), and its first
	// grouped GEMM in float32 beside the dense GEMM of the same rows;
	// zero with -moe=false.
	MoEFP32             float64 `json:"moe_iter_ms_fp32,omitempty"`
	MoEBF16             float64 `json:"moe_iter_ms_bf16,omitempty"`
	MoEFP8              float64 `json:"moe_iter_ms_fp8,omitempty"`
	MoEBF16OverFP32     float64 `json:"ratio_moe_bf16_over_fp32,omitempty"`
	MoEFP8OverFP32      float64 `json:"ratio_moe_fp8_over_fp32,omitempty"`
	MoEGroupedGFLOPS    float64 `json:"moe_grouped_gemm_gflops,omitempty"`
	MoEDenseGFLOPS      float64 `json:"moe_dense_gemm_gflops,omitempty"`
	MoEGroupedOverDense float64 `json:"ratio_moe_grouped_over_dense_rate,omitempty"`
}

// median returns the median of each contender's samples.
func median(ts [][]time.Duration) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		t = append([]time.Duration(nil), t...)
		sort.Slice(t, func(a, b int) bool { return t[a] < t[b] })
		out[i] = t[len(t)/2]
	}
	return out
}

// pairedRatio returns the median over the rounds of samples of
// num[r]/den[r]: each round times every contender back to back, so the
// ratio of one round's two samples sees one machine state, where the
// ratio of two medians can pair a quiet minute with a busy one.
func pairedRatio(num, den []time.Duration) float64 {
	r := make([]float64, len(num))
	for i := range num {
		r[i] = float64(num[i]) / float64(den[i])
	}
	sort.Float64s(r)
	return r[len(r)/2]
}

// samples times each of fs reps times, interleaved (f0, f1, …, f0, f1,
// …) so that all of them see the same machine conditions, after warm-up
// calls, and returns every contender's samples in the order taken (round
// r of every contender before round r+1 of any). A sample is the mean of
// as many consecutive calls as fill sampleTime (one for a call that
// long): the steady state a training loop runs in, not one call after
// the collection that precedes each sample.
func samples(reps int, fs ...func() error) ([][]time.Duration, error) {
	runs := make([]int, len(fs))
	for i := 0; i < 2; i++ {
		for j, f := range fs {
			start := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			runs[j] = max(1, min(maxRuns, int(sampleTime/max(time.Since(start), time.Microsecond))))
		}
	}
	ts := make([][]time.Duration, len(fs))
	for r := 0; r < reps; r++ {
		for i, f := range fs {
			// Collect outside the timed region, so one contender's
			// garbage (gorgonia allocates every step) is not collected on
			// another's time.
			runtime.GC()
			start := time.Now()
			for k := 0; k < runs[i]; k++ {
				if err := f(); err != nil {
					return nil, err
				}
			}
			ts[i] = append(ts[i], time.Since(start)/time.Duration(runs[i]))
		}
	}
	return ts, nil
}

// sampleTime is how long one of samples' samples runs, and maxRuns
// the most calls it averages.
const (
	sampleTime = 20 * time.Millisecond
	maxRuns    = 50
)

func gflops(n int, d time.Duration) float64 {
	return 2 * float64(n) * float64(n) * float64(n) / d.Seconds() / 1e9
}

func randn(rng *rand.Rand, size int, std float64) []float32 {
	s := make([]float32, size)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * std)
	}
	return s
}

// precisions are the recipes the model figures compare: float32 (nil),
// bf16 mixed precision and FP8 (TE, HYBRID).
var precisions = []recipe.Recipe{nil, recipe.BF16{}, recipe.TE{}}

// smallRecipes are the recipes of the MLP and baby-GPT figures: the
// precisions, then Transformer Engine's Float8BlockScaling (its
// defaults: E4M3, 1-D inputs and gradients, 2-D weights).
var smallRecipes = append(append([]recipe.Recipe(nil), precisions...), recipe.Float8Block{}, recipe.NVFP4{}, recipe.TE{UseMXFP8BlockScaling: true})

func run(n, batch, reps int, withGPT bool) (*Results, error) {
	if err := kernels.CheckEnv(); err != nil {
		return nil, err
	}
	r := &Results{Kernel: kernels.Kernel(), KernelBF16: kernels.KernelBF16(), N: n, Batch: batch}
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c := randn(rng, n*n, 1), randn(rng, n*n, 0.05), make([]float32, n*n)

	g := kernels.NewGemm()
	gemm32 := func() error { g.Run(false, false, n, n, n, 1, a, n, b, n, 0, c, n); return nil }
	oa, ob := &kernels.Operand{F32: a}, &kernels.Operand{F32: b}
	gemm16 := func() error {
		g.RunBF16(false, false, n, n, n, oa, n, ob, n, c, n, kernels.Epilogue{Alpha: 1})
		return nil
	}
	sg := fp8.NewScaledGEMM()
	qa, qb := make([]uint8, n*n), make([]uint8, n*n)
	sa, sb := fp8.CurrentScale(fp8.Amax(a), fp8.E4M3, false), fp8.CurrentScale(fp8.Amax(b), fp8.E4M3, false)
	gemm8 := func() error {
		fp8.Quantize(qa, a, fp8.E4M3, sa)
		fp8.Quantize(qb, b, fp8.E4M3, sb)
		return sg.Run(n, n, n, fp8.Operand{Codes: qa, Format: fp8.E4M3, ScaleInv: 1 / sa}, fp8.Operand{Codes: qb, Format: fp8.E4M3, ScaleInv: 1 / sb}, c)
	}
	ga := blas32.General{Rows: n, Cols: n, Stride: n, Data: a}
	gb := blas32.General{Rows: n, Cols: n, Stride: n, Data: b}
	gc := blas32.General{Rows: n, Cols: n, Stride: n, Data: c}
	gonum := func() error { blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, ga, gb, 0, gc); return nil }
	// Warm the cores up before the first timed figure.
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		_ = gemm32()
	}
	ts, err := samples(reps, gemm32, gemm16, gemm8, gonum)
	if err != nil {
		return nil, err
	}
	d := median(ts)
	r.GemmFP32, r.GemmBF16, r.GemmFP8, r.GemmGonum = gflops(n, d[0]), gflops(n, d[1]), gflops(n, d[2]), gflops(n, d[3])
	// Rates: the float32 time over the other's.
	r.BF16OverFP32, r.FP8OverFP32, r.FP32OverGonum = pairedRatio(ts[0], ts[1]), pairedRatio(ts[0], ts[2]), pairedRatio(ts[3], ts[0])

	var steps []func() error
	for _, rec := range smallRecipes {
		step, err := octetMLP(batch, rec)
		if err != nil {
			return nil, err
		}
		steps = append(steps, step)
	}
	stepG, cleanup, err := gorgoniaMLP(batch)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if ts, err = samples(reps, append(steps, stepG)...); err != nil {
		return nil, err
	}
	d = median(ts)
	r.StepBF16OverFP32, r.StepFP8OverFP32, r.GorgoniaOverOctet = pairedRatio(ts[1], ts[0]), pairedRatio(ts[2], ts[0]), pairedRatio(ts[6], ts[0])
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.MLPFP32, r.MLPBF16, r.MLPFP8, r.MLPFP8Block, r.MLPNVFP4, r.MLPMXFP8, r.MLPGorgonia = ms(d[0]), ms(d[1]), ms(d[2]), ms(d[3]), ms(d[4]), ms(d[5]), ms(d[6])
	r.MLPFP8BlockOverFP8, r.MLPNVFP4OverFP8, r.MLPMXFP8OverFP8 = pairedRatio(ts[3], ts[2]), pairedRatio(ts[4], ts[2]), pairedRatio(ts[5], ts[2])

	if withGPT {
		steps = steps[:0]
		for _, rec := range smallRecipes {
			step, err := octetGPT(rec)
			if err != nil {
				return nil, err
			}
			steps = append(steps, step)
		}
		if ts, err = samples(reps, steps...); err != nil {
			return nil, err
		}
		d = median(ts)
		r.GPTFP32, r.GPTBF16, r.GPTFP8, r.GPTFP8Block, r.GPTNVFP4, r.GPTMXFP8 = ms(d[0]), ms(d[1]), ms(d[2]), ms(d[3]), ms(d[4]), ms(d[5])
		r.GPTFP8BlockOverFP8, r.GPTNVFP4OverFP8, r.GPTMXFP8OverFP8 = pairedRatio(ts[3], ts[2]), pairedRatio(ts[4], ts[2]), pairedRatio(ts[5], ts[2])
		r.GPTBF16OverFP32, r.GPTFP8OverFP32 = pairedRatio(ts[1], ts[0]), pairedRatio(ts[2], ts[0])
		// The share of each GPT iteration spent in GEMMs, from the
		// programs' own per-op profile (separate runs, not timed above).
		shares := []*float64{&r.GPTGEMMShareFP32, &r.GPTGEMMShareBF16, &r.GPTGEMMShareFP8}
		for i, rec := range precisions {
			step, prog, err := octetGPTProgram(rec)
			if err != nil {
				return nil, err
			}
			if err := step(); err != nil {
				return nil, err
			}
			prog.SetProfiling(true)
			for k := 0; k < max(3, reps); k++ {
				if err := step(); err != nil {
					return nil, err
				}
			}
			*shares[i] = prog.Profile().Share(gemmOps...)
		}
	}

	return r, nil
}

var mlpSizes = []int{784, 512, 512, 10}

// stepper makes one training step of a model through the library: the
// trainer for the recipe (nil: float32; parameters from seed 1, AdamW at
// a constant rate), stepping one fixed batch (ds holds exactly one); with
// debugDir, cfg's FP8 statistics are logged there.
func stepper(model train.ModelFunc, ds data.Dataset, batch int, rec recipe.Recipe, cfg *inspect.Config, debugDir string, noFusion bool, weightDecay, lr float64) (func() error, *train.Trainer, *train.Stepper, error) {
	prec := precision.Config{}
	switch {
	case rec == nil:
	case rec.Backend() == fp8.BackendBF16:
		prec.MixedPrecision = "bf16"
	default:
		prec.MixedPrecision, prec.Use = "fp8", rec
	}
	tr, err := train.New(train.Config{Model: model, Precision: prec, BatchSize: batch, NoShuffle: true, Seed: 1, LR: lr, WeightDecay: weightDecay,
		Debug: cfg, DebugLogDir: debugDir, NoFusion: noFusion})
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := tr.Start(ds)
	if err != nil {
		return nil, nil, nil, err
	}
	return func() error { _, err := s.Step(); return err }, tr, s, nil
}

// octetMLP returns one training step of the MLP with a recipe (nil:
// float32).
func octetMLP(batch int, rec recipe.Recipe) (func() error, error) {
	return octetMLPDebug(batch, rec, nil, "")
}

// octetMLPDebug is octetMLP with an FP8 debug config logging to dir.
func octetMLPDebug(batch int, rec recipe.Recipe, cfg *inspect.Config, dir string) (func() error, error) {
	step, _, _, err := mlpTrainingDebug(batch, rec, cfg, dir)
	return step, err
}

// mlpTraining returns one training step of the MLP, its program and
// its loss node.
func mlpTraining(batch int, rec recipe.Recipe) (func() error, *graph.Program, *graph.Node, error) {
	return mlpTrainingDebug(batch, rec, nil, "")
}

// mlpTrainingDebug is mlpTraining with an FP8 debug config logging to
// dir.
func mlpTrainingDebug(batch int, rec recipe.Recipe, cfg *inspect.Config, dir string) (func() error, *graph.Program, *graph.Node, error) {
	step, prog, loss, _, err := mlpTrainingStore(batch, rec, cfg, dir)
	return step, prog, loss, err
}

// mlpTrainingStore is mlpTrainingDebug that also returns the parameter
// store.
func mlpTrainingStore(batch int, rec recipe.Recipe, cfg *inspect.Config, dir string) (func() error, *graph.Program, *graph.Node, *graph.Store, error) {
	model := func(rows int, _ bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x := g.Input("x", graph.Float32, rows, mlpSizes[0])
		y := g.Input("labels", graph.Int32, rows)
		mlp, err := nn.NewMLP(b, "mlp", mlpSizes, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(mlp.Forward(x), y)}, nil
	}
	rng := rand.New(rand.NewPCG(3, 3))
	xs := randn(rng, batch*mlpSizes[0], 1)
	ys := make([]int32, batch)
	for i := range ys {
		ys[i] = int32(i % 10)
	}
	ds, err := data.NewTensors(data.Float32Column("x", xs, mlpSizes[0]), data.LabelColumn("label", ys, 10))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	step, tr, s, err := stepper(model, ds, batch, rec, cfg, dir, false, 0.01, 1e-3)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return step, s.Program(), tr.Model().Loss, tr.Store(), nil
}

// gemmOps are the op types that are GEMMs (with the fused GEMMs, whose
// types start with one of these and "+", see graph.Profile.Share).
var gemmOps = []string{"Linear", "MatMul", "BatchMatMul", "ScaledMatMul", "BF16MatMul"}

// gptConfig is examples/gpt's baby GPT on its default corpus's vocabulary.
var gptConfig = nn.GPTConfig{Layers: 4, Heads: 4, Embd: 128, Block: 64, Vocab: 104, Seed: 1}

const gptBatch = 12

// octetGPT returns one training iteration of the baby GPT with a recipe
// (see octetGPTProgram).
func octetGPT(rec recipe.Recipe) (func() error, error) {
	step, _, err := octetGPTProgram(rec)
	return step, err
}

// octetGPTProgram returns one training iteration of the baby GPT with a
// recipe (nil: float32) on a fixed random batch, and its program.
func octetGPTProgram(rec recipe.Recipe) (func() error, *graph.Program, error) {
	step, prog, _, err := gptTraining(gptConfig, gptBatch, rec, false)
	return step, prog, err
}

// gptTraining is octetGPTProgram for a GPT configuration, with or
// without Prepare's Fuse stage, also returning the loss node.
func gptTraining(cfg nn.GPTConfig, batch int, rec recipe.Recipe, noFusion bool) (func() error, *graph.Program, *graph.Node, error) {
	step, prog, loss, _, err := gptTrainingStore(cfg, batch, rec, noFusion)
	return step, prog, loss, err
}

// gptTrainingStore is gptTraining that also returns the parameter store.
func gptTrainingStore(cfg nn.GPTConfig, batch int, rec recipe.Recipe, noFusion bool) (func() error, *graph.Program, *graph.Node, *graph.Store, error) {
	t := cfg.Block
	model := func(rows int, _ bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		gpt, err := nn.NewGPT(b, "gpt", cfg)
		if err != nil {
			return nil, err
		}
		ids, pos, labels := g.Input("ids", graph.Int32, rows, t), g.Input("pos", graph.Int32, t), g.Input("labels", graph.Int32, rows, t)
		ps := make([]int32, t)
		for i := range ps {
			ps[i] = int32(i)
		}
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": ids, "y": labels}, Loss: ops.CrossEntropy(gpt.Forward(ids, pos), labels),
			Fixed: func(p *graph.Program) error { return p.FeedInt32(pos, ps) }}, nil
	}
	rng := rand.New(rand.NewPCG(4, 4))
	xs, ys := make([]int32, batch*t), make([]int32, batch*t)
	for i := range xs {
		xs[i], ys[i] = rng.Int32N(int32(cfg.Vocab)), rng.Int32N(int32(cfg.Vocab))
	}
	ds, err := data.NewTensors(data.Int32Column("x", xs, t), data.Column{Field: data.Field{Name: "y", DType: graph.Int32, Shape: []int{t}, Label: true}, I32: ys})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	step, tr, s, err := stepper(model, ds, batch, rec, nil, "", noFusion, 0.1, 3e-4)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return step, s.Program(), tr.Model().Loss, tr.Store(), nil
}

func printTable(r *Results) {
	fmt.Printf("GEMM n=%d (micro-kernels %s, bf16 %s)\n", r.N, r.Kernel, r.KernelBF16)
	fmt.Printf("  %-34s %8.1f GFLOP/s\n", "Octet float32", r.GemmFP32)
	fmt.Printf("  %-34s %8.1f GFLOP/s  (%.2f× float32)\n", "Octet bf16 (float32 operands)", r.GemmBF16, r.BF16OverFP32)
	fmt.Printf("  %-34s %8.1f GFLOP/s  (%.2f× float32)\n", "Octet FP8 E4M3 (casts included)", r.GemmFP8, r.FP8OverFP32)
	fmt.Printf("  %-34s %8.1f GFLOP/s  (Octet is %.1f× gonum)\n", "gonum blas32.Gemm", r.GemmGonum, r.FP32OverGonum)
	fmt.Printf("MLP 784-512-512-10 training step, batch %d\n", r.Batch)
	fmt.Printf("  %-34s %8.2f ms\n", "Octet float32 (AdamW)", r.MLPFP32)
	fmt.Printf("  %-34s %8.2f ms  (%.2f× float32)\n", "Octet bf16 mixed precision (AdamW)", r.MLPBF16, r.StepBF16OverFP32)
	fmt.Printf("  %-34s %8.2f ms  (%.2f× float32)\n", "Octet FP8 TE HYBRID (AdamW)", r.MLPFP8, r.StepFP8OverFP32)
	fmt.Printf("  %-34s %8.2f ms  (%.2f× FP8 TE HYBRID)\n", "Octet FP8 Float8BlockScaling", r.MLPFP8Block, r.MLPFP8BlockOverFP8)
	fmt.Printf("  %-34s %8.2f ms  (%.2f× FP8 TE HYBRID)\n", "Octet NVFP4BlockScaling", r.MLPNVFP4, r.MLPNVFP4OverFP8)
	fmt.Printf("  %-34s %8.2f ms  (%.2f× FP8 TE HYBRID)\n", "Octet MXFP8BlockScaling", r.MLPMXFP8, r.MLPMXFP8OverFP8)
	fmt.Printf("  %-34s %8.2f ms  (Octet float32 is %.1f× faster)\n", "gorgonia v0.9.18 (Adam)", r.MLPGorgonia, r.GorgoniaOverOctet)
	if r.GPTFP32 > 0 {
		fmt.Printf("Baby GPT iteration (4 layers, 4 heads, 128 wide, context 64, batch %d)\n", gptBatch)
		fmt.Printf("  %-34s %8.2f ms\n", "Octet float32", r.GPTFP32)
		fmt.Printf("  %-34s %8.2f ms  (%.2f× float32)\n", "Octet bf16 mixed precision", r.GPTBF16, r.GPTBF16OverFP32)
		fmt.Printf("  %-34s %8.2f ms  (%.2f× float32)\n", "Octet FP8 TE HYBRID", r.GPTFP8, r.GPTFP8OverFP32)
		fmt.Printf("  %-34s %8.2f ms  (%.2f× FP8 TE HYBRID)\n", "Octet FP8 Float8BlockScaling", r.GPTFP8Block, r.GPTFP8BlockOverFP8)
		fmt.Printf("  %-34s %8.2f ms  (%.2f× FP8 TE HYBRID)\n", "Octet NVFP4BlockScaling", r.GPTNVFP4, r.GPTNVFP4OverFP8)
		fmt.Printf("  %-34s %8.2f ms  (%.2f× FP8 TE HYBRID)\n", "Octet MXFP8BlockScaling", r.GPTMXFP8, r.GPTMXFP8OverFP8)
		fmt.Printf("  %-34s float32 %.0f%%, bf16 %.0f%%, FP8 %.0f%%\n", "share of the iteration in GEMMs", 100*r.GPTGEMMShareFP32, 100*r.GPTGEMMShareBF16, 100*r.GPTGEMMShareFP8)
	}
	if r.GPT2FP32 > 0 {
		fmt.Printf("GPT-2 124M iteration (12 layers, 12 heads, 768 wide, vocabulary 50304, context 64, batch %d)\n", gpt2Batch)
		fmt.Printf("  %-34s %8.1f ms  (%.0f%% of the float32 GEMM roofline, %.1f GFLOP of GEMMs)\n", "Octet float32", r.GPT2FP32, 100*r.GPT2RooflineFP32, r.GPT2GEMMGFLOP)
		fmt.Printf("  %-34s %8.1f ms  (%.2f× float32)\n", "Octet bf16 mixed precision", r.GPT2BF16, r.GPT2BF16OverFP32)
		fmt.Printf("  %-34s %8.1f ms  (%.2f× float32)\n", "Octet FP8 TE HYBRID", r.GPT2FP8, r.GPT2FP8OverFP32)
		fmt.Printf("  %-34s float32 %.2f GB, FP8 %.2f GB (%.2f×)\n", "planned activations at context 512", float64(r.GPT2T512ArenaFP32)/1e9, float64(r.GPT2T512ArenaFP8)/1e9, r.GPT2T512ArenaRatio)
	}
	if r.LlamaFP32 > 0 {
		fmt.Printf("Llama (examples/llama's default: width 288, 6 layers, 6/2 heads, context 256, batch %d)\n", llamaBatch)
		fmt.Printf("  %-34s float32 %.1f ms, bf16 %.1f ms (%.2f×), FP8 %.1f ms (%.2f×)\n", "iteration", r.LlamaFP32, r.LlamaBF16, r.LlamaBF16OverFP32, r.LlamaFP8, r.LlamaFP8OverFP32)
	}
	if r.MoEFP32 > 0 {
		fmt.Printf("Mixtral-style MoE (width 256, 4 layers, 8/2 heads, 8 experts top-2 of width 512, vocabulary 8192, context 128, batch %d)\n", moeBatch)
		fmt.Printf("  %-34s float32 %.1f ms, bf16 %.1f ms (%.2f×), FP8 %.1f ms (%.2f×)\n", "iteration", r.MoEFP32, r.MoEBF16, r.MoEBF16OverFP32, r.MoEFP8, r.MoEFP8OverFP32)
		fmt.Printf("  %-34s %.1f GFLOP/s grouped, %.1f dense (grouped %.2f× the dense rate)\n", "gate_up GEMM, 2048 rows", r.MoEGroupedGFLOPS, r.MoEDenseGFLOPS, r.MoEGroupedOverDense)
	}
}
