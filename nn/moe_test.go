package nn

import (
	"errors"
	"math"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// moeBlockRef is a Mixture-of-Experts block from its definition in
// float64 (transformers' MixtralSparseMoeBlock and Qwen2MoeSparseMoeBlock):
// softmax or sigmoid scores, each token's top k (ties to the lower
// expert), optionally renormalised and scaled; Σ_k w_k · expert_k(x);
// plus sigmoid(x·g) · shared(x).
func moeBlockRef(c MoEConfig, x, gate, gateUp, down, sg, su, sd, sgate []float32, tokens int) []float64 {
	h, in, e := c.Hidden, c.Intermediate, c.Experts
	y := make([]float64, tokens*h)
	swiglu := func(xt []float32, wg, wu func(j, k int) float64, wd func(o, j int) float64, n int, scale float64, out []float64) {
		act := make([]float64, n)
		for j := 0; j < n; j++ {
			var g, u float64
			for k := 0; k < h; k++ {
				g += float64(xt[k]) * wg(j, k)
				u += float64(xt[k]) * wu(j, k)
			}
			act[j] = g / (1 + math.Exp(-g)) * u
		}
		for o := 0; o < h; o++ {
			var s float64
			for j := 0; j < n; j++ {
				s += act[j] * wd(o, j)
			}
			out[o] += scale * s
		}
	}
	for t := 0; t < tokens; t++ {
		xt := x[t*h : (t+1)*h]
		scores := make([]float64, e)
		var z float64
		m := math.Inf(-1)
		for ex := 0; ex < e; ex++ {
			for k := 0; k < h; k++ {
				scores[ex] += float64(xt[k]) * float64(gate[ex*h+k])
			}
			m = math.Max(m, scores[ex])
		}
		for ex := range scores {
			if c.Sigmoid {
				scores[ex] = 1 / (1 + math.Exp(-scores[ex]))
			} else {
				scores[ex] = math.Exp(scores[ex] - m)
				z += scores[ex]
			}
		}
		if !c.Sigmoid {
			for ex := range scores {
				scores[ex] /= z
			}
		}
		choice := append([]float64(nil), scores...)
		if c.Groups > 0 { // DeepSeek-V3: the best groups by their top-2 sums
			size := e / c.Groups
			gs := make([]float64, c.Groups)
			for gi := range gs {
				a, b := math.Inf(-1), math.Inf(-1)
				for _, v := range choice[gi*size : (gi+1)*size] {
					if v > a {
						a, b = v, a
					} else if v > b {
						b = v
					}
				}
				gs[gi] = a + b
			}
			keep := map[int]bool{}
			for range c.TopKGroups {
				best := -1
				for gi, v := range gs {
					if !keep[gi] && (best < 0 || v > gs[best]) {
						best = gi
					}
				}
				keep[best] = true
			}
			for ex := range choice {
				if !keep[ex/size] {
					choice[ex] = 0
				}
			}
		}
		chosen := map[int]bool{}
		var picks []int
		var sum float64
		for range c.TopK {
			best := -1
			for ex := range choice {
				if !chosen[ex] && (best < 0 || choice[ex] > choice[best]) {
					best = ex
				}
			}
			chosen[best], picks, sum = true, append(picks, best), sum+scores[best]
		}
		out := y[t*h : (t+1)*h]
		for _, ex := range picks {
			w := scores[ex]
			if c.NormTopKProb {
				w /= sum
			}
			if c.RoutedScalingFactor != 0 {
				w *= c.RoutedScalingFactor
			}
			base := ex * 2 * in * h
			swiglu(xt, func(j, k int) float64 { return float64(gateUp[base+j*h+k]) },
				func(j, k int) float64 { return float64(gateUp[base+(in+j)*h+k]) },
				func(o, j int) float64 { return float64(down[ex*h*in+o*in+j]) }, in, w, out)
		}
		if c.SharedIntermediate > 0 {
			n := c.SharedIntermediate
			var gl float64
			for k := 0; k < h; k++ {
				gl += float64(xt[k]) * float64(sgate[k])
			}
			swiglu(xt, func(j, k int) float64 { return float64(sg[j*h+k]) }, func(j, k int) float64 { return float64(su[j*h+k]) },
				func(o, j int) float64 { return float64(sd[o*n+j]) }, n, 1/(1+math.Exp(-gl)), out)
		}
	}
	return y
}

func TestMoEBlockAgainstDefinition(t *testing.T) {
	for _, c := range []MoEConfig{
		{Experts: 4, TopK: 2, Hidden: 16, Intermediate: 8, NormTopKProb: true},                                                                    // Mixtral
		{Experts: 6, TopK: 3, Hidden: 16, Intermediate: 8, SharedIntermediate: 12},                                                                // Qwen2-MoE
		{Experts: 8, TopK: 2, Hidden: 16, Intermediate: 8, Sigmoid: true, NormTopKProb: true, Groups: 4, TopKGroups: 2, RoutedScalingFactor: 2.5}, // DeepSeek-V3-style
	} {
		g := graph.New()
		b := NewBuilder(g)
		x := b.Param("x", Normal(1), 2, 5, c.Hidden)
		m, err := NewMoE(b, "model.layers.0.mlp", c)
		require.NoError(t, err)
		y, logits := m.Forward(x)
		require.NoError(t, g.Err())
		require.Equal(t, graph.Shape{2, 5, c.Hidden}, y.Shape())
		require.Equal(t, graph.Shape{10, c.Experts}, logits.Shape())
		store := graph.NewStore()
		require.NoError(t, b.Init(store, 3))
		p, err := graph.Compile(g, store, graph.Options{}, y)
		require.NoError(t, err)
		require.NoError(t, p.Run())
		val := func(n *graph.Node) []float32 {
			if n == nil {
				return nil
			}
			return store.Float32(n.Name())
		}
		want := moeBlockRef(c, val(x), val(m.Gate), val(m.GateUp), val(m.Down), val(m.SharedGateProj), val(m.SharedUpProj), val(m.SharedDownProj), val(m.SharedExpertGate), 10)
		for i, v := range p.Float32(y) {
			require.InDelta(t, want[i], float64(v), 2e-5*(1+math.Abs(want[i])), "%+v: y[%d]", c, i)
		}
	}
}

func TestMoEBlockGradients(t *testing.T) {
	for _, out := range []string{"output", "load balancing loss", "router z-loss"} {
		g := graph.New()
		b := NewBuilder(g)
		x := b.Param("x", Normal(1), 6, 8)
		m, err := NewMoE(b, "moe", MoEConfig{Experts: 4, TopK: 2, Hidden: 8, Intermediate: 4, NormTopKProb: true, SharedIntermediate: 4, Init: Normal(0.5)})
		require.NoError(t, err)
		y, logits := m.Forward(x)
		params := b.Params()
		switch out {
		case "load balancing loss":
			y, params = LoadBalancingLoss([]*graph.Node{logits, ops.Scale(logits, 0.5)}, 4, 2), []*graph.Node{x, m.Gate}
		case "router z-loss":
			y, params = RouterZLoss([]*graph.Node{logits}), []*graph.Node{x, m.Gate}
		}
		require.NoError(t, g.Err())
		worst := fdCheck(t, b, params, y, func(*graph.Program) {}, 30)
		t.Logf("%s: worst relative gradient error %.2g", out, worst)
	}
}

func TestMoEConfigRefusals(t *testing.T) {
	ok := MoEConfig{Experts: 4, TopK: 2, Hidden: 8, Intermediate: 4}
	for _, c := range []struct {
		edit func(*MoEConfig)
		says string
	}{
		{func(c *MoEConfig) { c.TopK = 5 }, "num_experts_per_tok"},
		{func(c *MoEConfig) { c.TopK = 0 }, "num_experts_per_tok"},
		{func(c *MoEConfig) { c.Experts = 0 }, "num_experts 0"},
		{func(c *MoEConfig) { c.RoutedScalingFactor = math.NaN() }, "routed_scaling_factor"},
		{func(c *MoEConfig) { c.Groups = 3 }, "n_group"},
		{func(c *MoEConfig) { c.SharedIntermediate = -1 }, "shared_expert_intermediate_size"},
		{func(c *MoEConfig) { c.BiasUpdateSpeed = 0.001 }, "bias_update_speed"},
		{func(c *MoEConfig) { c.SelectionBias, c.BiasUpdateSpeed = true, -1 }, "bias_update_speed"},
		{func(c *MoEConfig) { c.SelectionBias, c.BiasUpdateSpeed = true, math.Inf(1) }, "bias_update_speed"},
	} {
		cfg := ok
		c.edit(&cfg)
		_, err := NewMoE(NewBuilder(graph.New()), "moe", cfg)
		require.True(t, errors.Is(err, ErrMoEConfig), "%v", err)
		require.ErrorContains(t, err, c.says)
	}
}

// TestLoadBalancingLossValue: transformers' load_balancing_loss_func in
// float64 on two layers' logits.
func TestLoadBalancingLossValue(t *testing.T) {
	const n, e, k = 7, 5, 2
	g := graph.New()
	b := NewBuilder(g)
	l1, l2 := b.Param("l1", Normal(1.5), n, e), b.Param("l2", Normal(1.5), n, e)
	loss := LoadBalancingLoss([]*graph.Node{l1, l2}, e, k)
	z := RouterZLoss([]*graph.Node{l1, l2})
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 4))
	p, err := graph.Compile(g, store, graph.Options{}, loss, z)
	require.NoError(t, err)
	require.NoError(t, p.Run())
	all := append(append([]float32(nil), store.Float32("l1")...), store.Float32("l2")...)
	rows := float64(2 * n)
	f, pm := make([]float64, e), make([]float64, e)
	var zs float64
	for r := 0; r < 2*n; r++ {
		row := all[r*e : (r+1)*e]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v) - m)
		}
		lse := m + math.Log(sum)
		zs += lse * lse
		prob := make([]float64, e)
		for j, v := range row {
			prob[j] = math.Exp(float64(v)-m) / sum
			pm[j] += prob[j] / rows
		}
		taken := map[int]bool{}
		for range k {
			best := -1
			for j := range prob {
				if !taken[j] && (best < 0 || prob[j] > prob[best]) {
					best = j
				}
			}
			taken[best] = true
			f[best] += 1.0 / rows
		}
	}
	var want float64
	for j := range f {
		want += f[j] * pm[j]
	}
	want *= e
	got, _ := p.Scalar(loss)
	require.InDelta(t, want, float64(got), 1e-6*want)
	gz, _ := p.Scalar(z)
	require.InDelta(t, zs/rows, float64(gz), 1e-5*zs/rows)
}

// TestMoEUnderFP8: under TE's recipe the shared expert converts like any
// linear layer and the grouped expert GEMMs convert with a scaling state
// per expert; the router stays float32; a training step runs.
func TestMoEUnderFP8(t *testing.T) {
	g := graph.New()
	b := NewBuilder(g)
	x := g.Input("x", graph.Float32, 32, 32)
	m, err := NewMoE(b, "moe", MoEConfig{Experts: 4, TopK: 2, Hidden: 32, Intermediate: 32, NormTopKProb: true, SharedIntermediate: 16})
	require.NoError(t, err)
	y, _ := m.Forward(x)
	loss := ops.Mean(ops.Mul(y, y))
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 1))
	prep, err := passes.Prepare(g, store, passes.Config{Recipe: recipe.TE{}, Loss: loss, Params: b.Params()})
	require.NoError(t, err)
	require.Equal(t, []string{"moe.shared_expert.gate_up_proj", "moe.shared_expert.down_proj", "moe.experts.gate_up", "moe.experts.down"}, prep.Report.Converted())
	for _, l := range prep.Report.Layers { // x is an input: the first GEMMs have no dgrad
		require.Subset(t, l.FP8, []string{"fprop", "wgrad"}, l.FQN)
	}
	down, _ := prep.Report.Layer("moe.experts.down")
	require.Equal(t, []string{"fprop", "dgrad", "wgrad"}, down.FP8)
	require.NotContains(t, prep.Report.String(), "moe.gate", "the router stays float32")
	require.NotNil(t, store.State("moe.experts.down.3.fp8_state"), "each expert's own scaling state")
	require.NoError(t, prep.Train.FeedFloat32(x, make([]float32, 32*32)))
	require.NoError(t, prep.Train.Run())
}

// TestMoESelectionBiasBuffer: the selection bias is a buffer — in the
// store (so checkpoints keep it), not among the trained parameters —
// that training steps move toward an even load and evaluation leaves.
func TestMoESelectionBiasBuffer(t *testing.T) {
	g := graph.New()
	b := NewBuilder(g)
	m, err := NewMoE(b, "moe", MoEConfig{Experts: 4, TopK: 1, Hidden: 8, Intermediate: 4, SelectionBias: true, BiasUpdateSpeed: 0.5, Init: Normal(0.5)})
	require.NoError(t, err)
	require.Equal(t, []*graph.Node{m.SelectionBias}, b.Buffers())
	require.NotContains(t, b.Params(), m.SelectionBias)
	require.Equal(t, "moe.gate.e_score_correction_bias", m.SelectionBias.Name())
	x := g.Input("x", graph.Float32, 16, 8)
	y, logits := m.Forward(x)
	_, idx := m.Choose(logits) // Forward's own choice: the bias moves once
	load := ops.ExpertCounts(idx, 4)
	loss := ops.Mean(ops.Mul(y, y))
	store := graph.NewStore()
	require.NoError(t, b.Init(store, 1))
	require.Equal(t, make([]float32, 4), store.Float32("moe.gate.e_score_correction_bias"))
	prep, err := passes.Prepare(g, store, passes.Config{Loss: loss, Params: b.Params(), TrainOutputs: []*graph.Node{load}})
	require.NoError(t, err)
	xv := make([]float32, 16*8)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i)))
	}
	require.NoError(t, prep.Train.FeedFloat32(x, xv))
	require.NoError(t, prep.Train.Run())
	bias := store.Float32("moe.gate.e_score_correction_bias")
	moved := 0
	for _, v := range bias {
		require.Contains(t, []float32{-0.5, 0, 0.5}, v)
		if v != 0 {
			moved++
		}
	}
	require.Greater(t, moved, 0, "16 tokens over 4 experts by a random router are not evenly spread")
}
