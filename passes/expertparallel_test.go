package passes_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// moeStep is one training step of an MoE layer: the loss, and each
// parameter's gradient by name.
type moeStep struct {
	loss  uint32
	grads map[string][]uint32
}

// runMoE builds an MoE layer over tokens rows (the rows themselves a
// parameter, so that their gradient is checked), with loss Σ y·dy,
// prepares it under rc (nil: float32), with expert parallelism over ep
// when set, and runs two steps on the same inputs; it returns the second.
func runMoE(t *testing.T, rc recipe.Recipe, ep *ops.ExpertParallel, tokens int) (moeStep, []passes.ExpertShard) {
	const hidden, inter, experts = 32, 32, 5
	g := graph.New()
	b := nn.NewBuilder(g)
	x := b.Scope("input").Param("rows", nn.Normal(1), tokens, hidden)
	moe, err := nn.NewMoE(b, "moe", nn.MoEConfig{Experts: experts, TopK: 2, Hidden: hidden, Intermediate: inter, NormTopKProb: true, Init: nn.Normal(0.2)})
	require.NoError(t, err)
	y, _ := moe.Forward(x)
	dy := g.Input("dy", graph.Float32, tokens, hidden)
	loss := ops.Sum(ops.Mul(y, dy))
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 11))
	var shards []passes.ExpertShard
	cfg := passes.Config{Recipe: rc, Loss: loss, Params: b.Params(), Filter: func(*graph.Node, string) bool { return true }}
	if ep != nil {
		cfg.ForwardPasses = []passes.Pass{passes.ExpertParallelPass(ep, &shards)}
	}
	prep, err := passes.Prepare(g, store, cfg)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	dys := make([]float32, tokens*hidden)
	for i := range dys {
		dys[i] = float32(rng.NormFloat64())
	}
	require.NoError(t, prep.Train.FeedFloat32(dy, dys))
	var out moeStep
	for range 2 {
		require.NoError(t, prep.Train.Run())
	}
	l, err := prep.Train.Scalar(prep.Loss)
	require.NoError(t, err)
	out.loss = math.Float32bits(l)
	out.grads = map[string][]uint32{}
	for i, p := range b.Params() {
		out.grads[p.Name()] = bitsOf(prep.Train.Float32(prep.Grads[i]))
	}
	return out, shards
}

// Expert parallelism over 2 and 3 ranks (10 tokens: uneven) gives the
// loss and every gradient one process gives, bit for bit — the rows', the
// router's, and each rank's slice of the expert weights' — in float32,
// bf16 and FP8 with block scaling, MXFP8 and delayed scaling (the
// experts' casts see one process's rows).
func TestExpertParallelEqualsOneProcess(t *testing.T) {
	recipes := map[string]recipe.Recipe{"fp32": nil, "bf16": recipe.BF16{}, "block": recipe.Float8Block{},
		"mxfp8": recipe.TE{UseMXFP8BlockScaling: true}, "te delayed": recipe.TE{Margin: 1, AmaxHistoryLen: 4, AmaxComputeAlgo: fp8.MaxAlgo}}
	for name, rc := range recipes {
		one, _ := runMoE(t, rc, nil, 10)
		for _, p := range []int{2, 3} {
			err := dist.RunLocal(p, func(c dist.Communicator) error {
				got, shards := runMoE(t, rc, &ops.ExpertParallel{Comm: c}, 10)
				if got.loss != one.loss {
					return fmt.Errorf("loss %v, one process %v", math.Float32frombits(got.loss), math.Float32frombits(one.loss))
				}
				held := map[string]passes.ExpertShard{}
				for _, s := range shards {
					held[s.Param.Name()] = s
				}
				if len(held) != 2 {
					return fmt.Errorf("%d expert weights sharded, want 2", len(held))
				}
				for pn, want := range one.grads {
					g := got.grads[pn]
					if s, ok := held[pn]; ok {
						per := len(want) / 5
						want, g = want[s.First*per:(s.First+s.N)*per], g[s.First*per:(s.First+s.N)*per]
					}
					for i := range want {
						if g[i] != want[i] {
							return fmt.Errorf("gradient of %q [%d]: %v, one process %v", pn, i, math.Float32frombits(g[i]), math.Float32frombits(want[i]))
						}
					}
				}
				return nil
			})
			require.NoError(t, err, "%s over %d ranks", name, p)
		}
	}
}

// With bf16 or FP8 dispatch the results no longer equal one process's
// float32 exchange, but they do not depend on the number of ranks (every
// row is rounded the same on whichever rank it is), stay close to it,
// and the wire formats round-trip as specified.
func TestExpertParallelNarrowDispatch(t *testing.T) {
	exact, _ := runMoE(t, nil, nil, 12)
	for _, f := range []ops.WireFormat{ops.WireBF16, ops.WireFP8} {
		var two, three moeStep
		for _, p := range []int{2, 3} {
			require.NoError(t, dist.RunLocal(p, func(c dist.Communicator) error {
				got, _ := runMoE(t, nil, &ops.ExpertParallel{Comm: c, Dispatch: f}, 12)
				if c.Rank() == 0 {
					if p == 2 {
						two = got
					} else {
						three = got
					}
				}
				return nil
			}))
		}
		require.Equal(t, two.loss, three.loss, "%v: 2 and 3 ranks", f)
		require.Equal(t, two.grads["input.rows"], three.grads["input.rows"], "%v: the rows' gradient", f)
		// The experts' weight gradients (their inputs came over the
		// wire) within a few percent of the exact ones, in L2.
		for _, name := range []string{"moe.experts.gate_up_proj", "moe.experts.down_proj"} {
			var num, den float64
			for i, w := range exact.grads[name][:len(exact.grads[name])*2/5] { // rank 0's experts
				d := float64(math.Float32frombits(two.grads[name][i])) - float64(math.Float32frombits(w))
				num += d * d
				den += float64(math.Float32frombits(w)) * float64(math.Float32frombits(w))
			}
			rel := math.Sqrt(num / den)
			require.Less(t, rel, map[ops.WireFormat]float64{ops.WireBF16: 0.01, ops.WireFP8: 0.08}[f], "%v %s", f, name)
			require.Greater(t, rel, 0.0, "%v %s: narrowed", f, name)
		}
	}
	for _, s := range []string{"fp32", "bf16", "fp8", "BF16", ""} {
		_, err := ops.ParseWireFormat(s)
		require.NoError(t, err, s)
	}
	_, err := ops.ParseWireFormat("fp16")
	require.ErrorContains(t, err, `"fp16"`)
}

// An expert-parallel step allocates nothing after the first: the
// exchanges, plans and gathers reuse their buffers (every rank's
// allocations are counted, the ranks running at once).
func TestExpertParallelStepAllocatesNothing(t *testing.T) {
	for _, f := range []ops.WireFormat{ops.WireFloat32, ops.WireFP8} {
		var mallocs [2]uint64
		require.NoError(t, dist.RunLocal(2, func(c dist.Communicator) error {
			g := graph.New()
			b := nn.NewBuilder(g)
			x := b.Scope("input").Param("rows", nn.Normal(1), 12, 32)
			moe, err := nn.NewMoE(b, "moe", nn.MoEConfig{Experts: 4, TopK: 2, Hidden: 32, Intermediate: 32, Init: nn.Normal(0.2)})
			if err != nil {
				return err
			}
			y, _ := moe.Forward(x)
			loss := ops.Sum(ops.Mul(y, y))
			store := graph.NewStore()
			if err := b.Init(store, 5); err != nil {
				return err
			}
			var shards []passes.ExpertShard
			prep, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.Float8Block{}, Loss: loss, Params: b.Params(),
				ForwardPasses: []passes.Pass{passes.ExpertParallelPass(&ops.ExpertParallel{Comm: c, Dispatch: f}, &shards)}})
			if err != nil {
				return err
			}
			sync := []float32{0}
			var ms runtime.MemStats
			for i := range 2 {
				for range 3 {
					if err := prep.Train.Run(); err != nil {
						return err
					}
				}
				if err := c.AllReduceF32(sync, dist.Sum); err != nil {
					return err
				}
				if c.Rank() == 0 {
					runtime.ReadMemStats(&ms)
					mallocs[i] = ms.Mallocs
				}
				if err := c.AllReduceF32(sync, dist.Sum); err != nil {
					return err
				}
			}
			return nil
		}))
		require.Zero(t, mallocs[1]-mallocs[0], "%v: allocations in 3 steps of 2 ranks", f)
	}
}
