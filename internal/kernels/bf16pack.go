package kernels

import (
	"math"
	"unsafe"
)

// Packing for the bf16 GEMM. A packed sliver holds, for each pair q of k
// values (2q, 2q+1), one 32-bit lane per row of op(A) (or column of
// op(B)): the bf16 of the even value in the low half, the odd one in the
// high half, as VDPBF16PS reads them. An odd k pads the last pair with
// zero. Sources are Operands: float32 values round to nearest even
// (BF16FromFloat32); FP8 codes decode exactly through Table (the decoded
// value times a power-of-two Scale, so every value is a bf16 value).

// asU32 views a float32 packing buffer as 32-bit lanes (same size, no
// pointers: the bf16 packs reuse the float32 buffers).
func asU32(f []float32) []uint32 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

// bf16At returns element o of the operand as bf16.
func (x *Operand) bf16At(o int) uint16 {
	if x.E2M1 != nil {
		return x.e2m1At(o)
	}
	if x.Codes == nil {
		return BF16FromFloat32(x.F32[o])
	}
	return BF16FromFloat32(x.Table[x.Codes[o]])
}

// pairs16 writes dst[j] = pair(x[o0+j], x[o1+j]) for j < n; o1 < 0 pads
// with zeros. The vector kernel does what it can; the loop is its twin.
func (x *Operand) pairs16(dst []uint32, o0, o1, n int) {
	dst = dst[:n]
	j := 0
	if x.E2M1 != nil && o1 >= 0 {
		j = x.e2m1PairsVector(dst, o0, o1, n)
	} else if o1 >= 0 {
		j = pairsVector(x, dst, o0, o1, n)
	}
	if o1 >= 0 {
		for ; j < n; j++ {
			dst[j] = bf16Pair(x.bf16At(o0+j), x.bf16At(o1+j))
		}
		return
	}
	for ; j < n; j++ {
		dst[j] = uint32(x.bf16At(o0 + j))
	}
}

// pairs16Groups is pairs16 for groups runs of width lanes: run g reads
// x[o0+g·width:] and x[o1+g·width:] and writes dst[g·stride:] (one run
// per sliver of a packed panel).
func (x *Operand) pairs16Groups(dst []uint32, o0, o1, groups, width, stride int) {
	if o1 >= 0 && (groupsVector(x, dst, o0, o1, groups, width, stride) || x.e2m1GroupsVector(dst, o0, o1, groups, width, stride)) {
		return
	}
	for g := 0; g < groups; g++ {
		o := -1
		if o1 >= 0 {
			o = o1 + g*width
		}
		x.pairs16(dst[g*stride:], o0+g*width, o, width)
	}
}

// pairs16GroupsExp is pairs16Groups followed by the exponent shifts of
// Float8BlockScaling: lane j of the groups taken end to end (group g's
// lane i is j = g·width + i) adds shifts[j] (shiftLane values). The
// vector kernel shifts as it converts; otherwise each group is shifted
// after.
func (x *Operand) pairs16GroupsExp(dst []uint32, o0, o1, groups, width, stride int, shifts []uint32) {
	if groupsExpVector(x, dst, o0, o1, groups, width, stride, shifts) {
		return
	}
	x.pairs16Groups(dst, o0, o1, groups, width, stride)
	if shiftGroupsVector(dst, shifts, groups, width, stride) {
		return
	}
	for g := 0; g < groups; g++ {
		shiftLanes(dst[g*stride:g*stride+width], shifts[g*width:(g+1)*width])
	}
}

// pairs16Exp is pairs16 followed by shiftLanes(dst, shifts): the vector
// kernel does the longest multiple of 16 lanes in one pass.
func (x *Operand) pairs16Exp(dst []uint32, o0, o1, n int, shifts []uint32) {
	j := 0
	if blocks := n / 16; blocks > 0 && groupsExpVector(x, dst, o0, o1, 1, 16*blocks, 0, shifts) {
		j = 16 * blocks
	}
	if j < n {
		p1 := -1
		if o1 >= 0 {
			p1 = o1 + j
		}
		x.pairs16(dst[j:n], o0+j, p1, n-j)
		shiftLanes(dst[j:n], shifts[j:n])
	}
}

// rows16 is row16 of rows rows of n values, row r at x[o+r·ld:] written
// to dst[r·ldd:]: one call of the vector kernel for float32 values and
// FP8 codes, and for NVFP4 codes one a band of rows sharing their
// factors' stride.
func (x *Operand) rows16(dst []uint32, o, ld, rows, n, ldd int) {
	if rowsVector(x, dst, o, ld, rows, n, ldd) || x.e2m1RowsVector(dst, o, ld, rows, n, ldd) {
		return
	}
	for r := 0; r < rows; r++ {
		x.row16(dst[r*ldd:r*ldd+(n+1)/2], o+r*ld, n)
	}
}

// rowsAt is rows16 of rows rows i0 … of a stored operand along which k
// runs, the n values of each from k index pc, ld apart, written ldd
// apart; with Operand.Exp (pc a multiple of ExpBlock) each run of k
// values of row i sharing an entry takes its shift as it converts.
func (x *Operand) rowsAt(dst []uint32, i0, ld, pc, rows, n, ldd int) {
	if x.Exp != nil {
		x.rows16Exp(dst, i0*ld+pc, ld, rows, n, ldd, x.Exp[i0*x.ExpBlocks+pc/x.expRun():], x.ExpBlocks)
		return
	}
	x.rows16(dst, i0*ld+pc, ld, rows, n, ldd)
}

// pairs16Shifted is pairs16 of the n lanes of rows (or columns) i0 … of
// op(X) that pair k indices p and p+1, and with Operand.Exp each lane's
// k-block shift: sv holds the lanes' shifts, refilled when p starts a
// run of k values sharing an entry (the callers walk p up from a
// multiple of ExpBlock).
func (x *Operand) pairs16Shifted(dst []uint32, o0, o1, n, i0, p int, sv []uint32) {
	if x.Exp == nil {
		x.pairs16(dst, o0, o1, n)
		return
	}
	if p%x.expRun() == 0 {
		x.expLanes(sv[:n], i0, p)
	}
	x.pairs16Exp(dst, o0, o1, n, sv[:n])
}

// expLanes writes the shifts (shiftLane values) of the run of k values
// holding k index p for rows (or columns) i0 … i0+len(sv)−1 of op(X).
func (x *Operand) expLanes(sv []uint32, i0, p int) {
	e := x.Exp[i0*x.ExpBlocks+p/x.expRun():]
	for j := range sv {
		sv[j] = shiftLane(int(e[j*x.ExpBlocks]))
	}
}

// row16 converts the n consecutive values at x[o:] into ⌈n/2⌉ pairs.
func (x *Operand) row16(dst []uint32, o, n int) {
	if x.E2M1 != nil {
		if !x.e2m1RowsVector(dst, o, x.E2M1Cols, 1, n, 0) {
			x.e2m1Row(dst, o, n)
		}
		return
	}
	if rowsVector(x, dst, o, 0, 1, n, 0) {
		return
	}
	x.row16From(dst, o, n, 0)
}

// row16From is row16's loop from pair q0 on.
func (x *Operand) row16From(dst []uint32, o, n, q0 int) {
	q := q0
	for ; 2*q+1 < n; q++ {
		dst[q] = bf16Pair(x.bf16At(o+2*q), x.bf16At(o+2*q+1))
	}
	if 2*q < n {
		dst[q] = uint32(x.bf16At(o + 2*q))
	}
}

// packA16 packs op(A)[ic:ic+mb, pc:pc+kb] into mr-row bf16-pair slivers
// (sliver s at dst[s·kp:], kp = ⌈kb/2⌉ pairs of mr lanes); missing rows
// are zero. tmp must hold max(16·kp, mb) lanes, and shifts mb (for
// Operand.Exp; pc is then a multiple of ExpBlock).
func packA16(dst []uint32, mr int, trans bool, a *Operand, lda, ic, pc, mb, kb int, tmp, shifts []uint32) {
	kp := (kb + 1) / 2
	if trans {
		// op(A)[r][p] = A[p][r]: rows p and p+1 of A are contiguous
		// over r; pair them across the whole block, then split.
		t := tmp[:mb]
		for q := 0; q < kp; q++ {
			o0, o1 := (pc+2*q)*lda+ic, -1
			if 2*q+1 < kb {
				o1 = o0 + lda
			}
			a.pairs16Shifted(t, o0, o1, mb, ic, pc+2*q, shifts)
			for s := 0; s < mb; s += mr {
				rows := min(mr, mb-s)
				d := dst[s*kp+q*mr : s*kp+q*mr+mr]
				copy(d, t[s:s+rows])
				clear(d[rows:])
			}
		}
		return
	}
	for s := 0; s < mb; s += mr {
		rows := min(mr, mb-s)
		rowsTransposed(dst[s*kp:s*kp+mr*kp], mr, a, lda, ic+s, pc, kb, rows, tmp)
	}
}

// rowsTransposed packs rows i0 … i0+rows−1 of a stored operand, along
// which k runs from pc, into the w lanes of a sliver d (lane q·w+r holds
// pair q of row r); lanes of missing rows are zero. Up to 16 rows are
// converted into tmp at a time, then transposed into place.
func rowsTransposed(d []uint32, w int, x *Operand, ld, i0, pc, kb, rows int, tmp []uint32) {
	kp := (kb + 1) / 2
	for r0 := 0; r0 < w; r0 += 16 {
		n := min(16, rows-r0)
		if n <= 0 {
			for q := 0; q < kp; q++ {
				clear(d[q*w+r0 : q*w+min(w, r0+16)])
			}
			continue
		}
		x.rowsAt(tmp, i0+r0, ld, pc, n, kb, kp)
		transposeInto(d, w, r0, tmp, kp, n)
		if r0+n < w && n < 16 {
			for q := 0; q < kp; q++ {
				clear(d[q*w+r0+n : q*w+min(w, r0+16)])
			}
		}
	}
}

// transposeInto writes d[q·w+c+i] = t[i·kp+q] for i < rows and q < kp:
// the vector kernel for whole blocks of 16 pairs, this loop (its twin)
// for the rest. t holds 16 rows of kp lanes.
func transposeInto(d []uint32, w, c int, t []uint32, kp, rows int) {
	var q0 int
	if w == 6 && c == 0 && rows == 6 {
		q0 = pack6Vector(d, t, kp, kp) // the AVX2 kernel's six rows
	} else {
		q0 = transposeVector(d[c:], w, t, kp, rows, kp)
	}
	for q := q0; q < kp; q++ {
		dq := d[q*w+c : q*w+c+rows]
		for i := range dq {
			dq[i] = t[i*kp+q]
		}
	}
}

// packB16 packs op(B)[pc:pc+kb, jc:jc+nb] into nr-column bf16-pair
// slivers of kps ≥ ⌈kb/2⌉ pair-rows (the rows past ⌈kb/2⌉ zero, for the
// AMX kernel's whole tiles); missing columns are zero. tmp must hold
// 16·kp lanes, and shifts nb (for Operand.Exp; pc is then a multiple of
// ExpBlock).
func packB16(dst []uint32, nr int, trans bool, b *Operand, ldb, pc, jc, kb, nb, kps int, tmp, shifts []uint32) {
	kp := (kb + 1) / 2
	if kps > kp {
		for s := 0; s < nb; s += nr {
			clear(dst[s*kps+kp*nr : s*kps+kps*nr])
		}
	}
	if !trans {
		// Rows p and p+1 of B are contiguous over the columns: pair them
		// across every full sliver at once, then the partial one.
		full := nb / nr
		for q := 0; q < kp; q++ {
			o0, o1 := (pc+2*q)*ldb+jc, -1
			if 2*q+1 < kb {
				o1 = o0 + ldb
			}
			var sv []uint32
			if b.Exp != nil {
				sv = shifts[:nb]
				if q%(b.expRun()/2) == 0 {
					b.expLanes(sv, jc, pc+2*q)
				}
			}
			if full > 0 {
				if sv != nil {
					b.pairs16GroupsExp(dst[q*nr:], o0, o1, full, nr, kps*nr, sv)
				} else {
					b.pairs16Groups(dst[q*nr:], o0, o1, full, nr, kps*nr)
				}
			}
			if cols := nb - full*nr; cols > 0 {
				o := -1
				if o1 >= 0 {
					o = o1 + full*nr
				}
				dq := dst[full*nr*kps+q*nr : full*nr*kps+q*nr+nr]
				if sv != nil {
					b.pairs16Exp(dq, o0+full*nr, o, cols, sv[full*nr:])
				} else {
					b.pairs16(dq, o0+full*nr, o, cols)
				}
				clear(dq[cols:])
			}
		}
		return
	}
	// op(B)[p][j] = B[j][p]: a column of op(B) is a row of B, whose
	// consecutive values are already pairs.
	for s := 0; s < nb; s += nr {
		rowsTransposed(dst[s*kps:s*kps+nr*kp], nr, b, ldb, jc+s, pc, kb, min(nr, nb-s), tmp)
	}
}

// macroKernel16 is macroKernel for the bf16 kernel: kp pairs of k; with
// overwrite (the first block of k) C is written, not added to.
func macroKernel16(tile []float32, mb, nb, kp int, alpha, alphaLo float32, overwrite bool, pa, pb []uint32, c []float32, ldc int) {
	mr, nr := kern16.mr, kern16.nr
	la, lb := kern16.sliver(mr, kp), kern16.sliver(nr, kp)
	// The slivers' offsets walk on by la and lb (a division by mr a
	// micro-kernel call cost 1–2% of the GEMM).
	for j, ob := 0, 0; j < nb; j, ob = j+nr, ob+lb {
		bs := pb[ob : ob+lb]
		cols := min(nr, nb-j)
		for i, oa := 0, 0; i < mb; i, oa = i+mr, oa+la {
			as := pa[oa : oa+la]
			rows := min(mr, mb-i)
			if rows == mr && cols == nr {
				kern16.run(kp, as, bs, c[i*ldc+j:], ldc, alpha, alphaLo, overwrite)
				continue
			}
			t := tile[:mr*nr]
			if !overwrite {
				for r := 0; r < rows; r++ {
					copy(t[r*nr:r*nr+cols], c[(i+r)*ldc+j:])
				}
			}
			kern16.run(kp, as, bs, t, nr, alpha, alphaLo, overwrite)
			for r := 0; r < rows; r++ {
				copy(c[(i+r)*ldc+j:(i+r)*ldc+j+cols], t[r*nr:r*nr+cols])
			}
		}
	}
}

// splitSlivers splits slivers consecutive slivers of l bf16 pairs from
// src into a split kernel's layout in dst: sliver s at 2·s·l holds its
// pairs' odd elements as float32 (the pair with its low half cleared),
// then at 2·s·l + l their even ones (the pair shifted up 16 bits). dst
// may be src (the slivers are split from the last, each read before it
// is written), and must hold 2·slivers·l lanes.
func splitSlivers(dst, src []uint32, slivers, l int) {
	for s := slivers - 1; s >= 0; s-- {
		splitPairs(dst[2*s*l:2*s*l+l], dst[2*s*l+l:2*s*l+2*l], src[s*l:s*l+l])
	}
}

// splitPairs writes the odd and even elements of the bf16 pairs in src
// as float32 to odd and even; odd may be src.
func splitPairs(odd, even, src []uint32) {
	for i := splitPairsVector(odd, even, src); i < len(src); i++ {
		v := src[i]
		odd[i], even[i] = v&0xFFFF0000, v<<16
	}
}

// ExpBlock is the number of values along k that share one exponent
// shift of Operand.Exp (Float8BlockScaling's 128).
const ExpBlock = 128

// bf16ShiftGo is the loop bf16ShiftAVX512 replaces: each bf16 half of
// d[i] whose exponent field is neither 0 nor all ones gets the matching
// half of shifts[i] added (shifts one per lane, or, when len(shifts) is
// 16 and d longer, the same 16 for every run of 16 lanes).
func bf16ShiftGo(d, shifts []uint32) {
	for i, x := range d {
		s := shifts[i%len(shifts)]
		var out uint32
		for h := 0; h < 32; h += 16 {
			v := uint16(x >> h)
			if e := v & 0x7F80; e != 0 && e != 0x7F80 {
				v += uint16(s >> h)
			}
			out |= uint32(v) << h
		}
		d[i] = out
	}
}

// shiftLane is the lane value that moves both bf16 halves' exponents by
// e (e·2^7 in each 16-bit half).
func shiftLane(e int) uint32 {
	h := uint32(uint16(int16(e) << 7))
	return h | h<<16
}

// shiftRun moves the exponents of the n lanes at d by e.
func shiftRun(d []uint32, e int) {
	if e == 0 || len(d) == 0 {
		return
	}
	var v [16]uint32
	for i := range v {
		v[i] = shiftLane(e)
	}
	done := bf16ShiftVector(d, v[:], 0)
	bf16ShiftGo(d[done:], v[:])
}

// shiftLanes moves the exponent of each lane d[i] by the lane shifts[i]
// (shiftLane values).
func shiftLanes(d, shifts []uint32) {
	done := bf16ShiftVector(d, shifts, 64)
	bf16ShiftGo(d[done:], shifts[done:])
}

// shiftPeriodic moves the exponent of each lane d[i] by shifts[i mod
// len(shifts)] (shiftLane values; len(d) a multiple of len(shifts)).
func shiftPeriodic(d, shifts []uint32) {
	if shiftPeriodVector(d, shifts) {
		return
	}
	// A period that is not whole vectors: the vector kernel takes the
	// shifts repeated over lcm(period, 8) lanes, as many whole repeats
	// of that as d holds; the loop below the rest.
	done := 0
	if p := len(shifts); p > 0 && p%8 != 0 && p <= 48 {
		var ext [8 * 48]uint32
		l := p * (8 / gcd(p, 8))
		for i := range l {
			ext[i] = shifts[i%p]
		}
		if whole := len(d) / l * l; whole > 0 && shiftPeriodVector(d[:whole], ext[:l]) {
			done = whole
		}
	}
	for i := done; i < len(d); i += len(shifts) {
		shiftLanes(d[i:i+len(shifts)], shifts)
	}
}

// gcd is the greatest common divisor of two positive integers.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// e2m1Run returns NVFP4's codes and factors from element o (r·E2M1Cols
// + c) on: the byte holding o (its low nibble when c is even) and o's
// block factor (its tile's with E2M1Tiles).
func (x *Operand) e2m1Run(o int) (codes []uint8, f []float32) {
	cols := x.E2M1Cols
	r, c := o/cols, o%cols
	fr := r
	if x.E2M1Tiles {
		fr = r / 16
	}
	return x.E2M1[r*((cols+1)/2)+c/2:], x.E2M1Factors[fr*((cols+15)/16)+c/16:]
}

// e2m1Loc returns the code of NVFP4 element o (r·E2M1Cols + c) and its
// factor.
func (x *Operand) e2m1Loc(o int) (code uint8, f float32) {
	codes, fs := x.e2m1Run(o)
	return codes[0] >> (4 * (o % x.E2M1Cols & 1)) & 0xF, fs[0]
}

// e2m1At returns NVFP4 element o (r·E2M1Cols + c) as bf16: its code's
// value times its factor, decodeE2M1BF16Go's arithmetic.
func (x *Operand) e2m1At(o int) uint16 {
	c, f := x.e2m1Loc(o)
	v := e2m1Values[c&7]
	if c&8 != 0 {
		v = -v
	}
	return uint16(math.Float32bits(v*f) >> 16)
}

// e2m1RowsVector does rows16 for NVFP4 codes with the vector kernel when
// the rows are runs of whole blocks of 16 of consecutive stored rows
// (ld the stored row length), and reports whether it did: rows of 1×16
// blocks in one call, rows of 16×16 tiles a call per band of rows that
// share their tiles' factors.
func (x *Operand) e2m1RowsVector(dst []uint32, o, ld, rows, n, ldd int) bool {
	cols := x.E2M1Cols
	if !hasE2M1Rows || x.E2M1 == nil || rows <= 0 || n <= 0 || n%16 != 0 || ld != cols {
		return false
	}
	r0, c0 := o/cols, o%cols
	if c0%16 != 0 || c0+n > cols {
		return false
	}
	for r := 0; r < rows; {
		k, fs := rows-r, (cols+15)/16
		if x.E2M1Tiles {
			k, fs = min(k, 16-(r0+r)%16), 0
		}
		codes, f := x.e2m1Run(o + r*cols)
		e2m1RowsVector(dst[r*ldd:], codes, f, k, n/16, (cols+1)/2, ldd, fs)
		r += k
	}
	return true
}

// e2m1Row is row16 for NVFP4 codes: a run starting on a block of 16
// decodes straight into the pairs (consecutive bf16 values are pairs,
// the first in the low half), the vector kernel doing its whole blocks;
// any other run goes element by element.
func (x *Operand) e2m1Row(dst []uint32, o, n int) {
	if n <= 0 {
		return
	}
	cols := x.E2M1Cols
	if c := o % cols; c%16 != 0 || c+n > cols {
		q := 0
		for ; 2*q+1 < n; q++ {
			dst[q] = bf16Pair(x.e2m1At(o+2*q), x.e2m1At(o+2*q+1))
		}
		if 2*q < n {
			dst[q] = uint32(x.e2m1At(o + 2*q))
		}
		return
	}
	codes, f := x.e2m1Run(o)
	d := unsafe.Slice((*uint16)(unsafe.Pointer(&dst[0])), 2*len(dst))
	DecodeE2M1BF16(d, codes, f, n)
	if n%2 == 1 {
		d[n] = 0 // the odd pair's missing value
	}
}

// e2m1GroupsVector does pairs16Groups for NVFP4 codes with one call of
// the vector kernel, when both rows' runs start on a block and the
// groups lie end to end within the rows, and reports whether it did.
func (x *Operand) e2m1GroupsVector(dst []uint32, o0, o1, groups, width, stride int) bool {
	cols := x.E2M1Cols
	if x.E2M1 == nil || groups <= 0 || width <= 0 || width%16 != 0 {
		return false
	}
	c0, c1 := o0%cols, o1%cols
	n := groups * width
	if c0%16 != 0 || c1%16 != 0 || c0+n > cols || c1+n > cols {
		return false
	}
	a, fa := x.e2m1Run(o0)
	b, fb := x.e2m1Run(o1)
	return e2m1GroupsVector(dst, a, b, fa, fb, groups, width/16, stride, width)
}

// e2m1PairsVector does the whole blocks of 16 of pairs16 for NVFP4
// codes with the vector kernel (as one group of e2m1GroupsVector), when
// both runs start on a block within their rows, and returns how many
// lanes it wrote.
func (x *Operand) e2m1PairsVector(dst []uint32, o0, o1, n int) int {
	if w := n / 16 * 16; w > 0 && x.e2m1GroupsVector(dst, o0, o1, 1, w, 0) {
		return w
	}
	return 0
}
