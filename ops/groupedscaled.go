package ops

import (
	"fmt"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// GroupedCast is how a grouped GEMM casts its two operands, in
// fp8.GEMM.Operands order (fprop: x, W; dgrad: dy, W; wgrad: dy, x).
// Both quantizers are bf16 (fp8.BF16Rounding: the operands rounded to
// bf16, no codes) or both cast to codes as in QuantizeConfig (delayed
// or current scaling, MXFP8, Float8BlockScaling; NVFP4 is not grouped
// yet). Each expert casts with its own delayed-scaling state: MetasA and
// MetasB hold one fp8.Meta per expert for a DelayedScaling A or B (A.Meta
// and B.Meta are unused).
type GroupedCast struct {
	A, B           QuantizeConfig
	MetasA, MetasB []*fp8.Meta
}

// check reports a cast the op cannot run for experts experts.
func (c GroupedCast) check(experts int) error {
	bf16 := c.A.Kind == fp8.BF16Rounding
	if bf16 != (c.B.Kind == fp8.BF16Rounding) {
		return fmt.Errorf("one operand is bf16 (%v) and the other %v", c.A.Quantizer, c.B.Quantizer)
	}
	if bf16 {
		return nil
	}
	for i, q := range []QuantizeConfig{c.A, c.B} {
		metas := [2][]*fp8.Meta{c.MetasA, c.MetasB}[i]
		switch {
		case q.Kind == fp8.NVFP4Blocks:
			return fmt.Errorf("operand %c: NVFP4 grouped GEMMs are not supported", 'A'+i)
		case q.Kind == fp8.DelayedScaling && len(metas) != experts:
			return fmt.Errorf("operand %c: delayed scaling needs one fp8.Meta per expert: %d for %d experts", 'A'+i, len(metas), experts)
		}
		for e, m := range metas {
			if m == nil || m.Format != q.Format {
				return fmt.Errorf("operand %c: expert %d's meta is missing or not %v", 'A'+i, e, q.Format)
			}
		}
		probe := q
		if q.Kind == fp8.DelayedScaling {
			probe.Meta = metas[0]
		}
		if err := validateQuantize(probe); err != nil {
			return fmt.Errorf("operand %c: %w", 'A'+i, err)
		}
	}
	return fp8.Multiplies(c.A.Quantizer, c.B.Quantizer)
}

// groupedScaledOp is groupedOp with each expert's operands cast as the
// GroupedCast says before its GEMM.
type groupedScaledOp struct {
	gemm fp8.GEMM
	cast GroupedCast
}

func (o groupedScaledOp) mode() groupedMode {
	switch o.gemm {
	case fp8.Dgrad:
		return groupedGradX
	case fp8.Wgrad:
		return groupedGradW
	}
	return groupedForward
}

func (o groupedScaledOp) Type() string     { return KindGroupedScaledMatMul.String() }
func (o groupedScaledOp) Kind() graph.Kind { return KindGroupedScaledMatMul }
func (o groupedScaledOp) Attrs() string {
	return fmt.Sprintf("%v,%v·%v", o.gemm, o.cast.A.Quantizer, o.cast.B.Quantizer)
}

// Config returns the op's GEMM and casts.
func (o groupedScaledOp) Config() (fp8.GEMM, GroupedCast) { return o.gemm, o.cast }

func (o groupedScaledOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	s, dt, err := groupedOp{mode: o.mode()}.Infer(in)
	if err != nil {
		return nil, graph.Invalid, err
	}
	if err := o.cast.check(in[1].Shape()[0]); err != nil {
		return nil, graph.Invalid, err
	}
	return s, dt, nil
}

// Bind casts each expert's operands with one fp8.Cast per operand (an
// expert's rows are a QuantizeRows of the operand's cast, its delayed
// state swapped in) and runs the scaled GEMM of that expert, as the
// ScaledMatMul of a linear layer over those rows would.
func (o groupedScaledOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	if err := kernels.CheckEnv(); err != nil {
		return nil, err
	}
	rows, counts, third, out := b.In[0].F32, b.In[1].I32, b.In[2].F32, b.Out.F32
	n, width := b.In[0].Shape[0], b.In[0].Shape[1]
	name := b.Node.Input(1).Name()
	// Each operand's 2-D shape per expert (rows cap for the row operands),
	// its contraction axis, and where expert e's values start.
	var nOut, in int
	var aRows, aCols, bRows, bCols int
	switch o.gemm {
	case fp8.Fprop: // y_e [c out] = x_e [c in] · W_eᵀ
		nOut, in = b.In[2].Shape[1], b.In[2].Shape[2]
		aRows, aCols, bRows, bCols = n, in, nOut, in
	case fp8.Dgrad: // dx_e [c in] = dy_e [c out] · W_e
		nOut, in = b.In[2].Shape[1], b.In[2].Shape[2]
		aRows, aCols, bRows, bCols = n, nOut, nOut, in
	default: // dW_e [out in] = dy_eᵀ [out c] · x_e [c in]
		nOut, in = width, b.In[2].Shape[1]
		aRows, aCols, bRows, bCols = n, nOut, n, in
	}
	metaOf := func(ms []*fp8.Meta) *fp8.Meta {
		if len(ms) > 0 {
			return ms[0]
		}
		return nil
	}
	if o.cast.A.Kind == fp8.BF16Rounding {
		return o.bindBF16(rows, counts, third, out, n, nOut, in, name, paddedRows(b.Node.Input(1)))
	}
	ca, err := fp8.NewCast(o.cast.A.Quantizer, aRows, aCols, o.cast.A.Axis, metaOf(o.cast.MetasA))
	if err != nil {
		return nil, err
	}
	cb, err := fp8.NewCast(o.cast.B.Quantizer, bRows, bCols, o.cast.B.Axis, metaOf(o.cast.MetasB))
	if err != nil {
		return nil, err
	}
	codesA, codesB := make([]uint8, aRows*aCols), make([]uint8, bRows*bCols)
	record := b.Training
	if record {
		for _, ms := range [][]*fp8.Meta{o.cast.MetasA, o.cast.MetasB} {
			for _, m := range ms {
				b.AtStepEnd(func() error { m.Update(); return nil })
			}
		}
	}
	g := fp8.NewScaledGEMM()
	// expert runs expert e's cast and GEMM on its c rows from row r0.
	return o.experts(counts, out, n, nOut, in, name, paddedRows(b.Node.Input(1)), func(e, r0, c int, warm bool) error {
		cast := func(cc *fp8.Cast, metas []*fp8.Meta, dst []uint8, src []float32, r int) error {
			if metas != nil {
				cc.Meta = metas[e]
			}
			return cc.QuantizeRows(dst, src, r, 0, record && !warm)
		}
		if err := cast(ca, o.cast.MetasA, codesA, rows[r0*aCols:], c); err != nil {
			return err
		}
		switch o.gemm {
		case fp8.Fprop:
			if err := cast(cb, o.cast.MetasB, codesB, third[e*nOut*in:], bRows); err != nil {
				return err
			}
			return g.Run(c, nOut, in, ca.Operand(codesA, false, false), cb.Operand(codesB, true, false), out[r0*nOut:])
		case fp8.Dgrad:
			if err := cast(cb, o.cast.MetasB, codesB, third[e*nOut*in:], bRows); err != nil {
				return err
			}
			return g.Run(c, in, nOut, ca.Operand(codesA, false, false), cb.Operand(codesB, false, true), out[r0*in:])
		}
		if err := cast(cb, o.cast.MetasB, codesB, third[r0*in:], c); err != nil {
			return err
		}
		return g.Run(nOut, in, c, ca.Operand(codesA, true, true), cb.Operand(codesB, false, true), out[e*nOut*in:])
	}), nil
}

// experts returns the kernel that runs run for each expert with tokens
// (its index, first row and row count) after checking the group sizes;
// an expert without tokens gets a zero weight gradient. The first run
// begins with run over all the rows (warm set; into out, which the run
// then writes): the GEMMs' buffers and scratch grow with the shapes they
// have seen, and this sizes them for the largest group, so that no
// later routing allocates. A warm run records no amax.
func (o groupedScaledOp) experts(counts []int32, out []float32, n, nOut, in int, name string, padded bool, run func(e, r0, c int, warm bool) error) graph.Kernel {
	warm := false
	outWidth := nOut // the output's row width (fprop: out, dgrad: in)
	if o.gemm == fp8.Dgrad {
		outWidth = in
	}
	return func() error {
		total, err := checkCounts(counts, n, name, padded)
		if err != nil {
			return err
		}
		if !warm && n > 0 {
			warm = true
			if err := run(0, 0, n, true); err != nil {
				return err
			}
		}
		if total < n && o.gemm != fp8.Wgrad {
			defer clear(out[total*outWidth:]) // the padding rows, after the warm run
		}
		r0 := 0
		for e, cnt := range counts {
			c := int(cnt)
			if c == 0 {
				if o.gemm == fp8.Wgrad {
					clear(out[e*nOut*in : (e+1)*nOut*in])
				}
				continue // an expert without tokens casts nothing: its state is not rolled
			}
			if err := run(e, r0, c, false); err != nil {
				return fmt.Errorf("expert %d: %w", e, err)
			}
			r0 += c
		}
		return nil
	}
}

// bindBF16 is Bind for bf16 operands: each expert's GEMM is the
// BF16MatMul of its rows.
func (o groupedScaledOp) bindBF16(rows []float32, counts []int32, third, out []float32, n, nOut, in int, name string, padded bool) (graph.Kernel, error) {
	g, err := newGemm()
	if err != nil {
		return nil, err
	}
	a, bb := &kernels.Operand{}, &kernels.Operand{}
	ep := kernels.Epilogue{Alpha: 1}
	return o.experts(counts, out, n, nOut, in, name, padded, func(e, r0, c int, _ bool) error {
		return o.runBF16(g, a, bb, ep, rows, third, out, e, r0, c, nOut, in)
	}), nil
}

// runBF16 runs expert e's bf16 GEMM on its c > 0 rows from row r0.
func (o groupedScaledOp) runBF16(g *kernels.Gemm, a, bb *kernels.Operand, ep kernels.Epilogue, rows, third, out []float32, e, r0, c, nOut, in int) error {
	switch o.gemm {
	case fp8.Fprop:
		a.F32, bb.F32 = rows[r0*in:(r0+c)*in], third[e*nOut*in:(e+1)*nOut*in]
		g.RunBF16(false, true, c, nOut, in, a, in, bb, in, out[r0*nOut:], nOut, ep)
	case fp8.Dgrad:
		a.F32, bb.F32 = rows[r0*nOut:(r0+c)*nOut], third[e*nOut*in:(e+1)*nOut*in]
		g.RunBF16(false, false, c, in, nOut, a, nOut, bb, in, out[r0*in:], in, ep)
	default:
		a.F32, bb.F32 = rows[r0*nOut:(r0+c)*nOut], third[r0*in:(r0+c)*in]
		g.RunBF16(true, false, nOut, in, c, a, nOut, bb, in, out[e*nOut*in:(e+1)*nOut*in], in, ep)
	}
	return nil
}

// GroupedScaledMatMul is the grouped GEMM gemm of a grouped linear layer
// (GroupedLinear's forward, or its gradient with respect to x or W) with
// each expert's operands cast per cast before its product: the inputs
// are GroupedLinear's (fprop: x, counts, w), its dx node's (dgrad: dy,
// counts, w) or its dw node's (wgrad: dy, counts, x). Each expert's
// product is, bit for bit, the ScaledMatMul (or BF16MatMul) a converted
// linear layer with that expert's weight and scaling state runs on that
// expert's rows; the casts' row blocks (32 for MXFP8, 128 for
// Float8BlockScaling) start at each expert's first row, as if each
// group were padded to the alignment, so the padding changes no bit. An
// expert without tokens casts nothing (its delayed state is not rolled,
// as a layer that did not run) and gets a zero weight gradient.
func GroupedScaledMatMul(name string, gemm fp8.GEMM, rows, counts, third *graph.Node, cast GroupedCast) *graph.Node {
	return apply(groupedScaledOp{gemm: gemm, cast: cast}, name, rows, counts, third)
}
