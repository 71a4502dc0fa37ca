package nn

import (
	"errors"
	"fmt"
	"math"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// ErrMoEConfig is the error every refused MoEConfig matches
// (errors.Is); the message names the key.
var ErrMoEConfig = errors.New("MoE config")

// MoEConfig configures a Mixture-of-Experts block, in the keys of
// Hugging Face's configs (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3).
type MoEConfig struct {
	// Experts is num_local_experts / num_experts; TopK
	// num_experts_per_tok.
	Experts, TopK int
	// Hidden is the model width; Intermediate each expert's SwiGLU width
	// (moe_intermediate_size, or Mixtral's intermediate_size).
	Hidden, Intermediate int
	// NormTopKProb renormalises the K routing weights to sum to 1
	// (norm_topk_prob; Mixtral always does).
	NormTopKProb bool
	// Sigmoid scores the experts with a sigmoid instead of a softmax
	// (scoring_func "sigmoid", DeepSeek-V3).
	Sigmoid bool
	// Groups and TopKGroups limit the choice to groups of experts
	// (n_group, topk_group; see ops.RouterConfig).
	Groups, TopKGroups int
	// RoutedScalingFactor multiplies the routing weights
	// (routed_scaling_factor); 0 means 1.
	RoutedScalingFactor float64
	// SelectionBias gives the router DeepSeek-V3's selection bias
	// (e_score_correction_bias, NAME.gate.e_score_correction_bias [E], a
	// buffer starting at 0): added to the scores for the choice only.
	// BiasUpdateSpeed γ > 0 moves it after every training step toward an
	// even load (auxiliary-loss-free balancing, bias_update_speed; see
	// ops.RouterConfig); it needs SelectionBias.
	SelectionBias   bool
	BiasUpdateSpeed float64
	// SharedIntermediate, when above 0, adds a shared expert of this
	// SwiGLU width that every token goes through, scaled by a sigmoid gate
	// of the token (Qwen2-MoE's shared_expert_intermediate_size).
	SharedIntermediate int
	// Init draws the parameters (nil: N(0, 0.02²), as transformers'
	// initializer_range 0.02).
	Init Initializer
}

func (c MoEConfig) router() ops.RouterConfig {
	return ops.RouterConfig{K: c.TopK, Groups: c.Groups, TopKGroups: c.TopKGroups, BiasUpdateSpeed: c.BiasUpdateSpeed}
}

// Validate reports a configuration that cannot build, naming the key.
func (c MoEConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("nn: %w: %s", ErrMoEConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Experts < 1:
		return bad("num_experts %d, want ≥ 1", c.Experts)
	case c.Hidden < 1 || c.Intermediate < 1:
		return bad("hidden_size %d and moe_intermediate_size %d, want ≥ 1", c.Hidden, c.Intermediate)
	case c.SharedIntermediate < 0:
		return bad("shared_expert_intermediate_size %d, want ≥ 0", c.SharedIntermediate)
	case math.IsNaN(c.RoutedScalingFactor) || math.IsInf(c.RoutedScalingFactor, 0) || c.RoutedScalingFactor < 0:
		return bad("routed_scaling_factor %v, want a finite number > 0", c.RoutedScalingFactor)
	case c.BiasUpdateSpeed != 0 && !c.SelectionBias:
		return bad("bias_update_speed %v without a selection bias (e_score_correction_bias)", c.BiasUpdateSpeed)
	}
	if err := c.router().Check(c.Experts); err != nil {
		return bad("%v", err)
	}
	return nil
}

// MoE is a Mixture-of-Experts block: a float32 router (never converted
// to FP8), Experts SwiGLU experts run as grouped GEMMs over their
// tokens, and an optional shared expert. Parameter names follow
// transformers 5's stacked layout: NAME.gate.weight [E, H],
// NAME.experts.gate_up_proj [E, 2I, H] (gate rows first),
// NAME.experts.down_proj [E, H, I]; the shared expert's
// NAME.shared_expert.{gate,up,down}_proj.weight and
// NAME.shared_expert_gate.weight [1, H].
type MoE struct {
	Name   string
	Config MoEConfig
	// Gate is the router's weight [E, H]; SelectionBias its selection
	// bias [E] (a buffer; nil without one).
	Gate, SelectionBias *graph.Node
	// GateUp [E, 2I, H] and Down [E, H, I] are the experts' weights.
	GateUp, Down *graph.Node
	// SharedGateProj [S, H], SharedUpProj [S, H] and SharedDownProj
	// [H, S] are the shared expert's weights, SharedExpertGate [1, H]
	// its sigmoid gate's (all nil without a shared expert).
	SharedGateProj, SharedUpProj, SharedDownProj, SharedExpertGate *graph.Node
	chosen                                                         map[*graph.Node][2]*graph.Node // Choose's nodes by logits
}

// NewMoE creates the block's parameters under name.
func NewMoE(b *Builder, name string, cfg MoEConfig) (*MoE, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	init := cfg.Init
	if init == nil {
		init = Normal(0.02)
	}
	s := b.Scope(name)
	e, h, i := cfg.Experts, cfg.Hidden, cfg.Intermediate
	m := &MoE{Name: s.Name(""), Config: cfg,
		Gate:   s.Scope("gate").Param("weight", init, e, h),
		GateUp: s.Scope("experts").Param("gate_up_proj", init, e, 2*i, h),
		Down:   s.Scope("experts").Param("down_proj", init, e, h, i)}
	if cfg.SelectionBias {
		m.SelectionBias = s.Scope("gate").Buffer("e_score_correction_bias", Zeros, e)
	}
	if n := cfg.SharedIntermediate; n > 0 {
		sh := s.Scope("shared_expert")
		m.SharedGateProj = sh.Scope("gate_proj").Param("weight", init, n, h)
		m.SharedUpProj = sh.Scope("up_proj").Param("weight", init, n, h)
		m.SharedDownProj = sh.Scope("down_proj").Param("weight", init, h, n)
		m.SharedExpertGate = s.Scope("shared_expert_gate").Param("weight", init, 1, h)
	}
	return m, nil
}

// Forward maps tokens x [T, H] (or [B, T, H]) to the block's output of
// the same shape, and returns the router's logits [tokens, E] for the
// balancing losses.
func (m *MoE) Forward(x *graph.Node) (y, logits *graph.Node) {
	c := m.Config
	shape := x.Shape()
	if shape.Rank() < 2 || shape[len(shape)-1] != c.Hidden {
		f := x.Graph().Failed(fmt.Errorf("nn: MoE %q: input %q has shape %v, want [tokens %d]", m.Name, x.Name(), shape, c.Hidden))
		return f, f
	}
	tokens := shape.Numel() / c.Hidden
	x2 := ops.Reshape(x, tokens, c.Hidden)
	logits = ops.MatMul(x2, m.Gate, false, true) // float32: MatMul is no linear layer to the FP8 passes
	scores, idx := m.Choose(logits)
	w := ops.GatherLast(scores, idx)
	if c.NormTopKProb && c.TopK > 1 {
		sum := ops.SumKeepDims(w, 1)
		if c.Sigmoid {
			eps := x.Graph().Const(m.Name+".router.eps", 1e-20, sum.Shape()...)
			sum = ops.Add(sum, eps) // DeepSeek-V3's denominator
		}
		w = ops.Div(w, ops.BroadcastTo(sum, w.Shape()))
	}
	if f := c.RoutedScalingFactor; f != 0 && f != 1 {
		w = ops.Scale(w, float32(f))
	}
	xs := ops.Dispatch(x2, idx, c.Experts)
	counts := ops.ExpertCounts(idx, c.Experts)
	hdn := ops.SwiGLUHalves(ops.GroupedLinear(m.Name+".experts.gate_up", xs, counts, m.GateUp))
	ys := ops.GroupedLinear(m.Name+".experts.down", hdn, counts, m.Down)
	y = ops.Combine(ys, idx, w, c.Experts)
	if m.SharedDownProj != nil {
		gu := ops.Linear(m.Name+".shared_expert.gate_up_proj", x2, ops.Concat(0, m.SharedGateProj, m.SharedUpProj), nil)
		shared := ops.Linear(m.Name+".shared_expert.down_proj", ops.SwiGLUHalves(gu), m.SharedDownProj, nil)
		gate := ops.Sigmoid(ops.MatMul(x2, m.SharedExpertGate, false, true)) // [T, 1]
		y = ops.Add(y, ops.Mul(ops.BroadcastTo(gate, shared.Shape()), shared))
	}
	return ops.Reshape(y, shape...), logits
}

// Choose is the router's choice from its logits [tokens, E]: the scores
// (softmax, or sigmoid) and each token's experts [tokens, K] (int32),
// chosen with the selection bias if the block has one. Forward routes
// with it; ops.ExpertCounts of its choice is the load. Choose of logits
// it has chosen from before (those Forward returned) returns the same
// nodes: one choice, so a selection bias moves once per step.
func (m *MoE) Choose(logits *graph.Node) (scores, idx *graph.Node) {
	if c, ok := m.chosen[logits]; ok {
		return c[0], c[1]
	}
	if m.Config.Sigmoid {
		scores = ops.Sigmoid(logits)
	} else {
		scores = ops.Softmax(logits)
	}
	idx = ops.TopK(scores, m.SelectionBias, m.Config.router())
	if m.chosen == nil {
		m.chosen = map[*graph.Node][2]*graph.Node{}
	}
	m.chosen[logits] = [2]*graph.Node{scores, idx}
	return scores, idx
}

// LoadBalancingLoss is transformers' load_balancing_loss_func (Switch
// Transformer's auxiliary loss) over the router logits of every MoE
// layer: the logits concatenated, softmax, each token's top k, then
// experts · Σ_e f_e · P_e with f_e the share of the choices expert e got
// (over the k choices) and P_e its mean probability. The gradient flows
// through P only. Multiply by router_aux_loss_coef and add it to the
// loss.
func LoadBalancingLoss(logits []*graph.Node, experts, k int) *graph.Node {
	all := routerRows(logits)
	if all == nil {
		return nil
	}
	p := ops.Softmax(all)
	f := ops.ExpertShare(ops.TopK(p, nil, ops.RouterConfig{K: k}), experts)
	return ops.Scale(ops.Sum(ops.Mul(f, ops.Mean(p, 0))), float32(experts))
}

// RouterZLoss is ST-MoE's router z-loss over the router logits of every
// MoE layer: the mean over tokens of (log Σ_e exp(logit_e))².
func RouterZLoss(logits []*graph.Node) *graph.Node {
	all := routerRows(logits)
	if all == nil {
		return nil
	}
	z := ops.LogSumExp(all)
	return ops.Mean(ops.Mul(z, z))
}

// routerRows stacks the MoE layers' router logits into one [tokens, E]
// (nil for none).
func routerRows(logits []*graph.Node) *graph.Node {
	switch len(logits) {
	case 0:
		return nil
	case 1:
		return logits[0]
	}
	return ops.Concat(0, logits...)
}
