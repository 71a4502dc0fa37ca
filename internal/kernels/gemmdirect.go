package kernels

// The direct float32 GEMM: at the sizes of a training step's linear
// layers (a few hundred rows and columns, k up to a few thousand) packing
// costs as much as it saves. The row-GEMM kernels read op(A) by
// broadcasts straight from A at any strides — so neither A nor Aᵀ is
// packed — and op(B) by rows; only op(B) = Bᵀ is transposed first, with
// the 16×16 vector transpose. Each element of C keeps its whole sum over
// k in a register and is stored once (beta = 0 writes C without reading
// or clearing it), and the workers split the rows of C, or its columns
// when there are few rows.

// directGemm enables the direct path; tests switch it off to exercise
// the blocked one at small sizes.
var directGemm = true

// directMaxB bounds the elements of op(B) for the direct path: the
// row kernels stream op(B) once per group of rows, which pays only while
// it stays in L2; beyond that the blocked GEMM's packing pays for
// itself.
const directMaxB = 1 << 19

// directMaxRowsTransB and directMaxColsTransB bound the GEMMs with
// op(B) = Bᵀ that run direct: the direct path then transposes all of B
// on every call, which the blocked path's faster micro-kernel repays
// once C has a few dozen rows, unless op(B) is narrow (at most 128
// columns: measured, bench/RESULTS.md, "Direct or blocked").
const (
	directMaxRowsTransB = 32
	directMaxColsTransB = 128
)

// useDirect reports whether a float32 GEMM of this shape runs direct.
// The rule is the measured cost of both paths on the GEMMs of training
// steps: direct when op(B) fits in L2 and is read as stored (B not
// transposed), or is Bᵀ with C of few rows or few columns. It depends on
// the shape alone, never on the CPU or the kernel: the two paths sum k
// in different groupings once k exceeds the blocked path's kc, so the
// same choice everywhere is part of giving every machine the same bits.
func useDirect(m, n, k int, transB bool) bool {
	if !directGemm || k == 0 || k*n > directMaxB {
		return false
	}
	return !transB || m < directMaxRowsTransB || n <= directMaxColsTransB
}

// runDirect runs g.args on the direct path.
func (g *Gemm) runDirect() {
	a := &g.args
	m, n, k := a.m, a.n, a.k
	if a.transB && cap(g.bt) < k*n {
		g.bt = make([]float32, k*n)
	}
	if a.beta != 0 && a.beta != 1 {
		scaleC(m, n, a.beta, a.c, a.ldc)
	}
	var parts int
	a.splitN, a.chunk, parts = directSplit(m, n, k, len(g.parts), 0.95)
	// (with op(B) = Bᵀ, on a column split each worker then transposes
	// only its part of B; on a row split the caller transposes all of it
	// first, which measured faster at the GPT's shapes than reading A
	// twice).
	if a.transB && !a.splitN {
		// Every worker needs all of Bᵀ: transpose it first, split
		// over the workers by rows of B (16 at a time).
		if tparts := min(len(g.parts), n/16); parts > 1 && tparts > 1 {
			g.tparts = tparts
			g.group.For(tparts, g.transposer)
		} else {
			transposeF32(g.bt[:k*n], n, a.b, a.ldb, n, k)
		}
	}
	if a.transposesOpA() {
		getParts(g.parts)
		defer putParts(g.parts)
	}
	g.group.For(parts, g.direct)
}

// transposesOpA reports whether the direct path's workers transpose
// their rows of op(A) = Aᵀ before the products (into the buffer of their
// gemmPart). The row kernels read op(A)'s rows by broadcasts along A's
// columns, a line of A per value of k; the AVX2 kernels' blocks of 16
// columns re-read those lines from L2 for every block, and ran the
// GPT's wgrads at 0.65–0.75× the rate of the same GEMMs on transposed
// rows (one thread; the AVX-512 kernels' blocks of 64 columns lost 5–10%
// to the transpose). The values and their order are the same: so are
// the bits.
//
// A worker transposes directRowsA values of op(A) at a time (whole
// groups of 6 rows, at least one): a buffer that stays in L2, whatever
// the GEMM.
func (a *gemmArgs) transposesOpA() bool {
	return a.transA && a.n > 16 && hasAVX2 && !hasAVX512
}

// directRowsA bounds the values of op(A) a worker of the direct path
// transposes at a time (see transposesOpA).
const directRowsA = 1 << 16

// transposePart transposes worker i's share of B's rows into g.bt.
func (g *Gemm) transposePart(i int) {
	a := &g.args
	blocks := (a.n + 15) / 16
	r0, r1 := min(a.n, blocks*i/g.tparts*16), min(a.n, blocks*(i+1)/g.tparts*16)
	if r0 < r1 {
		transposeF32(g.bt[r0:], a.n, a.b[r0*a.ldb:], a.ldb, r1-r0, a.k)
	}
}

// directPart computes worker i's rows (or columns) of C.
func (g *Gemm) directPart(i int) {
	a := &g.args
	rsA, csA := a.lda, 1
	if a.transA {
		rsA, csA = 1, a.lda
	}
	m0, m1, n0, n1 := a.part(i)
	if m0 >= m1 || n0 >= n1 {
		return
	}
	b, ldb := a.b, a.ldb
	if a.transB {
		// Columns n0…n1 of op(B) = rows n0…n1 of B, transposed into
		// columns n0…n1 of bt; on a row split every worker needs all of
		// them, and runDirect transposes them before the workers start
		// (it splits columns whenever it can).
		b, ldb = g.bt, a.n
		if a.splitN {
			transposeF32(g.bt[n0:], a.n, a.b[n0*a.ldb:], a.ldb, n1-n0, a.k)
		}
	}
	// Chunks of rows: all of them, or as many as a transposed buffer of
	// directRowsA values holds.
	step := m1 - m0
	transA := a.transposesOpA()
	if transA {
		step = max(6, directRowsA/a.k/6*6)
	}
	for r0 := m0; r0 < m1; r0 += step {
		rows := min(step, m1-r0)
		A := a.a[r0*rsA:]
		rs, cs := rsA, csA
		if transA {
			w := g.parts[i]
			if cap(w.rowsA) < rows*a.k {
				w.rowsA = make([]float32, step*a.k)
			}
			transposeF32(w.rowsA[:rows*a.k], a.k, a.a[r0:], a.lda, a.k, rows)
			A, rs, cs = w.rowsA, a.k, 1
		}
		c := a.c[r0*a.ldc+n0:]
		var add []float32
		ldadd := a.ldc
		switch {
		case a.bias != nil:
			add, ldadd = a.bias[n0:], 0
		case a.beta != 0:
			add = c
		}
		rowGemm(rows, n1-n0, a.k, a.alpha, A, rs, cs, b[n0:], ldb, c, a.ldc, add, ldadd)
	}
	if g.Block != nil {
		g.Block(m0, m1, n0, n1)
	}
}

// transposeF32 writes dst[q·w + i] = src[i·ld + q] for i < rows, q <
// cols: 16 rows at a time with the vector transpose where it can.
func transposeF32(dst []float32, w int, src []float32, ld, rows, cols int) {
	i := 0
	if cols >= 16 {
		for ; i+16 <= rows; i += 16 {
			done := transposeVector(asU32(dst[i:]), w, asU32(src[i*ld:]), ld, 16, cols)
			for q := done; q < cols; q++ {
				for r := 0; r < 16; r++ {
					dst[q*w+i+r] = src[(i+r)*ld+q]
				}
			}
		}
	}
	for ; i < rows; i++ {
		row := src[i*ld : i*ld+cols]
		for q, v := range row {
			dst[q*w+i] = v
		}
	}
}
