// Package kernels holds the numeric kernels that ops bind to: the float32
// GEMM and its helpers. The GEMM is the seam an assembly implementation
// replaces; everything here is pure Go.
package kernels

import (
	"sync"

	"github.com/octetml/octet/internal/parallel"
)

// Blocking parameters (elements). A packed A block is mc×kc, a packed B
// panel kc×nc; the micro-kernel (chosen at start-up, see kern) computes an
// mr×nr tile of C, and mc is the multiple of mr nearest 128.
const (
	kc = 384
	nc = 3840
)

// microKernel computes one register tile C[mr×nr] += alpha·A·B from
// packed slivers: a holds mr values per step of k, b holds nr. c starts
// at the tile's first element and its rows are ldc apart.
type microKernel struct {
	name   string
	mr, nr int
	run    func(k int, a, b, c []float32, ldc int, alpha float32)
}

// mc returns the A block height for the kernel.
func (m *microKernel) mc() int { return max(1, 128/m.mr) * m.mr }

// Kernel names the micro-kernel in use ("avx512 12x32", "avx2 6x16" or
// "go 4x4").
func Kernel() string { return kern.name }

// serialFlops is the size below which a GEMM runs on one goroutine.
const serialFlops = 1 << 18

// Gemm computes C = alpha·op(A)·op(B) + beta·C on row-major float32
// matrices, blocked for the caches and split across cores. A Gemm owns
// its packing buffers, so one should be made per call site (kernels make
// one at bind time) and Run never allocates. Run calls on one Gemm must
// not overlap.
type Gemm struct {
	group  parallel.Group
	parts  []*gemmPart
	work   func(int)
	batch  func(int)
	packer func(int)
	args   gemmArgs
	// sharedA holds op(A) packed once for all workers when they split N.
	sharedA []float32
	// post is the epilogue of the running bf16 GEMM; roundA and roundB
	// hold bf16-rounded operands where no bf16 kernel exists.
	post           Epilogue
	roundA, roundB []float32
}

type gemmArgs struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	qa, qb         *Operand // FP8 operands (decoded while packing), or nil
	// bf16 form (RunBF16): both operands in qa, qb; the store's two-part
	// alpha; post set when the epilogue applies row or column factors
	// after the accumulation.
	bf16          bool
	alphaLo       float32
	post          *Epilogue
	lda, ldb, ldc int
	splitN        bool
	chunk         int
	packedA       []float32 // op(A) packed for every (pc, ic) block, or nil
	// batched form
	count                   int
	strideA, strideB, strid int
}

type gemmPart struct {
	packA []float32
	packB []float32
	tile  []float32
	tmp16 []uint32 // staging for the bf16 packs
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
			dst[i] = newPart()
		}
	}
	partsMu.Unlock()
}

// newPart makes packing buffers large enough for the float32 kernel and
// the bf16 kernel in use (a bf16 pack takes one lane per pair of k).
func newPart() *gemmPart {
	mcr, tile, tmp := kern.mc(), kern.mr*kern.nr, 4*kc
	if kern16 != nil {
		mcr = max(mcr, (kern16.mc()+1)/2)
		tile = max(tile, kern16.mr*kern16.nr)
		tmp = max(tmp, 2*kern16.mc())
	}
	return &gemmPart{packA: make([]float32, mcr*kc), packB: make([]float32, kc*nc), tile: make([]float32, tile), tmp16: make([]uint32, tmp)}
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
	g.packer = g.packPart
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
	g.run()
}

// RunOperands is Run for operands that may be FP8 codes (see Operand),
// decoded to float32 while the panels are packed.
func (g *Gemm) RunOperands(transA, transB bool, m, n, k int, alpha float32, a *Operand, lda int, b *Operand, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	g.args = gemmArgs{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a.F32, b: b.F32, c: c, lda: lda, ldb: ldb, ldc: ldc}
	if a.isFP8() {
		g.args.qa = a
	}
	if b.isFP8() {
		g.args.qb = b
	}
	g.run()
}

func (g *Gemm) run() {
	m, n, k := g.args.m, g.args.n, g.args.k
	mr, nr, _ := g.args.geometry()
	parts := len(g.parts)
	getParts(g.parts)
	defer putParts(g.parts)
	if m*n*k < serialFlops || parts == 1 {
		g.args.splitN, g.args.chunk = true, n
		g.runPart(0)
		return
	}
	if n >= 4*m { // split M when it is not much smaller than N: B packs by copy, A by gathering
		g.args.splitN = true
		g.args.chunk = roundUp((n+parts-1)/parts, nr)
		parts = (n + g.args.chunk - 1) / g.args.chunk
		if parts > 1 && m*k <= maxSharedA {
			// Every worker would pack the same A: pack it once, the
			// workers splitting the slivers, then share it.
			size := roundUp(m, mr) * k
			if g.args.bf16 {
				size = roundUp(m, mr) * ((k+1)/2 + 1)
			}
			if cap(g.sharedA) < size {
				g.sharedA = make([]float32, size)
			}
			g.args.packedA = g.sharedA[:size]
			g.group.For(len(g.parts), g.packer)
		}
	} else {
		g.args.chunk = roundUp((m+parts-1)/parts, mr)
		parts = (m + g.args.chunk - 1) / g.args.chunk
	}
	g.group.For(parts, g.work)
}

// geometry returns the register tile (mr × nr) and A block height of the
// micro-kernel the GEMM runs.
func (a *gemmArgs) geometry() (mr, nr, mc int) {
	if a.bf16 {
		return kern16.mr, kern16.nr, kern16.mc()
	}
	return kern.mr, kern.nr, kern.mc()
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
	one := *a
	for i := part * a.chunk; i < min((part+1)*a.chunk, a.count); i++ {
		one.a, one.b, one.c = a.a[i*a.strideA:], a.b[i*a.strideB:], a.c[i*a.strid:]
		gemmSerial(g.parts[part], &one, 0, a.m, 0, a.n)
	}
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// maxSharedA bounds the elements of A packed once and shared.
const maxSharedA = 1 << 22

// packedABlock returns the offset of block (pc, ic) in a fully packed A of
// m rows: blocks are laid out by pc, then ic, each roundUp(mb)·kb long
// (kb counted in pairs of k for bf16, whose packs take one lane a pair).
func (a *gemmArgs) packedABlock(pc, ic, kb int) int {
	mr, _, _ := a.geometry()
	if a.bf16 {
		return pc/2*roundUp(a.m, mr) + ic*((kb+1)/2)
	}
	return pc*roundUp(a.m, mr) + ic*kb
}

// packPart packs worker i's share of the mr-row slivers of A for every
// (pc, ic) block into g.args.packedA.
func (g *Gemm) packPart(i int) {
	a := &g.args
	mr, _, mc := a.geometry()
	slivers := (a.m + mr - 1) / mr
	per := (slivers + len(g.parts) - 1) / len(g.parts)
	lo, hi := i*per*mr, min((i+1)*per*mr, a.m)
	for pc := 0; pc < a.k; pc += kc {
		kb := min(kc, a.k-pc)
		for ic := 0; ic < a.m; ic += mc {
			mb := min(mc, a.m-ic)
			// The slivers of this block that fall in [lo, hi).
			s0, s1 := max(ic, lo), min(ic+mb, hi)
			if s0 >= s1 {
				continue
			}
			if a.bf16 {
				dst := asU32(a.packedA[a.packedABlock(pc, ic, kb)+(s0-ic)*((kb+1)/2):])
				packA16(dst, mr, a.transA, a.qa, a.lda, s0, pc, s1-s0, kb, g.parts[i].tmp16)
				continue
			}
			dst := a.packedA[a.packedABlock(pc, ic, kb)+(s0-ic)*kb:]
			if a.qa != nil {
				packA8(dst, mr, a.transA, a.qa, a.lda, s0, pc, s1-s0, kb)
			} else {
				packA(dst, mr, a.transA, a.a, a.lda, s0, pc, s1-s0, kb)
			}
		}
	}
}

func (g *Gemm) runPart(i int) {
	a := &g.args
	lo := i * a.chunk
	if a.splitN {
		hi := min(lo+a.chunk, a.n)
		gemmSerial(g.parts[i], a, 0, a.m, lo, hi)
		return
	}
	gemmSerial(g.parts[i], a, lo, min(lo+a.chunk, a.m), 0, a.n)
}

// gemmSerial is the blocked GEMM on one goroutine: loop over nc-wide
// column panels of B, kc-deep slices of the inner dimension and mc-tall
// blocks of A, packing each so the micro-kernel reads contiguous memory.
func gemmSerial(w *gemmPart, g *gemmArgs, m0, m1, n0, n1 int) {
	if g.bf16 {
		gemmSerial16(w, g, m0, m1, n0, n1)
		return
	}
	ldc := g.ldc
	c := g.c[m0*ldc+n0:]
	m, n, k := m1-m0, n1-n0, g.k
	scaleC(m, n, g.beta, c, ldc)
	if k == 0 || g.alpha == 0 {
		return
	}
	mr, nr, mc := kern.mr, kern.nr, kern.mc()
	for jc := 0; jc < n; jc += nc {
		nb := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kb := min(kc, k-pc)
			if g.qb != nil {
				packB8(w.packB, nr, g.transB, g.qb, g.ldb, pc, n0+jc, kb, nb)
			} else {
				packB(w.packB, nr, g.transB, g.b, g.ldb, pc, n0+jc, kb, nb)
			}
			for ic := 0; ic < m; ic += mc {
				mb := min(mc, m-ic)
				pa := w.packA
				switch {
				case g.packedA != nil: // packed once for all workers (m0 = 0)
					pa = g.packedA[g.packedABlock(pc, ic, kb):]
				case g.qa != nil:
					packA8(w.packA, mr, g.transA, g.qa, g.lda, m0+ic, pc, mb, kb)
				default:
					packA(w.packA, mr, g.transA, g.a, g.lda, m0+ic, pc, mb, kb)
				}
				macroKernel(w.tile, mb, nb, kb, g.alpha, pa, w.packB, c[ic*ldc+jc:], ldc)
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
func packA(dst []float32, mr int, trans bool, a []float32, lda, ic, pc, mb, kb int) {
	for s := 0; s < mb; s += mr {
		d := dst[s*kb : s*kb+mr*kb]
		rows := min(mr, mb-s)
		if trans && rows == mr {
			// op(A) = Aᵀ: the mr values for one p are contiguous in A.
			for p := 0; p < kb; p++ {
				o := (pc+p)*lda + ic + s
				copy(d[p*mr:p*mr+mr], a[o:o+mr])
			}
			continue
		}
		r := 0
		if !trans {
			for ; r+4 <= rows; r += 4 {
				interleave4(d, mr, r, a, lda, ic+s+r, pc, kb)
			}
		}
		for ; r < mr; r++ {
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

// interleave4 transposes four consecutive source rows src[i..i+3][pc:pc+kb]
// (leading dimension ld) into columns c..c+3 of the width-w panel d:
// four sequential reads and four adjacent writes per step.
func interleave4[T float32 | uint32](d []T, w, c int, src []T, ld, i, pc, kb int) {
	r0 := src[i*ld+pc : i*ld+pc+kb]
	r1 := src[(i+1)*ld+pc : (i+1)*ld+pc+kb]
	r2 := src[(i+2)*ld+pc : (i+2)*ld+pc+kb]
	r3 := src[(i+3)*ld+pc : (i+3)*ld+pc+kb]
	for p := range r0 {
		q := d[p*w+c : p*w+c+4 : p*w+c+4]
		q[0], q[1], q[2], q[3] = r0[p], r1[p], r2[p], r3[p]
	}
}

// packB copies op(B)[pc:pc+kb, jc:jc+nb] into nr-column slivers: sliver
// s holds, for each p, the nr values op(B)[pc+p][jc+s·nr+c]; missing
// columns are zero.
func packB(dst []float32, nr int, trans bool, b []float32, ldb, pc, jc, kb, nb int) {
	for s := 0; s < nb; s += nr {
		d := dst[s*kb : s*kb+nr*kb]
		cols := min(nr, nb-s)
		if !trans && cols == nr {
			for p := 0; p < kb; p++ {
				o := (pc+p)*ldb + jc + s
				copy(d[p*nr:p*nr+nr], b[o:o+nr])
			}
			continue
		}
		cc := 0
		if trans {
			// Four columns of op(B) (rows of B) at a time: four
			// sequential reads, four adjacent writes per step.
			for ; cc+4 <= cols; cc += 4 {
				interleave4(d, nr, cc, b, ldb, jc+s+cc, pc, kb)
			}
		}
		for ; cc < nr; cc++ {
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
// block of C, accumulating alpha·packA·packB. Full tiles are updated in
// place; edge tiles go through tile and only their valid part is added.
func macroKernel(tile []float32, mb, nb, kb int, alpha float32, pa, pb []float32, c []float32, ldc int) {
	mr, nr := kern.mr, kern.nr
	for j := 0; j < nb; j += nr {
		bs := pb[j*kb : j*kb+nr*kb]
		cols := min(nr, nb-j)
		for i := 0; i < mb; i += mr {
			as := pa[i*kb : i*kb+mr*kb]
			rows := min(mr, mb-i)
			if rows == mr && cols == nr {
				kern.run(kb, as, bs, c[i*ldc+j:], ldc, alpha)
				continue
			}
			clear(tile)
			kern.run(kb, as, bs, tile, nr, alpha)
			for r := 0; r < rows; r++ {
				crow := c[(i+r)*ldc+j : (i+r)*ldc+j+cols]
				for cc := range crow {
					crow[cc] += tile[r*nr+cc]
				}
			}
		}
	}
}

// Sgemm is a convenience form of Gemm.Run that makes its own buffers; use
// a Gemm on hot paths.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	NewGemm().Run(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
