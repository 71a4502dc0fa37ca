package fp8

import (
	"bytes"
	"fmt"
	"math"
	"unsafe"

	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
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
	// BlockScaleInv holds Float8BlockScaling decode factors (each block's
	// scale_inv), one per 128 values along k: [outer][⌈k/128⌉] with outer
	// the rows of op(A) or the columns of op(B); with BlockTiles, one per
	// 128×128 tile, [⌈outer/128⌉][⌈k/128⌉]. Both operands of a GEMM carry
	// them or neither, and at most one has tiles. It overrides the others.
	BlockScaleInv []float32
	BlockTiles    bool
	// FP4, if set, is an NVFP4 operand instead of Codes: op(X) is FP4's
	// [Rows][Cols] (or its transpose, with Trans). Both operands of a GEMM
	// are NVFP4 or neither.
	FP4 *NVFP4

	blockF32 []float32 // BlockScaleInv per 32 values along k (float32 path)
}

func (o *Operand) kind() string {
	switch {
	case o.FP4 != nil:
		return "nvfp4"
	case o.Codes == nil:
		return "float32"
	case o.BlockScaleInv != nil:
		return "float8 block"
	case o.Block != nil:
		return "mxfp8"
	case o.AxisScaleInv != nil:
		return "axiswise"
	}
	return "tensorwise"
}

// ScaledGEMM multiplies FP8 operands with float32 accumulation and a
// float32 result, emulating a scaled FP8 matrix engine. Each operand is
// read once, one byte per element. Run allocates only when operand
// shapes grow.
//
// Where the CPU has a bf16 kernel (kernels.HasBF16: AVX512_BF16, or its
// order in float32 FMAs on AVX2 and NEON), the product runs on it: every
// FP8 value is exactly a bf16 value, the codes decode straight to bf16
// while the panels are packed, the products are exact and accumulate in
// float32. Scales stay out of the values: the two tensorwise scales
// multiply the accumulators as C is stored (one rounding), axiswise
// scales are per-row and per-column factors applied after the
// accumulation (one rounding), and MXFP8's E8M0 block scales, which
// change along k, are applied to the values as they convert — exponent
// shifts, exact, as they are powers of two, relative to each operand's
// largest block exponent (moved into the store's factor) so that the
// values stay normal bf16 numbers (a NaN scale is folded into a decoded
// float32 copy instead). VDPBF16PS reads denormal inputs as zero and
// flushes denormal results; plain FP8 values (at least 2^-16, products
// at least 2^-32) never come near, and a block-scaled GEMM whose shifted
// values would (block exponents spread by more than about 100 within an
// operand) runs on the float32 path instead.
//
// Elsewhere, and when an operand is float32, the codes are decoded to
// float32 while the GEMM packs its panels, every scale folded into the
// decoded value, and the float32 micro-kernel does the rest.
type ScaledGEMM struct {
	// Block, if set, is called on each block of C (rows [r0, r1),
	// columns [c0, c1)) as soon as it is final, by the worker that
	// computed it, and may modify it in place: a bias or a fused
	// elementwise epilogue. Calls for disjoint blocks may run
	// concurrently.
	Block          func(r0, r1, c0, c1 int)
	gemm           *kernels.Gemm
	opA, opB       kernels.Operand
	tabA, tabB     [256]float32
	blockA, blockB []float32
	decA, decB     []float32
	f4A, f4B       []float32 // NVFP4 block factors
	fold           []float32 // MXFP8 block factors being folded
	expShA, expShB []int8    // Float8BlockScaling exponent shifts
	f32A, f32B     []float32 // Float8BlockScaling factors per 32 (float32 path)
	group          parallel.Group
	job            foldJob
	foldPartFn     func(int)
}

// useBF16 reports whether FP8 products take the bf16 kernels; tests turn
// it off to run the float32 path that CPUs without AVX512_BF16 take.
var useBF16 = kernels.HasBF16

// mxShifts says whether MXFP8 operands take the exponent shifts; tests
// turn it off to compare with the folded operands.
var mxShifts = true

// NewScaledGEMM returns a ScaledGEMM.
func NewScaledGEMM() *ScaledGEMM {
	g := &ScaledGEMM{gemm: kernels.NewGemm()}
	g.foldPartFn = g.foldPart
	return g
}

// Run computes C[m n] = op(A)[m k] · op(B)[k n].
func (g *ScaledGEMM) Run(m, n, k int, a, b Operand, c []float32) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("fp8: scaled GEMM: negative size %d×%d×%d", m, n, k)
	}
	if len(c) < m*n {
		return fmt.Errorf("fp8: scaled GEMM: C has %d elements, want %d", len(c), m*n)
	}
	if a.FP4 != nil || b.FP4 != nil {
		return g.runNVFP4(m, n, k, &a, &b, c)
	}
	if a.BlockScaleInv != nil || b.BlockScaleInv != nil {
		if done, err := g.runFloat8BlockBF16(m, n, k, &a, &b, c); done || err != nil {
			return err
		}
		if err := g.expandFloat8Blocks(m, n, k, &a, &b); err != nil {
			return err
		}
	}
	if (a.Block != nil) != (b.Block != nil) && a.Codes != nil && b.Codes != nil {
		return fmt.Errorf("fp8: scaled GEMM: MXFP8 needs block scales on both operands (A is %s, B is %s)", a.kind(), b.kind())
	}
	if err := checkOperand("A", &a, m, k); err != nil {
		return err
	}
	if err := checkOperand("B", &b, n, k); err != nil {
		return err
	}
	lda, ldb := k, n
	if a.Trans {
		lda = m
	}
	if b.Trans {
		ldb = k
	}
	g.gemm.Block = g.Block
	if useBF16() && a.Codes != nil && b.Codes != nil && a.blockF32 == nil {
		if ep, ok := g.prepareBF16(m, n, k, &a, &b); ok {
			g.gemm.RunBF16(a.Trans, b.Trans, m, n, k, &g.opA, lda, &g.opB, ldb, c, n, ep)
			return nil
		}
	}
	prepare(&g.opA, &g.tabA, &g.blockA, &a, m, k)
	prepare(&g.opB, &g.tabB, &g.blockB, &b, n, k)
	// A tensorwise operand that the packing would have to gather code by
	// code (A, or a transposed B) is decoded up front with the vector
	// kernel instead, then packed like float32: the same values.
	predecode(&g.opA, &g.decA, m*k)
	if b.Trans {
		predecode(&g.opB, &g.decB, n*k)
	}
	g.gemm.RunOperands(a.Trans, b.Trans, m, n, k, 1, &g.opA, lda, &g.opB, ldb, 0, c, n)
	return nil
}

// checkOperand verifies that an operand has the elements and scales
// its shape needs: outer is m for A and n for B.
func checkOperand(name string, o *Operand, outer, k int) error {
	size := outer * k
	switch {
	case o.Codes == nil:
		if len(o.F32) < size {
			return fmt.Errorf("fp8: scaled GEMM: float32 operand %s has %d elements, want %d", name, len(o.F32), size)
		}
	case len(o.Codes) < size:
		return fmt.Errorf("fp8: scaled GEMM: operand %s has %d codes, want %d", name, len(o.Codes), size)
	case o.Format != E4M3 && o.Format != E5M2:
		return fmt.Errorf("fp8: scaled GEMM: operand %s has format %v (want E4M3 or E5M2)", name, o.Format)
	case o.Block != nil:
		if want := outer * ((k + BlockSize - 1) / BlockSize); len(o.Block) < want {
			return fmt.Errorf("fp8: scaled GEMM: operand %s has %d block scales, want %d", name, len(o.Block), want)
		}
	case o.AxisScaleInv != nil:
		if len(o.AxisScaleInv) < outer {
			return fmt.Errorf("fp8: scaled GEMM: operand %s has %d axiswise scales, want %d", name, len(o.AxisScaleInv), outer)
		}
	}
	return nil
}

// prepareBF16 sets up both FP8 operands for the bf16 kernels and returns
// the epilogue, or ok = false when MXFP8 block scales cannot be folded
// exactly (see ScaledGEMM).
func (g *ScaledGEMM) prepareBF16(m, n, k int, a, b *Operand) (ep kernels.Epilogue, ok bool) {
	ep.Alpha = 1
	if a.Block != nil {
		// Block scales as exponent shifts of the codes as they convert
		// (no decoded copy), unless a scale is NaN or the shifted values
		// would leave the normal floats; then folded into float32.
		if shiftA, minA, okA := g.mxExponents(&g.opA, &g.expShA, a, m, k, !a.Trans); okA && mxShifts {
			if shiftB, minB, okB := g.mxExponents(&g.opB, &g.expShB, b, n, k, b.Trans); okB && minA+minB >= -126 {
				ep.Alpha = math.Ldexp(1, shiftA+shiftB)
				return ep, true
			}
		}
		shiftA, minA, okA := g.foldBlocks(&g.opA, &g.decA, a, m, k, !a.Trans)
		shiftB, minB, okB := g.foldBlocks(&g.opB, &g.decB, b, n, k, b.Trans)
		// Folded values and their products must stay normal floats.
		if !okA || !okB || minA+minB < -126 {
			return ep, false
		}
		ep.Alpha = math.Ldexp(1, shiftA+shiftB)
		return ep, true
	}
	for _, x := range []struct {
		dst *kernels.Operand
		o   *Operand
		row bool
	}{{&g.opA, a, true}, {&g.opB, b, false}} {
		*x.dst = kernels.Operand{Codes: x.o.Codes, Table: decodeTable(x.o.Format), Cast: formats[x.o.Format].cast, Scale: 1}
		switch {
		case x.o.AxisScaleInv != nil && x.row:
			ep.Row = x.o.AxisScaleInv[:m]
		case x.o.AxisScaleInv != nil:
			ep.Col = x.o.AxisScaleInv[:n]
		default:
			ep.Alpha *= float64(x.o.ScaleInv)
		}
	}
	return ep, true
}

// foldBlocks decodes an MXFP8 operand to float32 with each block's scale
// 2^e folded in as 2^(e−shift), shift being the operand's largest block
// exponent (NaN scales aside), and points dst at the values. It returns
// shift and a lower bound on the exponent of the smallest non-zero
// folded magnitude (the format's smallest subnormal in the block with
// the smallest scale that holds a non-zero code), and ok = false if some
// value might not be a normal float. rowMajor says the operand is stored
// [outer][k] (A as op(A), B as op(B)ᵀ).
func (g *ScaledGEMM) foldBlocks(dst *kernels.Operand, buf *[]float32, o *Operand, outer, k int, rowMajor bool) (shift, minExp int, ok bool) {
	blocks := (k + BlockSize - 1) / BlockSize
	scales := o.Block[:outer*blocks]
	codes := unsafe.Slice((*uint8)(unsafe.Pointer(&scales[0])), len(scales))
	lo, hi, any := kernels.E8M0Range(codes)
	shift = 0 // every scale NaN: so is every value
	if any {
		shift = E8M0(hi).Exp()
	}
	size := outer * k
	if cap(*buf) < size {
		*buf = make([]float32, size)
	}
	d := (*buf)[:size]
	// One factor 2^(e−shift) per block (NaN for the NaN scale),
	// transposed to [blocks][outer] when k runs down the stored rows
	// (each stored row is one k, all outer indices).
	if cap(g.fold) < 2*outer*blocks {
		g.fold = make([]float32, 2*outer*blocks)
	}
	f := g.fold[:outer*blocks]
	if rowMajor {
		kernels.E8M0Factors(f, codes, shift)
	} else {
		t := g.fold[outer*blocks : 2*outer*blocks]
		kernels.E8M0Factors(t, codes, shift)
		kernels.Transpose(f, t, outer, blocks, 0, blocks)
	}
	minE := mxMinExp(o.Codes, codes, lo, any, blocks, outer, k, rowMajor)
	g.job = foldJob{d: d, f: f, codes: o.Codes, format: o.Format, outer: outer, k: k, rowMajor: rowMajor}
	parts := 1
	if size >= 1<<15 {
		parts = parallel.Workers()
	}
	g.job.parts = parts
	g.group.For(parts, g.foldPartFn)
	*dst = kernels.Operand{F32: d}
	if minE == math.MaxInt {
		return shift, 0, true // no non-zero value
	}
	_, sub := math.Frexp(float64(o.Format.MinSubnormal()))
	minExp = minE - shift + sub - 1
	return shift, minExp, minExp >= -126
}

// mxMinExp returns the exponent of the smallest scale (codes, lo the
// smallest of them, any whether one is not NaN) of an MXFP8 block
// holding a non-zero code — the smallest scale, or the next one up
// while every block with the candidate scale holds only zeros — or
// math.MaxInt if there is none.
func mxMinExp(values, codes []uint8, lo uint8, any bool, blocks, outer, k int, rowMajor bool) int {
	for c := int(lo); any && c < 255; {
		next := 255
		for j, s := range codes {
			if int(s) == c {
				if !zeroBlock(values, j/blocks, j%blocks, outer, k, rowMajor) {
					return c - 127
				}
			} else if int(s) > c && int(s) < next {
				next = int(s)
			}
		}
		c = next
	}
	return math.MaxInt
}

// mxExponents points dst at an MXFP8 operand's codes with its block
// scales 2^e as exponent shifts 2^(e−shift) per row of op(X) (or column
// of op(B)) and 32 values of k, shift the operand's largest exponent;
// it returns shift, a lower bound on the exponent of the smallest
// non-zero shifted magnitude (see foldBlocks), and ok = false (dst
// untouched) when a scale is NaN or some value might not be a normal
// float. An all-zero block's shift is clamped: its values stay zero.
func (g *ScaledGEMM) mxExponents(dst *kernels.Operand, buf *[]int8, o *Operand, outer, k int, rowMajor bool) (shift, minExp int, ok bool) {
	blocks := (k + BlockSize - 1) / BlockSize
	if outer == 0 || blocks == 0 {
		return 0, 0, false
	}
	scales := o.Block[:outer*blocks]
	codes := unsafe.Slice((*uint8)(unsafe.Pointer(&scales[0])), len(scales))
	if bytes.IndexByte(codes, uint8(E8M0NaN)) >= 0 {
		return 0, 0, false
	}
	lo, hi, _ := kernels.E8M0Range(codes)
	shift = E8M0(hi).Exp()
	if minE := mxMinExp(o.Codes, codes, lo, true, blocks, outer, k, rowMajor); minE != math.MaxInt {
		_, sub := math.Frexp(float64(o.Format.MinSubnormal()))
		minExp = minE - shift + sub - 1
		if minExp < -126 {
			return 0, 0, false
		}
	}
	if cap(*buf) < len(codes) {
		*buf = make([]int8, len(codes))
	}
	ex := (*buf)[:len(codes)]
	for j, s := range codes {
		ex[j] = int8(max(int(s)-127-shift, -128))
	}
	*dst = kernels.Operand{Codes: o.Codes, Table: decodeTable(o.Format), Cast: formats[o.Format].cast, Scale: 1, Exp: ex, ExpBlocks: blocks, ExpRun: BlockSize}
	return shift, minExp, true
}

// foldJob is the decode foldBlocks splits over the workers.
type foldJob struct {
	d, f     []float32
	codes    []uint8
	format   Format
	outer, k int
	rowMajor bool
	parts    int
}

// foldPart decodes part i of g.job: rows of op(X) when k runs along the
// stored rows' values (rowMajor), stored rows (values of k) otherwise.
func (g *ScaledGEMM) foldPart(i int) {
	j := &g.job
	d, f, codes, format, outer, k := j.d, j.f, j.codes, j.format, j.outer, j.k
	blocks := (k + BlockSize - 1) / BlockSize
	if j.rowMajor {
		// A row's blocks of 32 in one call, each times its factor.
		for r := outer * i / j.parts; r < outer*(i+1)/j.parts; r++ {
			kernels.DecodeFP8Blocks32(formats[format].cast, d[r*k:(r+1)*k], codes[r*k:(r+1)*k], f[r*blocks:(r+1)*blocks])
		}
		return
	}
	for p := k * i / j.parts; p < k*(i+1)/j.parts; p++ {
		row := d[p*outer : (p+1)*outer]
		decodeScaled(row, codes[p*outer:(p+1)*outer], format, 1)
		kernels.MulRow(row, f[(p/BlockSize)*outer:(p/BlockSize+1)*outer])
	}
}

// decodeScaled writes dst[i] = decode(src[i])·scale (exact for a power of
// two that keeps the values normal).
func decodeScaled(dst []float32, src []uint8, f Format, scale float32) {
	kernels.DecodeFP8(formats[f].cast, dst, src, scale)
}

// zeroBlock reports whether MXFP8 block bi of outer index i holds only
// zeros (of either sign), whose scale does not matter.
func zeroBlock(codes []uint8, i, bi, outer, k int, rowMajor bool) bool {
	for p := bi * BlockSize; p < min(k, (bi+1)*BlockSize); p++ {
		idx := i*k + p
		if !rowMajor {
			idx = p*outer + i
		}
		if codes[idx]&0x7F != 0 {
			return false
		}
	}
	return true
}

// predecode turns an FP8 operand whose table is a scaled decode table
// into float32 in buf, when the vector decode makes that cheaper than
// decoding while packing.
func predecode(op *kernels.Operand, buf *[]float32, size int) {
	if op.Cast == nil || op.Codes == nil || !kernels.VectorDecode() || size < 16 {
		return
	}
	if cap(*buf) < size {
		*buf = make([]float32, size)
	}
	dst := (*buf)[:size]
	kernels.DecodeFP8(op.Cast, dst, op.Codes[:size], op.Scale)
	*op = kernels.Operand{F32: dst}
}

// prepare fills the kernel operand of the float32 path for o (checked
// by checkOperand): outer is m for A and n for B.
func prepare(dst *kernels.Operand, tab *[256]float32, block *[]float32, o *Operand, outer, k int) {
	*dst = kernels.Operand{}
	if o.Codes == nil {
		dst.F32 = o.F32
		return
	}
	dst.Codes, dst.Table = o.Codes, tab
	src := decodeTable(o.Format)
	switch {
	case o.blockF32 != nil:
		*tab = *src
		dst.Block, dst.Blocks = o.blockF32, (k+BlockSize-1)/BlockSize
	case o.Block != nil:
		blocks := (k + BlockSize - 1) / BlockSize
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
		*tab = *src
		dst.Outer = o.AxisScaleInv[:outer]
	default:
		for i, v := range src {
			tab[i] = v * o.ScaleInv
		}
		dst.Cast, dst.Scale = formats[o.Format].cast, o.ScaleInv
	}
}

// expandFloat8Blocks turns the Float8BlockScaling factors of both
// operands into float32 factors per 32 values along k, the granularity
// the float32 path applies: it multiplies them into the decoded values
// (exact for power-of-two factors; each value rounded once otherwise,
// within the float32 accumulation bound). The bf16 kernels take
// power-of-two factors in runFloat8BlockBF16 instead.
func (g *ScaledGEMM) expandFloat8Blocks(m, n, k int, a, b *Operand) error {
	both := a.Codes != nil && b.Codes != nil
	if both && (a.BlockScaleInv == nil) != (b.BlockScaleInv == nil) {
		return fmt.Errorf("fp8: scaled GEMM: Float8BlockScaling needs block scales on both operands (A is %s, B is %s)", a.kind(), b.kind())
	}
	if a.BlockTiles && b.BlockTiles {
		return fmt.Errorf("fp8: scaled GEMM: both operands have 2-D (128×128) blocks; a 2-D operand multiplies only a 1-D one")
	}
	na, nb := float8BlockFactors(m, k, a.BlockTiles), float8BlockFactors(n, k, b.BlockTiles)
	if a.Codes != nil && len(a.BlockScaleInv) < na {
		return fmt.Errorf("fp8: scaled GEMM: operand A has %d block scales, want %d", len(a.BlockScaleInv), na)
	}
	if b.Codes != nil && len(b.BlockScaleInv) < nb {
		return fmt.Errorf("fp8: scaled GEMM: operand B has %d block scales, want %d", len(b.BlockScaleInv), nb)
	}
	// With a float32 operand (a precision override) the other's factors
	// multiply its decoded values alone.
	if a.Codes != nil {
		expandFloat8Block(a, m, k, &g.f32A)
	}
	if b.Codes != nil {
		expandFloat8Block(b, n, k, &g.f32B)
	}
	return nil
}

// expandFloat8Block rewrites one operand's Float8BlockScaling factors
// (checked) as float32 factors per 32 values along k, into f.
func expandFloat8Block(o *Operand, outer, k int, f *[]float32) {
	nb, n32 := (k+Float8BlockSize-1)/Float8BlockSize, (k+BlockSize-1)/BlockSize
	if cap(*f) < outer*n32 {
		*f = make([]float32, outer*n32)
	}
	d := (*f)[:outer*n32]
	for i := 0; i < outer; i++ {
		ti := i
		if o.BlockTiles {
			ti = i / Float8BlockSize
		}
		r := o.BlockScaleInv[ti*nb : ti*nb+nb]
		for bi := 0; bi < n32; bi++ {
			d[i*n32+bi] = r[bi*BlockSize/Float8BlockSize]
		}
	}
	o.blockF32, o.Block = d, nil
	o.BlockScaleInv, o.BlockTiles, o.ScaleInv, o.AxisScaleInv = nil, false, 1, nil
}

// runNVFP4 multiplies two NVFP4 operands on the bf16 GEMM: its packs
// decode each element as they read it, its code's value times its E4M3
// block scale — every such product exactly a bf16 value — and the
// products accumulate in float32, both tensors' S_dec applied to the
// accumulators as C is stored.
func (g *ScaledGEMM) runNVFP4(m, n, k int, a, b *Operand, c []float32) error {
	if a.FP4 == nil || b.FP4 == nil {
		return fmt.Errorf("fp8: scaled GEMM: NVFP4 needs both operands in NVFP4 (A is %s, B is %s)", a.kind(), b.kind())
	}
	for _, x := range []struct {
		name         string
		q            *NVFP4
		trans        bool
		outer, inner int
	}{{"A", a.FP4, a.Trans, m, k}, {"B", b.FP4, !b.Trans, n, k}} {
		r, cl := x.outer, x.inner
		if x.trans {
			r, cl = cl, r
		}
		if x.q.Rows != r || x.q.Cols != cl {
			return fmt.Errorf("fp8: scaled GEMM: NVFP4 operand %s is [%d %d], want [%d %d]", x.name, x.q.Rows, x.q.Cols, r, cl)
		}
		br, bc := NVFP4ScaleShape(x.q.Rows, x.q.Cols, x.q.TwoD)
		if len(x.q.Codes) < x.q.Rows*((x.q.Cols+1)/2) || len(x.q.BlockScales) < br*bc {
			return fmt.Errorf("fp8: scaled GEMM: NVFP4 operand %s has %d codes and %d block scales for [%d %d]", x.name, len(x.q.Codes), len(x.q.BlockScales), x.q.Rows, x.q.Cols)
		}
	}
	g.opA = nvfp4Operand(&g.f4A, a.FP4)
	g.opB = nvfp4Operand(&g.f4B, b.FP4)
	g.gemm.Block = g.Block
	g.gemm.RunBF16(a.Trans, b.Trans, m, n, k, &g.opA, a.FP4.Cols, &g.opB, b.FP4.Cols, c, n,
		kernels.Epilogue{Alpha: float64(a.FP4.SDec) * float64(b.FP4.SDec)})
	return nil
}

// nvfp4Operand points an operand of the bf16 kernels at q's codes, with
// its block scales decoded into *buf as the factors of their blocks of
// 16 (or 16×16 tiles): the packs decode each element to bf16 as they
// read it, its code's value times its factor, exactly (S_dec left out:
// the epilogue applies it).
func nvfp4Operand(buf *[]float32, q *NVFP4) kernels.Operand {
	br, bc := NVFP4ScaleShape(q.Rows, q.Cols, q.TwoD)
	if cap(*buf) < br*bc {
		*buf = make([]float32, br*bc)
	}
	f := (*buf)[:br*bc]
	kernels.DecodeFP8(formats[E4M3].cast, f, q.BlockScales[:br*bc], 1)
	return kernels.Operand{E2M1: q.Codes, E2M1Factors: f, E2M1Cols: q.Cols, E2M1Tiles: q.TwoD}
}

// runFloat8BlockBF16 runs a GEMM of two Float8BlockScaling operands with
// power-of-two scales on the bf16 kernels, each operand's block factors
// applied as exponent shifts while its codes convert to bf16 (exact:
// powers of two, relative to the operand's largest so the values stay
// normal), and reports whether it did; otherwise (float32 scales, no bf16 kernel, a float32 operand,
// factors spread too far) the caller takes the general path.
func (g *ScaledGEMM) runFloat8BlockBF16(m, n, k int, a, b *Operand, c []float32) (bool, error) {
	if !useBF16() || a.Codes == nil || b.Codes == nil || a.BlockScaleInv == nil || b.BlockScaleInv == nil || (a.BlockTiles && b.BlockTiles) {
		return false, nil
	}
	na, nb := float8BlockFactors(m, k, a.BlockTiles), float8BlockFactors(n, k, b.BlockTiles)
	if len(a.BlockScaleInv) < na || len(b.BlockScaleInv) < nb || checkOperand("A", a, m, k) != nil || checkOperand("B", b, n, k) != nil {
		return false, nil // the general path reports it
	}
	if !allPow2E8M0(a.BlockScaleInv[:na]) || !allPow2E8M0(b.BlockScaleInv[:nb]) {
		return false, nil
	}
	// The bf16 GEMM shifts the converted values' exponents as it packs
	// them: no decoded copy of either operand.
	shiftA, minA := g.exponents(&g.opA, &g.expShA, a, m, k)
	shiftB, minB := g.exponents(&g.opB, &g.expShB, b, n, k)
	if minA+minB < -126 {
		return false, nil
	}
	lda, ldb := k, n
	if a.Trans {
		lda = m
	}
	if b.Trans {
		ldb = k
	}
	g.gemm.Block = g.Block
	g.gemm.RunBF16(a.Trans, b.Trans, m, n, k, &g.opA, lda, &g.opB, ldb, c, n, kernels.Epilogue{Alpha: math.Ldexp(1, shiftA+shiftB)})
	return true, nil
}

// exponents points dst at a power-of-two Float8BlockScaling operand's
// codes with its factors as exponent shifts 2^(e−shift) per row of op(X)
// (or column of op(B)) and 128-block of k, shift the operand's largest
// exponent; it returns shift and a lower bound on the exponent of its
// smallest non-zero shifted magnitude (an all-zero block has factor 1,
// so every factor counts).
func (g *ScaledGEMM) exponents(dst *kernels.Operand, buf *[]int8, o *Operand, outer, k int) (shift, minExp int) {
	nb := (k + Float8BlockSize - 1) / Float8BlockSize
	inv := o.BlockScaleInv[:float8BlockFactors(outer, k, o.BlockTiles)]
	shift, minE := pow2Range(inv)
	if cap(*buf) < outer*nb {
		*buf = make([]int8, outer*nb)
	}
	ex := (*buf)[:outer*nb]
	_, sub := math.Frexp(float64(o.Format.MinSubnormal()))
	minExp = minE - shift + sub - 1
	if minExp >= -126 { // otherwise the caller refuses: shifts would not fit
		// One pass over the scales, without branches (this runs on one
		// core before the GEMM); a tile's row of shifts is then repeated
		// down its rows by doubling copies.
		if !o.BlockTiles {
			for i, v := range inv {
				ex[i] = int8(pow2Exp(v) - shift)
			}
		} else {
			for t := 0; t*Float8BlockSize < outer; t++ {
				r0, r1 := t*Float8BlockSize*nb, min(outer, (t+1)*Float8BlockSize)*nb
				for s, v := range inv[t*nb : (t+1)*nb] {
					ex[r0+s] = int8(pow2Exp(v) - shift)
				}
				for w := nb; r0+w < r1; w *= 2 {
					copy(ex[r0+w:r1], ex[r0:r0+w])
				}
			}
		}
	}
	*dst = kernels.Operand{Codes: o.Codes, Table: decodeTable(o.Format), Cast: formats[o.Format].cast, Scale: 1, Exp: ex, ExpBlocks: nb}
	return shift, minExp
}

// float8BlockFactors is the number of Float8BlockScaling factors of an
// operand with outer rows (of op(A), or columns of op(B)) and k values
// along the contraction.
func float8BlockFactors(outer, k int, tiles bool) int {
	nb := (k + Float8BlockSize - 1) / Float8BlockSize
	if tiles {
		return ((outer + Float8BlockSize - 1) / Float8BlockSize) * nb
	}
	return outer * nb
}

// allPow2E8M0 reports whether every factor is a power of two that E8M0
// holds (2^-127 … 2^127).
func allPow2E8M0(fs []float32) bool {
	for _, v := range fs {
		b := math.Float32bits(v)
		switch e, man := b>>23, b&0x7FFFFF; {
		case e >= 1 && e <= 254 && man == 0:
		case b == 0x00400000: // 2^-127, the one subnormal E8M0 holds
		default:
			return false
		}
	}
	return true
}

// pow2Range returns the largest and smallest exponents of factors that
// allPow2E8M0 accepted.
func pow2Range(inv []float32) (hi, lo int) {
	hi, lo = -1000, 1000
	for _, v := range inv {
		e := pow2Exp(v)
		hi, lo = max(hi, e), min(lo, e)
	}
	return hi, lo
}

// pow2Exp is log2 of a factor allPow2E8M0 accepted: its exponent field
// less the bias, which is also right for 2^-127 (0x00400000, exponent
// field 0).
func pow2Exp(v float32) int { return int(math.Float32bits(v)>>23) - 127 }
