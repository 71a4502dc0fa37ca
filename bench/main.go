// Command bench measures Octet against gonum and gorgonia in one run and
// prints a table (or, with -json, one JSON object):
//
//	go run ./bench          # table
//	go run ./bench -json    # {"gemm_gflops_fp32": …, …}
//
// GEMMs are square (n = 1024 by default), C = A·B. The FP8 GEMM includes
// casting both inputs (delayed scaling: scale known, cast and amax in one
// pass). The MLP step is 784-512-512-10 with ReLU, softmax cross-entropy
// and one Adam(W) update at batch 128: feed, forward, backward, update.
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

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

func main() {
	n := flag.Int("n", 1024, "GEMM size")
	batch := flag.Int("batch", 128, "MLP batch size")
	reps := flag.Int("reps", 15, "timed repetitions per figure (median reported)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	flag.Parse()
	res, err := run(*n, *batch, *reps)
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
	Kernel            string  `json:"gemm_kernel"`
	N                 int     `json:"gemm_n"`
	GemmFP32          float64 `json:"gemm_gflops_fp32"`
	GemmFP8           float64 `json:"gemm_gflops_fp8"`
	GemmGonum         float64 `json:"gemm_gflops_gonum"`
	Batch             int     `json:"mlp_batch"`
	MLPFP32           float64 `json:"mlp_step_ms_fp32"`
	MLPFP8            float64 `json:"mlp_step_ms_fp8"`
	MLPGorgonia       float64 `json:"mlp_step_ms_gorgonia"`
	FP32OverGonum     float64 `json:"ratio_gemm_fp32_over_gonum"`
	FP8OverFP32       float64 `json:"ratio_gemm_fp8_over_fp32"`
	GorgoniaOverOctet float64 `json:"ratio_mlp_gorgonia_over_fp32"`
	StepFP8OverFP32   float64 `json:"ratio_mlp_fp8_over_fp32"`
}

// medians times each of fs reps times, interleaved (f0, f1, …, f0, f1,
// …) so that all of them see the same machine conditions, after warm-up
// calls, and returns each one's median.
func medians(reps int, fs ...func() error) ([]time.Duration, error) {
	for i := 0; i < 2; i++ {
		for _, f := range fs {
			if err := f(); err != nil {
				return nil, err
			}
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
			if err := f(); err != nil {
				return nil, err
			}
			ts[i] = append(ts[i], time.Since(start))
		}
	}
	out := make([]time.Duration, len(fs))
	for i, t := range ts {
		sort.Slice(t, func(a, b int) bool { return t[a] < t[b] })
		out[i] = t[len(t)/2]
	}
	return out, nil
}

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

func run(n, batch, reps int) (*Results, error) {
	r := &Results{Kernel: kernels.Kernel(), N: n, Batch: batch}
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c := randn(rng, n*n, 1), randn(rng, n*n, 0.05), make([]float32, n*n)

	g := kernels.NewGemm()
	gemm32 := func() error { g.Run(false, false, n, n, n, 1, a, n, b, n, 0, c, n); return nil }
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
	d, err := medians(reps, gemm32, gemm8, gonum)
	if err != nil {
		return nil, err
	}
	r.GemmFP32, r.GemmFP8, r.GemmGonum = gflops(n, d[0]), gflops(n, d[1]), gflops(n, d[2])

	step32, err := octetMLP(batch, false)
	if err != nil {
		return nil, err
	}
	step8, err := octetMLP(batch, true)
	if err != nil {
		return nil, err
	}
	stepG, cleanup, err := gorgoniaMLP(batch)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	d, err = medians(reps, step32, step8, stepG)
	if err != nil {
		return nil, err
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.MLPFP32, r.MLPFP8, r.MLPGorgonia = ms(d[0]), ms(d[1]), ms(d[2])

	r.FP32OverGonum = r.GemmFP32 / r.GemmGonum
	r.FP8OverFP32 = r.GemmFP8 / r.GemmFP32
	r.GorgoniaOverOctet = r.MLPGorgonia / r.MLPFP32
	r.StepFP8OverFP32 = r.MLPFP8 / r.MLPFP32
	return r, nil
}

var mlpSizes = []int{784, 512, 512, 10}

// octetMLP returns one training step of the MLP, in float32 or FP8 (TE
// recipe, HYBRID).
func octetMLP(batch int, useFP8 bool) (func() error, error) {
	g := graph.New()
	b := nn.NewBuilder(g)
	x := g.Input("x", graph.Float32, batch, mlpSizes[0])
	y := g.Input("labels", graph.Int32, batch)
	mlp, err := nn.NewMLP(b, "mlp", mlpSizes, nn.ReLU, nn.Dropout{})
	if err != nil {
		return nil, err
	}
	loss := ops.CrossEntropy(mlp.Forward(x), y)
	grads, err := graph.Grad(loss, b.Params()...)
	if err != nil {
		return nil, err
	}
	store := graph.NewStore()
	if err := b.Init(store, 1); err != nil {
		return nil, err
	}
	outs := append([]*graph.Node{loss}, grads...)
	var prog *graph.Program
	if useFP8 {
		prep, err := passes.Prepare(g, store, passes.Config{Recipe: fp8.TERecipe{}, TrainOutputs: outs})
		if err != nil {
			return nil, err
		}
		prog = prep.Train
	} else if prog, err = graph.Compile(g, store, graph.Options{Training: true}, outs...); err != nil {
		return nil, err
	}
	params, err := optim.Bind(store, prog, b.Params(), grads)
	if err != nil {
		return nil, err
	}
	opt := optim.NewAdamW(params, 0.01)
	rng := rand.New(rand.NewPCG(3, 3))
	xs := randn(rng, batch*mlpSizes[0], 1)
	ys := make([]int32, batch)
	for i := range ys {
		ys[i] = int32(i % 10)
	}
	return func() error {
		if err := prog.FeedFloat32(x, xs); err != nil {
			return err
		}
		if err := prog.FeedInt32(y, ys); err != nil {
			return err
		}
		if err := prog.Run(); err != nil {
			return err
		}
		opt.Step(1e-3)
		return nil
	}, nil
}

func printTable(r *Results) {
	fmt.Printf("GEMM n=%d (micro-kernel %s)\n", r.N, r.Kernel)
	fmt.Printf("  %-34s %8.1f GFLOP/s\n", "Octet float32", r.GemmFP32)
	fmt.Printf("  %-34s %8.1f GFLOP/s  (%.2f× float32)\n", "Octet FP8 E4M3 (casts included)", r.GemmFP8, r.FP8OverFP32)
	fmt.Printf("  %-34s %8.1f GFLOP/s  (Octet is %.1f× gonum)\n", "gonum blas32.Gemm", r.GemmGonum, r.FP32OverGonum)
	fmt.Printf("MLP 784-512-512-10 training step, batch %d\n", r.Batch)
	fmt.Printf("  %-34s %8.2f ms\n", "Octet float32 (AdamW)", r.MLPFP32)
	fmt.Printf("  %-34s %8.2f ms  (%.2f× float32)\n", "Octet FP8 TE HYBRID (AdamW)", r.MLPFP8, r.StepFP8OverFP32)
	fmt.Printf("  %-34s %8.2f ms  (Octet float32 is %.1f× faster)\n", "gorgonia v0.9.18 (Adam)", r.MLPGorgonia, r.GorgoniaOverOctet)
}
