package kernels

import "math"

// bfloat16 helpers and the pure-Go twins of the AVX512_BF16 instructions
// the bf16 GEMM uses. A bf16 value is the upper half of a float32: sign,
// 8 exponent bits, 7 mantissa bits.

// BF16FromFloat32 rounds x to bfloat16 as VCVTNE2PS2BF16 does: to
// nearest even, NaN kept quiet, and — unlike IEEE rounding — a denormal
// input becomes a zero of its sign (the instruction treats denormal
// inputs as zero). Overflow rounds to infinity.
func BF16FromFloat32(x float32) uint16 {
	b := math.Float32bits(x)
	switch {
	case b&0x7F800000 == 0: // zero or denormal
		return uint16(b>>16) & 0x8000
	case b&0x7FFFFFFF > 0x7F800000: // NaN
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// BF16ToFloat32 widens a bfloat16 value exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16Pair packs two bf16 values into one 32-bit lane: lo is the even k
// index, hi the odd one.
func bf16Pair(lo, hi uint16) uint32 { return uint32(lo) | uint32(hi)<<16 }

// dazF32 widens a bf16 input as VDPBF16PS reads it: a denormal is zero.
func dazF32(h uint16) float64 {
	if h&0x7F80 == 0 {
		if h&0x8000 != 0 {
			return math.Copysign(0, -1)
		}
		return 0
	}
	return float64(BF16ToFloat32(h))
}

// fmaFTZ is one float32 fused multiply-add acc + a·b as VDPBF16PS does
// it: rounded once to nearest even, a denormal result flushed to a zero
// of its sign. a·b (two bf16 values) is exact in float64, and the sum of
// it and a float32 rounds correctly through float64 (see bf16KernelRef).
func fmaFTZ(acc float32, a, b float64) float32 {
	r := float32(a*b + float64(acc)) // fused: a·b is exact, so fused or not gives these bits
	if b := math.Float32bits(r); b&0x7F800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return r
}

// dpbf16 is one lane of VDPBF16PS: acc += a.hi·b.hi, then acc += a.lo·b.lo,
// each a fused multiply-add with denormal inputs read as zero and a
// denormal result flushed to zero (Intel SDM, VDPBF16PS; MXCSR is neither
// read nor written).
func dpbf16(acc float32, a, b uint32) float32 {
	if acc64 := math.Float32bits(acc); acc64&0x7F800000 == 0 {
		acc = math.Float32frombits(acc64 & 0x80000000)
	}
	acc = fmaFTZ(acc, dazF32(uint16(a>>16)), dazF32(uint16(b>>16)))
	return fmaFTZ(acc, dazF32(uint16(a)), dazF32(uint16(b)))
}

// bf16KernelRef is the reference every bf16 micro-kernel is checked
// against and the loop the assembly replaces: C[mr×nr] += alpha·A·B from
// slivers packed in bf16 pairs (k counts pairs: A holds mr lanes per
// pair of k, B nr), the accumulation in VDPBF16PS order (per pair, the
// odd k first). The store is C = fma(acc, alpha, fma(acc, alphaLo, C)),
// the inner one skipped when alphaLo is 0 (so an infinite accumulator
// stays infinite); with overwrite, C is not read: C = fma(acc, alpha,
// acc·alphaLo), or acc·alpha.
//
// Why float64 gives the float32 fused result: a product of two bf16
// values has at most 16 significant bits, so it is exact in float64; the
// float64 sum of it and a 24-bit float32 is exact unless one addend is
// below 2^-24 of the other, and then the smaller one is under half a
// float32 ulp of the larger and cannot reach a float32 rounding midpoint,
// so rounding twice (to float64, then to float32) equals rounding once.
// The two-part store uses fma32, which rounds once like the hardware.
func bf16KernelRef(mr, nr, k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
	for r := 0; r < mr; r++ {
		for j := 0; j < nr; j++ {
			var acc float32
			for p := 0; p < k; p++ {
				acc = dpbf16(acc, b[p*nr+j], a[p*mr+r])
			}
			storeBF16(c, r*ldc+j, acc, alpha, alphaLo, overwrite)
		}
	}
}

// bf16KernelSplitRef is bf16KernelRef on split slivers (see
// splitSlivers): A's k·mr odd elements as float32, then its k·mr even
// ones, and B's likewise. It is the Go twin of the AVX2 kernel.
func bf16KernelSplitRef(mr, nr, k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
	for r := 0; r < mr; r++ {
		for j := 0; j < nr; j++ {
			var acc float32
			for p := 0; p < k; p++ {
				pa := a[p*mr+r] | a[(k+p)*mr+r]>>16
				pb := b[p*nr+j] | b[(k+p)*nr+j]>>16
				acc = dpbf16(acc, pb, pa)
			}
			storeBF16(c, r*ldc+j, acc, alpha, alphaLo, overwrite)
		}
	}
}

// storeBF16 is the bf16 kernels' two-part store of acc to c[o].
func storeBF16(c []float32, o int, acc, alpha, alphaLo float32, overwrite bool) {
	switch {
	case overwrite && alphaLo != 0:
		c[o] = fma32(acc, alpha, acc*alphaLo)
	case overwrite:
		c[o] = acc * alpha
	default:
		if alphaLo != 0 {
			c[o] = fma32(acc, alphaLo, c[o])
		}
		c[o] = fma32(acc, alpha, c[o])
	}
}

// goBF16Kernel4x16 is the portable bf16 micro-kernel: the reference on a
// 4×16 tile.
func goBF16Kernel4x16(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
	bf16KernelRef(4, 16, k, a, b, c, ldc, alpha, alphaLo, overwrite)
}

var goBF16Kernel = bf16Kernel{name: "go bf16 4x16", mr: 4, nr: 16, run: goBF16Kernel4x16}

// bf16Kernel is a micro-kernel on bf16 pairs: C[mr×nr] += alpha·A·B (or
// C = alpha·A·B with overwrite) with a two-part alpha (see
// bf16KernelRef); k counts pairs. An AMX kernel sets tiles instead of
// run: it computes whole grids of 32×32 blocks from AMX-packed operands
// (see amx.go).
//
// A split kernel reads its slivers split into float32 halves (see
// splitSlivers), which the blocked GEMM prepares after packing.
type bf16Kernel struct {
	name   string
	mr, nr int
	split  bool
	run    func(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool)
	tiles  func(kt int, a []uint32, lda int, b []uint32, c []float32, ldc, mt, nt int, alpha, alphaLo float32, mode int, scratch []float32)
}

// sliver returns the lanes of a packed sliver w wide of kp pair-rows:
// kp·w, or twice that split.
func (m *bf16Kernel) sliver(w, kp int) int {
	if m.split {
		return 2 * w * kp
	}
	return w * kp
}

// runPairs runs the kernel on slivers of pairs, splitting them first
// for a split kernel (allocating: for tests).
func (m *bf16Kernel) runPairs(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
	if m.split {
		sa, sb := make([]uint32, 2*m.mr*k), make([]uint32, 2*m.nr*k)
		splitSlivers(sa, a, 1, m.mr*k)
		splitSlivers(sb, b, 1, m.nr*k)
		a, b = sa, sb
	}
	m.run(k, a, b, c, ldc, alpha, alphaLo, overwrite)
}

// pairRows is the number of pair-rows a packed block of kb values of k
// takes: ⌈kb/2⌉, rounded up to whole tiles for an AMX kernel.
func (m *bf16Kernel) pairRows(kb int) int {
	if m.tiles != nil {
		return amxPairs(kb)
	}
	return (kb + 1) / 2
}

// mc returns the A block height for the kernel: a multiple of 16 as
// well as of mr, so that pairing the rows of a transposed A runs whole
// vectors.
func (m *bf16Kernel) mc() int { return max(1, 192/m.mr) * m.mr }
