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
// float32 result, emulating a scaled FP8 matrix engine: operands are
// decoded exactly (MXFP8 block scales, being powers of two, folded in
// exactly), multiplied by the float32 GEMM, and tensorwise or axiswise
// factors applied to the accumulated products, as torch._scaled_mm does.
// It keeps its decode buffers, so Run allocates only when shapes grow.
type ScaledGEMM struct {
	gemm *kernels.Gemm
	bufA []float32
	bufB []float32
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
	pa, err := g.prepare(&g.bufA, "A", &a, m, k, true)
	if err != nil {
		return err
	}
	pb, err := g.prepare(&g.bufB, "B", &b, n, k, false)
	if err != nil {
		return err
	}
	lda, ldb := k, n
	if a.Trans {
		lda = m
	}
	if b.Trans {
		ldb = k
	}
	alpha := float32(1)
	if a.Codes != nil && a.Block == nil && a.AxisScaleInv == nil {
		alpha *= a.ScaleInv
	}
	if b.Codes != nil && b.Block == nil && b.AxisScaleInv == nil {
		alpha *= b.ScaleInv
	}
	g.gemm.Run(a.Trans, b.Trans, m, n, k, alpha, pa, lda, pb, ldb, 0, c, n)
	ra, rb := a.AxisScaleInv, b.AxisScaleInv
	if a.Codes == nil || a.Block != nil {
		ra = nil
	}
	if b.Codes == nil || b.Block != nil {
		rb = nil
	}
	if ra != nil || rb != nil {
		for i := 0; i < m; i++ {
			row := c[i*n : i*n+n]
			fa := float32(1)
			if ra != nil {
				fa = ra[i]
			}
			for j := range row {
				f := fa
				if rb != nil {
					f = fa * rb[j]
				}
				row[j] *= f
			}
		}
	}
	return nil
}

// prepare returns the operand as float32 ready for the GEMM: F32 as it
// is, FP8 decoded into buf (with MXFP8 scales folded in). outer is m for
// A and n for B.
func (g *ScaledGEMM) prepare(buf *[]float32, name string, o *Operand, outer, k int, isA bool) ([]float32, error) {
	size := outer * k
	if o.Codes == nil {
		if len(o.F32) < size {
			return nil, fmt.Errorf("fp8: scaled GEMM: float32 operand %s has %d elements, want %d", name, len(o.F32), size)
		}
		return o.F32, nil
	}
	if len(o.Codes) < size {
		return nil, fmt.Errorf("fp8: scaled GEMM: operand %s has %d codes, want %d", name, len(o.Codes), size)
	}
	if o.AxisScaleInv != nil && o.Block == nil && len(o.AxisScaleInv) < outer {
		return nil, fmt.Errorf("fp8: scaled GEMM: operand %s has %d axiswise scales, want %d", name, len(o.AxisScaleInv), outer)
	}
	if cap(*buf) < size {
		*buf = make([]float32, size)
	}
	dst := (*buf)[:size]
	if o.Block == nil {
		t := &decodeTables[o.Format]
		for i, q := range o.Codes[:size] {
			dst[i] = t[q]
		}
		return dst, nil
	}
	// Stored shape and blocking axis: the reduction dimension k is the
	// stored columns of A and of Bᵀ, the stored rows otherwise.
	rows, cols, axis := outer, k, 1
	if o.Trans == isA {
		rows, cols, axis = k, outer, 0
	}
	if err := DequantizeMX(dst, o.Codes[:size], o.Block, rows, cols, axis, o.Format); err != nil {
		return nil, fmt.Errorf("fp8: scaled GEMM: operand %s: %w", name, err)
	}
	return dst, nil
}
