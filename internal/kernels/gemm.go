// Package kernels holds the numeric kernels that ops bind to: the float32
// GEMM and its helpers. The GEMM is the seam an assembly implementation
// replaces; everything here is pure Go.
package kernels

import (
	"sync"

	"github.com/octetml/octet/internal/parallel"
)

// Blocking parameters (elements). A packed A block is mc×kc, a packed B
// panel kc×nc; the micro-kernel computes an mr×nr tile of C.
const (
	mr = 4
	nr = 4
	kc = 256
	mc = 64
	nc = 1024
)

// serialFlops is the size below which a GEMM runs on one goroutine.
const serialFlops = 1 << 18

// Gemm computes C = alpha·op(A)·op(B) + beta·C on row-major float32
// matrices, blocked for the caches and split across cores. A Gemm owns
// its packing buffers, so one should be made per call site (kernels make
// one at bind time) and Run never allocates. Run calls on one Gemm must
// not overlap.
type Gemm struct {
	group parallel.Group
	parts []*gemmPart
	work  func(int)
	batch func(int)
	args  gemmArgs
}

type gemmArgs struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	splitN         bool
	chunk          int
	// batched form
	count                   int
	strideA, strideB, strid int
}

type gemmPart struct {
	packA []float32
	packB []float32
}

// Packing buffers are shared by all Gemms through a free list, so that a
// program with many GEMM nodes holds one set per concurrent call, not one
// per node.
var (
	partsMu   sync.Mutex
	freeParts []*gemmPart
)

func getParts(dst []*gemmPart) {
	partsMu.Lock()
	for i := range dst {
		if k := len(freeParts); k > 0 {
			dst[i] = freeParts[k-1]
			freeParts = freeParts[:k-1]
		} else {
			dst[i] = &gemmPart{packA: make([]float32, mc*kc), packB: make([]float32, kc*nc)}
		}
	}
	partsMu.Unlock()
}

func putParts(src []*gemmPart) {
	partsMu.Lock()
	freeParts = append(freeParts, src...)
	partsMu.Unlock()
	clear(src)
}

// NewGemm returns a Gemm that can use every worker.
func NewGemm() *Gemm {
	g := &Gemm{parts: make([]*gemmPart, parallel.Workers())}
	g.work = g.runPart
	g.batch = g.runBatch
	return g
}

// Run computes C = alpha·op(A)·op(B) + beta·C where op(X) is X or Xᵀ.
// op(A) is m×k, op(B) is k×n and C is m×n; lda, ldb and ldc are the row
// strides of A, B and C as stored. beta = 0 overwrites C (NaNs in C do
// not propagate).
func (g *Gemm) Run(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	g.args = gemmArgs{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
	parts := len(g.parts)
	getParts(g.parts)
	defer putParts(g.parts)
	if m*n*k < serialFlops || parts == 1 {
		g.args.splitN, g.args.chunk = true, n
		g.runPart(0)
		return
	}
	if n >= m {
		g.args.splitN = true
		g.args.chunk = roundUp((n+parts-1)/parts, nr)
		parts = (n + g.args.chunk - 1) / g.args.chunk
	} else {
		g.args.chunk = roundUp((m+parts-1)/parts, mr)
		parts = (m + g.args.chunk - 1) / g.args.chunk
	}
	g.group.For(parts, g.work)
}

// RunBatched computes count independent products C_i = alpha·op(A_i)·op(B_i)
// + beta·C_i, where X_i starts at element i·strideX of x and each matrix is
// stored densely (row stride = its column count). Small products are
// spread over the workers by batch index.
func (g *Gemm) RunBatched(count int, transA, transB bool, m, n, k int, alpha float32, a []float32, strideA int, b []float32, strideB int, beta float32, c []float32, strideC int) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	if count == 1 || m*n*k >= serialFlops {
		for i := 0; i < count; i++ {
			g.Run(transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, c[i*strideC:], n)
		}
		return
	}
	getParts(g.parts)
	defer putParts(g.parts)
	g.args = gemmArgs{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: n, count: count, strideA: strideA, strideB: strideB, strid: strideC}
	parts := min(len(g.parts), count)
	g.args.chunk = (count + parts - 1) / parts
	parts = (count + g.args.chunk - 1) / g.args.chunk
	g.group.For(parts, g.batch)
}

func (g *Gemm) runBatch(part int) {
	a := &g.args
	for i := part * a.chunk; i < min((part+1)*a.chunk, a.count); i++ {
		gemmSerial(g.parts[part], a.transA, a.transB, a.m, a.n, a.k, a.alpha, a.a[i*a.strideA:], a.lda, a.b[i*a.strideB:], a.ldb, a.beta, a.c[i*a.strid:], a.ldc)
	}
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

func (g *Gemm) runPart(i int) {
	a := &g.args
	lo := i * a.chunk
	if a.splitN {
		hi := min(lo+a.chunk, a.n)
		// Columns lo:hi of op(B) and C.
		boff := lo // op(B)[p][j] = B[p][j] or B[j][p]
		if a.transB {
			boff = lo * a.ldb
		}
		gemmSerial(g.parts[i], a.transA, a.transB, a.m, hi-lo, a.k, a.alpha, a.a, a.lda, a.b[boff:], a.ldb, a.beta, a.c[lo:], a.ldc)
		return
	}
	hi := min(lo+a.chunk, a.m)
	aoff := lo * a.lda
	if a.transA {
		aoff = lo
	}
	gemmSerial(g.parts[i], a.transA, a.transB, hi-lo, a.n, a.k, a.alpha, a.a[aoff:], a.lda, a.b, a.ldb, a.beta, a.c[lo*a.ldc:], a.ldc)
}

// gemmSerial is the blocked GEMM on one goroutine: loop over nc-wide
// column panels of B, kc-deep slices of the inner dimension and mc-tall
// blocks of A, packing each so the micro-kernel reads contiguous memory.
func gemmSerial(w *gemmPart, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	scaleC(m, n, beta, c, ldc)
	if k == 0 || alpha == 0 {
		return
	}
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			packB(w.packB, transB, b, ldb, pc, jc, kb, nb)
			for ic := 0; ic < m; ic += mc {
				mb := min(mc, m-ic)
				packA(w.packA, transA, a, lda, ic, pc, mb, kb)
				macroKernel(mb, nb, kb, alpha, w.packA, w.packB, c[ic*ldc+jc:], ldc)
			}
		}
	}
}

func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// packA copies op(A)[ic:ic+mb, pc:pc+kb] into mr-row slivers: sliver s
// holds, for each p, the mr values op(A)[ic+s·mr+r][pc+p]; missing rows
// are zero.
func packA(dst []float32, trans bool, a []float32, lda, ic, pc, mb, kb int) {
	for s := 0; s < mb; s += mr {
		d := dst[s*kb : s*kb+mr*kb]
		rows := min(mr, mb-s)
		for r := 0; r < mr; r++ {
			if r >= rows {
				for p := 0; p < kb; p++ {
					d[p*mr+r] = 0
				}
				continue
			}
			i := ic + s + r
			if !trans {
				src := a[i*lda+pc : i*lda+pc+kb]
				for p, v := range src {
					d[p*mr+r] = v
				}
			} else {
				for p := 0; p < kb; p++ {
					d[p*mr+r] = a[(pc+p)*lda+i]
				}
			}
		}
	}
}

// packB copies op(B)[pc:pc+kb, jc:jc+nb] into nr-column slivers: sliver
// s holds, for each p, the nr values op(B)[pc+p][jc+s·nr+c]; missing
// columns are zero.
func packB(dst []float32, trans bool, b []float32, ldb, pc, jc, kb, nb int) {
	for s := 0; s < nb; s += nr {
		d := dst[s*kb : s*kb+nr*kb]
		cols := min(nr, nb-s)
		if !trans && cols == nr {
			for p := 0; p < kb; p++ {
				o := (pc+p)*ldb + jc + s
				src := b[o : o+nr : o+nr]
				dp := d[p*nr : p*nr+nr : p*nr+nr]
				dp[0], dp[1], dp[2], dp[3] = src[0], src[1], src[2], src[3]
			}
			continue
		}
		for cc := 0; cc < nr; cc++ {
			if cc >= cols {
				for p := 0; p < kb; p++ {
					d[p*nr+cc] = 0
				}
				continue
			}
			j := jc + s + cc
			if trans {
				src := b[j*ldb+pc : j*ldb+pc+kb]
				for p, v := range src {
					d[p*nr+cc] = v
				}
			} else {
				for p := 0; p < kb; p++ {
					d[p*nr+cc] = b[(pc+p)*ldb+j]
				}
			}
		}
	}
}

// macroKernel runs the micro-kernel over every mr×nr tile of an mb×nb
// block of C, accumulating alpha·packA·packB.
func macroKernel(mb, nb, kb int, alpha float32, pa, pb []float32, c []float32, ldc int) {
	var tile [mr * nr]float32
	for j := 0; j < nb; j += nr {
		bs := pb[j*kb : j*kb+nr*kb]
		cols := min(nr, nb-j)
		for i := 0; i < mb; i += mr {
			as := pa[i*kb : i*kb+mr*kb]
			rows := min(mr, mb-i)
			microKernel(kb, as, bs, &tile)
			for r := 0; r < rows; r++ {
				crow := c[(i+r)*ldc+j : (i+r)*ldc+j+cols]
				for cc := range crow {
					crow[cc] += alpha * tile[r*nr+cc]
				}
			}
		}
	}
}

// microKernel computes the 4×4 tile Σ_p a[p]·b[p]ᵀ from packed slivers.
func microKernel(kb int, a, b []float32, t *[mr * nr]float32) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	a = a[:kb*mr]
	b = b[:kb*nr]
	for p := 0; p < kb; p++ {
		ap := a[p*mr : p*mr+4 : p*mr+4]
		bp := b[p*nr : p*nr+4 : p*nr+4]
		a0, a1, a2, a3 := ap[0], ap[1], ap[2], ap[3]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	*t = [mr * nr]float32{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33}
}

// Sgemm is a convenience form of Gemm.Run that makes its own buffers; use
// a Gemm on hot paths.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	NewGemm().Run(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
