package passes

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
)

// LinearConfig configures ConvertLinear.
type LinearConfig struct {
	// Recipe lowers each layer (recipe.Recipe.Lower): recipe.TE,
	// recipe.Float8Block, recipe.NVFP4, recipe.Custom,
	// recipe.AO, recipe.MSAMP, recipe.BF16, or a recipe of
	// one's own.
	Recipe recipe.Recipe
	// Filter, if set, must accept a layer for it to convert; it gets the
	// layer's forward node and fully qualified name. With the AO recipe
	// it replaces torchao's default filter (first and last linear layers
	// and layers with dims not divisible by 16 stay in high precision);
	// the recipe's own ModuleFilter is used when Filter is nil.
	Filter func(n *graph.Node, fqn string) bool
	// Seed is the run's seed, for recipes that draw (NVFP4's stochastic
	// rounding) and have no seed of their own (recipe.Layer.Seed).
	Seed uint64
	// Debug, if set, applies a debug config's precision switches: a
	// layer of a section with DisableFP8Layer stays float32, and the
	// GEMMs its DisableFP8GEMM lists stay in high precision.
	Debug *inspect.Config
}

// converter holds the state of one ConvertLinear run.
type converter struct {
	g      *graph.Graph
	store  *graph.Store
	cfg    LinearConfig
	reg    *registry
	report *Report
	deq    map[*graph.Node]*graph.Node // Dequantize node of each forward cast
	linIdx map[*graph.Node]int         // each linear layer's (and grouped GEMM's) place in graph order
	nLin   int
	quant  map[quantKey]*graph.Node
	rows   map[string]int // report index by fqn
	// keptBy says why a debug switch kept a GEMM ("fqn/gemm").
	keptBy map[string]string
}

type quantKey struct {
	x   *graph.Node
	cfg ops.QuantizeConfig
}

// ConvertLinear rewrites, in a joint forward+backward graph, each
// eligible linear layer's three GEMMs (its Linear node, role Fprop, and
// the MatMul nodes with roles Dgrad and Wgrad linked to it) into Quantize
// and ScaledMatMul nodes per the recipe:
//
//   - TE: delayed scaling with one fp8.Meta per tensor (input, weight,
//     grad_output) stored in store under fp8.LayerStateKey(fqn); HYBRID casts the
//     forward tensors to E4M3 and grad_output to E5M2;
//     OverrideLinearPrecision keeps any of fprop, dgrad and wgrad in
//     float32; UseMXFP8BlockScaling casts every operand in MXFP8 blocks
//     along its GEMM's contraction dimension instead.
//   - AO: current scaling per operand cast config (tensorwise or
//     axiswise; a disabled pair keeps that GEMM in float32).
//   - MS-AMP: delayed scaling as TE's HYBRID with a one-step window and
//     power-of-two scales.
//   - Float8BlockScaling (recipe.Float8Block): each operand cast with
//     a scale per 1×128 block along its GEMM's contraction axis (1-D:
//     an input or gradient read by two GEMMs gets two casts, as
//     Transformer Engine quantizes the column-wise copy again from the
//     source) or per 128×128 tile (2-D: one cast serves both GEMMs, the
//     column-wise copy being its exact transpose); no scaling state.
//   - NVFP4BlockScaling (recipe.NVFP4): 4-bit E2M1 casts with E4M3
//     scales per 1×16 block along each GEMM's contraction axis (inputs,
//     gradients) or per 16×16 tile (weights, one cast for both GEMMs),
//     the random Hadamard transform on the wgrad operands (when the
//     batch's rows are a multiple of 16; otherwise a note says it is off
//     for that layer), stochastic rounding of gradients; KeepFirst and
//     KeepLast keep the first and last linear layers in high precision.
//   - BF16: each GEMM becomes a BF16MatMul reading the same float32
//     operands rounded to bf16 (no casts, no scaling state; any layer
//     size).
//
// A Mixture of Experts' grouped GEMMs (ops.GroupedLinear and its
// gradients) convert as a linear layer of one expert's weight shape
// would, into ops.GroupedScaledMatMul nodes: every expert casts its own
// rows and weight with its own scaling state (a LayerState per expert,
// named after the grouped layer and the expert's index: fqn.0, fqn.1,
// …), bit for bit the converted linear layer of that expert's rows
// (NVFP4 grouped GEMMs stay float32 for now, with a reason in the
// report). The router's GEMM is a MatMul, no linear layer: it is never
// converted.
//
// A layer is eligible when both weight dims are divisible by 16 (with the
// AO recipe, torchao's default filter or the given one decides, and
// PadInnerDim admits other sizes). A layer that is not eligible is
// skipped alone and the report says why. The original nodes stay in the
// graph, unused, so ConvertModel can convert back. Converting a layer a
// second time changes nothing and is reported.
func ConvertLinear(g *graph.Graph, store *graph.Store, cfg LinearConfig) (Report, error) {
	if cfg.Recipe == nil {
		return Report{}, fmt.Errorf("passes: convert linear: no recipe")
	}
	if err := cfg.Recipe.Validate(); err != nil {
		return Report{}, fmt.Errorf("passes: convert linear: %w", err)
	}
	if store == nil {
		return Report{}, fmt.Errorf("passes: convert linear: no parameter store")
	}
	if err := g.Err(); err != nil {
		return Report{}, fmt.Errorf("passes: convert linear: graph has errors: %w", err)
	}
	c := &converter{g: g, store: store, cfg: cfg, reg: registryOf(g), report: &Report{Backend: cfg.Recipe.Backend().String(), Recipe: cfg.Recipe.Label()},
		quant: map[quantKey]*graph.Node{}, rows: map[string]int{}, keptBy: map[string]string{}, deq: map[*graph.Node]*graph.Node{}}
	nodes := g.Nodes()
	c.linIdx = map[*graph.Node]int{}
	for _, n := range nodes {
		if isLinear(n) || n.Is(ops.KindGroupedLinear) {
			c.linIdx[n] = c.nLin // a grouped GEMM: the linear layers before it
		}
		if isLinear(n) {
			c.nLin++
		}
	}
	// A layer's forward GEMM x·Wᵀ (+ b), then its backward GEMMs dy·W
	// and dyᵀ·x; the rules bind the operands they use.
	fprop := []graph.Role{graph.Fprop}
	rules := []Rule{
		{Name: "fprop", Pattern: &Pattern{Kind: ops.KindLinear, Roles: fprop, Inputs: []*Pattern{{Bind: "x"}, {Bind: "w"}}}, Apply: c.fprop},
		{Name: "fprop+bias", Pattern: &Pattern{Kind: ops.KindLinear, Roles: fprop, Inputs: []*Pattern{{Bind: "x"}, {Bind: "w"}, {Bind: "b"}}}, Apply: c.fprop},
		{Name: "dgrad", Pattern: &Pattern{Kind: ops.KindMatMul, Roles: []graph.Role{graph.Dgrad}, Inputs: []*Pattern{{Bind: "dy"}, nil}}, Apply: c.backward},
		{Name: "wgrad", Pattern: &Pattern{Kind: ops.KindMatMul, Roles: []graph.Role{graph.Wgrad}, Inputs: []*Pattern{{Bind: "dy"}, nil}}, Apply: c.backward},
	}
	if _, err := Rewrite(g, nodes, append(rules, c.groupedRules()...)...); err != nil {
		return *c.report, fmt.Errorf("passes: convert linear: %w", err)
	}
	return *c.report, nil
}

func isLinear(n *graph.Node) bool { return n.Is(ops.KindLinear) && n.Role() == graph.Fprop }

func (c *converter) backend() fp8.Backend { return c.cfg.Recipe.Backend() }

// plan asks the recipe how a layer converts (after the debug config's
// DisableFP8Layer): its Skip says why not.
func (c *converter) plan(n *graph.Node, out, in int, x *graph.Node) (recipe.LayerPlan, error) {
	fqn := n.Name()
	if sec, ok := c.cfg.Debug.SectionFor(fqn); ok && sec.DisableLayer {
		return recipe.LayerPlan{Skip: fmt.Sprintf("DisableFP8Layer (debug config section %q)", sec.Name)}, nil
	}
	rows, _ := view2DOf(x.Shape())
	l := recipe.Layer{FQN: fqn, Node: n, Index: c.linIdx[n], Count: c.nLin, Out: out, In: in, Rows: rows, Seed: c.cfg.Seed}
	if f := c.cfg.Filter; f != nil {
		l.Accept = func() bool { return f(n, fqn) }
	}
	p, err := c.cfg.Recipe.Lower(l)
	if err == nil && p.Backward > recipe.BackwardDequantized {
		err = fmt.Errorf("layer %q: the recipe's backward override %d, want high_precision or dequantized", fqn, p.Backward)
	}
	return p, err
}

// gemm identifies one of a layer's three products.
type gemm uint8

const (
	gemmFprop gemm = iota
	gemmDgrad
	gemmWgrad
)

// debugGEMM names each GEMM as a debug config does.
var debugGEMM = [...]inspect.GEMM{gemmFprop: inspect.Fprop, gemmDgrad: inspect.DgradGEMM, gemmWgrad: inspect.WgradGEMM}

var gemmNames = [...]string{"fprop", "dgrad", "wgrad"}

// casts returns the configs of a GEMM's two operands, or ok = false when
// the recipe keeps the GEMM in float32. axisA and axisB are the
// contraction axes of the operands' 2-D views.
func (c *converter) casts(l *layer, which gemm, axisA, axisB int) (a, b ops.QuantizeConfig, ok bool) {
	a, b, ok = c.recipeCasts(l, which, axisA, axisB)
	if sec, on := c.cfg.Debug.SectionFor(l.fqn); on && ok {
		// PerTensorScaling: one current scale per tensor for the chosen
		// operands, whatever the recipe's scaling.
		for _, q := range []*ops.QuantizeConfig{&a, &b} {
			if sec.PerTensor(debugGEMM[which], debugTensor[q.Tensor]) {
				*q = ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: q.Format}, Tensor: q.Tensor}
				c.report.Notes = append(c.report.Notes, fmt.Sprintf("%s: %s %s cast with per-tensor current scaling (PerTensorScaling, debug config section %q)",
					l.fqn, debugGEMM[which], debugTensor[q.Tensor], sec.Name))
			}
		}
	}
	return a, b, ok
}

// fake returns a GEMM's operands with the debug config's FakeQuant
// applied (quantize-dequantize of the listed ones), and whether any was.
func (c *converter) fake(l *layer, which gemm, a, b *graph.Node) (*graph.Node, *graph.Node, bool) {
	sec, on := c.cfg.Debug.SectionFor(l.fqn)
	if !on || len(sec.FakeQuant) == 0 {
		return a, b, false
	}
	f := fp8.E4M3
	if sec.FakeQuantFormat == "FP8E5M2" {
		f = fp8.E5M2
	}
	g := debugGEMM[which]
	operands := [2]inspect.Tensor{inspect.Activation, inspect.Weight}
	switch which {
	case gemmDgrad:
		operands = [2]inspect.Tensor{inspect.Gradient, inspect.Weight}
	case gemmWgrad:
		operands = [2]inspect.Tensor{inspect.Gradient, inspect.Activation}
	}
	out := [2]*graph.Node{a, b}
	faked := false
	for i, t := range operands {
		if sec.Fake(g, t) {
			out[i] = ops.FakeQuant(fmt.Sprintf("%s/fakequant.%s.%s", l.fqn, t, g), out[i], f)
			faked = true
		}
	}
	if faked {
		c.report.Notes = append(c.report.Notes, fmt.Sprintf("%s: %s computed in high precision on fake-quantized %s (FakeQuant %s, debug config section %q)",
			l.fqn, g, fakeList(sec, g, operands), sec.FakeQuantFormat, sec.Name))
	}
	return out[0], out[1], faked
}

func fakeList(sec *inspect.Section, g inspect.GEMM, operands [2]inspect.Tensor) string {
	var names []string
	for _, t := range operands {
		if sec.Fake(g, t) {
			names = append(names, string(t))
		}
	}
	return strings.Join(names, " and ")
}

// debugTensor names each tensor role as a debug config does.
var debugTensor = map[fp8.TensorRole]inspect.Tensor{fp8.RoleInput: inspect.Activation, fp8.RoleWeight: inspect.Weight, fp8.RoleGradOutput: inspect.Gradient}

// recipeCasts are the casts the recipe (and DisableFP8GEMM) give a GEMM.
func (c *converter) recipeCasts(l *layer, which gemm, axisA, axisB int) (a, b ops.QuantizeConfig, ok bool) {
	if sec, on := c.cfg.Debug.SectionFor(l.fqn); on {
		for _, dg := range sec.DisableGEMMs {
			if dg == debugGEMM[which] {
				c.keptBy[l.fqn+"/"+string(dg)] = fmt.Sprintf("by DisableFP8GEMM (debug config section %q)", sec.Name)
				return a, b, false
			}
		}
	}
	pair := l.plan.GEMMs[which]
	if pair[0].Kind == fp8.HighPrecision { // a recipe's pair is both or neither
		if by := l.plan.KeptBy[which]; by != "" {
			c.keptBy[l.fqn+"/"+gemmNames[which]] = by
		}
		return a, b, false
	}
	roles := fp8.GEMM(which).Operands()
	return c.quantizerConfig(l, pair[0], axisA, roles[0]), c.quantizerConfig(l, pair[1], axisB, roles[1]), true
}

// quantizerConfig is the cast of a quantizer for the operand of tensor
// role tensor contracting along axis (of its 2-D view): the quantizer
// as it is (the fields its kind reads), the axis its cast runs along,
// and a delayed cast's meta.
func (c *converter) quantizerConfig(l *layer, q fp8.Quantizer, axis int, tensor fp8.TensorRole) ops.QuantizeConfig {
	cfg := ops.QuantizeConfig{Quantizer: q.Canonical(), Tensor: tensor, Axis: q.CastAxis(axis)}
	if q.Kind == fp8.DelayedScaling {
		cfg.Meta = l.state.Meta(tensor)
	}
	return cfg
}

// quantize returns the (shared) Quantize node casting x per cfg.
func (c *converter) quantize(l *layer, x *graph.Node, cfg ops.QuantizeConfig) *graph.Node {
	k := quantKey{x, cfg}
	if q, ok := c.quant[k]; ok {
		return q
	}
	name := l.fqn + "/quantize." + cfg.Tensor.String()
	if (cfg.Kind == fp8.Float8Blocks || cfg.Kind == fp8.NVFP4Blocks) && cfg.BlockDim == 2 {
		name += ".tiles"
	} else if cfg.AlongAxis() {
		name += fmt.Sprintf(".axis%d", cfg.Axis)
	}
	if cfg.RHT {
		name += ".rht"
	}
	if (cfg.Kind == fp8.CurrentScaling && !cfg.Axiswise) && c.backend() != fp8.BackendAO {
		name += ".current" // PerTensorScaling beside the recipe's casts
	}
	q := ops.QuantizeNamed(name, x, cfg)
	c.quant[k] = q
	return q
}

// layerState returns the layer's scaling state, creating it in the store
// (or reusing one already there, e.g. from a checkpoint).
func (c *converter) layerState(fqn string) (*fp8.LayerState, error) {
	key := fp8.LayerStateKey(fqn)
	if st, ok := c.store.State(key).(*fp8.LayerState); ok && st != nil {
		if st.Backend != c.backend() {
			return nil, fmt.Errorf("layer %q already has %s scaling state; it cannot convert with the %s recipe", fqn, st.Backend, c.backend())
		}
		return st, nil
	}
	st := c.cfg.Recipe.NewLayerState(fqn)
	c.store.SetState(key, st)
	return st, nil
}

func (c *converter) addReport(lr LayerReport) {
	c.rows[lr.FQN] = len(c.report.Layers)
	c.report.Layers = append(c.report.Layers, lr)
}

// fprop converts a layer's forward GEMM, deciding eligibility.
func (c *converter) fprop(n *graph.Node, m Match) (*graph.Node, error) {
	fqn := n.Name()
	x, w, bias := m["x"], m["w"], m["b"]
	out, in := w.Shape()[0], w.Shape()[1]
	lr := LayerReport{FQN: fqn, Out: out, In: in}
	if l, ok := c.reg.byNode[n]; ok {
		if l.state.Backend != c.backend() {
			return nil, fmt.Errorf("layer %q was converted with the %s backend; convert it back (ConvertModel) and drop its state before using the %s recipe", fqn, l.state.Backend, c.backend())
		}
		if l.fp8 {
			lr.Converted, lr.FP8, lr.Reason = true, l.gemmsFP8(), "already FP8 (unchanged)"
			c.addReport(lr)
			return nil, nil
		}
		if l.fpFprop != nil || l.fpDgrad != nil || l.fpWgrad != nil { // converted before, then reverted
			if err := l.point(c.g, true); err != nil {
				return nil, err
			}
			lr.Converted, lr.FP8, lr.Reason = true, l.gemmsFP8(), "converted again (earlier FP8 nodes reused)"
			c.addReport(lr)
			return nil, nil
		}
	}
	plan, err := c.plan(n, out, in, x)
	if err != nil {
		return nil, err
	}
	if plan.Skip != "" {
		lr.Reason = plan.Skip
		c.addReport(lr)
		return nil, nil
	}
	c.report.Notes = append(c.report.Notes, plan.Notes...)
	st, err := c.layerState(fqn)
	if err != nil {
		return nil, err
	}
	l := &layer{fqn: fqn, hpFprop: n, state: st, fp8: true, plan: plan}
	c.reg.add(l)
	lr.Converted = true
	c.addReport(lr)
	var y *graph.Node
	if fx, fw, fake := c.fake(l, gemmFprop, x, w); fake {
		y = ops.Linear(fqn+".fakequant", fx, fw, bias)
	} else if l.bf16(gemmFprop) {
		y = ops.BF16MatMul(fqn+".bf16", x, w, false, true, bias)
	} else {
		qa, qb, fp := c.casts(l, gemmFprop, 1, 1)
		if !fp {
			c.noteKept(l, "fprop")
			return nil, nil
		}
		y = ops.ScaledMatMul(fqn+".fp8", c.quantize(l, x, qa), c.quantize(l, w, qb), false, true, bias)
	}
	if y == nil || y.DType() == graph.Invalid {
		return nil, fmt.Errorf("layer %q: %w", fqn, c.g.Err())
	}
	y.SetRole(graph.Fprop, nil)
	l.fpFprop = y
	c.report.Layers[c.rows[fqn]].FP8 = l.gemmsFP8()
	return y, nil
}

func (c *converter) noteKept(l *layer, gemmName string) {
	i := c.rows[l.fqn]
	r := &c.report.Layers[i]
	why := "by the recipe"
	if w, ok := c.keptBy[l.fqn+"/"+gemmName]; ok {
		why = w
	}
	msg := gemmName + " kept in float32 " + why
	if r.Reason == "" {
		r.Reason = msg
	} else {
		r.Reason += "; " + msg
	}
	r.FP8 = l.gemmsFP8()
}

// backward converts a Dgrad or Wgrad GEMM of a converted layer.
func (c *converter) backward(n *graph.Node, m Match) (*graph.Node, error) {
	l, ok := c.reg.byNode[n.Forward()]
	if !ok {
		return nil, nil
	}
	dgrad := n.Role() == graph.Dgrad
	if (dgrad && l.hpDgrad != nil) || (!dgrad && l.hpWgrad != nil) {
		return nil, nil // converted earlier (this is the same node)
	}
	if _, fresh := c.rows[l.fqn]; !fresh || !l.fp8 {
		return nil, nil
	}
	mm, isMM := graph.SettingsOf[ops.MatMulConfig](n)
	if !isMM || !n.Is(ops.KindMatMul) && !n.Is(ops.KindBatchMatMul) {
		return nil, nil
	}
	tA, tB := mm.TransA, mm.TransB
	dy2 := m["dy"]
	fwd := l.fpFprop
	if fwd == nil {
		fwd = l.hpFprop
	}
	// dx = dy·W: dy contracts over its last axis, W over its rows.
	// dW = dyᵀ·x: both contract over the rows.
	kind, name, role, suffix := gemmWgrad, "wgrad", graph.Wgrad, ".wgrad.fp8"
	axisA, other, wantTA, slot := 0, l.hpFprop.Input(0), true, &l.fpWgrad
	if dgrad {
		kind, name, role, suffix = gemmDgrad, "dgrad", graph.Dgrad, ".dgrad.fp8"
		axisA, other, wantTA, slot = 1, l.hpFprop.Input(1), false, &l.fpDgrad
		l.hpDgrad = n
	} else {
		l.hpWgrad = n
	}
	if tA != wantTA || tB {
		return nil, fmt.Errorf("layer %q: unexpected %s layout %v", l.fqn, name, n)
	}
	var out *graph.Node
	// The recipe's backward override (recipe.WithBackward) runs dgrad and
	// wgrad unquantized: on the float32 operands (high_precision) or on
	// the forward's quantized weight and input, dequantized.
	if ov := l.plan.Backward; ov != recipe.BackwardQuantized && !l.bf16(kind) {
		fq := l.fpFprop
		if ov == recipe.BackwardHighPrecision || fq == nil || !fq.Is(ops.KindScaledMatMul) {
			c.keptBy[l.fqn+"/"+name] = "by the backward override " + ov.String()
			c.noteKept(l, name)
			return nil, nil
		}
		// dequantized: the forward's cast of the weight (dgrad) or the
		// input (wgrad), decoded.
		cast := fq.Input(1)
		if !dgrad {
			cast = fq.Input(0)
		}
		deq, ok := c.deq[cast]
		if !ok {
			deq = ops.Dequantize(cast.Name()+"/dequantize", cast)
			c.deq[cast] = deq
		}
		// The cast holds the forward's operand as it was (x of a
		// sequence model is [batch, time, in]); the GEMM reads the 2-D
		// view the high-precision one read.
		if want := n.Input(1).Shape(); !deq.Shape().Equal(want) {
			deq = ops.Reshape(deq, want...)
		}
		out = ops.MatMul(dy2, deq, wantTA, false)
		if err := c.g.Err(); err != nil {
			return nil, fmt.Errorf("layer %q: %w", l.fqn, err)
		}
		out.SetRole(role, fwd)
		*slot = out
		c.keptBy[l.fqn+"/"+name] = "on the dequantized forward operands (backward override dequantized)"
		c.noteKept(l, name)
		return out, nil
	}
	if fa, fb, fake := c.fake(l, kind, dy2, other); fake {
		out = ops.MatMul(fa, fb, wantTA, false)
	} else if l.bf16(kind) {
		out = ops.BF16MatMul(l.fqn+strings.Replace(suffix, ".fp8", ".bf16", 1), dy2, other, wantTA, false, nil)
	} else {
		qa, qb, fp := c.casts(l, kind, axisA, 0)
		if !fp {
			c.noteKept(l, name)
			return nil, nil
		}
		out = ops.ScaledMatMul(l.fqn+suffix, c.quantize(l, dy2, qa), c.quantize(l, other, qb), wantTA, false, nil)
	}
	out.SetRole(role, fwd)
	*slot = out
	c.report.Layers[c.rows[l.fqn]].FP8 = l.gemmsFP8()
	return out, nil
}

// bf16 reports whether the layer's plan rounds GEMM which's operands to
// bf16 (a BF16MatMul, no casts).
func (l *layer) bf16(which gemm) bool { return l.plan.GEMMs[which][0].Kind == fp8.BF16Rounding }

// isHighPrecision reports whether a replacement GEMM computes in float32
// (a FakeQuant GEMM of the debug config).
func isHighPrecision(n *graph.Node) bool { return n.Is(ops.KindLinear) || n.Is(ops.KindMatMul) }

// gemmsFP8 lists the layer's GEMMs that have FP8 (or bf16) replacements.
func (l *layer) gemmsFP8() []string {
	var out []string
	for i, n := range []*graph.Node{l.fpFprop, l.fpDgrad, l.fpWgrad} {
		if n != nil && !isHighPrecision(n) {
			out = append(out, gemmNames[i])
		}
	}
	return out
}

// point makes the layer's consumers read its FP8 nodes (toFP8) or the
// original ones.
func (l *layer) point(g *graph.Graph, toFP8 bool) error {
	pairs := [][2]*graph.Node{{l.hpFprop, l.fpFprop}, {l.hpDgrad, l.fpDgrad}, {l.hpWgrad, l.fpWgrad}}
	for i, p := range pairs {
		hp, fp := p[0], p[1]
		if hp == nil || fp == nil {
			continue
		}
		if i == 0 && l.autocast != nil {
			// Consumers read the Switch; it keeps both branches.
			continue
		}
		from, to := fp, hp
		if toFP8 {
			from, to = hp, fp
		}
		if err := g.ReplaceUses(from, to); err != nil {
			return fmt.Errorf("layer %q: %w", l.fqn, err)
		}
	}
	if l.autocast != nil {
		from, to := l.autocast, l.hpFprop
		if toFP8 {
			from, to = l.hpFprop, l.autocast
		}
		// The Switch keeps reading both branches: ReplaceUses leaves the
		// inputs of the new node alone.
		if err := g.ReplaceUses(from, to); err != nil {
			return fmt.Errorf("layer %q: %w", l.fqn, err)
		}
	}
	l.fp8 = toFP8
	return nil
}

// view2DOf is a shape's 2-D view [numel/last, last].
func view2DOf(s graph.Shape) (rows, cols int) {
	if len(s) == 0 {
		return 1, 1
	}
	cols = s[len(s)-1]
	if cols == 0 {
		return 0, 0
	}
	return s.Numel() / cols, cols
}
