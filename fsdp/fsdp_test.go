package fsdp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

var sizes = []int{784, 64, 48, 16}

const global = 24 // divides by 1, 2, 3 and 4

// data returns the global batch of step s.
func data(s int) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(uint64(s), 1))
	x := make([]float32, global*sizes[0])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	y := make([]int32, global)
	for i := range y {
		y[i] = rng.Int32N(int32(sizes[len(sizes)-1]))
	}
	return x, y
}

type replica struct {
	store  *graph.Store
	prog   *graph.Program
	params []*graph.Node
	grads  []*graph.Node
	x, y   *graph.Node
	loss   *graph.Node
}

// build makes the MLP for a batch, converted to FP8 (AO tensorwise, every
// layer) when fp is set.
func build(t *testing.T, batch int, fp bool, shard func(g *graph.Graph, s *graph.Store, params []*graph.Node)) *replica {
	g := graph.New()
	b := nn.NewBuilder(g)
	r := &replica{}
	r.x = g.Input("x", graph.Float32, batch, sizes[0])
	r.y = g.Input("labels", graph.Int32, batch)
	mlp, err := nn.NewMLP(b, "mlp", sizes, nn.ReLU, nn.Dropout{})
	require.NoError(t, err)
	r.loss = ops.CrossEntropy(mlp.Forward(r.x), r.y)
	r.params = b.Params()
	r.grads, err = graph.Grad(r.loss, r.params...)
	require.NoError(t, err)
	r.store = graph.NewStore()
	require.NoError(t, b.Init(r.store, 7))
	outs := append([]*graph.Node{r.loss}, r.grads...)
	if fp {
		ao, _ := recipe.NewAO("tensorwise")
		_, err := passes.ConvertLinear(g, r.store, passes.LinearConfig{Recipe: ao, Filter: func(*graph.Node, string) bool { return true }})
		require.NoError(t, err)
		require.True(t, passes.HasFP8Layers(g))
	}
	if shard != nil {
		shard(g, r.store, r.params)
	}
	r.prog, err = graph.Compile(g, r.store, graph.Options{Training: true}, outs...)
	require.NoError(t, err)
	return r
}

// reference trains single-process: the global batch at once, or (micro >
// 1) as micro-batches whose gradients are averaged, which is what the
// ranks of a sharded run compute.
func reference(t *testing.T, steps, micro int, fp bool) []float64 {
	r := build(t, global/micro, fp, nil)
	params, err := optim.Bind(r.store, r.prog, r.params, r.grads)
	require.NoError(t, err)
	acc := make([][]float32, len(params))
	accParams := make([]optim.Param, len(params))
	for i, p := range params {
		acc[i] = make([]float32, len(p.W))
		accParams[i] = optim.Param{Name: p.Name, W: p.W, G: acc[i], Decay: p.Decay}
	}
	opt := optim.NewAdamW(accParams, 0.01)
	var losses []float64
	local := global / micro
	for s := 0; s < steps; s++ {
		x, y := data(s)
		for i := range acc {
			clear(acc[i])
		}
		var loss float64
		for m := 0; m < micro; m++ {
			require.NoError(t, r.prog.FeedFloat32(r.x, x[m*local*sizes[0]:(m+1)*local*sizes[0]]))
			require.NoError(t, r.prog.FeedInt32(r.y, y[m*local:(m+1)*local]))
			require.NoError(t, r.prog.Run())
			l, _ := r.prog.Scalar(r.loss)
			loss += float64(l)
			for i, p := range params {
				for j, g := range p.G {
					acc[i][j] += g
				}
			}
		}
		for i := range acc {
			for j := range acc[i] {
				acc[i][j] /= float32(micro)
			}
		}
		opt.Step(1e-3)
		losses = append(losses, loss/float64(micro))
	}
	return losses
}

type result struct {
	losses []float64
	stats  []dist.Stats // per step, collectives inside the step
	report Report
}

// trainRank trains one rank of a sharded run over comm and returns, on
// every rank, the mean loss and this rank's in-step collective counters
// for each step.
func trainRank(t *testing.T, comm dist.Communicator, steps int, fp bool, cfg Config) (result, error) {
	var res result
	n, rank := comm.Size(), comm.Rank()
	// The first global%n ranks take one row more.
	lo := rank*(global/n) + min(rank, global%n)
	hi := lo + global/n
	if rank < global%n {
		hi++
	}
	var sh *Sharded
	var serr error
	r := build(t, hi-lo, fp, func(g *graph.Graph, s *graph.Store, params []*graph.Node) {
		sh, res.report, serr = Shard(g, s, comm, params, cfg)
	})
	if serr != nil {
		return res, serr
	}
	drv, err := NewRank(sh, r.prog, r.grads)
	if err != nil {
		return res, err
	}
	if err := drv.SetBatchShare(hi-lo, global); err != nil {
		return res, err
	}
	opt := optim.NewAdamW(drv.Params(), 0.01)
	even := global%n == 0
	for s := 0; s < steps; s++ {
		x, y := data(s)
		if err := r.prog.FeedFloat32(r.x, x[lo*sizes[0]:hi*sizes[0]]); err != nil {
			return res, err
		}
		if err := r.prog.FeedInt32(r.y, y[lo:hi]); err != nil {
			return res, err
		}
		comm.ResetStats()
		if err := drv.Run(); err != nil {
			return res, err
		}
		opt.Step(1e-3)
		if err := drv.AfterUpdate(); err != nil {
			return res, err
		}
		st := comm.Stats()
		l, _ := r.prog.Scalar(r.loss)
		buf := []float32{l}
		if !even {
			buf[0] *= float32(hi-lo) * float32(n) / global
		}
		if err := comm.AllReduceF32(buf, dist.Sum); err != nil {
			return res, err
		}
		res.losses = append(res.losses, float64(buf[0])/float64(n))
		res.stats = append(res.stats, st)
	}
	return res, nil
}

// sharded trains with n in-process ranks and returns rank 0's result.
func sharded(t *testing.T, n, steps int, fp bool, cfg Config) result {
	results := make([]result, n)
	require.NoError(t, dist.RunLocal(n, func(c dist.Communicator) (err error) {
		results[c.Rank()], err = trainRank(t, c, steps, fp, cfg)
		return err
	}))
	return results[0]
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }

// A global batch that does not split evenly (24 rows over 5 or 7 ranks)
// trains as one process does: SetBatchShare weights each rank's
// gradients by its rows. Without it the uneven average drifts.
func TestUnevenSplitMatchesSingleProcess(t *testing.T) {
	ref := reference(t, 10, 1, false)
	for _, n := range []int{5, 7} {
		got := sharded(t, n, 10, false, Config{})
		for s := range ref {
			require.Less(t, relErr(got.losses[s], ref[s]), 1e-5, "N=%d step %d: %v vs %v", n, s, got.losses[s], ref[s])
		}
	}
}

func TestSetBatchShareRefusesNonsense(t *testing.T) {
	require.NoError(t, dist.RunLocal(2, func(c dist.Communicator) error {
		var sh *Sharded
		r := build(t, 4, false, func(g *graph.Graph, s *graph.Store, params []*graph.Node) {
			var err error
			sh, _, err = Shard(g, s, c, params, Config{})
			require.NoError(t, err)
		})
		drv, err := NewRank(sh, r.prog, r.grads)
		require.NoError(t, err)
		require.ErrorContains(t, drv.SetBatchShare(0, 8), "batch share 0 of 8")
		require.ErrorContains(t, drv.SetBatchShare(9, 8), "batch share 9 of 8")
		require.NoError(t, drv.SetBatchShare(4, 8))
		return nil
	}))
}

func TestFloat32MatchesSingleProcess(t *testing.T) {
	ref := reference(t, 20, 1, false)
	for _, n := range []int{1, 2, 3, 4} {
		got := sharded(t, n, 20, false, Config{})
		for s := range ref {
			require.Less(t, relErr(got.losses[s], ref[s]), 1e-5, "N=%d step %d: %v vs %v", n, s, got.losses[s], ref[s])
		}
		// Every parameter is gathered in float32: numel × 4 bytes a step.
		want := 0
		for i := 0; i+1 < len(sizes); i++ {
			want += 4 * (sizes[i]*sizes[i+1] + sizes[i+1])
		}
		require.Equal(t, int64(want), got.stats[0].AllGatherBytes, "N=%d", n)
	}
}

func TestFloat8AllGatherMatchesSingleProcessFP8(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		ref := reference(t, 10, n, true)
		for _, pre := range []bool{false, true} {
			got := sharded(t, n, 10, true, Config{Float8AllGather: true, Precompute: pre})
			for s := range ref {
				require.Less(t, relErr(got.losses[s], ref[s]), 1e-5, "N=%d precompute=%v step %d: %v vs %v", n, pre, s, got.losses[s], ref[s])
			}
			// Weights move one byte per element, biases four.
			w, b := 0, 0
			for i := 0; i+1 < len(sizes); i++ {
				w += sizes[i] * sizes[i+1]
				b += 4 * sizes[i+1]
			}
			require.Equal(t, int64(w+b), got.stats[0].AllGatherBytes, "N=%d", n)
			require.Equal(t, w, got.report.Float8Bytes)
			require.Equal(t, len(sizes)-1, got.report.Float8Weights)
			// One amax all-reduce per layer per step, or one per step
			// (after the update) with precompute.
			want := len(sizes) - 1
			if pre {
				want = 1
			}
			require.Equal(t, want, got.stats[1].AllReduceCalls, fmt.Sprintf("N=%d precompute=%v", n, pre))
		}
	}
}

func TestRowwiseWeightsRefused(t *testing.T) {
	comms, _ := dist.NewLocal(1)
	g := graph.New()
	b := nn.NewBuilder(g)
	x := g.Input("x", graph.Float32, 4, 32)
	y := g.Input("labels", graph.Int32, 4)
	mlp, _ := nn.NewMLP(b, "mlp", []int{32, 32, 16}, nn.ReLU, nn.Dropout{})
	loss := ops.CrossEntropy(mlp.Forward(x), y)
	_, err := graph.Grad(loss, b.Params()...)
	require.NoError(t, err)
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 1))
	rw, _ := recipe.NewAO("rowwise")
	_, err = passes.ConvertLinear(g, store, passes.LinearConfig{Recipe: rw, Filter: func(*graph.Node, string) bool { return true }})
	require.NoError(t, err)
	_, _, err = Shard(g, store, comms[0], b.Params(), Config{Float8AllGather: true})
	require.ErrorContains(t, err, "tensorwise")
}

// TestShardCheckpoint saves every rank's shards and optimizer state,
// restores them into fresh ranks and continues: the losses equal an
// uninterrupted run's.
func TestShardCheckpoint(t *testing.T) {
	const n, steps, cut = 3, 8, 4
	straight := sharded(t, n, steps, true, Config{Float8AllGather: true})
	dir := t.TempDir()
	run := func(resume bool, from, to int) []float64 {
		losses := make([][]float64, n)
		require.NoError(t, dist.RunLocal(n, func(comm dist.Communicator) error {
			rank := comm.Rank()
			var sh *Sharded
			var serr error
			r := build(t, global/n, true, func(g *graph.Graph, s *graph.Store, params []*graph.Node) {
				sh, _, serr = Shard(g, s, comm, params, Config{Float8AllGather: true})
			})
			if serr != nil {
				return serr
			}
			drv, err := NewRank(sh, r.prog, r.grads)
			if err != nil {
				return err
			}
			opt := optim.NewAdamW(drv.Params(), 0.01)
			ss, err := sh.ShardStore(r.store)
			if err != nil {
				return err
			}
			path := fmt.Sprintf("%s/rank%d.safetensors", dir, rank)
			if resume {
				st := &checkpoint.State{Store: ss, Optimizer: opt}
				if err := checkpoint.Load(path, st); err != nil {
					return err
				}
				r.prog.SetStep(st.Step)
			}
			local := global / n
			for s := from; s < to; s++ {
				x, y := data(s)
				_ = r.prog.FeedFloat32(r.x, x[rank*local*sizes[0]:(rank+1)*local*sizes[0]])
				_ = r.prog.FeedInt32(r.y, y[rank*local:(rank+1)*local])
				if err := drv.Run(); err != nil {
					return err
				}
				opt.Step(1e-3)
				l, _ := r.prog.Scalar(r.loss)
				buf := []float32{l}
				if err := comm.AllReduceF32(buf, dist.Sum); err != nil {
					return err
				}
				losses[rank] = append(losses[rank], float64(buf[0])/n)
			}
			if !resume {
				return checkpoint.Save(path, &checkpoint.State{Store: ss, Optimizer: opt, Step: r.prog.Step()})
			}
			return nil
		}))
		return losses[0]
	}
	first := run(false, 0, cut)
	require.Equal(t, straight.losses[:cut], first)
	second := run(true, cut, steps)
	require.Equal(t, straight.losses[cut:], second, "resumed sharded run")
}

// TestFloat8BlockAllGatherIsTheFullCast: a Float8BlockScaling weight
// gathered from 1–4 uneven shards (every rank casting its own elements
// with block amaxes all-reduced across the ranks) holds, on every rank,
// the codes and scales of one cast of the full weight — 128×128 tiles
// and 1×128 blocks along either axis, ragged edges, NaN and infinite
// elements — checked through Dequantize, bit for bit.
func TestFloat8BlockAllGatherIsTheFullCast(t *testing.T) {
	const rows, cols = 200, 300
	rng := rand.New(rand.NewPCG(3, 4))
	full := make([]float32, rows*cols)
	for i := range full {
		full[i] = float32(rng.NormFloat64() * math.Exp(2*rng.NormFloat64()))
	}
	full[7], full[130*cols+299] = float32(math.NaN()), float32(math.Inf(-1))
	for _, c := range []ops.QuantizeConfig{
		{Quantizer: fp8.Quantizer{Kind: fp8.Float8Blocks, Format: fp8.E4M3, BlockDim: 2}, Tensor: fp8.RoleWeight},
		{Quantizer: fp8.Quantizer{Kind: fp8.Float8Blocks, Format: fp8.E4M3, BlockDim: 1}, Axis: 1, Tensor: fp8.RoleWeight},
		{Quantizer: fp8.Quantizer{Kind: fp8.Float8Blocks, Format: fp8.E5M2, BlockDim: 1, FP32Scales: true}, Axis: 0, Tensor: fp8.RoleWeight},
	} {
		// The reference: one cast of the full weight, dequantized.
		g := graph.New()
		w := g.Input("w", graph.Float32, rows, cols)
		d := ops.Dequantize("d", ops.Quantize(w, c))
		p, err := graph.Compile(g, graph.NewStore(), graph.Options{Training: true}, d)
		require.NoError(t, err)
		require.NoError(t, p.FeedFloat32(w, full))
		require.NoError(t, p.Run())
		want := append([]float32(nil), p.Float32(d)...)
		for _, n := range []int{1, 2, 3, 4} {
			comms, err := dist.NewLocal(n)
			require.NoError(t, err)
			counts := dist.Split(len(full), n)
			offs := dist.Offsets(counts)
			got := make([][]float32, n)
			errs := make([]error, n)
			done := make(chan int)
			for r := 0; r < n; r++ {
				go func(r int) {
					defer func() { done <- r }()
					g := graph.New()
					wp := g.Param("w", rows, cols)
					sh := &ops.Shard{Comm: comms[r], Counts: counts, Data: append([]float32(nil), full[offs[r]:offs[r]+counts[r]]...)}
					dq := ops.Dequantize("d", ops.FP8AllGather(wp, sh, c))
					store := graph.NewStore()
					if errs[r] = store.SetFloat32("w", make([]float32, rows*cols), rows, cols); errs[r] != nil {
						return
					}
					p, err := graph.Compile(g, store, graph.Options{Training: true}, dq)
					if err != nil {
						errs[r] = err
						return
					}
					if errs[r] = p.Run(); errs[r] == nil {
						got[r] = append([]float32(nil), p.Float32(dq)...)
					}
				}(r)
			}
			for range n {
				<-done
			}
			for r := 0; r < n; r++ {
				require.NoError(t, errs[r], "%+v N=%d rank %d", c, n, r)
				for i := range want {
					if math.Float32bits(got[r][i]) != math.Float32bits(want[i]) && !(got[r][i] != got[r][i] && want[i] != want[i]) {
						t.Fatalf("%+v N=%d rank %d: element %d = %v, full cast %v", c, n, r, i, got[r][i], want[i])
					}
				}
			}
		}
	}
}
