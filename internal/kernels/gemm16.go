package kernels

import "math"

// Epilogue says how a bf16 GEMM turns its float32 accumulators into C:
// C[i][j] = Alpha · Row[i] · Col[j] · Σ_p op(A)[i][p]·op(B)[p][j], each
// factor present only when set (Row and Col may be nil). With neither
// Row nor Col, the micro-kernel applies Alpha as it stores C, split into
// two float32 parts so that the store rounds once; otherwise the
// accumulators are stored as they are and a final pass multiplies them
// by the factors in float64 and rounds once.
type Epilogue struct {
	Alpha    float64
	Row, Col []float32
}

// HasBF16 reports whether a bf16 micro-kernel is in use: the
// AVX512_BF16 kernel where the CPU has one, the AVX2 one where it has
// AVX2 and FMA, the pure-Go twin elsewhere. Without one (KernelEnv
// "fp32"), RunBF16 rounds its operands to bf16 and runs the float32
// kernel (same products, float32 accumulation).
func HasBF16() bool { return kern16 != nil }

// KernelBF16 names the bf16 micro-kernel in use, or "none".
func KernelBF16() string {
	if kern16 == nil {
		return "none"
	}
	return kern16.name
}

// splitAlpha returns hi + lo = alpha with hi, lo float32 (exact for a
// product of two float32 values), or ok = false when alpha is not in
// the range where the two-part store is exact.
func splitAlpha(alpha float64) (hi, lo float32, ok bool) {
	hi = float32(alpha)
	if math.IsInf(float64(hi), 0) || math.IsNaN(alpha) || (alpha != 0 && math.Abs(alpha) < 0x1p-80) {
		return 0, 0, false
	}
	lo = float32(alpha - float64(hi))
	return hi, lo, float64(hi)+float64(lo) == alpha
}

// RunBF16 computes C = ep(op(A)·op(B)) on the bf16 dot-product kernel:
// every operand value is read as bf16 (float32 values round to nearest
// even; FP8 codes decode exactly, so a and b must have no Outer or Block
// factors: fold them into Table when exact, or pass them in ep), the
// products are exact and accumulate in float32. C is overwritten.
// op(A) is m×k, op(B) k×n; lda, ldb and ldc are the row strides as
// stored.
func (g *Gemm) RunBF16(transA, transB bool, m, n, k int, a *Operand, lda int, b *Operand, ldb int, c []float32, ldc int, ep Epilogue) {
	if m == 0 || n == 0 {
		return
	}
	if kern16 == nil {
		g.runRounded(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, ep)
		return
	}
	g.args = gemmArgs{transA: transA, transB: transB, m: m, n: n, k: k, alpha: 1,
		c: c, lda: lda, ldb: ldb, ldc: ldc, qa: g.op16(0, a), qb: g.op16(1, b), bf16: true}
	if hi, lo, ok := splitAlpha(ep.Alpha); ok && ep.Row == nil && ep.Col == nil {
		g.args.alpha, g.args.alphaLo = hi, lo
	} else {
		g.post = ep
		g.args.post = &g.post
	}
	g.run()
}

// op16 returns the Gemm's copy i of operand x for the bf16 packs, with
// the bf16 table of its FP8 codes when the vector packs can use one.
func (g *Gemm) op16(i int, x *Operand) *Operand {
	d := &g.ops16[i]
	*d = *x
	d.bf16Tab = nil
	if x.Codes != nil && bf16Table(&g.tabs16[i], x.Table) {
		d.bf16Tab = &g.tabs16[i]
	}
	return d
}

// bf16Table fills t with the bf16 bits of tab[0:128] and reports whether
// the vector packs may use it: every value exactly a bf16 value (NaN
// aside) and tab[c|0x80] the negation of tab[c], so that a code's sign
// bit can be moved to bit 15.
func bf16Table(t *[128]uint16, tab *[256]float32) bool {
	for c := range t {
		v, neg := tab[c], tab[c|0x80]
		h := BF16FromFloat32(v)
		if v != v {
			if neg == neg {
				return false
			}
			t[c] = h &^ 0x8000
			continue
		}
		if BF16ToFloat32(h) != v || math.Float32bits(neg) != math.Float32bits(v)^0x80000000 {
			return false
		}
		t[c] = h
	}
	return true
}

// runRounded is RunBF16 on the float32 kernel, for CPUs without a bf16
// kernel: both operands are rounded to bf16 into float32 buffers first.
func (g *Gemm) runRounded(transA, transB bool, m, n, k int, a *Operand, lda int, b *Operand, ldb int, c []float32, ldc int, ep Epilogue) {
	ra := roundedCopy(&g.roundA, a, span(transA, m, k, lda))
	rb := roundedCopy(&g.roundB, b, span(transB, k, n, ldb))
	if hi, _, ok := splitAlpha(ep.Alpha); ok && ep.Row == nil && ep.Col == nil && float64(hi) == ep.Alpha {
		g.Run(transA, transB, m, n, k, hi, ra, lda, rb, ldb, 0, c, ldc)
		return
	}
	g.Run(transA, transB, m, n, k, 1, ra, lda, rb, ldb, 0, c, ldc)
	postScale(&ep, c, ldc, 0, m, 0, n)
}

// span is the number of elements a stored operand covers.
func span(trans bool, rows, cols, ld int) int {
	if trans {
		rows, cols = cols, rows
	}
	if rows == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// roundedCopy writes the operand's first size values, rounded to bf16,
// as float32 into *buf.
func roundedCopy(buf *[]float32, x *Operand, size int) []float32 {
	if cap(*buf) < size {
		*buf = make([]float32, size)
	}
	d := (*buf)[:size]
	for i := range d {
		d[i] = BF16ToFloat32(x.bf16At(i))
	}
	return d
}

// postScale applies the epilogue's factors to rows [m0, m1) and columns
// [n0, n1) of C (C holds the plain accumulations).
func postScale(ep *Epilogue, c []float32, ldc, m0, m1, n0, n1 int) {
	for i := m0; i < m1; i++ {
		f := ep.Alpha
		if ep.Row != nil {
			f *= float64(ep.Row[i])
		}
		row := c[i*ldc+n0 : i*ldc+n1]
		if ep.Col == nil {
			done := scaleRowVector(row, nil, f) // the loop's twin, bit for bit
			for j, v := range row[done:] {
				row[done+j] = float32(float64(v) * f)
			}
			continue
		}
		col := ep.Col[n0:n1]
		done := scaleRowVector(row, col, f)
		for j, v := range row[done:] {
			row[done+j] = float32(float64(v) * (f * float64(col[done+j])))
		}
	}
}

// gemmSerial16 is gemmSerial for the bf16 kernel: the same blocking, A
// and B packed into bf16 pairs (kb values of k make ⌈kb/2⌉ pairs).
func gemmSerial16(w *gemmPart, g *gemmArgs, m0, m1, n0, n1 int) {
	ldc := g.ldc
	c := g.c[m0*ldc+n0:]
	m, n, k := m1-m0, n1-n0, g.k
	if k == 0 {
		scaleC(m, n, 0, c, ldc)
		return
	}
	// The first block of k overwrites C (no clearing, no read); the
	// others add to it.
	mr, nr, mc := kern16.mr, kern16.nr, kern16.mc()
	amx := kern16.tiles != nil
	pa16, pb16 := asU32(w.packA), asU32(w.packB)
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			kps := kern16.pairRows(kb)
			packB16(pb16, nr, g.transB, g.qb, g.ldb, pc, n0+jc, kb, nb, kps, w.tmp16, w.shifts)
			if kern16.split {
				splitSlivers(pb16, pb16, (nb+nr-1)/nr, nr*kps)
			}
			for ic := 0; ic < m; ic += mc {
				mb := min(mc, m-ic)
				pa := pa16
				switch {
				case g.packedA != nil:
					pa = asU32(g.packedA[g.packedABlock(pc, ic, kb):])
				case amx:
					packA16AMX(pa16, g.transA, g.qa, g.lda, m0+ic, pc, mb, kb, kps, w.tmp16, w.shifts)
				default:
					packA16(pa16, mr, g.transA, g.qa, g.lda, m0+ic, pc, mb, kb, w.tmp16, w.shifts)
				}
				if kern16.split && g.packedA == nil { // (a shared A is split)
					// B's panel splits in place (kc·nc lanes hold it
					// split); A's block, which may be shared, into a
					// buffer of its own, made on first use.
					slivers := (mb + mr - 1) / mr
					if n := 2 * slivers * mr * kps; len(w.splitA) < n {
						w.splitA = make([]uint32, kern16.sliver(mc, kern16.pairRows(kc)))
					}
					splitSlivers(w.splitA, pa, slivers, mr*kps)
					pa = w.splitA
				}
				if amx {
					macroKernelAMX(w, mb, nb, kps, g.alpha, g.alphaLo, pc == 0, pa, pb16, c[ic*ldc+jc:], ldc)
				} else {
					macroKernel16(w.tile, mb, nb, kps, g.alpha, g.alphaLo, pc == 0, pa, pb16, c[ic*ldc+jc:], ldc)
				}
			}
		}
	}
	if g.post != nil {
		postScale(g.post, g.c, ldc, m0, m1, n0, n1)
	}
}
