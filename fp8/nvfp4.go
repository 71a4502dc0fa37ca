package fp8

import (
	"fmt"
	"math"
)

// NVFP4BlockScaling (Transformer Engine 2.x): 4-bit E2M1 elements (1 sign,
// 2 exponent, 1 mantissa bit: ±0, 0.5, 1, 1.5, 2, 3, 4, 6) with an E4M3
// scale per 16 consecutive elements (or per 16×16 tile) and a float32
// scale per tensor; gradients may round stochastically, and the operands
// of the weight-gradient GEMM may first go through a 16-point random
// Hadamard transform. Two codes share a byte, the even element in the
// low nibble.

// NVFP4Block is the side of an NVFP4 block: 1×16 or 16×16.
const NVFP4Block = 16

// nvfp4Values are the magnitudes of E2M1 codes 0–7.
var nvfp4Values = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// E2M1Decode returns the value of a 4-bit E2M1 code (bit 3 the sign).
func E2M1Decode(code uint8) float32 {
	v := nvfp4Values[code&7]
	if code&8 != 0 {
		return -v
	}
	return v
}

// E2M1Encode rounds x to the nearest E2M1 value, ties to the even code,
// saturating: |x| beyond 6 (infinities too) gives ±6; the sign of zero is
// kept (−0 is code 8). E2M1 has no NaN: a NaN gives +6, as the
// saturating hardware conversion does.
func E2M1Encode(x float32) uint8 {
	if x != x {
		return 7
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign, x = 8, -x
	}
	// Midpoints between neighbours; at a midpoint the even code wins.
	switch {
	case x < 0.25:
		return sign
	case x == 0.25:
		return sign // tie: codes 0 and 1 → 0
	case x < 0.75:
		return sign | 1
	case x <= 1.25: // 0.75 (tie 1/2 → 2) … 1.25 (tie 2/3 → 2)
		return sign | 2
	case x < 1.75:
		return sign | 3
	case x <= 2.5: // 1.75 (tie 3/4 → 4) … 2.5 (tie 4/5 → 4)
		return sign | 4
	case x < 3.5:
		return sign | 5
	case x <= 5: // 3.5 (tie 5/6 → 6) … 5 (tie 6/7 → 6)
		return sign | 6
	}
	return sign | 7
}

// e2m1Neighbours returns the E2M1 magnitudes below and above |x| ≤ 6 and
// the codes of each (for stochastic rounding).
func e2m1Neighbours(a float32) (lo, hi float32, clo, chi uint8) {
	for c := 1; c < 8; c++ {
		if a <= nvfp4Values[c] {
			return nvfp4Values[c-1], nvfp4Values[c], uint8(c - 1), uint8(c)
		}
	}
	return 6, 6, 7, 7
}

// E2M1Stochastic rounds x to one of its two neighbouring E2M1 values,
// up with probability equal to the fraction of the way x lies between
// them (u uniform in [0, 1)), saturating at ±6 and keeping the sign; an
// exact value stays. NaN gives +6.
func E2M1Stochastic(x float32, u float64) uint8 {
	if x != x {
		return 7
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign, x = 8, -x
	}
	if x >= 6 {
		return sign | 7
	}
	lo, hi, clo, chi := e2m1Neighbours(x)
	switch {
	case x == hi:
		return sign | chi
	case x == lo || u >= float64(x-lo)/float64(hi-lo):
		return sign | clo
	}
	return sign | chi
}

// NVFP4Cast says how a tensor is cast to NVFP4.
type NVFP4Cast struct {
	// TwoD casts 16×16 tiles (weights) instead of 1×16 blocks.
	TwoD bool
	// RHT applies the random Hadamard transform along each row first
	// (rows must then be a multiple of 16 long).
	RHT bool
	// Stochastic rounds the elements stochastically (gradients), from a
	// counter-based generator keyed by Key and each element's index, so
	// the same key gives the same codes.
	Stochastic bool
	Key        uint64
}

// NVFP4 is a tensor cast to NVFP4: rows × cols E2M1 codes, two per byte
// (Codes[r·⌈cols/2⌉ + j/2], element j even in the low nibble; an odd
// row ends with a zero nibble), the E4M3 codes of the block scales
// (BlockScales, NVFP4ScaleShape), the tensor's amax (after the transform
// with RHT) and its float32 decode scale SDec = 1/S_enc.
type NVFP4 struct {
	Rows, Cols  int
	Codes       []uint8
	BlockScales []uint8
	Amax        float32
	SDec        float32
	TwoD        bool
}

// NVFP4ScaleShape returns the shape of the block scales of a rows × cols
// tensor: [rows, ⌈cols/16⌉] for 1×16 blocks, [⌈rows/16⌉, ⌈cols/16⌉] for
// 16×16 tiles.
func NVFP4ScaleShape(rows, cols int, twoD bool) (r, c int) {
	c = (cols + NVFP4Block - 1) / NVFP4Block
	if twoD {
		return (rows + NVFP4Block - 1) / NVFP4Block, c
	}
	return rows, c
}

// rhtSigns is Transformer Engine's fixed sign vector of the 16-point
// random Hadamard transform: bit k of 0xD7E8 set where s_k = −1.
const rhtSigns = 0xD7E8

// bf16Round rounds x to bfloat16 (nearest even; NaN kept), as a float32.
func bf16Round(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return x
	}
	return math.Float32frombits((b + 0x7FFF + (b>>16)&1) &^ 0xFFFF)
}

// RHT16 applies Transformer Engine's random Hadamard transform to each
// group of 16 consecutive values of x (its length a multiple of 16),
// in place: the values rounded to bf16, then y_j = 0.25·Σ_k s_k·
// (−1)^popcount(j&k)·v_k accumulated in float32 over k in order, rounded
// to bf16.
func RHT16(x []float32) error {
	if len(x)%NVFP4Block != 0 {
		return fmt.Errorf("fp8: random Hadamard transform: %d values, want a multiple of 16", len(x))
	}
	var v [16]float32
	for g := 0; g < len(x); g += 16 {
		for k := range v {
			v[k] = bf16Round(x[g+k])
			if rhtSigns>>k&1 != 0 {
				v[k] = -v[k]
			}
		}
		for j := 0; j < 16; j++ {
			var s float32
			for k := 0; k < 16; k++ {
				if popcount4(j&k)&1 != 0 {
					s -= v[k]
				} else {
					s += v[k]
				}
			}
			x[g+j] = bf16Round(0.25 * s)
		}
	}
	return nil
}

func popcount4(v int) int { return v&1 + v>>1&1 + v>>2&1 + v>>3&1 }

// nvfp4Uniform is the stochastic rounding's uniform number for element
// i under key: SplitMix64's finaliser of key + i·φ, its top 53 bits.
func nvfp4Uniform(key uint64, i int) float64 {
	z := key + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// NVFP4Scales returns a tensor's encode scale S_enc = 2688/amax (448·6;
// FLT_MAX when that overflows; 1 when amax is 0 or the quotient 0), the
// factor M = S_enc·float32(1/6) that maps a block's amax to its E4M3
// scale, and the decode scale S_dec = float32(1/float64(S_enc)).
func NVFP4Scales(amax float32) (sEnc, m, sDec float32) {
	sEnc = 2688 / amax
	if math.IsInf(float64(sEnc), 0) {
		sEnc = math.MaxFloat32
	}
	if amax == 0 || sEnc == 0 || sEnc != sEnc {
		sEnc = 1
	}
	return sEnc, sEnc * float32(1.0/6), float32(1 / float64(sEnc))
}

// QuantizeNVFP4 casts the rows × cols matrix src (row-major) to NVFP4 as
// Transformer Engine does: optionally the random Hadamard transform
// along the rows (on a copy), the tensor's amax (NaN left out), S_enc
// and S_dec (NVFP4Scales); per block, its amax b, the stored scale sf =
// E4M3(min(b·M, FLT_MAX)) and the element scale es = min(1/(decode(sf)·
// S_dec), FLT_MAX); each element E2M1(float32(y·es)), nearest even or
// stochastic. Errors: an RHT on rows not a multiple of 16 long.
func QuantizeNVFP4(src []float32, rows, cols int, c NVFP4Cast) (*NVFP4, error) {
	if rows < 0 || cols < 0 || len(src) < rows*cols {
		return nil, fmt.Errorf("fp8: quantize NVFP4: %d values for shape [%d %d]", len(src), rows, cols)
	}
	q := NewNVFP4(rows, cols, c.TwoD)
	if err := QuantizeNVFP4Into(q, src, rows, cols, 1, c, nil); err != nil {
		return nil, err
	}
	return q, nil
}

// NewNVFP4 returns a zero NVFP4 tensor of rows × cols elements with its
// codes and block scales allocated.
func NewNVFP4(rows, cols int, twoD bool) *NVFP4 {
	sr, sc := NVFP4ScaleShape(rows, cols, twoD)
	return &NVFP4{Rows: rows, Cols: cols, Codes: make([]uint8, rows*((cols+1)/2)), BlockScales: make([]uint8, sr*sc), TwoD: twoD}
}

// QuantizeNVFP4Into casts the rows × cols matrix src into q (its slices
// allocated, as NewNVFP4 does, for the stored shape) for a GEMM that
// contracts along axis. With axis 1 q holds src's layout, [rows][cols].
// With axis 0 and 1×16 blocks q holds the transpose, [cols][rows]:
// Transformer Engine's column-wise copy, whose transform and blocks run
// down src's columns. 16×16 tiles are cast in src's layout whatever the
// axis (their column-wise copy is the exact transpose). work is scratch
// of at least rows·cols values when the transform is on or the copy is
// column-wise (nil: allocated). Errors: shapes that do not match, an RHT
// along a length that is not a multiple of 16.
func QuantizeNVFP4Into(q *NVFP4, src []float32, rows, cols, axis int, c NVFP4Cast, work []float32) error {
	if rows < 0 || cols < 0 || len(src) < rows*cols {
		return fmt.Errorf("fp8: quantize NVFP4: %d values for shape [%d %d]", len(src), rows, cols)
	}
	if axis != 0 && axis != 1 {
		return fmt.Errorf("fp8: quantize NVFP4: axis %d, want 0 or 1", axis)
	}
	trans := axis == 0 && !c.TwoD
	sr, sc := rows, cols
	if trans {
		sr, sc = cols, rows
	}
	br, bc := NVFP4ScaleShape(sr, sc, c.TwoD)
	if q.Rows != sr || q.Cols != sc || q.TwoD != c.TwoD || len(q.Codes) < sr*((sc+1)/2) || len(q.BlockScales) < br*bc {
		return fmt.Errorf("fp8: quantize NVFP4: destination [%d %d] (2-D %v) for a cast stored [%d %d] (2-D %v)", q.Rows, q.Cols, q.TwoD, sr, sc, c.TwoD)
	}
	if c.RHT && sc%NVFP4Block != 0 {
		return fmt.Errorf("fp8: quantize NVFP4: the random Hadamard transform needs rows of a multiple of 16 values, got %d", sc)
	}
	y := src[:rows*cols]
	if trans || c.RHT {
		if len(work) < rows*cols {
			work = make([]float32, rows*cols)
		}
		w := work[:rows*cols]
		if trans {
			transposeF32(w, y, rows, cols)
		} else {
			copy(w, y)
		}
		if c.RHT {
			_ = RHT16(w)
		}
		y = w
	}
	return quantizeNVFP4Rows(q, y, c)
}

// transposeF32 writes the cols × rows transpose of src into dst, in
// tiles that stay in cache.
func transposeF32(dst, src []float32, rows, cols int) {
	const t = 32
	for r0 := 0; r0 < rows; r0 += t {
		for c0 := 0; c0 < cols; c0 += t {
			for r := r0; r < min(rows, r0+t); r++ {
				for j := c0; j < min(cols, c0+t); j++ {
					dst[j*rows+r] = src[r*cols+j]
				}
			}
		}
	}
}

// quantizeNVFP4Rows casts y ([q.Rows][q.Cols], transformed already) into
// q's slices.
func quantizeNVFP4Rows(q *NVFP4, y []float32, c NVFP4Cast) error {
	rows, cols := q.Rows, q.Cols
	amax := blockAmax(y, rows, cols, cols)
	_, m, sDec := NVFP4Scales(amax)
	q.Amax, q.SDec = amax, sDec
	sr, sc := NVFP4ScaleShape(rows, cols, c.TwoD)
	half := (cols + 1) / 2
	clear(q.Codes[:rows*half])
	h := 1
	if c.TwoD {
		h = NVFP4Block
	}
	for br := 0; br < sr; br++ {
		r0 := br * h
		nr := min(h, rows-r0)
		for bc := 0; bc < sc; bc++ {
			c0 := bc * NVFP4Block
			n := min(NVFP4Block, cols-c0)
			b := blockAmax(y[r0*cols+c0:], nr, n, cols)
			sf := E4M3.Encode(min(b*m, math.MaxFloat32))
			q.BlockScales[br*sc+bc] = sf
			es := min(1/(E4M3.Decode(sf)*sDec), math.MaxFloat32)
			for r := r0; r < r0+nr; r++ {
				row, out := y[r*cols+c0:r*cols+c0+n], q.Codes[r*half:]
				for i, x := range row {
					v := float32(x * es)
					var code uint8
					if c.Stochastic {
						code = E2M1Stochastic(v, nvfp4Uniform(c.Key, r*cols+c0+i))
					} else {
						code = E2M1Encode(v)
					}
					j := c0 + i
					out[j/2] |= code << (4 * (j & 1))
				}
			}
		}
	}
	return nil
}

// Code returns element (r, j)'s E2M1 code.
func (q *NVFP4) Code(r, j int) uint8 { return q.Codes[r*((q.Cols+1)/2)+j/2] >> (4 * (j & 1)) & 0xF }

// Dequantize writes every element's value e2m1 · decode(sf) · S_dec.
func (q *NVFP4) Dequantize(dst []float32) error {
	if len(dst) < q.Rows*q.Cols {
		return fmt.Errorf("fp8: dequantize NVFP4: dst has %d elements, want %d", len(dst), q.Rows*q.Cols)
	}
	_, sc := NVFP4ScaleShape(q.Rows, q.Cols, q.TwoD)
	for r := 0; r < q.Rows; r++ {
		br := r
		if q.TwoD {
			br = r / NVFP4Block
		}
		for j := 0; j < q.Cols; j++ {
			dst[r*q.Cols+j] = E2M1Decode(q.Code(r, j)) * E4M3.Decode(q.BlockScales[br*sc+j/NVFP4Block]) * q.SDec
		}
	}
	return nil
}
