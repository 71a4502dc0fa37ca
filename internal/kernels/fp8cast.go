package kernels

import (
	"fmt"
	"math"
	"math/bits"
)

// FP8Cast holds what the float32 ↔ FP8 kernels need of one format: the
// constants of the rounding cast (see EncodeAbs) and the decode table.
// Package fp8 builds one per format with NewFP8Cast; every cast of the
// module goes through it.
type FP8Cast struct {
	// Format selects the vector kernels: 0 E4M3, 1 E5M2.
	Format int
	// MaxCode is the largest finite magnitude code, NaNCode the NaN the
	// cast writes (sign added).
	MaxCode, NaNCode uint32
	minNormBits      uint32  // float32 bits of the smallest normal FP8 value
	magic            float32 // 2^(emin − mbits + 23): its ulp is the subnormal quantum
	magicBits        uint32
	shift            uint32 // 23 − mbits
	expOffset        uint32 // (127 − bias) << mbits
	// Decode maps every code to its exact float32 value.
	Decode [256]float32
}

// NewFP8Cast returns the cast of the format with mbits mantissa bits and
// exponent bias, whose codes decode as decode says.
func NewFP8Cast(format, mbits, bias int, maxCode, nanCode uint8, decode func(uint8) float32) *FP8Cast {
	emin := 1 - bias
	c := &FP8Cast{Format: format, MaxCode: uint32(maxCode), NaNCode: uint32(nanCode)}
	c.minNormBits = math.Float32bits(float32(math.Ldexp(1, emin)))
	c.magic = float32(math.Ldexp(1, emin-mbits+23))
	c.magicBits = math.Float32bits(c.magic)
	c.shift = 23 - uint32(mbits)
	c.expOffset = uint32(127-bias) << mbits
	for b := range c.Decode {
		c.Decode[b] = decode(uint8(b))
	}
	return c
}

// EncodeAbs rounds the non-NaN magnitude with float32 bits abs to the
// nearest FP8 code, ties to even. A result above MaxCode means overflow
// (infinity included).
//
// Below the smallest normal, adding a magic constant whose ulp is the
// subnormal quantum lets the FPU round to nearest even, and the number of
// quanta is the code. Above it, the FP8 code is the float32 bit pattern
// with the exponent rebiased and the mantissa cut to mbits bits; adding
// half an ulp minus one, plus the kept lsb, before the cut rounds to
// nearest even, and a mantissa that carries over bumps the exponent as
// it should.
func (c *FP8Cast) EncodeAbs(abs uint32) uint32 {
	if abs < c.minNormBits {
		return math.Float32bits(math.Float32frombits(abs)+c.magic) - c.magicBits
	}
	r := abs + (1<<(c.shift-1) - 1) + (abs>>c.shift)&1
	return r>>c.shift - c.expOffset
}

// QuantizeFP8 writes the saturating cast of x·scale of every x in src to
// dst (at least as long as src) and returns the float32 bits of max|x|
// over src: a pattern above +inf (0x7f800000) if any x is NaN. The
// vector kernel casts the longest multiple of 16 it can; quantizeFP8Go,
// its twin, the rest, with the same bits.
func QuantizeFP8(c *FP8Cast, dst []uint8, src []float32, scale float32) (amaxBits uint32) {
	dst = dst[:len(src)]
	done, m := quantizeFP8Vector(c.Format, dst, src, scale)
	return max(m, quantizeFP8Go(c, dst[done:], src[done:], scale))
}

// quantizeFP8Go is the cast loop the vector kernels replace: EncodeAbs
// inlined by hand with its constants in locals (so they stay in
// registers), the clamp to MaxCode as a min, NaN last.
func quantizeFP8Go(c *FP8Cast, dst []uint8, src []float32, scale float32) uint32 {
	maxCode, nanCode := c.MaxCode, c.NaNCode
	minNorm, magic, magicBits := c.minNormBits, c.magic, c.magicBits
	shift, off := c.shift, c.expOffset
	half := uint32(1)<<(shift-1) - 1
	var m uint32 // max |x| as bits: NaN patterns sort above +inf
	for i, v := range src {
		if a := math.Float32bits(v) &^ (1 << 31); a > m {
			m = a
		}
		y := math.Float32bits(v * scale)
		ya := y &^ (1 << 31)
		var code uint32
		if ya < minNorm {
			code = math.Float32bits(math.Float32frombits(ya)+magic) - magicBits
		} else {
			code = (ya+half+(ya>>shift)&1)>>shift - off
		}
		code = min(code, maxCode)
		if ya > 0x7F800000 {
			code = nanCode
		}
		dst[i] = uint8(y>>24)&0x80 | uint8(code)
	}
	return m
}

// DecodeFP8 writes Decode[q]·scale for every code q in src to dst (at
// least as long as src). The vector kernel decodes the longest multiple
// of 16 it can, the table loop (its twin) the rest, with the same bits.
func DecodeFP8(c *FP8Cast, dst []float32, src []uint8, scale float32) {
	dst = dst[:len(src)]
	done := decodeFP8Vector(c.Format, dst, src, scale)
	decodeFP8Go(c, dst[done:], src[done:], scale)
}

// DecodeFP8Blocks32 is DecodeFP8 with a scale per block of 32 codes:
// dst[j] = Decode[src[j]]·scales[j/32] (the last block holding what is
// left). The vector kernel decodes the whole blocks, decodeFP8Go (its
// twin, block by block) the rest, with the same bits.
func DecodeFP8Blocks32(c *FP8Cast, dst []float32, src []uint8, scales []float32) {
	dst, scales = dst[:len(src)], scales[:(len(src)+31)/32]
	done := decodeFP8Blocks32Vector(c.Format, dst, src, scales)
	for b := done / 32; b < len(scales); b++ {
		lo, hi := 32*b, min(len(src), 32*b+32)
		DecodeFP8(c, dst[lo:hi], src[lo:hi], scales[b])
	}
}

// decodeFP8Go is the loop the vector decode replaces.
func decodeFP8Go(c *FP8Cast, dst []float32, src []uint8, scale float32) {
	for i, q := range src {
		dst[i] = c.Decode[q] * scale
	}
}

// VectorDecode reports whether DecodeFP8 runs a vector kernel on this
// CPU (so that decoding a whole operand ahead of a GEMM pays).
func VectorDecode() bool { return hasAVX512 }

// AmaxBits returns the float32 bits of max|x| over src: a pattern above
// +inf (0x7f800000) if any x is NaN. The vector kernel reads the longest
// multiple of 64 it can, amaxBitsGo (its twin) the rest.
func AmaxBits(src []float32) uint32 {
	done, m := amaxBitsVector(src)
	return max(m, amaxBitsGo(src[done:]))
}

// amaxBitsGo is the loop the vector kernel replaces. The largest bit
// pattern of |x| is the largest |x| (the integer order of non-negative
// floats is their order) and lies above +inf when any x is NaN; four
// running maxima (conditional moves) keep the loop free of branches and
// of a single dependency chain.
func amaxBitsGo(src []float32) uint32 {
	const abs = 1<<31 - 1
	var a0, a1, a2, a3 uint32
	for len(src) >= 4 {
		a0 = max(a0, math.Float32bits(src[0])&abs)
		a1 = max(a1, math.Float32bits(src[1])&abs)
		a2 = max(a2, math.Float32bits(src[2])&abs)
		a3 = max(a3, math.Float32bits(src[3])&abs)
		src = src[4:]
	}
	for _, v := range src {
		a0 = max(a0, math.Float32bits(v)&abs)
	}
	return max(a0, a1, a2, a3)
}

// QuantizeFP8Lanes is QuantizeFP8 with one scale per value: dst[i] is the
// saturating cast of src[i]·scales[i] (scales and dst at least as long as
// src). The vector kernel casts the longest multiple of 16 it can;
// quantizeFP8LanesGo, its twin, the rest, with the same bits.
func QuantizeFP8Lanes(c *FP8Cast, dst []uint8, src, scales []float32) (amaxBits uint32) {
	dst, scales = dst[:len(src)], scales[:len(src)]
	done, m := quantizeFP8LanesVector(c.Format, dst, src, scales)
	return max(m, quantizeFP8LanesGo(c, dst[done:], src[done:], scales[done:]))
}

// quantizeFP8LanesGo is the loop the per-lane vector kernels replace:
// quantizeFP8Go of each value with its own scale.
func quantizeFP8LanesGo(c *FP8Cast, dst []uint8, src, scales []float32) uint32 {
	var m uint32
	for i, v := range src {
		m = max(m, quantizeFP8Go(c, dst[i:i+1], src[i:i+1], scales[i]))
		_ = v
	}
	return m
}

// QuantizeFP8Blocks writes the saturating cast of src[j]·scales[j/128]
// to dst[j] for every value of src (Float8BlockScaling's row-wise cast:
// a scale per block of 128, the last block holding what is left). It
// records no amax. The vector kernel does the whole blocks,
// quantizeFP8BlocksGo (its twin) the rest, with the same bits.
func QuantizeFP8Blocks(c *FP8Cast, dst []uint8, src, scales []float32) {
	quantizeFP8BlocksOf(c, 128, dst, src, scales)
}

// QuantizeFP8Blocks32 is QuantizeFP8Blocks with a scale per block of 32
// (MXFP8's blocks).
func QuantizeFP8Blocks32(c *FP8Cast, dst []uint8, src, scales []float32) {
	quantizeFP8BlocksOf(c, 32, dst, src, scales)
}

func quantizeFP8BlocksOf(c *FP8Cast, size int, dst []uint8, src, scales []float32) {
	dst, scales = dst[:len(src)], scales[:(len(src)+size-1)/size]
	done := quantizeFP8BlocksVector(c.Format, size, dst, src, scales)
	// The blocks the kernel left (a ragged last one; all of them without
	// it), each through the one-scale cast.
	for b := done / size; b < len(scales); b++ {
		lo, hi := size*b, min(len(src), size*b+size)
		QuantizeFP8(c, dst[lo:hi], src[lo:hi], scales[b])
	}
}

// quantizeFP8BlocksGo is the loop the block-scaled vector casts
// (quantizeBlocks…, blocks of size 128 or 32) replace: quantizeFP8Go
// block by block.
func quantizeFP8BlocksGo(c *FP8Cast, size int, dst []uint8, src, scales []float32) {
	for b, s := range scales {
		lo, hi := size*b, min(len(src), size*b+size)
		quantizeFP8Go(c, dst[lo:hi], src[lo:hi], s)
	}
}

// QuantizeFP8Cols casts a band of rows × n values of src (rows ld apart)
// with a scale per column, writing codes ldd apart: dst[r·ldd+j] =
// cast(src[r·ld+j]·scales[j]) (Float8BlockScaling's column-wise cast, a
// block being 128 values down a column). It records no amax. The vector
// kernel does the whole strips of 16 columns, quantizeFP8ColsGo (its
// twin) the rest, with the same bits.
func QuantizeFP8Cols(c *FP8Cast, dst []uint8, ldd int, src []float32, ld int, scales []float32, rows, n int) {
	done := quantizeFP8ColsVector(c.Format, dst, ldd, src, ld, scales, rows, n)
	if done < n {
		quantizeFP8ColsGo(c, dst[done:], ldd, src[done:], ld, scales[done:], rows, n-done)
	}
}

// quantizeFP8ColsGo is the loop quantizeColsE4M3AVX512 and
// quantizeColsE5M2AVX512 replace: quantizeFP8LanesGo row by row.
func quantizeFP8ColsGo(c *FP8Cast, dst []uint8, ldd int, src []float32, ld int, scales []float32, rows, n int) {
	for r := 0; r < rows; r++ {
		quantizeFP8LanesGo(c, dst[r*ldd:r*ldd+n], src[r*ld:r*ld+n], scales[:n])
	}
}

// AmaxColsBand writes to acc[j] the float32 bits of max|x| down column j
// of a band of rows × n values of src (rows ld apart), NaN left out
// (fmaxf's rule), and returns the largest |x| bits seen (above +inf when
// the band holds a NaN). The vector kernel does the whole strips of 16
// columns, amaxColsBandGo (its twin) the rest.
func AmaxColsBand(acc []uint32, src []float32, ld, rows, n int) (seen uint32) {
	done, seen := amaxColsBandVector(acc, src, ld, rows, n)
	if done < n {
		seen = max(seen, amaxColsBandGo(acc[done:n], src[done:], ld, rows))
	}
	return seen
}

// amaxColsBandGo is the loop amaxColsBandAVX512 replaces: amaxColsGo
// row by row from zero amaxes.
func amaxColsBandGo(acc []uint32, src []float32, ld, rows int) (seen uint32) {
	clear(acc)
	for r := 0; r < rows; r++ {
		seen = max(seen, amaxColsGo(acc, src[r*ld:r*ld+len(acc)]))
	}
	return seen
}

// AmaxCols folds one row into column amaxes: acc[j] = max(acc[j],
// |src[j]|) as float32 bits, a NaN left out (fmaxf's rule), for j <
// len(src) (acc at least as long). It returns the largest |x| bits of
// the row, above +inf (0x7f800000) when a value is NaN. The vector kernel
// does the longest multiple of 16 it can, amaxColsGo (its twin) the rest.
func AmaxCols(acc []uint32, src []float32) (seen uint32) {
	acc = acc[:len(src)]
	done, s := amaxColsVector(acc, src)
	return max(s, amaxColsGo(acc[done:], src[done:]))
}

// amaxColsGo is the loop amaxColsAVX512 replaces.
func amaxColsGo(acc []uint32, src []float32) uint32 {
	var seen uint32
	for j, v := range src {
		a := math.Float32bits(v) &^ (1 << 31)
		seen = max(seen, a)
		if a <= 0x7F800000 {
			acc[j] = max(acc[j], a)
		}
	}
	return seen
}

// MulRow multiplies each row[i] by f[i] (f at least as long), rounding
// each product once as float32 multiplication does (the vector kernel
// forms it exactly in float64 first). It is how a block-scaled operand
// stored with k along its rows gets each column's factor.
func MulRow(row, f []float32) {
	f = f[:len(row)]
	done := scaleRowVector(row, f, 1)
	for i := done; i < len(row); i++ {
		row[i] *= f[i]
	}
}

// RHT16 applies Transformer Engine's 16-point random Hadamard transform
// in place to each group of 16 consecutive values of x (len(x) a
// multiple of 16; a shorter tail is left alone): the values rounded to
// bf16 (nearest even, NaN kept), times the sign vector s (bit k of
// 0xD7E8 set where s_k = −1), y_j = Σ_k (−1)^popcount(j&k)·v_k
// accumulated in float32 in k order, times 0.25, rounded to bf16. The
// vector kernel transforms what it can, rht16Go (its twin) the rest.
func RHT16(x []float32) {
	x = x[:len(x)/16*16]
	done := rht16Vector(x)
	rht16Go(x[done:])
}

// bf16RoundF32 rounds x to bf16 (nearest even, NaN kept) as a float32.
func bf16RoundF32(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return x
	}
	return math.Float32frombits((b + 0x7FFF + (b>>16)&1) &^ 0xFFFF)
}

// rht16Go is the loop rht16AVX512 replaces.
func rht16Go(x []float32) {
	var v [16]float32
	for g := 0; g+16 <= len(x); g += 16 {
		for k := range v {
			v[k] = bf16RoundF32(x[g+k])
			if 0xD7E8>>k&1 != 0 {
				v[k] = -v[k]
			}
		}
		for j := 0; j < 16; j++ {
			var s float32
			for k := 0; k < 16; k++ {
				if bits.OnesCount(uint(j&k))&1 != 0 {
					s -= v[k]
				} else {
					s += v[k]
				}
			}
			x[g+j] = bf16RoundF32(0.25 * s)
		}
	}
}

// StochasticDraw is NVFP4 stochastic rounding's 32-bit draw for stored
// byte n under key: murmur3's 32-bit finaliser of key ^ n·0x9E3779B1.
// Its low 16 bits round the byte's even element, its high 16 bits the
// odd one.
func StochasticDraw(key, n uint32) uint32 {
	h := n*0x9E3779B1 ^ key
	h ^= h >> 16
	h *= 0x85EBCA6B
	h ^= h >> 13
	h *= 0xC2B2AE35
	h ^= h >> 16
	return h
}

// StochasticUniform is the uniform number in [0, 1), a multiple of
// 2^−16, that stochastic rounding draws for the even (odd false) or odd
// element of stored byte n under key.
func StochasticUniform(key, n uint32, odd bool) float32 {
	h := StochasticDraw(key, n)
	if odd {
		h >>= 16
	}
	return float32(h&0xFFFF) * 0x1p-16
}

// e2m1Values and e2m1InvGaps are the E2M1 magnitudes and the inverses of
// the gaps above them (0 above 6).
var (
	e2m1Values  = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
	e2m1InvGaps = [8]float32{2, 2, 2, 2, 1, 1, 0.5, 0}
)

// Amax16 writes to out[b] the float32 bits of max|x| over block b of 16
// consecutive values of src (⌈len(src)/16⌉ blocks, the last one holding
// what is left), a NaN counting as 0 (fmaxf's rule): NVFP4's block
// amaxes. The vector kernel does the whole blocks, amax16Go (its twin)
// the rest.
func Amax16(out []uint32, src []float32) {
	out = out[:(len(src)+15)/16]
	done := amax16Vector(out, src)
	amax16Go(out[done:], src[16*done:])
}

// NVFP4Cols is the first pass of NVFP4's column-wise cast of columns
// c0 ≤ j < c1 of the rows × cols matrix src (row-major), without the
// transform: it writes them transposed to rows c0…c1−1 of dst (cols ×
// rows, as Transpose does), and the amax bits of each block of 16 of
// those rows to bam (⌈rows/16⌉ blocks a row, Amax16's rule). The vector
// kernel does strips of 16 columns when rows is a multiple of 16,
// reading each value once; Transpose and Amax16 (its twin) do the rest,
// with the same bits.
func NVFP4Cols(dst []float32, bam []uint32, src []float32, rows, cols, c0, c1 int) {
	if rows <= 0 || c0 >= c1 {
		return
	}
	nb := (rows + 15) / 16
	_, _, _ = src[rows*cols-1], dst[c1*rows-1], bam[c1*nb-1]
	j := c0 + nvfp4ColsStrips(dst, nil, bam, src, rows, cols, 0, rows, c0, c1)
	if j >= c1 {
		return
	}
	Transpose(dst, src, rows, cols, j, c1)
	for r := j; r < c1; r++ {
		Amax16(bam[r*nb:(r+1)*nb], dst[r*rows:(r+1)*rows])
	}
}

// NVFP4ColsRHT is NVFP4Cols with Transformer Engine's random Hadamard
// transform of each group of 16 along the stored rows (RHT16; rows must
// be a multiple of 16). The transformed values are bf16 values: dst
// takes their bf16 bits (a NaN made quiet, so that it stays one), half
// the bytes of float32 for the cast to read back. The vector kernel does
// the strips of 16 columns, nvfp4ColsRHTGo (its twin) the rest, with the
// same bits.
func NVFP4ColsRHT(dst []uint16, bam []uint32, src []float32, rows, cols, c0, c1 int) {
	if rows <= 0 || c0 >= c1 {
		return
	}
	if rows%16 != 0 {
		panic(fmt.Sprintf("kernels: NVFP4ColsRHT of %d rows, not a multiple of 16", rows))
	}
	nb := rows / 16
	_, _, _ = src[rows*cols-1], dst[c1*rows-1], bam[c1*nb-1]
	j := c0 + nvfp4ColsStrips(nil, dst, bam, src, rows, cols, 0, rows, c0, c1)
	// The columns the strip kernels left (all of them without AVX-512):
	// the twin's loop with the vector transform.
	nvfp4ColsRHTWith(true, dst, bam, src, rows, cols, 0, rows, j, c1)
}

// nvfp4ColsRHTGo is the loop nvfp4ColsRHTAVX512 replaces, for source
// rows [r0, r1) of columns [c0, c1): each group of 16 of a column
// transformed (rht16Go), its amax (amax16Go), its values' bf16 bits.
func nvfp4ColsRHTGo(dst []uint16, bam []uint32, src []float32, rows, cols, r0, r1, c0, c1 int) {
	nvfp4ColsRHTWith(false, dst, bam, src, rows, cols, r0, r1, c0, c1)
}

// nvfp4ColsRHTWith is nvfp4ColsRHTGo's loop, with the twins' transform
// and block amaxes, or with vec RHT16 and Amax16 (which equal them bit
// for bit; static calls, so that the buffer stays on the stack): strips of up to 16 columns by up to 16 groups of rows are moved
// into a buffer transposed (transposeF32), so that one call transforms
// a column's groups.
func nvfp4ColsRHTWith(vec bool, dst []uint16, bam []uint32, src []float32, rows, cols, r0, r1, c0, c1 int) {
	const span = 256 // rows of a chunk: 16 groups
	nb := rows / 16
	var v [16 * span]float32
	for j0 := c0; j0 < c1; j0 += 16 {
		nc := min(16, c1-j0)
		for g0 := r0 / 16; g0 < r1/16; g0 += span / 16 {
			ng := min(span/16, r1/16-g0)
			transposeF32(v[:], span, src[16*g0*cols+j0:], cols, 16*ng, nc)
			for q := 0; q < nc; q++ {
				j := j0 + q
				w := v[q*span : q*span+16*ng]
				d := dst[j*rows+16*g0 : j*rows+16*g0+16*ng]
				if vec {
					RHT16(w)
					Amax16(bam[j*nb+g0:j*nb+g0+ng], w)
					BF16Bits(d, w)
					continue
				}
				rht16Go(w)
				amax16Go(bam[j*nb+g0:j*nb+g0+ng], w)
				for k, x := range w {
					d[k] = bf16Bits(x)
				}
			}
		}
	}
}

// BF16Bits writes bf16Bits of every value of src to dst (at least as
// long): the high halves of float32 values that are bf16 values, NaNs
// made quiet. The vector kernel does the whole blocks of 16, the loop
// (its twin) the rest.
func BF16Bits(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	done := bf16BitsVector(dst, src)
	for i, x := range src[done:] {
		dst[done+i] = bf16Bits(x)
	}
}

// bf16Bits returns the high half of a bf16 value's float32 bits, a NaN
// made quiet first (so that the half is a NaN too).
func bf16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		b |= 0x00400000
	}
	return uint16(b >> 16)
}

// NVFP4ColsBands reports whether NVFP4ColsBand and NVFP4ColsBandRHT have
// a vector kernel for a rows × cols source: AVX-512, and both sides
// multiples of 16.
func NVFP4ColsBands(rows, cols int) bool { return nvfp4ColsBands(rows, cols) }

// NVFP4ColsBand is NVFP4Cols for source rows r0 ≤ i < r1 (multiples of
// 16) of every column, when NVFP4ColsBands allows it: stored columns r0
// … r1−1 of every stored row, and their blocks' amaxes, with the same
// bits.
func NVFP4ColsBand(dst []float32, bam []uint32, src []float32, rows, cols, r0, r1 int) {
	nvfp4ColsBand(dst, nil, bam, src, rows, cols, r0, r1)
}

// NVFP4ColsBandRHT is NVFP4ColsRHT for source rows r0 ≤ i < r1, as
// NVFP4ColsBand is NVFP4Cols's.
func NVFP4ColsBandRHT(dst []uint16, bam []uint32, src []float32, rows, cols, r0, r1 int) {
	nvfp4ColsBand(nil, dst, bam, src, rows, cols, r0, r1)
}

func nvfp4ColsBand(dst32 []float32, dst16 []uint16, bam []uint32, src []float32, rows, cols, r0, r1 int) {
	if r0 >= r1 {
		return
	}
	if !nvfp4ColsBands(rows, cols) || r0%16 != 0 || r1%16 != 0 || r1 > rows {
		panic(fmt.Sprintf("kernels: NVFP4ColsBand rows %d…%d of [%d %d]", r0, r1, rows, cols))
	}
	nb := rows / 16
	_, _ = src[rows*cols-1], bam[cols*nb-1]
	if dst16 != nil {
		_ = dst16[cols*rows-1]
	} else {
		_ = dst32[cols*rows-1]
	}
	nvfp4ColsStrips(dst32, dst16, bam, src, rows, cols, r0, r1, 0, cols)
}

// amax16Go is the loop amax16AVX512 replaces.
func amax16Go(out []uint32, src []float32) {
	for b := range out {
		var m uint32
		for _, v := range src[16*b : min(len(src), 16*b+16)] {
			if a := math.Float32bits(v) &^ (1 << 31); a <= 0x7F800000 {
				m = max(m, a)
			}
		}
		out[b] = m
	}
}

// NVFP4BlockScales computes NVFP4's scales of blocks whose amaxes (float32
// bits, sign clear, no NaN) are amax, under the tensor's factor m = S_enc/6
// and decode scale sdec: sf[b] = E4M3(min(amax[b]·m, FLT_MAX)), saturating
// and rounding to nearest even, the stored block scale; es[b] =
// min(1/(decode(sf[b])·sdec), FLT_MAX), the scale its elements are
// multiplied by before their cast (FLT_MAX for a zero sf). The vector
// kernel does the multiples of 16 blocks, nvfp4ScalesGo (its twin) the
// rest, with the same bits.
func NVFP4BlockScales(sf []uint8, es []float32, amax []uint32, m, sdec float32) {
	sf, es = sf[:len(amax)], es[:len(amax)]
	done := nvfp4ScalesVector(sf, es, amax, m, sdec)
	nvfp4ScalesGo(sf[done:], es[done:], amax[done:], m, sdec)
}

// MXScales sets, for MXFP8 blocks whose amaxes have the float32 bits
// amax[j] (signs cleared; NaN patterns above +inf's), sc[j] to the
// block's E8M0 scale code and inv[j] to the factor its values are cast
// with, and returns the largest amax bits. The code is the amax's
// exponent field less emax (the element format's largest value being
// 1.75·2^emax), plus one when ceil and its mantissa is above 1.75's,
// clamped to [0, 254]: ⌈log2(amax/max)⌉ + 127 (ceil) or
// ⌊log2(amax)⌋ − emax + 127, and 0 for a zero or subnormal amax; 255
// (NaN) for an infinite or NaN one. The factor is 2^(127−code), NaN
// for code 255. The vector kernel does the multiples of 8 blocks (for
// emax ≥ 2, where no code reaches 254), mxScalesGo (its twin) the rest,
// with the same bits.
func MXScales(sc []uint8, inv []float32, amax []uint32, emax int, ceil bool) uint32 {
	sc, inv = sc[:len(amax)], inv[:len(amax)]
	thr := uint32(1<<23 - 1) // no mantissa is above it
	if ceil {
		thr = 0x600000
	}
	done, m := mxScalesVector(sc, inv, amax, uint32(emax), thr)
	return max(m, mxScalesGo(sc[done:], inv[done:], amax[done:], uint32(emax), thr))
}

// mxScalesGo is the loop mxScalesAVX2 replaces (see MXScales; ceilThr
// the mantissa bits above which the code rounds up).
func mxScalesGo(sc []uint8, inv []float32, amax []uint32, emax, ceilThr uint32) uint32 {
	var m uint32
	for j, b := range amax {
		m = max(m, b)
		s := int32(b>>23) - int32(emax)
		if b&(1<<23-1) > ceilThr {
			s++
		}
		s = min(max(s, 0), 254)
		f := math.Float32frombits(uint32(254-s) << 23)
		if s == 254 {
			f = 0x1p-127 // subnormal
		}
		if b > 0x7F7FFFFF {
			s, f = 255, float32(math.NaN())
		}
		sc[j], inv[j] = uint8(s), f
	}
	return m
}

// E8M0Range returns the smallest and the largest of the E8M0 codes sc
// other than 255 (NaN), and ok = false when there is none.
func E8M0Range(sc []uint8) (lo, hi uint8, ok bool) {
	done, lo, hi1 := e8m0RangeVector(sc)
	l, h := e8m0RangeGo(sc[done:])
	lo, hi1 = min(lo, l), max(hi1, h)
	return lo, hi1 - 1, hi1 != 0
}

// e8m0RangeGo is the loop e8m0RangeAVX2 replaces: the smallest code
// (255 for none) and the largest code other than 255 plus one (0 for
// none).
func e8m0RangeGo(sc []uint8) (lo, hi1 uint8) {
	lo = 255
	for _, s := range sc {
		lo, hi1 = min(lo, s), max(hi1, s+1) // 255 wraps to 0
	}
	return lo, hi1
}

// E8M0Factors writes f[j] = 2^(sc[j] − 127 − shift) for E8M0 codes
// sc[j] (the scale 2^(s−127) over 2^shift): subnormal or zero below
// float32's normals, +inf above them, NaN for code 255. The vector
// kernel does the multiples of 8 codes, e8m0FactorsGo (its twin) the
// rest, with the same bits.
func E8M0Factors(f []float32, sc []uint8, shift int) {
	f = f[:len(sc)]
	shift = min(max(shift, -512), 512) // the same factors, no overflow
	done := e8m0FactorsVector(f, sc, shift)
	e8m0FactorsGo(f[done:], sc[done:], shift)
}

// e8m0FactorsGo is the loop e8m0FactorsAVX2 replaces.
func e8m0FactorsGo(f []float32, sc []uint8, shift int) {
	for j, s := range sc {
		var b uint32
		switch d := int(s) - shift; {
		case s == 255:
			b = 0x7FC00000
		case d > 254:
			b = 0x7F800000
		case d > 0:
			b = uint32(d) << 23
		case d+22 >= 0:
			b = 1 << (d + 22)
		}
		f[j] = math.Float32frombits(b)
	}
}

// nvfp4ScalesGo is the loop nvfp4ScalesAVX512 replaces.
func nvfp4ScalesGo(sf []uint8, es []float32, amax []uint32, m, sdec float32) {
	for b, a := range amax {
		c := e4m3RoundAbs(min(math.Float32frombits(a)*m, math.MaxFloat32))
		sf[b] = uint8(c)
		es[b] = min(1/(e4m3Value(c)*sdec), math.MaxFloat32)
	}
}

// e4m3RoundAbs is the E4M3 code of a non-negative, non-NaN x: nearest
// even, saturating at 448 (quantizeFP8Go's arithmetic with E4M3's
// constants).
func e4m3RoundAbs(x float32) uint32 {
	const shift, off, half = 20, 120 << 3, 1<<19 - 1
	const minNorm, magic = 0x3C800000, float32(1 << 14)
	ya := math.Float32bits(x)
	var code uint32
	if ya < minNorm {
		code = math.Float32bits(x+magic) - math.Float32bits(magic)
	} else {
		code = (ya+half+(ya>>shift)&1)>>shift - off
	}
	return min(code, 0x7E)
}

// e4m3Value is the value of a non-negative E4M3 code below 0x7F.
func e4m3Value(c uint32) float32 {
	if c < 8 {
		return float32(c) * 0x1p-9
	}
	return math.Float32frombits(c<<20 + 120<<23)
}

// QuantizeE2M1Blocks writes the E2M1 code (NVFP4's element: 0, 0.5, 1,
// 1.5, 2, 3, 4, 6; the sign in bit 3) of src[j]·es[j/16] for every value
// of src, two codes a byte, element j in the low nibble of dst[j/2] when
// j is even (an odd length ends with a zero nibble): round to nearest,
// ties to the even code, |v| beyond 6 (infinities too) to ±6, a NaN to
// +6, the sign of zero kept. The vector kernel does the whole blocks of
// 16, e2m1BlocksGo (its twin) the rest, with the same codes.
func QuantizeE2M1Blocks(dst []uint8, src, es []float32) {
	dst, es = dst[:(len(src)+1)/2], es[:(len(src)+15)/16]
	done := e2m1BlocksVector(dst, src, es)
	e2m1BlocksGo(dst[done/2:], src[done:], es[done/16:])
}

// e2m1BlocksGo is the loop e2m1BlocksAVX512 replaces: quantizeFP8Go's
// rounding with E2M1's constants (22 = 23 − 1 mantissa bit; the smallest
// normal 1.0; subnormals on the magic constant 2^22, whose ulp is 0.5;
// exponent rebias 126 << 1), from an even element on.
func e2m1BlocksGo(dst []uint8, src, es []float32) {
	const shift, off, half = 22, 126 << 1, 1<<21 - 1
	const minNorm, magic = 0x3F800000, float32(1 << 22)
	magicBits := math.Float32bits(magic)
	for j, v := range src {
		y := math.Float32bits(v * es[j/16])
		ya := y &^ (1 << 31)
		var code uint32
		if ya < minNorm {
			code = math.Float32bits(math.Float32frombits(ya)+magic) - magicBits
		} else {
			code = (ya+half+(ya>>shift)&1)>>shift - off
		}
		code = min(code, 7) | y>>28&8
		if ya > 0x7F800000 {
			code = 7
		}
		packNibble(dst, j, uint8(code))
	}
}

// packNibble stores code as element j of a packed E2M1 row (the even
// element low; an even element clears the high nibble).
func packNibble(dst []uint8, j int, code uint8) {
	if j&1 == 0 {
		dst[j/2] = code
	} else {
		dst[j/2] |= code << 4
	}
}

// E2M1StochasticBlocks rounds each src[j]·es[j/16] stochastically to an
// E2M1 code (the sign in bit 3), packed as QuantizeE2M1Blocks packs: up to
// the next magnitude when StochasticUniform(key, base+j/2, j odd) — base
// is dst[0]'s byte counter — is below the fraction of the gap the value
// lies above the code at or below it, down otherwise (an exact value
// stays); |v| ≥ 6 (infinities too) gives ±6, a NaN +6. The vector kernel
// does the whole blocks of 16, e2m1StochasticGo (its twin) the rest, with
// the same codes.
func E2M1StochasticBlocks(dst []uint8, src, es []float32, key, base uint32) {
	dst, es = dst[:(len(src)+1)/2], es[:(len(src)+15)/16]
	done := e2m1StochasticVector(dst, src, es, key, base)
	e2m1StochasticGo(dst[done/2:], src[done:], es[done/16:], key, base+uint32(done/2))
}

// QuantizeE2M1BlocksBF16 is QuantizeE2M1Blocks of bf16 values (bf16
// bits, each read as the float32 of its high half).
func QuantizeE2M1BlocksBF16(dst []uint8, src []uint16, es []float32) {
	dst, es = dst[:(len(src)+1)/2], es[:(len(src)+15)/16]
	done := e2m1BlocksBF16Vector(dst, src, es)
	// The rest widened to float32 a chunk of blocks at a time, then
	// the float32 cast (its vector kernel where there is one).
	var v [256]float32
	for lo := done; lo < len(src); lo += len(v) {
		w := WidenBF16(v[:], src[lo:min(len(src), lo+len(v))])
		QuantizeE2M1Blocks(dst[lo/2:], w, es[lo/16:])
	}
}

// E2M1StochasticBlocksBF16 is E2M1StochasticBlocks of bf16 values.
func E2M1StochasticBlocksBF16(dst []uint8, src []uint16, es []float32, key, base uint32) {
	dst, es = dst[:(len(src)+1)/2], es[:(len(src)+15)/16]
	done := e2m1StochasticBF16Vector(dst, src, es, key, base)
	var v [256]float32
	for lo := done; lo < len(src); lo += len(v) {
		w := WidenBF16(v[:], src[lo:min(len(src), lo+len(v))])
		E2M1StochasticBlocks(dst[lo/2:], w, es[lo/16:], key, base+uint32(lo/2))
	}
}

// WidenBF16 writes the float32 values of the bf16 bits h to v[:len(h)]
// and returns that slice.
func WidenBF16(v []float32, h []uint16) []float32 {
	v = v[:len(h)]
	for i := widenBF16Vector(v, h); i < len(h); i++ {
		v[i] = BF16ToFloat32(h[i])
	}
	return v
}

// e2m1StochasticGo is the loop e2m1StochasticAVX512 replaces, from an
// even element on (base the byte counter of dst[0]).
func e2m1StochasticGo(dst []uint8, src, es []float32, key, base uint32) {
	for j, x := range src {
		v := x * es[j/16]
		b := math.Float32bits(v)
		a := b &^ (1 << 31)
		fa := math.Float32frombits(a)
		var c uint32
		if a < 0x3F800000 {
			c = uint32(int32(fa + fa))
		} else {
			c = a>>22 - 252
		}
		if a >= 0x40C00000 {
			c = 7
		}
		if StochasticUniform(key, base+uint32(j/2), j&1 == 1) < (fa-e2m1Values[c])*e2m1InvGaps[c] {
			c++
		}
		c |= b >> 28 & 8
		if a > 0x7F800000 {
			c = 7
		}
		packNibble(dst, j, uint8(c))
	}
}

// Transpose writes columns c0 ≤ j < c1 of the rows × cols matrix src
// (row-major) to rows c0…c1−1 of its transpose dst (cols × rows):
// dst[j·rows+i] = src[i·cols+j]. Bands of 16 rows go through the vector
// kernel 16 columns at a time; the rest is the loop.
func Transpose(dst, src []float32, rows, cols, c0, c1 int) {
	_, _ = src[rows*cols-1], dst[c1*rows-1]
	// Strips of transposeCols columns, so that the rows of dst being
	// written stay few (a band of 16 source rows across every column
	// would write a line in every row of dst, page after page).
	for j0 := c0; j0 < c1; j0 += transposeCols {
		j1 := min(c1, j0+transposeCols)
		r0 := 0
		for ; r0+16 <= rows; r0 += 16 {
			done := transposeVector(asU32(dst[j0*rows+r0:]), rows, asU32(src[r0*cols+j0:]), cols, 16, j1-j0)
			transposeGo(dst, src, rows, cols, r0, r0+16, j0+done, j1)
		}
		transposeGo(dst, src, rows, cols, r0, rows, j0, j1)
	}
}

// transposeCols is how many columns Transpose moves at a time.
const transposeCols = 16

// transposeGo is Transpose's loop over rows r0…r1−1 and columns c0…c1−1.
func transposeGo(dst, src []float32, rows, cols, r0, r1, c0, c1 int) {
	for j := c0; j < c1; j++ {
		out := dst[j*rows+r0 : j*rows+r1]
		for i := range out {
			out[i] = src[(r0+i)*cols+j]
		}
	}
}

// DecodeE2M1BF16 writes, as bf16, the values of n packed E2M1 codes (src,
// two per byte, the even element in the low nibble) times one factor per
// 16 elements: dst[j] = the top half of the float32 bits of
// value(code j)·factors[j/16], for j < n (dst at least n long, src
// ⌈n/2⌉ bytes) — exact when each product is a bf16 value, as an E2M1
// value times an E4M3 block scale is (NVFP4's GEMM operands). The
// vector kernel decodes the whole blocks of 16, decodeE2M1BF16Go (its
// twin) the rest, with the same bits.
func DecodeE2M1BF16(dst []uint16, src []uint8, factors []float32, n int) {
	done := decodeE2M1BF16Vector(dst[:n], src[:(n+1)/2], factors[:(n+15)/16])
	decodeE2M1BF16Go(dst[done:n], src[done/2:(n+1)/2], factors[done/16:(n+15)/16])
}

// decodeE2M1BF16Go is the loop e2m1DecodeBF16AVX512 replaces, from an
// even element on.
func decodeE2M1BF16Go(dst []uint16, src []uint8, factors []float32) {
	for j := range dst {
		c := src[j/2] >> (4 * (j & 1)) & 0xF
		v := e2m1Values[c&7]
		if c&8 != 0 {
			v = -v
		}
		dst[j] = uint16(math.Float32bits(v*factors[j/16]) >> 16)
	}
}

// Amax128 writes to out[b] the float32 bits of max|x| over each block
// of 128 values of src (len(src)/128 blocks; a pattern above +inf when
// the block holds a NaN). The vector kernel does the blocks,
// amaxBlocksGo (its twin) is the loop.
func Amax128(out []uint32, src []float32) { amaxBlocks(out, src, 128) }

// Amax32 is Amax128 for blocks of 32 (MXFP8's).
func Amax32(out []uint32, src []float32) { amaxBlocks(out, src, 32) }

func amaxBlocks(out []uint32, src []float32, size int) {
	blocks := len(src) / size
	out = out[:blocks]
	done := amaxBlocksVector(out, src[:blocks*size], size)
	amaxBlocksGo(out[done:], src[done*size:blocks*size], size)
}

// amaxBlocksGo is the loop the block amax kernels replace.
func amaxBlocksGo(out []uint32, src []float32, size int) {
	for b := range out {
		out[b] = amaxBitsGo(src[b*size : (b+1)*size])
	}
}

// BlockScale returns the scale and scale_inv of a Float8BlockScaling
// block whose amax (NaN elements left out) is amax, for a format whose
// largest finite value is fmax, in float32 as Transformer Engine
// computes them: amax floored at eps; scale 1 for an amax of 0, ±inf or
// NaN; otherwise fmax/amax, FLT_MAX if that overflows; the scale's bits
// masked with mask (0xFF800000 rounds it down to a power of two,
// 0xFFFFFFFF keeps it); scale_inv = 1/scale.
func BlockScale(amax, fmax, eps float32, mask uint32) (scale, scaleInv float32) {
	if amax < eps {
		amax = eps
	}
	if amax == 0 || math.IsInf(float64(amax), 0) || amax != amax {
		scale = 1
	} else {
		scale = fmax / amax
		if math.IsInf(float64(scale), 0) {
			scale = math.MaxFloat32
		}
	}
	scale = math.Float32frombits(math.Float32bits(scale) & mask)
	return scale, 1 / scale
}

// BlockTiles casts tiles with Float8BlockScaling: tile t is rows × width
// values of src from offset t·ts (rows ld apart; codes in dst from t·tds,
// rows ldd apart), cast with the scale BlockScale gives its amax, its
// scale_inv stored to inv[t]. Tiles side by side along a band have ts =
// tds = width; the ragged last blocks of consecutive rows are tiles of
// one row with ts = ld, tds = ldd. A 1×128 row block is a tile of one
// row, a 128×128 tile one of 128 rows. A tile holding a NaN (whose amax
// leaves the NaN out) is for the caller's slower path. Tiles go in
// groups (blockGroup), and it stops before the first group holding a
// NaN; it returns the number of tiles cast and the largest amax bits
// among them. The vector kernel runs when width is a multiple of 16,
// blockTilesGo (its twin) otherwise, with the same bits.
func BlockTiles(c *FP8Cast, dst []uint8, ldd int, src []float32, ld int, inv []float32, tiles, rows, width, ts, tds int, eps float32, mask uint32) (done int, amax uint32) {
	if tiles <= 0 || rows <= 0 || width <= 0 {
		return 0, 0
	}
	_, _, _ = dst[(tiles-1)*tds+(rows-1)*ldd+width-1], src[(tiles-1)*ts+(rows-1)*ld+width-1], inv[tiles-1]
	if done, amax, ok := blockTilesVector(c.Format, dst, ldd, src, ld, inv, tiles, rows, width, ts, tds, eps, mask); ok {
		return done, amax
	}
	// The twin's loop with the row kernels (AmaxBits, QuantizeFP8) in
	// place of their twins: the same bits, vectorised where the
	// whole-tile kernel is missing (AVX2, arm64).
	return blockTilesWith(c, true, dst, ldd, src, ld, inv, tiles, rows, width, ts, tds, eps, mask)
}

// blockGroup is how many tiles of rows × width values BlockTiles takes
// at a time: up to 16 small ones (so that the scales of several are one
// vector computation), large ones one by one (so that a tile is still in
// the cache when its codes are written).
func blockGroup(rows, width int) int { return min(16, max(1, 2048/(rows*width))) }

// blockTilesGo is the loop blockTilesE4M3AVX512 and blockTilesE5M2AVX512
// replace: group by group (blockGroup), each tile's amax (amaxBitsGo row
// by row), its scale (BlockScale), and quantizeFP8Go row by row.
func blockTilesGo(c *FP8Cast, dst []uint8, ldd int, src []float32, ld int, inv []float32, tiles, rows, width, ts, tds int, eps float32, mask uint32) (done int, amax uint32) {
	return blockTilesWith(c, false, dst, ldd, src, ld, inv, tiles, rows, width, ts, tds, eps, mask)
}

// blockTilesWith is blockTilesGo's loop with the twins' row amax and row
// cast, or with vec the kernels that equal them bit for bit (AmaxBits,
// QuantizeFP8).
func blockTilesWith(c *FP8Cast, vec bool, dst []uint8, ldd int, src []float32, ld int, inv []float32, tiles, rows, width, ts, tds int, eps float32, mask uint32) (done int, amax uint32) {
	fmax := c.Decode[c.MaxCode]
	group := blockGroup(rows, width)
	var am [16]uint32
	// With vec, a tile of 16 rows or more and up to 128 columns is one
	// call each way: its column amaxes' largest, and the column cast with
	// its scale in every column (the row kernels' bits, without a call a
	// row; a tile of a few rows takes the row kernels).
	var acc [128]uint32
	var sc [128]float32
	cols := vec && width <= len(acc) && rows >= 16
	for t0 := 0; t0 < tiles; t0 += group {
		g := min(group, tiles-t0)
		for i := range g {
			s := (t0 + i) * ts
			am[i] = 0
			if cols {
				am[i] = AmaxColsBand(acc[:width], src[s:], ld, rows, width)
			}
			for r := 0; r < rows && !cols; r++ {
				row := src[s+r*ld : s+r*ld+width]
				if vec {
					am[i] = max(am[i], AmaxBits(row))
				} else {
					am[i] = max(am[i], amaxBitsGo(row))
				}
			}
			if am[i] > 0x7F800000 {
				return t0, amax
			}
		}
		for i, a := range am[:g] {
			t := t0 + i
			amax = max(amax, a)
			var scale float32
			scale, inv[t] = BlockScale(math.Float32frombits(a), fmax, eps, mask)
			s, d := t*ts, t*tds
			if cols {
				for j := range sc[:width] {
					sc[j] = scale
				}
				QuantizeFP8Cols(c, dst[d:], ldd, src[s:], ld, sc[:width], rows, width)
				continue
			}
			for r := 0; r < rows; r++ {
				out, row := dst[d+r*ldd:d+r*ldd+width], src[s+r*ld:s+r*ld+width]
				if vec {
					QuantizeFP8(c, out, row, scale)
				} else {
					quantizeFP8Go(c, out, row, scale)
				}
			}
		}
	}
	return tiles, amax
}

// BlockCols casts the columns of a band of rows × n values of src (rows
// ld apart; codes ldd apart in dst) with Float8BlockScaling, a block
// being a column: each column cast with the scale BlockScale gives its
// amax, column j's scale_inv stored to inv[j]. It works in strips of 16
// columns (the last one ragged), stops before the first strip holding a
// NaN (the caller's slower path), and returns the number of columns
// cast and the largest amax bits among them. The vector kernel does the
// whole strips, blockColsGo (its twin) the rest, with the same bits.
func BlockCols(c *FP8Cast, dst []uint8, ldd int, src []float32, ld int, inv []float32, rows, n int, eps float32, mask uint32) (done int, amax uint32) {
	if rows <= 0 || n <= 0 {
		return 0, 0
	}
	_, _, _ = dst[(rows-1)*ldd+n-1], src[(rows-1)*ld+n-1], inv[n-1]
	done, amax, tried := blockColsVector(c.Format, dst, ldd, src, ld, inv, rows, n, eps, mask)
	if done < tried { // stopped before a strip holding a NaN
		return done, amax
	}
	if done < n {
		// The twin's loop with the band kernels in place of their twins
		// (the same bits; vectorised where blockColsVector is missing).
		d, a := blockColsWith(c, true, dst[done:], ldd, src[done:], ld, inv[done:], rows, n-done, eps, mask)
		done, amax = done+d, max(amax, a)
	}
	return done, amax
}

// blockColsGo is the loop blockColsE4M3AVX512 and blockColsE5M2AVX512
// replace: strip by strip, the column amaxes (amaxColsBandGo), their
// scales (BlockScale) and quantizeFP8ColsGo.
func blockColsGo(c *FP8Cast, dst []uint8, ldd int, src []float32, ld int, inv []float32, rows, n int, eps float32, mask uint32) (done int, amax uint32) {
	return blockColsWith(c, false, dst, ldd, src, ld, inv, rows, n, eps, mask)
}

// blockColsWith is blockColsGo's loop with the twins' band amax and band
// cast, or with vec the kernels that equal them bit for bit
// (AmaxColsBand, QuantizeFP8Cols).
func blockColsWith(c *FP8Cast, vec bool, dst []uint8, ldd int, src []float32, ld int, inv []float32, rows, n int, eps float32, mask uint32) (done int, amax uint32) {
	fmax := c.Decode[c.MaxCode]
	var am [16]uint32
	var scales [16]float32
	for j0 := 0; j0 < n; j0 += 16 {
		w := min(16, n-j0)
		var seen uint32
		if vec {
			seen = AmaxColsBand(am[:w], src[j0:], ld, rows, w)
		} else {
			seen = amaxColsBandGo(am[:w], src[j0:], ld, rows)
		}
		if seen > 0x7F800000 {
			return j0, amax
		}
		for j, a := range am[:w] {
			amax = max(amax, a)
			scales[j], inv[j0+j] = BlockScale(math.Float32frombits(a), fmax, eps, mask)
		}
		if vec {
			QuantizeFP8Cols(c, dst[j0:], ldd, src[j0:], ld, scales[:w], rows, w)
		} else {
			quantizeFP8ColsGo(c, dst[j0:], ldd, src[j0:], ld, scales[:w], rows, w)
		}
	}
	return n, amax
}
