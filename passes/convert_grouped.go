package passes

import (
	"fmt"
	"sort"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
)

// groupedLayer is a grouped expert GEMM (ops.GroupedLinear) being
// converted: its plan, each expert's scaling state and the node that
// replaced its forward GEMM.
type groupedLayer struct {
	fqn     string
	experts int
	plan    recipe.LayerPlan
	states  []*fp8.LayerState
	hp, fwd *graph.Node // the float32 forward node and its replacement
	sw      *graph.Node // the autocast Switch between them (Autowrap)
	// hpD, fpD, hpW, fpW are the dgrad and wgrad nodes and their
	// replacements; fp8 says the layer's consumers read the
	// replacements (ConvertModel converts back and forth).
	hpD, fpD, hpW, fpW *graph.Node
	fp8                bool
	row                int // its conversion report row
}

// point makes the layer's consumers read its FP8 nodes, or its float32
// ones (the Switch keeps reading both branches).
func (gl *groupedLayer) point(g *graph.Graph, toFP8 bool) error {
	fwdFP := gl.fwd
	if gl.sw != nil {
		fwdFP = gl.sw
	}
	for _, p := range [][2]*graph.Node{{gl.hp, fwdFP}, {gl.hpD, gl.fpD}, {gl.hpW, gl.fpW}} {
		hp, fp := p[0], p[1]
		if hp == nil || fp == nil {
			continue
		}
		from, to := fp, hp
		if toFP8 {
			from, to = hp, fp
		}
		if err := g.ReplaceUses(from, to); err != nil {
			return fmt.Errorf("layer %q: %w", gl.fqn, err)
		}
	}
	gl.fp8 = toFP8
	return nil
}

// groupedRules are ConvertLinear's rules for grouped expert GEMMs:
// GroupedLinear (role Fprop) and its dx and dw nodes (Dgrad, Wgrad).
func (c *converter) groupedRules() []Rule {
	return []Rule{
		{Name: "grouped fprop", Pattern: &Pattern{Kind: ops.KindGroupedLinear, Roles: []graph.Role{graph.Fprop}, Inputs: []*Pattern{{Bind: "x"}, {Bind: "counts"}, {Bind: "w"}}}, Apply: c.groupedFprop},
		{Name: "grouped dgrad", Pattern: &Pattern{Kind: ops.KindGroupedLinearGradX, Roles: []graph.Role{graph.Dgrad}}, Apply: c.groupedBackward},
		{Name: "grouped wgrad", Pattern: &Pattern{Kind: ops.KindGroupedLinearGradW, Roles: []graph.Role{graph.Wgrad}}, Apply: c.groupedBackward},
	}
}

// groupedFprop converts a grouped expert GEMM's forward product as the
// recipe lowers a linear layer of one expert's weight shape: each expert
// casts with its own scaling state (a LayerState per expert, named
// fqn.N), the router staying float32 (it is no linear layer).
func (c *converter) groupedFprop(n *graph.Node, m Match) (*graph.Node, error) {
	fqn := n.Name()
	x, counts, w := m["x"], m["counts"], m["w"]
	ws := w.Shape()
	experts, out, in := ws[0], ws[1], ws[2]
	lr := LayerReport{FQN: fqn, Out: out, In: in}
	if gl := c.reg.grouped[n]; gl != nil { // converted by an earlier ConvertLinear
		lr.Converted, lr.FP8 = true, gl.gemms()
		lr.Reason = "already FP8 (unchanged)"
		if !gl.fp8 {
			if err := gl.point(c.g, true); err != nil {
				return nil, err
			}
			lr.Reason = "converted again (earlier FP8 nodes reused)"
		}
		c.addReport(lr)
		return nil, nil
	}
	skip := func(why string) (*graph.Node, error) {
		lr.Reason = why
		c.addReport(lr)
		return nil, nil
	}
	if sec, ok := c.cfg.Debug.SectionFor(fqn); ok && sec.DisableLayer {
		return skip(fmt.Sprintf("DisableFP8Layer (debug config section %q)", sec.Name))
	}
	idx := c.linIdx[n]
	// Among the linear layers it stands where it runs: after idx of
	// them (a first or last layer to torchao's default filter and
	// NVFP4's keep_first and keep_last as such a linear layer would be).
	l := recipe.Layer{FQN: fqn, Node: n, Index: idx, Count: c.nLin + 1, Out: out, In: in, Rows: x.Shape()[0], Seed: c.cfg.Seed}
	if f := c.cfg.Filter; f != nil {
		l.Accept = func() bool { return f(n, fqn) }
	}
	plan, err := c.cfg.Recipe.Lower(l)
	if err != nil {
		return nil, err
	}
	if plan.Skip != "" {
		return skip(plan.Skip)
	}
	for _, pair := range plan.GEMMs {
		if pair[0].Kind == fp8.NVFP4Blocks || pair[1].Kind == fp8.NVFP4Blocks {
			return skip("NVFP4 grouped expert GEMMs are not supported yet: kept float32")
		}
	}
	c.report.Notes = append(c.report.Notes, plan.Notes...)
	gl := &groupedLayer{fqn: fqn, experts: experts, plan: plan, hp: n, fp8: true}
	first := ops.GroupedFirstExpert(n) // an expert-parallel rank's experts keep their index in the layer
	for e := range experts {
		st, err := c.layerState(fmt.Sprintf("%s.%d", fqn, first+e))
		if err != nil {
			return nil, err
		}
		gl.states = append(gl.states, st)
	}
	c.reg.grouped[n] = gl
	lr.Converted = true
	lr.Reason = fmt.Sprintf("grouped: %d experts", experts)
	switch k := plan.GEMMs[fp8.Fprop][0].Kind; {
	case k == fp8.DelayedScaling:
		lr.Reason += ", each with its own delayed-scaling state"
	case k != fp8.BF16Rounding && k != fp8.HighPrecision:
		lr.Reason += ", each cast on its own rows"
	}
	gl.row = len(c.report.Layers)
	c.addReport(lr)
	cast, ok := c.groupedCast(gl, fp8.Fprop, 1, 1)
	if !ok {
		c.groupedKept(gl, fp8.Fprop, "by the recipe")
		return nil, nil
	}
	y := ops.GroupedScaledMatMul(fqn+".fp8", fp8.Fprop, x, counts, w, cast)
	if y.DType() == graph.Invalid {
		return nil, fmt.Errorf("layer %q: %w", fqn, c.g.Err())
	}
	y.SetRole(graph.Fprop, nil)
	gl.fwd = y
	c.groupedConverted(gl, fp8.Fprop)
	return y, nil
}

// groupedBackward converts the dgrad or wgrad product of a converted
// grouped layer.
func (c *converter) groupedBackward(n *graph.Node, _ Match) (*graph.Node, error) {
	gl := c.reg.grouped[n.Forward()]
	if gl == nil || gl.row >= len(c.report.Layers) || c.report.Layers[gl.row].FQN != gl.fqn {
		return nil, nil // not converted by this run
	}
	which, axisA, suffix, hp, fp := fp8.Wgrad, 0, ".wgrad.fp8", &gl.hpW, &gl.fpW
	if n.Role() == graph.Dgrad {
		which, axisA, suffix, hp, fp = fp8.Dgrad, 1, ".dgrad.fp8", &gl.hpD, &gl.fpD
	}
	if *hp != nil {
		return nil, nil // converted earlier (this is the same node)
	}
	if ov := gl.plan.Backward; ov != recipe.BackwardQuantized {
		c.groupedKept(gl, which, "by the backward override "+ov.String())
		return nil, nil
	}
	cast, ok := c.groupedCast(gl, which, axisA, 0)
	if !ok {
		c.groupedKept(gl, which, "by the recipe")
		return nil, nil
	}
	fwd := gl.fwd
	if fwd == nil {
		fwd = n.Forward()
	}
	y := ops.GroupedScaledMatMul(gl.fqn+suffix, which, n.Input(0), n.Input(1), n.Input(2), cast)
	if y.DType() == graph.Invalid {
		return nil, fmt.Errorf("layer %q: %w", gl.fqn, c.g.Err())
	}
	y.SetRole(n.Role(), fwd)
	*hp, *fp = n, y
	c.groupedConverted(gl, which)
	return y, nil
}

// gemms lists the GEMMs the layer runs converted.
func (gl *groupedLayer) gemms() []string {
	var out []string
	for i, n := range []*graph.Node{gl.fwd, gl.fpD, gl.fpW} {
		if n != nil {
			out = append(out, gemmNames[i])
		}
	}
	return out
}

// groupedCast is the cast of a grouped GEMM's operands, contracting
// along axisA and axisB, with each expert's metas; ok is false when the
// recipe keeps the GEMM in float32.
func (c *converter) groupedCast(gl *groupedLayer, which fp8.GEMM, axisA, axisB int) (ops.GroupedCast, bool) {
	pair := gl.plan.GEMMs[which]
	if pair[0].Kind == fp8.HighPrecision {
		return ops.GroupedCast{}, false
	}
	roles := which.Operands()
	var gc ops.GroupedCast
	for i, q := range pair {
		cfg := ops.QuantizeConfig{Quantizer: q.Canonical(), Tensor: roles[i], Axis: q.CastAxis([]int{axisA, axisB}[i])}
		var metas []*fp8.Meta
		if q.Kind == fp8.DelayedScaling {
			for _, st := range gl.states {
				metas = append(metas, st.Meta(roles[i]))
			}
		}
		if i == 0 {
			gc.A, gc.MetasA = cfg, metas
		} else {
			gc.B, gc.MetasB = cfg, metas
		}
	}
	return gc, true
}

func (c *converter) groupedConverted(gl *groupedLayer, which fp8.GEMM) {
	r := &c.report.Layers[gl.row]
	r.FP8 = append(r.FP8, which.String())
}

func (c *converter) groupedKept(gl *groupedLayer, which fp8.GEMM, why string) {
	r := &c.report.Layers[gl.row]
	msg := which.String() + " kept in float32 " + why
	if r.Reason == "" {
		r.Reason = msg
	} else {
		r.Reason += "; " + msg
	}
}

// groupedInOrder returns the converted grouped layers of reg by name.
func groupedInOrder(reg *registry) []*groupedLayer {
	var out []*groupedLayer
	for _, gl := range reg.grouped {
		if gl.fwd != nil {
			out = append(out, gl)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].fqn < out[j].fqn })
	return out
}
