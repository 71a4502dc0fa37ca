package kernels

// The AMX bf16 GEMM. On CPUs with AMX-BF16 (Intel Sapphire Rapids and
// later) TDPBF16PS multiplies a 16×32 bf16 tile by a 32×16 one into a
// 16×16 float32 tile: 8,192 products per instruction, about 2 TFLOP/s
// per core measured on the development machine against about 70 for
// float32 FMAs. The blocked bf16 GEMM then packs for tiles instead of
// registers:
//
//   - A in groups of 32 rows, each row of the block ⌈kb/2⌉ pairs padded
//     with zero pairs to a multiple of 16 (a tile row is 16 pairs, 64
//     bytes), missing rows zero;
//   - B in slivers of 32 columns, as for the AVX512_BF16 kernels (one
//     32-lane row per pair), padded with zero pair-rows likewise.
//
// A kernel call computes a grid of 32×32 blocks of C, each in four
// accumulator tiles, and stores them as the bf16 micro-kernels do
// (overwrite on the first block of k, a one- or two-part alpha).
//
// Numerics: the products are exact and the accumulation is float32 with
// denormals flushed, as on VDPBF16PS, but TDPBF16PS does not add the
// products one at a time in a documented order: its sums differ from
// the AVX512_BF16 kernel's in the last bits (they agree exactly where
// every partial sum is exact) and stay within the float32 error bound of
// a k-term sum (the tests check both). The pure-Go twin amxTilesRef
// reads the same packed layout and adds the pairs in VDPBF16PS order.

// amxPairs is the number of pair-rows an AMX-packed block of kb values
// of k takes: ⌈kb/2⌉ rounded up to whole tiles of 16.
func amxPairs(kb int) int { return roundUp((kb+1)/2, 16) }

// amxTilesRef is the pure-Go twin of amxBF16Tiles (see amxBF16Kernel in
// asmgen): mt×nt blocks of 32×32 of C from A (mt groups of 32 rows, row
// stride lda lanes) and B (nt slivers of 32 columns, kt·16 pair-rows
// each), stored with the bf16 micro-kernels' rule (mode bit 0:
// overwrite, bit 1: two-part alpha).
func amxTilesRef(kt int, a []uint32, lda int, b []uint32, c []float32, ldc, mt, nt int, alpha, alphaLo float32, mode int, _ []float32) {
	kp := 16 * kt
	lo := alphaLo
	if mode&2 == 0 {
		lo = 0
	}
	for j := 0; j < nt; j++ {
		bs := b[j*32*kp : (j+1)*32*kp]
		for i := 0; i < mt; i++ {
			for r := 0; r < 32; r++ {
				arow := a[(i*32+r)*lda : (i*32+r)*lda+kp]
				for col := 0; col < 32; col++ {
					var acc float32
					for p, av := range arow {
						acc = dpbf16(acc, bs[p*32+col], av)
					}
					o := (i*32+r)*ldc + j*32 + col
					switch {
					case mode&1 != 0 && lo != 0:
						c[o] = fma32(acc, alpha, acc*lo)
					case mode&1 != 0:
						c[o] = acc * alpha
					default:
						if lo != 0 {
							c[o] = fma32(acc, lo, c[o])
						}
						c[o] = fma32(acc, alpha, c[o])
					}
				}
			}
		}
	}
}

// goAMXKernel runs the AMX packing and blocking with the pure-Go twin,
// on any CPU (KernelEnv "go amx 32x32"): the tests' way to check the
// layout everywhere.
var goAMXKernel = bf16Kernel{name: "go amx 32x32", mr: 32, nr: 32, tiles: amxTilesRef}

// packA16AMX packs op(A)[ic:ic+mb, pc:pc+kb] for the AMX kernel: row r
// at dst[r·kps:], its ⌈kb/2⌉ pairs then zero pairs up to kps, rows
// padded with zeros to a multiple of 32. tmp must hold 16·mb lanes, and
// shifts mb (for Operand.Exp; pc is then a multiple of ExpBlock).
func packA16AMX(dst []uint32, trans bool, a *Operand, lda, ic, pc, mb, kb, kps int, tmp, shifts []uint32) {
	kp := (kb + 1) / 2
	rows := roundUp(mb, 32)
	if !trans {
		a.rowsAt(dst, ic, lda, pc, mb, kb, kps)
		for r := 0; r < mb; r++ {
			clear(dst[r*kps+kp : (r+1)*kps])
		}
		clear(dst[mb*kps : rows*kps])
		return
	}
	// op(A)[r][p] = A[pc+p][ic+r]: rows 2q and 2q+1 of A are contiguous
	// over r. Pair 16 of them at a time across the block, then transpose
	// the 16 × mb lanes into the rows.
	for q0 := 0; q0 < kp; q0 += 16 {
		nq := min(16, kp-q0)
		for i := 0; i < nq; i++ {
			q := q0 + i
			o0, o1 := (pc+2*q)*lda+ic, -1
			if 2*q+1 < kb {
				o1 = o0 + lda
			}
			a.pairs16Shifted(tmp[i*mb:(i+1)*mb], o0, o1, mb, ic, pc+2*q, shifts)
		}
		done := 0
		if mb >= 16 {
			done = transposeVector(dst[q0:], kps, tmp, mb, nq, mb)
		}
		for r := done; r < mb; r++ {
			d := dst[r*kps+q0 : r*kps+q0+nq]
			for i := range d {
				d[i] = tmp[i*mb+r]
			}
		}
	}
	for r := 0; r < mb; r++ {
		clear(dst[r*kps+kp : (r+1)*kps])
	}
	clear(dst[mb*kps : rows*kps])
}

// macroKernelAMX is macroKernel16 for an AMX kernel: the whole 32×32
// blocks of the mb×nb block of C in one call, the edges through
// w.tile (scratch for the tile stores, then a 32×32 staging block).
func macroKernelAMX(w *gemmPart, mb, nb, kps int, alpha, alphaLo float32, overwrite bool, pa, pb []uint32, c []float32, ldc int) {
	mode := 0
	if overwrite {
		mode |= 1
	}
	if alphaLo != 0 {
		mode |= 2
	}
	kt := kps / 16
	scratch, edge := w.tile[:1024], w.tile[1024:2048]
	mt, nt := mb/32, nb/32
	if mt > 0 && nt > 0 {
		kern16.tiles(kt, pa, kps, pb, c, ldc, mt, nt, alpha, alphaLo, mode, scratch)
	}
	for i := 0; i < (mb+31)/32; i++ {
		for j := 0; j < (nb+31)/32; j++ {
			if i < mt && j < nt {
				continue
			}
			rows, cols := min(32, mb-32*i), min(32, nb-32*j)
			cb := c[32*i*ldc+32*j:]
			if !overwrite {
				for r := 0; r < rows; r++ {
					copy(edge[r*32:r*32+cols], cb[r*ldc:])
				}
			}
			kern16.tiles(kt, pa[32*i*kps:], kps, pb[32*j*kps:], edge, 32, 1, 1, alpha, alphaLo, mode, scratch)
			for r := 0; r < rows; r++ {
				copy(cb[r*ldc:r*ldc+cols], edge[r*32:r*32+cols])
			}
		}
	}
}
