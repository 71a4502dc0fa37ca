package fp8

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
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

// twoD reports whether an NVFP4 quantizer casts 16×16 tiles (BlockDim
// 2, weights) rather than 1×16 blocks.
func (c Quantizer) twoD() bool { return c.BlockDim == 2 }

// checkNVFP4 refuses a quantizer the NVFP4 casts cannot follow.
func (c Quantizer) checkNVFP4() error {
	if c.Kind != NVFP4Blocks {
		return fmt.Errorf("fp8: quantize NVFP4: the quantizer is %v, want NVFP4 (Kind NVFP4Blocks)", c.Kind)
	}
	if c.BlockDim < 0 || c.BlockDim > 2 {
		return fmt.Errorf("fp8: quantize NVFP4: block dimension %d, want 1 (1×16) or 2 (16×16)", c.BlockDim)
	}
	return nil
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

// RHT16 applies Transformer Engine's random Hadamard transform to each
// group of 16 consecutive values of x (its length a multiple of 16),
// in place: the values rounded to bf16, then y_j = 0.25·Σ_k s_k·
// (−1)^popcount(j&k)·v_k accumulated in float32 over k in order, rounded
// to bf16 (on the AVX-512 kernel where the CPU has one: the same bits).
func RHT16(x []float32) error {
	if len(x)%NVFP4Block != 0 {
		return fmt.Errorf("fp8: random Hadamard transform: %d values, want a multiple of 16", len(x))
	}
	kernels.RHT16(x)
	return nil
}

func popcount4(v int) int { return v&1 + v>>1&1 + v>>2&1 + v>>3&1 }

// nvfp4Uniform is the stochastic rounding's uniform number under key for
// element j of stored row r of a tensor whose stored rows are cols long:
// kernels.StochasticUniform — one draw (murmur3's 32-bit finaliser) per
// stored byte, counted r·⌈cols/2⌉ + j/2, whose low 16 bits serve the
// even element and high 16 bits the odd one — of the key folded to 32
// bits.
func nvfp4Uniform(key uint64, r, j, cols int) float64 {
	return float64(kernels.StochasticUniform(nvfp4Key32(key), uint32(r*((cols+1)/2)+j/2), j&1 == 1))
}

// nvfp4Key32 folds a 64-bit key to the generator's 32 bits.
func nvfp4Key32(key uint64) uint32 { return uint32(key) ^ uint32(key>>32) }

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
func QuantizeNVFP4(src []float32, rows, cols int, c Quantizer) (*NVFP4, error) {
	if err := c.checkNVFP4(); err != nil {
		return nil, err
	}
	if rows < 0 || cols < 0 || len(src) < rows*cols {
		return nil, fmt.Errorf("fp8: quantize NVFP4: %d values for shape [%d %d]", len(src), rows, cols)
	}
	q := NewNVFP4(rows, cols, c.twoD())
	if err := QuantizeNVFP4Into(q, src, rows, cols, 1, c); err != nil {
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
// axis (their column-wise copy is the exact transpose). Errors: shapes
// that do not match, an RHT along a length that is not a multiple of 16.
// It allocates its scratch; an NVFP4Quantizer reuses it.
func QuantizeNVFP4Into(q *NVFP4, src []float32, rows, cols, axis int, c Quantizer) error {
	z, err := NewNVFP4Quantizer(rows, cols, axis, c)
	if err != nil {
		return err
	}
	return z.Quantize(q, src, c.Seed)
}

// NVFP4Quantizer casts rows × cols tensors to NVFP4 for a GEMM that
// contracts along one axis (see QuantizeNVFP4Into), with its scratch
// allocated once and the work split over the worker pool: Quantize
// allocates nothing.
type NVFP4Quantizer struct {
	rows, cols, axis int
	c                Quantizer
	trans            bool
	// bands: the column-wise pass splits the source rows over the parts
	// (each part then reads the rows its core most likely wrote, and
	// does enough of them to stream), not the columns.
	bands  bool
	sr, sc int // the stored shape
	nb     int // blocks of 16 per stored row
	work   []float32
	// work16 holds a transformed column-wise copy: the transform's
	// values are bf16 values, so their bits take half work's bytes (the
	// pass that writes them and the cast that reads them back move
	// less); cast32 is Cast's float32 copy of them.
	work16 []uint16
	cast32 []float32
	bam    []uint32 // each stored row's block amaxes, [sr][nb]; tiles': [⌈sr/16⌉][nb]
	parts  int
	group  parallel.Group
	// the cast being run, for the parts
	q              *NVFP4
	src, y         []float32
	key            uint64
	m              float32
	amax           []uint32
	tam            [][]float32 // per part: a band's column amaxes as float32 bits (16×16 tiles)
	es             []float32   // element scales, one a block: [sr][nb] (1×16), per part [nb] (tiles)
	prepFn, castFn func(int)
}

// nvfp4BandRows is the fewest source rows a part of a column-wise cast
// takes when the parts split the rows (NVFP4Quantizer.bands): with
// fewer, splitting the columns measured faster (the MLP's 128-row
// batches), with more, splitting the rows (the baby GPT's 768 tokens).
const nvfp4BandRows = 256

// NewNVFP4Quantizer returns a quantizer for rows × cols tensors cast
// per c for a GEMM contracting along axis, or an error for a bad axis or
// a transform along a length that is not a multiple of 16.
func NewNVFP4Quantizer(rows, cols, axis int, c Quantizer) (*NVFP4Quantizer, error) {
	if rows < 0 || cols < 0 {
		return nil, fmt.Errorf("fp8: quantize NVFP4: negative shape [%d %d]", rows, cols)
	}
	if axis != 0 && axis != 1 {
		return nil, fmt.Errorf("fp8: quantize NVFP4: axis %d, want 0 or 1", axis)
	}
	if err := c.checkNVFP4(); err != nil {
		return nil, err
	}
	z := &NVFP4Quantizer{rows: rows, cols: cols, axis: axis, c: c, trans: axis == 0 && !c.twoD(), sr: rows, sc: cols}
	if z.trans {
		z.sr, z.sc = cols, rows
	}
	if c.RHT && z.sc%NVFP4Block != 0 {
		return nil, fmt.Errorf("fp8: quantize NVFP4: the random Hadamard transform needs rows of a multiple of 16 values, got %d", z.sc)
	}
	if z.trans || c.RHT {
		if z.trans && c.RHT {
			z.work16 = make([]uint16, rows*cols)
		} else {
			z.work = make([]float32, rows*cols)
		}
	}
	_, z.nb = NVFP4ScaleShape(z.sr, z.sc, false)
	z.bam = make([]uint32, z.sr*z.nb)
	z.parts = 1
	if rows*cols >= 1<<14 {
		z.parts = parallel.Workers()
	}
	z.bands = z.trans && z.parts > 1 && rows >= nvfp4BandRows*z.parts && kernels.NVFP4ColsBands(rows, cols)
	z.amax = make([]uint32, z.parts)
	z.tam = make([][]float32, z.parts)
	for i := range z.tam {
		z.tam[i] = make([]float32, z.sc)
	}
	if c.twoD() {
		z.es = make([]float32, z.parts*z.nb)
	} else {
		z.es = make([]float32, z.sr*z.nb)
	}
	z.prepFn, z.castFn = z.prepPart, z.castPart
	return z, nil
}

// Quantize casts src into q (allocated for the stored shape, as NewNVFP4
// does); key seeds stochastic rounding.
func (z *NVFP4Quantizer) Quantize(q *NVFP4, src []float32, key uint64) error {
	rows, cols := z.rows, z.cols
	if len(src) < rows*cols {
		return fmt.Errorf("fp8: quantize NVFP4: %d values for shape [%d %d]", len(src), rows, cols)
	}
	br, bc := NVFP4ScaleShape(z.sr, z.sc, z.c.twoD())
	if q.Rows != z.sr || q.Cols != z.sc || q.TwoD != z.c.twoD() || len(q.Codes) < z.sr*((z.sc+1)/2) || len(q.BlockScales) < br*bc {
		return fmt.Errorf("fp8: quantize NVFP4: destination [%d %d] (2-D %v) for a cast stored [%d %d] (2-D %v)", q.Rows, q.Cols, q.TwoD, z.sr, z.sc, z.c.twoD())
	}
	z.q, z.src, z.key = q, src[:rows*cols], key
	z.y = z.src
	if z.work != nil {
		z.y = z.work
	}
	z.group.For(z.parts, z.prepFn)
	var amax uint32
	for _, a := range z.amax {
		amax = max(amax, a)
	}
	if z.bands {
		amax = maxBits(z.bam[:z.sr*z.nb]) // the parts' blocks interleave
	}
	q.Amax = math.Float32frombits(amax)
	_, z.m, q.SDec = NVFP4Scales(q.Amax)
	z.group.For(z.parts, z.castFn)
	return nil
}

// Cast returns the values the last Quantize cast, in the stored layout:
// the source transposed for a column-wise copy, after the transform when
// it is on (the values its codes approximate). A transformed column-wise
// copy is held as bf16 bits; Cast widens them into a float32 buffer that
// its first call allocates and later calls reuse.
func (z *NVFP4Quantizer) Cast() []float32 {
	if z.work16 == nil {
		return z.y
	}
	if z.cast32 == nil {
		z.cast32 = make([]float32, len(z.work16))
	}
	return kernels.WidenBF16(z.cast32, z.work16)
}

// span returns part i's range of n items.
func (z *NVFP4Quantizer) span(i, n int) (int, int) { return n * i / z.parts, n * (i + 1) / z.parts }

// prepPart writes part i's stored rows of the transposed or copied
// source into the scratch and transforms them, when the cast needs that;
// then it takes the amax of each of their blocks of 16 (NaN left out),
// and their largest as the part's amax: the tensor's amax is the largest
// block amax.
func (z *NVFP4Quantizer) prepPart(i int) {
	if z.bands {
		b0, b1 := z.span(i, z.rows/NVFP4Block)
		if z.work16 != nil {
			kernels.NVFP4ColsBandRHT(z.work16, z.bam, z.src, z.rows, z.cols, NVFP4Block*b0, NVFP4Block*b1)
		} else {
			kernels.NVFP4ColsBand(z.work, z.bam, z.src, z.rows, z.cols, NVFP4Block*b0, NVFP4Block*b1)
		}
		return
	}
	if z.trans {
		// Stored row j is source column j: one pass transposes,
		// transforms and takes the block amaxes, the parts split at
		// strips of 16 columns (the vector kernel's).
		strips := (z.sr + 15) / 16
		s0, s1 := z.span(i, strips)
		lo, hi := 16*s0, min(z.sr, 16*s1)
		if z.work16 != nil {
			kernels.NVFP4ColsRHT(z.work16, z.bam, z.src, z.rows, z.cols, lo, hi)
		} else {
			kernels.NVFP4Cols(z.work, z.bam, z.src, z.rows, z.cols, lo, hi)
		}
		z.amax[i] = maxBits(z.bam[lo*z.nb : hi*z.nb])
		return
	}
	lo, hi := z.span(i, z.sr)
	if z.c.twoD() {
		// Parts of whole bands of 16 rows; each band's tile amaxes
		// straight from its column amaxes (bam then holds tiles,
		// [bands][nb]).
		bands := (z.sr + NVFP4Block - 1) / NVFP4Block
		b0, b1 := z.span(i, bands)
		lo, hi = b0*NVFP4Block, min(z.sr, b1*NVFP4Block)
	}
	if w := z.work; w != nil {
		copy(w[lo*z.sc:hi*z.sc], z.src[lo*z.sc:hi*z.sc])
		if z.c.RHT {
			kernels.RHT16(w[lo*z.sc : hi*z.sc])
		}
	}
	if z.c.twoD() {
		cam := z.tam[i][:z.sc]
		colAm := unsafeBits(cam)
		for r0 := lo; r0 < hi; r0 += NVFP4Block {
			r1 := min(hi, r0+NVFP4Block)
			kernels.AmaxColsBand(colAm, z.y[r0*z.sc:], z.sc, r1-r0, z.sc)
			// The column amaxes are float32 bits, NaN-free: a tile's
			// amax is their largest over its 16 columns.
			b := r0 / NVFP4Block
			kernels.Amax16(z.bam[b*z.nb:(b+1)*z.nb], cam)
		}
		z.amax[i] = maxBits(z.bam[lo/NVFP4Block*z.nb : (hi+NVFP4Block-1)/NVFP4Block*z.nb])
		return
	}
	if z.sc%NVFP4Block == 0 { // rows of whole blocks: one run
		kernels.Amax16(z.bam[lo*z.nb:hi*z.nb], z.y[lo*z.sc:hi*z.sc])
	} else {
		for r := lo; r < hi; r++ {
			kernels.Amax16(z.bam[r*z.nb:(r+1)*z.nb], z.y[r*z.sc:(r+1)*z.sc])
		}
	}
	z.amax[i] = maxBits(z.bam[lo*z.nb : hi*z.nb])
}

// maxBits returns the largest of a part's block amaxes (0 for none):
// float32 bits with the sign clear, so the vector amax of the bits read
// as float32 values is their largest.
func maxBits(bam []uint32) uint32 {
	if len(bam) == 0 {
		return 0
	}
	return kernels.AmaxBits(unsafe.Slice((*float32)(unsafe.Pointer(&bam[0])), len(bam)))
}

// castPart casts part i's bands of stored rows (one row for 1×16
// blocks, 16 for tiles): the band's block scales from its block amaxes
// (a tile's amax the largest of its rows'), then each row's codes. With
// 1×16 blocks and rows a multiple of 16 long, the part's rows are one
// run of whole blocks: one call computes all their scales, one casts
// all their codes (the stochastic counter of each element is its byte's
// index either way).
func (z *NVFP4Quantizer) castPart(i int) {
	q, y, cols, nb := z.q, z.y, z.sc, z.nb
	h := 1
	if z.c.twoD() {
		h = NVFP4Block
	}
	bands := (z.sr + h - 1) / h
	lo, hi := z.span(i, bands)
	half := (cols + 1) / 2
	key := nvfp4Key32(z.key)
	cast := func(r0, r1 int, es []float32) {
		out := q.Codes[r0*half : r1*half]
		if w := z.work16; w != nil {
			if z.c.Stochastic {
				kernels.E2M1StochasticBlocksBF16(out, w[r0*cols:r1*cols], es, key, uint32(r0*half))
			} else {
				kernels.QuantizeE2M1BlocksBF16(out, w[r0*cols:r1*cols], es)
			}
			return
		}
		row := y[r0*cols : r1*cols]
		if z.c.Stochastic {
			kernels.E2M1StochasticBlocks(out, row, es, key, uint32(r0*half))
		} else {
			kernels.QuantizeE2M1Blocks(out, row, es)
		}
	}
	if h == 1 {
		es := z.es[lo*nb : hi*nb]
		kernels.NVFP4BlockScales(q.BlockScales[lo*nb:hi*nb], es, z.bam[lo*nb:hi*nb], z.m, q.SDec)
		if cols%NVFP4Block == 0 {
			cast(lo, hi, es)
			return
		}
		for r := lo; r < hi; r++ {
			cast(r, r+1, z.es[r*nb:(r+1)*nb])
		}
		return
	}
	es := z.es[i*nb : (i+1)*nb]
	for b := lo; b < hi; b++ {
		r0, r1 := b*h, min(z.sr, (b+1)*h)
		kernels.NVFP4BlockScales(q.BlockScales[b*nb:(b+1)*nb], es, z.bam[b*nb:(b+1)*nb], z.m, q.SDec)
		for r := r0; r < r1; r++ {
			cast(r, r+1, es)
		}
	}
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
