package fp8

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/octetml/octet/internal/kernels"
)

// Float8BlockScaling (Transformer Engine 2.x; DeepSeek-V3's scheme;
// torchao's blockwise_fp8_training): a float32 scale per block of 128
// consecutive values along the contiguous axis (1-D) or per 128×128 tile
// (2-D), E4M3 by default, scales rounded down to a power of two unless
// float32 scales are asked for.

// Float8BlockSize is the side of a Float8BlockScaling block: 1×128 (1-D) or
// 128×128 (2-D).
const Float8BlockSize = 128

// checkFloat8Blocks refuses a quantizer the block casts cannot follow:
// another kind, a block dimension other than 1 or 2 (0 means 1), a
// negative, NaN or infinite amax epsilon, a format other than E4M3 and
// E5M2.
func (c Quantizer) checkFloat8Blocks(op string) error {
	if c.Kind != Float8Blocks {
		return fmt.Errorf("fp8: %s: the quantizer is %v, want Float8BlockScaling (Kind Float8Blocks)", op, c.Kind)
	}
	if c.BlockDim < 0 || c.BlockDim > 2 {
		return fmt.Errorf("fp8: %s: block dimension %d, want 1 (1×128) or 2 (128×128)", op, c.BlockDim)
	}
	if !(c.Eps >= 0) || math.IsInf(float64(c.Eps), 0) {
		return fmt.Errorf("fp8: %s: amax epsilon %v, want a finite number ≥ 0", op, c.Eps)
	}
	return checkFormat(op, c.Format)
}

// Float8BlockScaleShape returns the shape of the scale_inv tensor of a rows ×
// cols matrix: [rows, ⌈cols/128⌉] for 1-D blocks, [⌈rows/128⌉,
// ⌈cols/128⌉] for 2-D tiles, as Transformer Engine stores it.
func Float8BlockScaleShape(rows, cols, dim int) (r, c int) {
	c = (cols + Float8BlockSize - 1) / Float8BlockSize
	if dim == 2 {
		return (rows + Float8BlockSize - 1) / Float8BlockSize, c
	}
	return rows, c
}

// Float8BlockScale returns the scale and scale_inv of a block whose amax is
// amax (NaN elements already left out), as Transformer Engine computes
// them in float32: amax floored at eps; scale 1 for an amax that is 0,
// infinite or NaN; otherwise fp8_max / amax, FLT_MAX if that overflows,
// rounded down to a power of two (sign and exponent bits kept) unless
// fp32Scales; scale_inv = 1/scale.
func Float8BlockScale(amax float32, f Format, eps float32, fp32Scales bool) (scale, scaleInv float32) {
	return kernels.BlockScale(amax, f.Max(), eps, c8mask(fp32Scales))
}

// c8mask is the mask of a block scale's bits: all of them for float32
// scales, the sign and exponent (a power of two) otherwise.
func c8mask(fp32Scales bool) uint32 {
	if fp32Scales {
		return 0xFFFFFFFF
	}
	return 0xFF800000
}

// QuantizeFloat8Block casts the rows × cols matrix src (row-major) with
// Float8BlockScaling: per block its scale (BlockScale), each code
// Encode(x·scale) (the product rounded to float32, saturating, nearest
// even, the sign of zero kept), and the block's scale_inv stored in
// scaleInv (Float8BlockScaleShape, row-major). A block at a ragged edge holds
// only its own elements. Short slices or a bad cast are errors, and
// nothing is written.
func QuantizeFloat8Block(dst []uint8, scaleInv []float32, src []float32, rows, cols int, c Quantizer) error {
	_, err := quantizeFloat8BlockRange(dst, scaleInv, src, rows, cols, 1, c, 0, float8BlockSlices(rows, cols, 1, c.Dim()), nil)
	return err
}

// DequantizeFloat8Block writes Decode(q)·scale_inv of each code to dst (the
// values the block-scaled GEMM multiplies).
func DequantizeFloat8Block(dst []float32, src []uint8, scaleInv []float32, rows, cols int, c Quantizer) error {
	if err := c.checkFloat8Blocks("dequantize block"); err != nil {
		return err
	}
	sr, sc := Float8BlockScaleShape(rows, cols, c.Dim())
	if err := checkMatrix("dequantize block", rows, cols, map[string][2]int{"dst": {len(dst), rows * cols}, "src": {len(src), rows * cols}, "scale_inv": {len(scaleInv), sr * sc}}); err != nil {
		return err
	}
	tab := decodeTable(c.Format)
	for r := 0; r < rows; r++ {
		br := r
		if c.Dim() == 2 {
			br = r / Float8BlockSize
		}
		for j := 0; j < cols; j++ {
			dst[r*cols+j] = tab[src[r*cols+j]] * scaleInv[br*sc+j/Float8BlockSize]
		}
	}
	return nil
}

// TransposeFloat8Block2D writes the exact transpose of a 2-D-tiled cast:
// codes [cols rows] and tile scales [⌈cols/128⌉ ⌈rows/128⌉] (the
// column-wise copy Transformer Engine makes of a 2-D-blocked tensor; a
// 1-D-blocked one is quantized again from its source instead).
func TransposeFloat8Block2D(dstCodes []uint8, dstScaleInv []float32, codes []uint8, scaleInv []float32, rows, cols int) error {
	sr, sc := Float8BlockScaleShape(rows, cols, 2)
	if err := checkMatrix("transpose block", rows, cols, map[string][2]int{"dst": {len(dstCodes), rows * cols}, "src": {len(codes), rows * cols},
		"scale_inv": {len(scaleInv), sr * sc}, "dst scale_inv": {len(dstScaleInv), sr * sc}}); err != nil {
		return err
	}
	for r := 0; r < rows; r++ {
		for j := 0; j < cols; j++ {
			dstCodes[j*rows+r] = codes[r*cols+j]
		}
	}
	for a := 0; a < sr; a++ {
		for b := 0; b < sc; b++ {
			dstScaleInv[b*sr+a] = scaleInv[a*sc+b]
		}
	}
	return nil
}

// Float8BlockGEMM computes C[m×n] = A·Bᵀ for block-scaled operands whose k axis
// is each one's contiguous axis (a: m × k codes, b: n × k codes, each
// cast 1-D or 2-D; no GEMM multiplies two 2-D operands), as Transformer
// Engine's block-scaled GEMMs do: for each 128-long slice of k the
// products of the codes' values are summed in float32, that partial sum
// is multiplied by both operands' scale_inv for the slice, and the slices
// are added in float32 in order. Bad shapes or two 2-D operands are
// errors.
func Float8BlockGEMM(c []float32, m, n, k int, a []uint8, aScaleInv []float32, ac Quantizer, b []uint8, bScaleInv []float32, bc Quantizer) error {
	if err := ac.checkFloat8Blocks("block GEMM: A"); err != nil {
		return err
	}
	if err := bc.checkFloat8Blocks("block GEMM: B"); err != nil {
		return err
	}
	if ac.Dim() == 2 && bc.Dim() == 2 {
		return fmt.Errorf("fp8: block GEMM: both operands have 2-D (128×128) blocks; Transformer Engine multiplies a 2-D operand only with a 1-D one")
	}
	ar, acn := Float8BlockScaleShape(m, k, ac.Dim())
	br, bcn := Float8BlockScaleShape(n, k, bc.Dim())
	if err := checkMatrix("block GEMM", m, n, map[string][2]int{"C": {len(c), m * n}, "A": {len(a), m * k}, "B": {len(b), n * k},
		"A scale_inv": {len(aScaleInv), ar * acn}, "B scale_inv": {len(bScaleInv), br * bcn}}); err != nil {
		return err
	}
	ta, tb := decodeTable(ac.Format), decodeTable(bc.Format)
	for i := 0; i < m; i++ {
		ia := i
		if ac.Dim() == 2 {
			ia = i / Float8BlockSize
		}
		for j := 0; j < n; j++ {
			jb := j
			if bc.Dim() == 2 {
				jb = j / Float8BlockSize
			}
			var acc float32
			for s := 0; s*Float8BlockSize < k; s++ {
				var part float32
				for p := s * Float8BlockSize; p < min(k, (s+1)*Float8BlockSize); p++ {
					part = float32(part + float32(ta[a[i*k+p]]*tb[b[j*k+p]]))
				}
				acc = float32(acc + float32(float32(part*aScaleInv[ia*acn+s])*bScaleInv[jb*bcn+s]))
			}
			c[i*n+j] = acc
		}
	}
	return nil
}

// Float8BlockScaleCount returns how many scale_inv factors a rows × cols
// matrix cast for a GEMM contracting along axis needs: 1-D blocks along
// axis 1 are TE's row-wise layout [rows][⌈cols/128⌉]; along axis 0 they
// run 128 down each column, TE's column-wise layout (the transposed
// tensor cast row-wise) [cols][⌈rows/128⌉]; 2-D tiles are
// [⌈rows/128⌉][⌈cols/128⌉] whatever the axis.
func Float8BlockScaleCount(rows, cols, axis, dim int) int {
	if dim == 1 && axis == 0 {
		return cols * ((rows + Float8BlockSize - 1) / Float8BlockSize)
	}
	r, c := Float8BlockScaleShape(rows, cols, dim)
	return r * c
}

// QuantizeFloat8BlockAxis is QuantizeFloat8Block for one operand of a
// GEMM that contracts the rows × cols matrix src along axis. With 1-D
// blocks and axis 1 it is QuantizeFloat8Block; with axis 0 each block is
// 128 consecutive values down a column — the codes Transformer Engine's
// column-wise copy holds (the source transposed, then cast row-wise),
// kept here in src's layout — with scale_inv [cols][⌈rows/128⌉]. 2-D
// tiles do not depend on the axis (their column-wise copy is the exact
// transpose). It returns the amax of the whole input (NaN if an element
// is NaN; block amaxes leave NaN out). Short slices or a bad cast are
// errors, and nothing is written. work, when it holds at least max(cols,
// 32) values (129·⌈cols/128⌉ with 128×128 tiles), is the cast's scratch
// (so that a training step allocates nothing); otherwise the cast
// allocates its own.
func QuantizeFloat8BlockAxis(dst []uint8, scaleInv []float32, src []float32, rows, cols, axis int, c Quantizer, work []float32) (float32, error) {
	return quantizeFloat8BlockRange(dst, scaleInv, src, rows, cols, axis, c, 0, float8BlockSlices(rows, cols, axis, c.Dim()), work)
}

// float8BlockSlices returns into how many independent slices
// quantizeFloat8BlockRange divides a cast: rows (1-D blocks along axis
// 1), bands of 128 rows (2-D tiles) or columns (1-D blocks along axis
// 0).
func float8BlockSlices(rows, cols, axis, dim int) int {
	switch {
	case dim == 2:
		return (rows + Float8BlockSize - 1) / Float8BlockSize
	case axis == 0:
		return cols
	}
	return rows
}

// quantizeFloat8BlockRange is QuantizeFloat8BlockAxis for the slices
// [lo, hi) of the cast (float8BlockSlices), so that parts of one cast
// can run concurrently; it returns their amax. Blocks go through fused
// kernels (each block's amax, scale and codes from one read of it); a
// block holding a NaN goes through a slower path that leaves the NaN
// out of its amax. work, when it holds at least hi−lo values for a
// column-wise cast, 129·⌈cols/128⌉ for 128×128 tiles, ⌈cols/128⌉
// otherwise, is the cast's scratch (else it allocates its own when it
// needs one).
func quantizeFloat8BlockRange(dst []uint8, scaleInv []float32, src []float32, rows, cols, axis int, c Quantizer, lo, hi int, work []float32) (float32, error) {
	if axis != 0 && axis != 1 {
		return 0, fmt.Errorf("fp8: quantize block: axis %d, want 0 or 1", axis)
	}
	if err := c.checkFloat8Blocks("quantize block"); err != nil {
		return 0, err
	}
	if err := checkMatrix("quantize block", rows, cols, map[string][2]int{"dst": {len(dst), rows * cols}, "src": {len(src), rows * cols},
		"scale_inv": {len(scaleInv), Float8BlockScaleCount(rows, cols, axis, c.Dim())}}); err != nil {
		return 0, err
	}
	if n := float8BlockSlices(rows, cols, axis, c.Dim()); lo < 0 || hi > n || lo > hi {
		return 0, fmt.Errorf("fp8: quantize block: slices [%d, %d) of %d", lo, hi, n)
	}
	var total uint32 // amax bits: NaN sorts above +inf
	nb := (cols + Float8BlockSize - 1) / Float8BlockSize
	cast, mask := formats[c.Format].cast, c8mask(c.FP32Scales)
	full := cols / Float8BlockSize
	switch {
	case c.Dim() == 2:
		// Each band's tiles through the fused kernel (amax, scale and
		// codes, a tile at a time); a band holding a NaN through
		// castTileBand.
		for br := lo; br < hi; br++ {
			r0, r1 := br*Float8BlockSize, min(rows, (br+1)*Float8BlockSize)
			d, a := kernels.BlockTiles(cast, dst[r0*cols:], cols, src[r0*cols:], cols, scaleInv[br*nb:], full, r1-r0, Float8BlockSize, Float8BlockSize, Float8BlockSize, c.Eps, mask)
			if d == full && full < nb {
				w := cols - full*Float8BlockSize
				e, b := kernels.BlockTiles(cast, dst[r0*cols+full*Float8BlockSize:], cols, src[r0*cols+full*Float8BlockSize:], cols, scaleInv[br*nb+full:], 1, r1-r0, w, w, w, c.Eps, mask)
				d, a = d+e, max(a, b)
			}
			total = max(total, a)
			if d < nb {
				if len(work) < (Float8BlockSize+1)*nb {
					work = make([]float32, (Float8BlockSize+1)*nb)
				}
				total = max(total, castTileBand(dst, scaleInv, src, rows, cols, c, br, work))
			}
		}
	case axis == 1 && full == nb:
		// Rows of whole blocks: one run of blocks side by side, a row
		// holding a NaN through castRowBlocks.
		if len(work) < nb {
			work = make([]float32, nb)
		}
		for t, n := lo*nb, hi*nb; t < n; {
			d, a := kernels.BlockTiles(cast, dst[t*Float8BlockSize:], 0, src[t*Float8BlockSize:], 0, scaleInv[t:], n-t, 1, Float8BlockSize, Float8BlockSize, Float8BlockSize, c.Eps, mask)
			total, t = max(total, a), t+d
			if t < n {
				r := t / nb
				total, t = max(total, castRowBlocks(dst, scaleInv, src, cols, c, r, work)), (r+1)*nb
			}
		}
	case axis == 1:
		// Rows with a ragged last block: bands of up to raggedRows rows,
		// each band's blocks a column of blocks at a time (tiles one row
		// high, cols apart; their scale_invs into work, then to their
		// places nb apart), so that every call fills its groups. A band
		// holding a NaN, from its row, goes through castRowBlocks.
		rag := cols - full*Float8BlockSize
		if len(work) < max(nb, raggedRows) {
			work = make([]float32, max(nb, raggedRows))
		}
		end := hi
		for r0 := lo; r0 < end; r0 += raggedRows {
			r1 := min(end, r0+raggedRows)
			for k := 0; k < nb && r0 < r1; k++ {
				w := Float8BlockSize
				if k == full {
					w = rag
				}
				inv, c0 := work[:r1-r0], k*Float8BlockSize
				d, a := kernels.BlockTiles(cast, dst[r0*cols+c0:], cols, src[r0*cols+c0:], cols, inv, r1-r0, 1, w, cols, cols, c.Eps, mask)
				total = max(total, a)
				for i, v := range inv[:d] {
					scaleInv[(r0+i)*nb+k] = v
				}
				if d < r1-r0 {
					r1 = r0 + d // a NaN in row r0+d's block k
					end = r1
				}
			}
		}
		for r := end; r < hi; r++ {
			total = max(total, castRowBlocks(dst, scaleInv, src, cols, c, r, work))
		}
	default:
		w := hi - lo
		if len(work) < w {
			work = make([]float32, w)
		}
		nbr := (rows + Float8BlockSize - 1) / Float8BlockSize
		for b := 0; b < nbr; b++ {
			total = max(total, castColsBand(dst, scaleInv, src, rows, cols, c, b, lo, hi, work))
		}
	}
	return math.Float32frombits(total), nil
}

// quantizeFloat8BlockBands is the column-wise cast (1-D blocks along
// axis 0, QuantizeFloat8BlockAxis with axis 0) of the bands [b0, b1) of
// 128 rows, every column: a part of the cast that reads only its own
// rows, as the part of the producer that wrote them did. work, when it
// holds at least cols values, is its scratch. It returns the bands'
// amax (NaN if an element is NaN).
func quantizeFloat8BlockBands(dst []uint8, scaleInv []float32, src []float32, rows, cols int, c Quantizer, b0, b1 int, work []float32) (float32, error) {
	if err := c.checkFloat8Blocks("quantize block"); err != nil {
		return 0, err
	}
	if c.Dim() != 1 {
		return 0, fmt.Errorf("fp8: quantize block: bands of a column-wise cast need 1-D blocks, got dimension %d", c.Dim())
	}
	if err := checkMatrix("quantize block", rows, cols, map[string][2]int{"dst": {len(dst), rows * cols}, "src": {len(src), rows * cols},
		"scale_inv": {len(scaleInv), Float8BlockScaleCount(rows, cols, 0, 1)}}); err != nil {
		return 0, err
	}
	if nbr := (rows + Float8BlockSize - 1) / Float8BlockSize; b0 < 0 || b1 > nbr || b0 > b1 {
		return 0, fmt.Errorf("fp8: quantize block: bands [%d, %d) of %d", b0, b1, nbr)
	}
	if len(work) < cols {
		work = make([]float32, cols)
	}
	var total uint32
	for b := b0; b < b1; b++ {
		total = max(total, castColsBand(dst, scaleInv, src, rows, cols, c, b, 0, cols, work))
	}
	return math.Float32frombits(total), nil
}

// castColsBand casts columns [lo, hi) of band b (128 rows) of a
// column-wise cast, with work (at least hi−lo values) for their
// scale_invs, and returns the band's amax bits (NaN above +inf). The
// fused kernel does it strip by strip (16 columns: amaxes, scales,
// codes, the strip read from memory once); a strip holding a NaN goes
// through castColsNaN.
func castColsBand(dst []uint8, scaleInv []float32, src []float32, rows, cols int, c Quantizer, b, lo, hi int, work []float32) uint32 {
	w := hi - lo
	inv := work[:w]
	nbr := (rows + Float8BlockSize - 1) / Float8BlockSize
	r0, r1 := b*Float8BlockSize, min(rows, (b+1)*Float8BlockSize)
	cast, mask := formats[c.Format].cast, c8mask(c.FP32Scales)
	var total uint32
	for j := 0; j < w; {
		at := r0*cols + lo + j
		d, a := kernels.BlockCols(cast, dst[at:], cols, src[at:], cols, inv[j:], r1-r0, w-j, c.Eps, mask)
		total, j = max(total, a), j+d
		if j < w {
			s := min(w, j+16)
			total, j = max(total, castColsNaN(dst, inv[j:s], src, cols, c, r0, r1, lo+j, lo+s)), s
		}
	}
	for j, v := range inv {
		scaleInv[(lo+j)*nbr+b] = v
	}
	return total
}

// raggedRows is how many rows quantizeFloat8BlockRange's row-wise cast
// of rows with a ragged last block takes at a time: a band whose
// columns of blocks are one call each (so that the calls fill the fused
// kernel's groups of 16) and whose rows stay in the cache from one
// column of blocks to the next.
const raggedRows = 32

// nanPaths counts the calls of the casts' paths for blocks holding a NaN
// (castColsNaN, castRowBlocks, castTileBand), so that a test can tell
// that a cast without NaNs never leaves the fused kernels.
var nanPaths atomic.Int64

// castColsNaN casts columns [j0, j1) (at most 16) of rows [r0, r1), some
// holding a NaN, writing their scale_invs to inv: each column's amax
// leaves the NaN out (fmaxf's rule), and the band's amax is NaN.
func castColsNaN(dst []uint8, inv []float32, src []float32, cols int, c Quantizer, r0, r1, j0, j1 int) uint32 {
	nanPaths.Add(1)
	var am [16]uint32
	var scale [16]float32
	w := j1 - j0
	total := uint32(0x7FC00000)
	kernels.AmaxColsBand(am[:w], src[r0*cols+j0:], cols, r1-r0, w)
	for j, a := range am[:w] {
		scale[j], inv[j] = Float8BlockScale(math.Float32frombits(a), c.Format, c.Eps, c.FP32Scales)
	}
	kernels.QuantizeFP8Cols(formats[c.Format].cast, dst[r0*cols+j0:], cols, src[r0*cols+j0:], cols, scale[:w], r1-r0, w)
	return total
}

// castRowBlocks casts row r's 1×128 blocks when one holds a NaN (its
// amax leaves the NaN out), with work (⌈cols/128⌉ values), and returns
// the row's amax bits (NaN above +inf).
func castRowBlocks(dst []uint8, scaleInv []float32, src []float32, cols int, c Quantizer, r int, work []float32) uint32 {
	nanPaths.Add(1)
	nb := (cols + Float8BlockSize - 1) / Float8BlockSize
	row, scales := unsafeBits(work[:nb]), work[:nb] // each amax becomes its scale in place
	var total uint32
	if rowBlockAmax(row, src[r*cols:(r+1)*cols]) {
		total = 0x7FC00000
	}
	for bc, am := range row {
		total = max(total, am)
		scales[bc], scaleInv[r*nb+bc] = Float8BlockScale(math.Float32frombits(am), c.Format, c.Eps, c.FP32Scales)
	}
	kernels.QuantizeFP8Blocks(formats[c.Format].cast, dst[r*cols:(r+1)*cols], src[r*cols:(r+1)*cols], scales)
	return total
}

// castTileBand casts band br's 128×128 tiles when one holds a NaN (its
// amax leaves the NaN out), with work (129·⌈cols/128⌉ values), and
// returns the band's amax bits (NaN above +inf).
func castTileBand(dst []uint8, scaleInv []float32, src []float32, rows, cols int, c Quantizer, br int, work []float32) uint32 {
	nanPaths.Add(1)
	nb := (cols + Float8BlockSize - 1) / Float8BlockSize
	full := cols / Float8BlockSize
	rowAm, acc := unsafeBits(work[:Float8BlockSize*nb]), unsafeBits(work[Float8BlockSize*nb:(Float8BlockSize+1)*nb])
	scales := work[Float8BlockSize*nb : (Float8BlockSize+1)*nb]
	r0, r1 := br*Float8BlockSize, min(rows, (br+1)*Float8BlockSize)
	var total uint32
	// Raw amax bits per row and block (NaN above +inf).
	for r := r0; r < r1; r++ {
		ra := rowAm[(r-r0)*nb : (r-r0+1)*nb]
		kernels.Amax128(ra[:full], src[r*cols:r*cols+full*Float8BlockSize])
		if full < nb {
			ra[full] = kernels.AmaxBits(src[r*cols+full*Float8BlockSize : (r+1)*cols])
		}
	}
	copy(acc, rowAm[:nb])
	for r := 1; r < r1-r0; r++ {
		for bc, a := range rowAm[r*nb : (r+1)*nb] {
			acc[bc] = max(acc[bc], a)
		}
	}
	for bc, am := range acc {
		if am > 0x7F800000 { // a NaN in the tile: its amax without it
			c0 := bc * Float8BlockSize
			am = math.Float32bits(blockAmax(src[r0*cols+c0:], r1-r0, min(cols, c0+Float8BlockSize)-c0, cols))
			total = 0x7FC00000
		}
		total = max(total, am)
		scales[bc], scaleInv[br*nb+bc] = Float8BlockScale(math.Float32frombits(am), c.Format, c.Eps, c.FP32Scales)
	}
	for r := r0; r < r1; r++ {
		kernels.QuantizeFP8Blocks(formats[c.Format].cast, dst[r*cols:(r+1)*cols], src[r*cols:(r+1)*cols], scales)
	}
	return total
}

// rowBlockAmax writes the amax bits of each 128-value block of row (the
// last one ragged) into out, NaN left out (fmaxf's rule), and reports
// whether a NaN was there.
func rowBlockAmax(out []uint32, row []float32) bool {
	full := len(row) / Float8BlockSize
	kernels.Amax128(out[:full], row)
	if full < len(out) {
		out[full] = kernels.AmaxBits(row[full*Float8BlockSize:])
	}
	nan := false
	for b, a := range out {
		if a > 0x7F800000 { // a NaN in the block: its amax without it
			out[b], _ = segAmax(row[b*Float8BlockSize : min(len(row), (b+1)*Float8BlockSize)])
			nan = true
		}
	}
	return nan
}

// segAmax returns max|x| of a segment as float32 bits with NaN left out
// (fmaxf's rule), and whether a NaN was there.
func segAmax(x []float32) (uint32, bool) {
	b := kernels.AmaxBits(x)
	if b <= 0x7F800000 {
		return b, false
	}
	var m uint32
	for _, v := range x {
		if a := math.Float32bits(v) & 0x7FFFFFFF; a <= 0x7F800000 && a > m {
			m = a
		}
	}
	return m, true
}

// unsafeBits views a float32 slice as its bits.
func unsafeBits(f []float32) []uint32 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), len(f))
}

// blockAmax is max|x| over the values of one block with NaNs left out
// (fmaxf's rule): rows of n values ld apart.
func blockAmax(src []float32, rows, n, ld int) float32 {
	var m uint32
	for r := 0; r < rows; r++ {
		b, _ := segAmax(src[r*ld : r*ld+n])
		m = max(m, b)
	}
	return math.Float32frombits(m)
}

// Float8BlockIndex returns the index, in QuantizeFloat8BlockAxis's
// scale_inv layout, of the block holding element (r, c) of a rows × cols
// matrix cast along axis with blocks of dimension dim.
func Float8BlockIndex(rows, cols, axis, dim, r, c int) int {
	switch {
	case dim == 2:
		return (r/Float8BlockSize)*((cols+Float8BlockSize-1)/Float8BlockSize) + c/Float8BlockSize
	case axis == 1:
		return r*((cols+Float8BlockSize-1)/Float8BlockSize) + c/Float8BlockSize
	}
	return c*((rows+Float8BlockSize-1)/Float8BlockSize) + r/Float8BlockSize
}
