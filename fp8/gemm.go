package fp8

import (
	"fmt"

	"github.com/octetml/octet/internal/kernels"
)

// Operand is one input of a scaled GEMM: a row-major matrix stored as
// op(X) or, with Trans, as op(X)ᵀ. Either Codes holds FP8 codes in Format
// with exactly one kind of scale, or F32 holds the operand in float32 (a
// precision override) and no scale applies.
type Operand struct {
	Codes  []uint8
	Format Format
	F32    []float32
	Trans  bool
	// ScaleInv multiplies every decoded value (tensorwise scaling).
	ScaleInv float32
	// AxisScaleInv has one factor per slice along the contraction
	// dimension: per row of op(A) for A, per column of op(B) for B
	// (axiswise scaling). It overrides ScaleInv.
	AxisScaleInv []float32
	// Block holds MXFP8 scales, [outer][⌈k/32⌉] with outer the rows of
	// op(A) or the columns of op(B). It overrides the others.
	Block []E8M0
}

func (o *Operand) kind() string {
	switch {
	case o.Codes == nil:
		return "float32"
	case o.Block != nil:
		return "mxfp8"
	case o.AxisScaleInv != nil:
		return "axiswise"
	}
	return "tensorwise"
}

// ScaledGEMM multiplies FP8 operands with float32 accumulation and a
// float32 result, emulating a scaled FP8 matrix engine: the codes are
// decoded to float32 while the GEMM packs its panels, with every scale
// (tensorwise, axiswise or MXFP8 block) folded into the decoded value,
// and the float32 micro-kernel does the rest. Each operand is read once,
// one byte per element. Run allocates only when operand shapes grow.
type ScaledGEMM struct {
	gemm           *kernels.Gemm
	opA, opB       kernels.Operand
	tabA, tabB     [256]float32
	blockA, blockB []float32
	decA, decB     []float32
}

// NewScaledGEMM returns a ScaledGEMM.
func NewScaledGEMM() *ScaledGEMM { return &ScaledGEMM{gemm: kernels.NewGemm()} }

// Run computes C[m n] = op(A)[m k] · op(B)[k n].
func (g *ScaledGEMM) Run(m, n, k int, a, b Operand, c []float32) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("fp8: scaled GEMM: negative size %d×%d×%d", m, n, k)
	}
	if len(c) < m*n {
		return fmt.Errorf("fp8: scaled GEMM: C has %d elements, want %d", len(c), m*n)
	}
	if (a.Block != nil) != (b.Block != nil) && a.Codes != nil && b.Codes != nil {
		return fmt.Errorf("fp8: scaled GEMM: MXFP8 needs block scales on both operands (A is %s, B is %s)", a.kind(), b.kind())
	}
	if err := prepare(&g.opA, &g.tabA, &g.blockA, "A", &a, m, k); err != nil {
		return err
	}
	if err := prepare(&g.opB, &g.tabB, &g.blockB, "B", &b, n, k); err != nil {
		return err
	}
	// A tensorwise operand that the packing would have to gather code by
	// code (A, or a transposed B) is decoded up front with the vector
	// kernel instead, then packed like float32: the same values.
	predecode(&g.opA, &g.decA, m*k)
	if b.Trans {
		predecode(&g.opB, &g.decB, n*k)
	}
	lda, ldb := k, n
	if a.Trans {
		lda = m
	}
	if b.Trans {
		ldb = k
	}
	g.gemm.RunOperands(a.Trans, b.Trans, m, n, k, 1, &g.opA, lda, &g.opB, ldb, 0, c, n)
	return nil
}

// predecode turns a vector-decodable FP8 operand into float32 in buf.
func predecode(op *kernels.Operand, buf *[]float32, size int) {
	if !op.Vector || op.Codes == nil {
		return
	}
	if cap(*buf) < size {
		*buf = make([]float32, size)
	}
	dst := (*buf)[:size]
	done := kernels.DecodeFP8(op.Format, dst, op.Codes[:size], op.Scale)
	if done == 0 && size >= 16 {
		return // no vector kernel here: keep decoding while packing
	}
	for i, q := range op.Codes[done:size] {
		dst[done+i] = op.Table[q]
	}
	*op = kernels.Operand{F32: dst}
}

// prepare fills the kernel operand for o: outer is m for A and n for B.
func prepare(dst *kernels.Operand, tab *[256]float32, block *[]float32, name string, o *Operand, outer, k int) error {
	size := outer * k
	*dst = kernels.Operand{}
	if o.Codes == nil {
		if len(o.F32) < size {
			return fmt.Errorf("fp8: scaled GEMM: float32 operand %s has %d elements, want %d", name, len(o.F32), size)
		}
		dst.F32 = o.F32
		return nil
	}
	if len(o.Codes) < size {
		return fmt.Errorf("fp8: scaled GEMM: operand %s has %d codes, want %d", name, len(o.Codes), size)
	}
	dst.Codes, dst.Table = o.Codes, tab
	src := &decodeTables[o.Format]
	switch {
	case o.Block != nil:
		blocks := (k + BlockSize - 1) / BlockSize
		if len(o.Block) < outer*blocks {
			return fmt.Errorf("fp8: scaled GEMM: operand %s has %d block scales, want %d", name, len(o.Block), outer*blocks)
		}
		if cap(*block) < outer*blocks {
			*block = make([]float32, outer*blocks)
		}
		f := (*block)[:outer*blocks]
		for i, s := range o.Block[:outer*blocks] {
			f[i] = s.Float32()
		}
		*tab = *src
		dst.Block, dst.Blocks = f, blocks
	case o.AxisScaleInv != nil:
		if len(o.AxisScaleInv) < outer {
			return fmt.Errorf("fp8: scaled GEMM: operand %s has %d axiswise scales, want %d", name, len(o.AxisScaleInv), outer)
		}
		*tab = *src
		dst.Outer = o.AxisScaleInv[:outer]
	default:
		for i, v := range src {
			tab[i] = v * o.ScaleInv
		}
		dst.Vector, dst.Format, dst.Scale = true, int(o.Format), o.ScaleInv
	}
	return nil
}
