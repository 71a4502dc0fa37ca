package kernels

import (
	"math"
	"sync"
)

// The direct bf16 GEMM: the counterpart of the direct float32 path
// (gemmdirect.go) for RunBF16 at the sizes of a training step's linear
// layers, where the blocked path's slivers and k blocks cost as much as
// the products. op(B) is converted once into bf16 pairs laid out as
// rows of pairs (lane (q, j) = op(B)[2q][j], op(B)[2q+1][j]); each
// worker converts its rows of op(A) a few dozen at a time into pairs —
// along the row when A is stored with k contiguous, down the columns
// when it is stored transposed — and the row kernels (VDPBF16PS) read
// them by 32-bit broadcasts. Each element of C keeps its whole sum over
// k in a register and is stored once, the alpha of the blocked kernels'
// overwrite store applied (or the epilogue's row and column factors
// right after, in the same pass over the rows). Products and the order
// of the float32 accumulation within a block of k are those of the
// blocked kernels (VDPBF16PS: per pair, the odd k first); only the
// blocked path's split of k beyond 384 values into partial sums stored
// in C differs, so results can differ in the last bits between the two
// paths, as the float32 paths' do.

// direct16MaxLanes bounds op(B) as pairs (⌈k/2⌉·n lanes, n rounded up to
// whole panels, 4 bytes each)
// for the direct path: the row kernels stream it once per group of rows
// of C, which pays while it stays in L2.
const direct16MaxLanes = 1 << 18

// direct16MaxPairs bounds ⌈k/2⌉ for the direct path, so that 16 rows of
// pairs fit a worker's buffer.
const direct16MaxPairs = 4096

// direct16TmpLanes is the size of each worker's buffer: a chunk of
// op(A)'s rows as pairs, or 16 rows of Bᵀ before they are transposed.
const direct16TmpLanes = 16 * direct16MaxPairs

// useDirect16 reports whether a bf16 GEMM of this shape runs direct:
// with a bf16 micro-kernel in VDPBF16PS order in use (AVX512_BF16 or the
// portable twin; not AMX's tiles) and op(B) small enough. As for the
// float32 path, the choice depends on the shape and not on which of
// those kernels runs, since the two paths group the sums over k
// differently.
func useDirect16(m, n, k int) bool {
	if !directGemm || kern16 == nil || kern16.tiles != nil || k == 0 {
		return false
	}
	kp := (k + 1) / 2
	return kp <= direct16MaxPairs && kp*roundUp(n, 64) <= direct16MaxLanes
}

// direct16Scratch holds a direct bf16 GEMM's buffers: op(B) as pairs
// and one buffer per worker. They come from a free list shared by all
// Gemms, so a program with many GEMM nodes holds one set per concurrent
// call; their sizes are fixed, so the list never reallocates.
type direct16Scratch struct {
	bt  []uint32
	tmp [][]uint32
	// tmpF[i] is worker i's buffer for op(A) as float32 values (the
	// split form, see useSplitA16), made on the worker's first use.
	tmpF [][]float32
}

var (
	scratch16Mu   sync.Mutex
	freeScratch16 []*direct16Scratch
)

func getScratch16(workers int) *direct16Scratch {
	scratch16Mu.Lock()
	defer scratch16Mu.Unlock()
	for i, s := range freeScratch16 {
		if len(s.tmp) >= workers {
			freeScratch16 = append(freeScratch16[:i], freeScratch16[i+1:]...)
			return s
		}
	}
	s := &direct16Scratch{bt: make([]uint32, direct16MaxLanes), tmp: make([][]uint32, workers), tmpF: make([][]float32, workers)}
	for i := range s.tmp {
		s.tmp[i] = make([]uint32, direct16TmpLanes)
	}
	return s
}

func putScratch16(s *direct16Scratch) {
	scratch16Mu.Lock()
	freeScratch16 = append(freeScratch16, s)
	scratch16Mu.Unlock()
}

// directSplit chooses how parts workers share a direct GEMM's C: its
// rows (in groups of the 6-row kernel) or its columns (in blocks of 64),
// columns when that loads the busiest worker less than bias times the
// row split would. It returns the split, the rows or columns of a part,
// and the number of parts; small products run on one.
func directSplit(m, n, k, parts int, bias float64) (splitN bool, chunk, count int) {
	if m*n*k < serialFlops || parts == 1 {
		return false, m, 1
	}
	rowChunk, colChunk := roundUp((m+parts-1)/parts, 6), roundUp((n+parts-1)/parts, 64)
	rowLoad, colLoad := float64(rowChunk)/float64(m), float64(colChunk)/float64(n)
	if colLoad < bias*rowLoad {
		return true, colChunk, (n + colChunk - 1) / colChunk
	}
	return false, rowChunk, (m + rowChunk - 1) / rowChunk
}

// splitBias16 returns the bias of directSplit for a direct bf16 GEMM.
// Splitting columns, each worker converts and streams only its own
// panels of op(B), with no wait between conversion and products, but
// converts all of op(A); splitting rows, it converts its rows of op(A)
// and reads panels another worker converted. Measured at the MLP's and
// the GPT's shapes (bench/RESULTS.md), columns won by 1.2–1.9× where C
// has no more rows than columns (op(A) no larger than op(B)) and lost
// inside the GPT's step (its op(A) of 768 rows read twice) elsewhere.
// On the AVX2 split kernels (split), whose op(A) a worker widens itself
// either way, rows won or tied at the MLP's and the GPT's shapes
// (bench/RESULTS.md, session 23): the float32 direct path's bias.
func splitBias16(m, n int, split bool) float64 {
	if m <= n && !split {
		return 1.5
	}
	return 0.95
}

// runDirect16 runs the bf16 g.args on the direct path.
func (g *Gemm) runDirect16() {
	a := &g.args
	s := getScratch16(len(g.parts))
	defer putScratch16(s)
	g.scr16 = s
	var parts int
	a.splitN, a.chunk, parts = directSplit(a.m, a.n, a.k, len(g.parts), splitBias16(a.m, a.n, useSplitA16(a.qa)))
	if !a.splitN {
		// Every worker reads all of op(B): convert it first, split over
		// the workers by columns (16 at a time).
		if tparts := min(len(g.parts), a.n/16); parts > 1 && tparts > 1 {
			g.tparts = tparts
			g.group.For(tparts, g.convertB16Part)
		} else {
			g.convertB16(0, 0, a.n)
		}
	}
	g.group.For(parts, g.direct16)
	g.scr16 = nil
}

// convertB16Share converts worker i's share of op(B)'s columns.
func (g *Gemm) convertB16Share(i int) {
	blocks := (g.args.n + 15) / 16
	j0, j1 := min(g.args.n, blocks*i/g.tparts*16), min(g.args.n, blocks*(i+1)/g.tparts*16)
	g.convertB16(i, j0, j1)
}

// convertB16 writes columns j0…j1−1 of op(B) as pairs into the scratch's
// bt, in panels of 64 columns (panel p at bt[64·⌈k/2⌉·p:], rows of 64
// lanes), with worker w's buffer. j0 is a multiple of 16, and of 64
// unless the call converts up to n.
func (g *Gemm) convertB16(w, j0, j1 int) {
	a := &g.args
	if j0 >= j1 {
		return
	}
	bt, x, ldb, k := g.scr16.bt, a.qb, a.ldb, a.k
	kp := (k + 1) / 2
	at := func(q, j int) []uint32 { return bt[j/64*64*kp+q*64+j%64:] }
	if !a.transB {
		// Rows 2q and 2q+1 of B are contiguous over the columns: pair
		// them across the whole panels at once, then the rest.
		first := min(j1, roundUp(j0, 64)) // j0 up to its panel's end
		full := (j1 - first) / 64
		// With exponent shifts, sv[j−j0] is column j's shift (as a
		// lane) for the current k-block, applied as the codes convert
		// (the worker's buffer holds them: this branch does not use it
		// otherwise).
		var sv []uint32
		fused := x.Exp != nil && j1-j0 <= len(g.scr16.tmp[w])
		if fused {
			sv = g.scr16.tmp[w][:j1-j0]
		}
		for q := 0; q < kp; q++ {
			o0, o1 := 2*q*ldb, -1
			if 2*q+1 < k {
				o1 = o0 + ldb
			}
			if fused && q%(x.expRun()/2) == 0 {
				x.expLanes(sv, j0, 2*q)
			}
			pair := func(j, n int) {
				p1 := -1
				if o1 >= 0 {
					p1 = o1 + j
				}
				if fused {
					x.pairs16Exp(at(q, j), o0+j, p1, n, sv[j-j0:j-j0+n])
				} else {
					x.pairs16(at(q, j), o0+j, p1, n)
				}
			}
			if first > j0 {
				pair(j0, first-j0)
			}
			if full > 0 {
				p1 := -1
				if o1 >= 0 {
					p1 = o1 + first
				}
				if fused {
					x.pairs16GroupsExp(at(q, first), o0+first, p1, full, 64, 64*kp, sv[first-j0:])
				} else {
					x.pairs16Groups(at(q, first), o0+first, p1, full, 64, 64*kp)
				}
			}
			if rest := first + 64*full; rest < j1 {
				pair(rest, j1-rest)
			}
		}
		if x.Exp != nil && !fused {
			// Lane (q, j) takes column j's shift of the run holding pair
			// q, per panel of 64 columns.
			var sv [64]uint32
			for p0 := j0 / 64 * 64; p0 < j1; p0 += 64 {
				c0, c1 := max(j0, p0)-p0, min(j1, p0+64)-p0
				for q := 0; q < kp; q++ {
					if q%(x.expRun()/2) == 0 {
						x.expLanes(sv[c0:c1], p0+c0, 2*q)
					}
					base := p0/64*64*kp + q*64
					shiftLanes(bt[base+c0:base+c1], sv[c0:c1])
				}
			}
		}
		return
	}
	// op(B)[p][j] = B[j][p]: a column of op(B) is a row of B, whose
	// consecutive values are already pairs; 16 rows converted, then
	// transposed into place.
	tmp := g.scr16.tmp[w]
	for j := j0; j < j1; j += 16 {
		rows := min(16, j1-j)
		x.rowsAt(tmp, j, ldb, 0, rows, k, kp)
		transposeInto(bt[j/64*64*kp:], 64, j%64, tmp, kp, rows)
	}
}

// direct16Rows is the number of rows of op(A) a worker converts at a
// time: a multiple of the row kernels' heights (6 and 8) while its pairs
// fit the worker's buffer.
func direct16Rows(kp int) int {
	return max(1, min(48, direct16TmpLanes/kp))
}

// directPart16 computes worker i's rows (or columns) of C.
func (g *Gemm) directPart16(i int) {
	a := &g.args
	m0, m1, n0, n1 := a.part(i)
	if m0 >= m1 || n0 >= n1 {
		return
	}
	if a.splitN {
		g.convertB16(i, n0, n1)
	}
	tmp, x, lda, k := g.scr16.tmp[i], a.qa, a.lda, a.k
	kp := (k + 1) / 2
	if useSplitA16(x) {
		g.directPart16Split(i, m0, m1, n0, n1)
		return
	}
	step := direct16Rows(kp)
	var sv [48]uint32 // a k-block's shifts of the rows (Exp, Aᵀ)
	// With Exp and Aᵀ: the pair rows below expEnd of the current k-block
	// had their first expVec lanes converted in one call.
	var expVec, expEnd int
	for r0 := m0; r0 < m1; r0 += step {
		rows := min(step, m1-r0)
		rsA, csA := kp, 1
		if !a.transA {
			// Row i of op(A) is row i of A: its values are pairs.
			x.rowsAt(tmp, r0, lda, 0, rows, k, kp)
		} else {
			// Row i of op(A) is column i of A: pair rows 2q and 2q+1 —
			// the whole 16-lane runs of every full pair in one call when
			// the operand has a vector path, the rest below.
			rsA, csA = 1, rows
			vec := rows / 16 * 16
			if !stridedPairsVector(x, tmp, r0, r0+lda, k/2, vec, rows, 2*lda) {
				vec = 0
			}
			for q := 0; q < kp; q++ {
				if vec > 0 && 2*q+1 < k {
					if vec < rows {
						o0 := 2*q*lda + r0 + vec
						x.pairs16(tmp[q*rows+vec:(q+1)*rows], o0, o0+lda, rows-vec)
					}
					continue
				}
				o0, o1 := 2*q*lda+r0, -1
				if 2*q+1 < k {
					o1 = o0 + lda
				}
				if x.Exp == nil {
					x.pairs16(tmp[q*rows:(q+1)*rows], o0, o1, rows)
					continue
				}
				if run := x.expRun(); q%(run/2) == 0 {
					x.expLanes(sv[:rows], r0, 2*q)
					// The run's full pair rows, their whole 16-lane
					// runs in one call; the rest pair by pair below.
					full := min(run/2, k/2-q)
					if vec := rows / 16 * 16; full > 0 && stridedPairsExpVector(x, tmp[q*rows:], o0, o0+lda, full, vec, rows, 2*lda, sv[:vec]) {
						expVec, expEnd = vec, q+full
					} else {
						expVec, expEnd = 0, q
					}
				}
				if q < expEnd {
					if expVec < rows {
						x.pairs16Exp(tmp[q*rows+expVec:(q+1)*rows], o0+expVec, o1+expVec, rows-expVec, sv[expVec:rows])
					}
					continue
				}
				x.pairs16Exp(tmp[q*rows:(q+1)*rows], o0, o1, rows, sv[:rows])
			}
		}
		rowGemm16(rows, n1-n0, kp, tmp, rsA, csA, g.scr16.bt[n0*kp:], a.c[r0*a.ldc+n0:], a.ldc, a.alpha, a.alphaLo)
		if a.post != nil {
			postScale(a.post, a.c, a.ldc, r0, r0+rows, n0, n1)
		}
	}
	if g.Block != nil {
		g.Block(m0, m1, n0, n1)
	}
}

// directPart16Split is directPart16 with op(A) widened to float32
// values (useSplitA16) a chunk of rows at a time: row i of op(A) along a
// row of the buffer when A is stored with k contiguous (a pair's odd
// element the next value), down a column when A is stored transposed
// (A's rows 2q and 2q+1 over the chunk's rows one after the other).
// An odd k's last pair is padded with a zero, as the pairs are.
func (g *Gemm) directPart16Split(i, m0, m1, n0, n1 int) {
	a := &g.args
	x, lda, k := a.qa, a.lda, a.k
	kp := (k + 1) / 2
	if g.scr16.tmpF[i] == nil {
		g.scr16.tmpF[i] = make([]float32, direct16TmpLanes)
	}
	tmp := g.scr16.tmpF[i]
	step := max(1, min(48, direct16TmpLanes/(2*kp)))
	for r0 := m0; r0 < m1; r0 += step {
		rows := min(step, m1-r0)
		var rsA, csA, oddA int
		if !a.transA {
			rsA, csA, oddA = 2*kp, 2, 1
			x.widenRows(tmp, r0*lda, lda, rows, k, rsA)
			if k%2 != 0 {
				for r := 0; r < rows; r++ {
					tmp[r*rsA+k] = 0
				}
			}
			if x.Exp != nil {
				// Each row's k-blocks by their shifts: a widened value
				// is its bf16 in a lane's upper half, the lower half
				// zero, which the pairs' shift leaves alone.
				for r := 0; r < rows; r++ {
					run := x.expRun()
					e := x.Exp[(r0+r)*x.ExpBlocks:]
					shiftRuns(asU32(tmp[r*rsA:r*rsA+k]), e[:(k+run-1)/run], run)
				}
			}
		} else {
			rsA, csA, oddA = 1, 2*rows, rows
			x.widenRows(tmp, r0, lda, k, rows, rows)
			if k%2 != 0 {
				clear(tmp[k*rows : (k+1)*rows])
			}
			if x.Exp != nil {
				// Value p of the chunk's rows: lane r takes row r0+r's
				// shift of p's k-block.
				var sv [48]uint32
				for p0, run := 0, x.expRun(); p0 < k; p0 += run {
					x.expLanes(sv[:rows], r0, p0)
					shiftPeriodic(asU32(tmp[p0*rows:min(k, p0+run)*rows]), sv[:rows])
				}
			}
		}
		rowGemm16Split(rows, n1-n0, kp, tmp, rsA, csA, oddA, g.scr16.bt[n0*kp:], a.c[r0*a.ldc+n0:], a.ldc, a.alpha, a.alphaLo)
		if a.post != nil {
			postScale(a.post, a.c, a.ldc, r0, r0+rows, n0, n1)
		}
	}
	if g.Block != nil {
		g.Block(m0, m1, n0, n1)
	}
}

// widenRows writes rows rows of n values of x, row r at x[o+r·ld:], to
// dst[r·ldd:] as float32 values of bf16 precision: each value's bf16
// (bf16At) widened back, what a pair holds. The vector kernel does what
// it can of each row; the loop is its twin.
func (x *Operand) widenRows(dst []float32, o, ld, rows, n, ldd int) {
	done := widenRowsVector(x, dst, o, ld, rows, n, ldd)
	for r := 0; r < rows; r++ {
		d := dst[r*ldd : r*ldd+n]
		for j := done; j < n; j++ {
			d[j] = math.Float32frombits(uint32(x.bf16At(o+r*ld+j)) << 16)
		}
	}
}

// rowGemm16Split is rowGemm16 with A as float32 values of bf16 precision
// (the split form): lane (i, q)'s even element at a[i·rsA + q·csA], its
// odd one oddA further. The products and their order are rowGemm16's.
func rowGemm16Split(m, n, kp int, a []float32, rsA, csA, oddA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) {
	if m <= 0 || n <= 0 {
		return
	}
	_, _, _ = a[(m-1)*rsA+(kp-1)*csA+oddA], b[(n-1)/64*64*kp+(kp-1)*64+(n-1)%64], c[(m-1)*ldc+n-1]
	if !rowGemm16SplitVector(m, n, kp, a, rsA, csA, oddA, b, c, ldc, alpha, alphaLo) {
		rowGemm16SplitGo(m, n, kp, a, rsA, csA, oddA, b, c, ldc, alpha, alphaLo)
	}
}

// rowGemm16SplitGo is the split row kernels' twin: rowGemm16Go's loop
// on the pairs the float32 values make.
func rowGemm16SplitGo(m, n, kp int, a []float32, rsA, csA, oddA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) {
	rowGemm16Loop(m, n, kp, func(i, q int) uint32 {
		o := i*rsA + q*csA
		return math.Float32bits(a[o])>>16 | math.Float32bits(a[o+oddA])&0xFFFF0000
	}, b, c, ldc, alpha, alphaLo)
}

// rowGemm16 computes C[m×n] = alpha·A·B (two-part alpha, see
// bf16KernelRef's overwrite store) from bf16 pairs: lane (i, q) of A at
// a[i·rsA + q·csA], lane (q, j) of B in panels of 64 columns, at
// b[64·kp·(j/64) + 64·q + j%64]; kp ≥ 1 pairs. C is not read.
func rowGemm16(m, n, kp int, a []uint32, rsA, csA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) {
	if m <= 0 || n <= 0 {
		return
	}
	// Touch the last element of each operand so that a short slice
	// panics here rather than in the assembly.
	_, _, _ = a[(m-1)*rsA+(kp-1)*csA], b[(n-1)/64*64*kp+(kp-1)*64+(n-1)%64], c[(m-1)*ldc+n-1]
	if !useRow16Vector || !rowGemm16Vector(m, n, kp, a, rsA, csA, b, c, ldc, alpha, alphaLo) {
		rowGemm16Go(m, n, kp, a, rsA, csA, b, c, ldc, alpha, alphaLo)
	}
}

// useRow16Vector lets tests run rowGemm16's twin on the direct path.
var useRow16Vector = true

// rowGemm16Go is rowGemm16's loop and the row kernels' twin, bit for
// bit: each element's pairs in order through dpbf16 (VDPBF16PS), then
// the overwrite store.
func rowGemm16Go(m, n, kp int, a []uint32, rsA, csA int, b []uint32, c []float32, ldc int, alpha, alphaLo float32) {
	rowGemm16Loop(m, n, kp, func(i, q int) uint32 { return a[i*rsA+q*csA] }, b, c, ldc, alpha, alphaLo)
}

// rowGemm16Loop is the row kernels' loop with A's lane (i, q) from lane.
func rowGemm16Loop(m, n, kp int, lane func(i, q int) uint32, b []uint32, c []float32, ldc int, alpha, alphaLo float32) {
	for i := 0; i < m; i++ {
		crow := c[i*ldc : i*ldc+n]
		for j := range crow {
			col := b[j/64*64*kp+j%64:]
			var acc float32
			for q := 0; q < kp; q++ {
				acc = dpbf16(acc, col[q*64], lane(i, q))
			}
			if math.Float32bits(alphaLo) != 0 {
				crow[j] = fma32(acc, alpha, acc*alphaLo)
			} else {
				crow[j] = acc * alpha
			}
		}
	}
}

// row16Exp is row16 of the n values at x[o:] (a row of op(X), k along
// it) followed by shiftRow with its k-blocks' shifts exp: the vector
// kernel converts and shifts the row in one pass.
func (x *Operand) row16Exp(dst []uint32, o, n int, exp []int8) {
	if rowsExpVector(x, dst, o, 0, 1, n, 0, exp, 0) {
		return
	}
	x.row16(dst, o, n)
	shiftRow(dst[:(n+1)/2], exp, x.expRun())
}

// rows16Exp is row16Exp of rows rows of n values, row r at x[o+r·ld:]
// with the shifts at exp[r·es:], written to dst[r·ldd:]: one call of the
// vector kernel.
func (x *Operand) rows16Exp(dst []uint32, o, ld, rows, n, ldd int, exp []int8, es int) {
	if rowsExpVector(x, dst, o, ld, rows, n, ldd, exp, es) {
		return
	}
	for r := 0; r < rows; r++ {
		x.row16Exp(dst[r*ldd:r*ldd+(n+1)/2], o+r*ld, n, exp[r*es:])
	}
}

// shiftRow moves a row of pairs (k along the row) by its exponent
// shifts, one per run/2 pairs.
func shiftRow(row []uint32, exp []int8, run int) { shiftRuns(row, exp, run/2) }

// shiftRuns moves each run of lanes lanes of d (the last one shorter)
// by its exp entry: the vector kernel the whole runs, bf16ShiftRunsGo
// (its twin) the rest.
func shiftRuns(d []uint32, exp []int8, lanes int) {
	done := bf16ShiftRunsVector(d, exp, lanes)
	bf16ShiftRunsGo(d[min(len(d), done*lanes):], exp[done:], lanes)
}

// bf16ShiftRunsGo is the loop bf16ShiftRunsAVX512 and bf16ShiftRunsAVX2
// replace: each run of lanes lanes of d (the last one shorter) moves by
// its exp entry.
func bf16ShiftRunsGo(d []uint32, exp []int8, lanes int) {
	for s, e := range exp {
		lo := s * lanes
		if lo >= len(d) {
			break
		}
		shiftRun(d[lo:min(len(d), lo+lanes)], int(e))
	}
}
