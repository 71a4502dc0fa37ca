package fp8

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/octetml/octet/internal/kernels"
)

// Amax returns max|x| over src, or NaN if src holds a NaN (so that a
// non-finite step is seen and counted, rather than skipped). Like
// Quantize and Dequantize, it splits a slice of 64Ki values or more
// over the worker goroutines, with the same result.
func Amax(src []float32) float32 { return fromAmaxBits(amaxSplit(src)) }

// fromAmaxBits turns the bits of max|x| from a kernel into the amax: NaN
// for a NaN pattern.
func fromAmaxBits(m uint32) float32 {
	if m > 0x7F800000 {
		return float32(math.NaN())
	}
	return math.Float32frombits(m)
}

// Quantize writes Encode(x·scale) (saturating, in float32 as Transformer
// Engine and torchao compute it) of every x in src to dst and returns the
// amax of the unscaled input, in one pass. A dst shorter than src is an
// error (the rule of every slice-taking function of this package), and
// nothing is written. A slice of 64Ki values or more is split over the
// worker goroutines (one per core); codes and amax are the same.
func Quantize(dst []uint8, src []float32, f Format, scale float32) (float32, error) {
	if err := checkLen("quantize", len(dst), len(src)); err != nil {
		return 0, err
	}
	if err := checkFormat("quantize", f); err != nil {
		return 0, err
	}
	return fromAmaxBits(quantizeSplit(formats[f].cast, dst[:len(src)], src, scale)), nil
}

// quantize is Quantize for callers that have checked the lengths.
func quantize(dst []uint8, src []float32, f Format, scale float32) float32 {
	return fromAmaxBits(kernels.QuantizeFP8(formats[f].cast, dst, src, scale))
}

// checkLen refuses a destination shorter than its source.
func checkLen(op string, dst, src int) error {
	if dst < src {
		return fmt.Errorf("fp8: %s: dst has %d elements, src %d", op, dst, src)
	}
	return nil
}

// checkFormat refuses a Format that is neither E4M3 nor E5M2.
func checkFormat(op string, f Format) error {
	if f != E4M3 && f != E5M2 {
		return fmt.Errorf("fp8: %s: %v is not a format (want E4M3 or E5M2)", op, f)
	}
	return nil
}

// Dequantize writes Decode(q)·scaleInv for every q in src to dst
// (Transformer Engine's form). A dst shorter than src is an error, and
// nothing is written. Long slices are split over the workers, as in
// Quantize.
func Dequantize(dst []float32, src []uint8, f Format, scaleInv float32) error {
	if err := checkLen("dequantize", len(dst), len(src)); err != nil {
		return err
	}
	if err := checkFormat("dequantize", f); err != nil {
		return err
	}
	decodeSplit(formats[f].cast, dst[:len(src)], src, scaleInv)
	return nil
}

// minAmax is the floor torchao puts under an amax before dividing.
const minAmax = 1e-12

// CurrentScale returns torchao's dynamic scale for an amax:
// max / max(amax, 1e-12), computed in float64 and stored as float32,
// optionally rounded down to a power of two. Non-finite cases follow
// Transformer Engine's compute_scale_from_amax, so that the inverse scale
// is never infinite: an infinite or NaN amax gives scale 1, and a scale
// beyond float32 (not reachable with the 1e-12 floor) would be the
// largest float32.
func CurrentScale(amax float32, f Format, pow2 bool) float32 {
	a := float64(amax)
	if math.IsNaN(a) || math.IsInf(a, 0) {
		return 1
	}
	s := float32(min(float64(formats[f].max)/math.Max(a, minAmax), math.MaxFloat32))
	if pow2 {
		s = RoundDownPow2(s)
	}
	return s
}

// RoundDownPow2 returns the largest power of two ≤ s, for positive finite
// s (+inf stays +inf).
func RoundDownPow2(s float32) float32 {
	b := math.Float32bits(s)
	if b&0x7F800000 == 0x7F800000 || s <= 0 {
		return s
	}
	if b&0x7F800000 == 0 { // subnormal
		_, e := math.Frexp(float64(s))
		return float32(math.Ldexp(1, e-1))
	}
	return math.Float32frombits(b & 0xFF800000)
}

// checkMatrix verifies slice lengths of a [rows cols] matrix operation.
func checkMatrix(op string, rows, cols int, lens map[string][2]int) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("fp8: %s: negative shape [%d %d]", op, rows, cols)
	}
	for name, l := range lens {
		if l[0] < l[1] {
			return fmt.Errorf("fp8: %s: %s has %d elements, want %d for shape [%d %d]", op, name, l[0], l[1], rows, cols)
		}
	}
	return nil
}

// QuantizeAxiswise quantizes a row-major [rows cols] matrix with one
// dynamic scale per slice along axis, torchao's axiswise ("rowwise")
// granularity: axis 1 gives one scale per row (amax over the row), axis 0
// one per column. scales receives the scales (len rows or cols), amaxes
// (if not nil) the amaxes; dequantize with DequantizeAxiswise.
func QuantizeAxiswise(dst []uint8, scales, amaxes []float32, src []float32, rows, cols, axis int, f Format, pow2 bool) error {
	outer := rows
	if axis == 0 {
		outer = cols
	}
	return quantizeAxiswiseRange(dst, scales, amaxes, src, rows, cols, axis, f, pow2, 0, outer)
}

// quantizeAxiswiseRange is QuantizeAxiswise of the slices lo … hi−1
// along axis only (rows for axis 1, columns for axis 0), writing their
// codes, scales and amaxes where QuantizeAxiswise writes them and
// nothing else: calls on disjoint ranges may run concurrently, and
// together give QuantizeAxiswise's result.
func quantizeAxiswiseRange(dst []uint8, scales, amaxes []float32, src []float32, rows, cols, axis int, f Format, pow2 bool, lo, hi int) error {
	outer := rows
	if axis == 0 {
		outer = cols
	} else if axis != 1 {
		return fmt.Errorf("fp8: quantize axiswise: axis %d, want 0 or 1", axis)
	}
	lens := map[string][2]int{"src": {len(src), rows * cols}, "dst": {len(dst), rows * cols}, "scales": {len(scales), outer}}
	if amaxes != nil {
		lens["amaxes"] = [2]int{len(amaxes), outer}
	}
	if err := checkMatrix("quantize axiswise", rows, cols, lens); err != nil {
		return err
	}
	if lo < 0 || hi > outer || lo > hi {
		return fmt.Errorf("fp8: quantize axiswise: slices [%d, %d) of %d", lo, hi, outer)
	}
	if axis == 1 {
		for r := lo; r < hi; r++ {
			row := src[r*cols : r*cols+cols]
			a := Amax(row)
			s := CurrentScale(a, f, pow2)
			scales[r] = s
			if amaxes != nil {
				amaxes[r] = a
			}
			quantize(dst[r*cols:r*cols+cols], row, f, s)
		}
		return nil
	}
	if rows == 0 { // empty columns: amax 0
		for c := lo; c < hi; c++ {
			scales[c] = CurrentScale(0, f, pow2)
			if amaxes != nil {
				amaxes[c] = 0
			}
		}
		return nil
	}
	// Column amaxes a chunk of columns at a time (the vector kernel;
	// a chunk holding a NaN takes the loop, whose amax is then NaN),
	// then the cast with a scale per column.
	var acc [256]uint32
	for c0 := lo; c0 < hi; c0 += len(acc) {
		n := min(len(acc), hi-c0)
		if seen := kernels.AmaxColsBand(acc[:n], src[c0:], cols, rows, n); seen > 0x7F800000 {
			for j := range n {
				acc[j] = math.Float32bits(columnAmax(src, rows, cols, c0+j))
			}
		}
		for j, a := range acc[:n] {
			m := math.Float32frombits(a)
			scales[c0+j] = CurrentScale(m, f, pow2)
			if amaxes != nil {
				amaxes[c0+j] = m
			}
		}
	}
	if hi > lo {
		kernels.QuantizeFP8Cols(formats[f].cast, dst[lo:], cols, src[lo:], cols, scales[lo:hi], rows, hi-lo)
	}
	return nil
}

// columnAmax is max |x| down column c of a row-major [rows cols] matrix,
// NaN if the column holds one.
func columnAmax(src []float32, rows, cols, c int) float32 {
	var m float32
	for r := 0; r < rows; r++ {
		a := float32(math.Abs(float64(src[r*cols+c])))
		if a > m {
			m = a
		} else if a != a {
			return float32(math.NaN())
		}
	}
	return m
}

// DequantizeAxiswise inverts QuantizeAxiswise: Decode(q)/scale of the
// element's row (axis 1) or column (axis 0).
func DequantizeAxiswise(dst []float32, src []uint8, scales []float32, rows, cols, axis int, f Format) error {
	outer := rows
	if axis == 0 {
		outer = cols
	} else if axis != 1 {
		return fmt.Errorf("fp8: dequantize axiswise: axis %d, want 0 or 1", axis)
	}
	if err := checkMatrix("dequantize axiswise", rows, cols, map[string][2]int{
		"src": {len(src), rows * cols}, "dst": {len(dst), rows * cols}, "scales": {len(scales), outer}}); err != nil {
		return err
	}
	t := decodeTable(f)
	for r := 0; r < rows; r++ {
		row, out := src[r*cols:r*cols+cols], dst[r*cols:r*cols+cols]
		for c, q := range row {
			s := scales[r]
			if axis == 0 {
				s = scales[c]
			}
			out[c] = t[q] / s
		}
	}
	return nil
}

// BlockSize is the number of consecutive values that share one MXFP8
// scale.
const BlockSize = 32

// MXScaleCount returns how many E8M0 scales an MXFP8 [rows cols] matrix
// blocked along axis needs: one per 32 values along axis for every slice
// across it, stored slice by slice ([rows][⌈cols/32⌉] for axis 1,
// [cols][⌈rows/32⌉] for axis 0).
func MXScaleCount(rows, cols, axis int) int {
	if axis == 0 {
		return cols * ((rows + BlockSize - 1) / BlockSize)
	}
	return rows * ((cols + BlockSize - 1) / BlockSize)
}

// QuantizeMX quantizes a row-major [rows cols] matrix in MXFP8: each run
// of 32 consecutive values along axis (1: within a row, 0: within a
// column; the last block may be shorter) shares the E8M0 scale 2^e chosen
// by rule from the block's amax, and each value is stored as
// Encode(x / 2^e), saturating. It returns the amax of the whole input
// (NaN when it holds a NaN).
func QuantizeMX(dst []uint8, scales []E8M0, src []float32, rows, cols, axis int, f Format, rule ExpRule) (float32, error) {
	return quantizeMXRange(dst, scales, src, rows, cols, axis, f, rule, 0, mXSlices(rows, cols, axis))
}

// mXSlices is the number of independent slices of an MXFP8 cast that
// quantizeMXRange takes: rows along axis 1, bands of 32 rows along
// axis 0.
func mXSlices(rows, cols, axis int) int {
	if axis == 0 {
		return (rows + BlockSize - 1) / BlockSize
	}
	return rows
}

// quantizeMXRange is QuantizeMX for slices lo ≤ s < hi of the matrix
// (see mXSlices): their codes and scales, and the amax of their values
// (NaN when they hold a NaN). Disjoint ranges may run at once; the
// slices together give QuantizeMX's codes and scales, and the largest
// of their amaxes its amax. Blocks are read by the vector kernels: a
// row's blocks one by one, a band's columns a chunk at a time (a chunk
// holding a NaN column by column).
func quantizeMXRange(dst []uint8, scales []E8M0, src []float32, rows, cols, axis int, f Format, rule ExpRule, lo, hi int) (float32, error) {
	if axis != 0 && axis != 1 {
		return 0, fmt.Errorf("fp8: quantize MXFP8: axis %d, want 0 or 1", axis)
	}
	if err := checkFormat("quantize MXFP8", f); err != nil {
		return 0, err
	}
	if err := checkMatrix("quantize MXFP8", rows, cols, map[string][2]int{
		"src": {len(src), rows * cols}, "dst": {len(dst), rows * cols}, "scales": {len(scales), MXScaleCount(rows, cols, axis)}}); err != nil {
		return 0, err
	}
	if n := mXSlices(rows, cols, axis); lo < 0 || hi > n || lo > hi {
		return 0, fmt.Errorf("fp8: quantize MXFP8: slices [%d, %d) of %d", lo, hi, n)
	}
	var total uint32 // amax bits: NaN sorts above +inf
	const chunk = 256
	var acc [chunk]uint32
	var inv [chunk]float32
	cast := formats[f].cast
	if axis == 1 {
		// A row a chunk of blocks at a time: the block amaxes (Amax32;
		// a ragged last block by AmaxBits), their scales, the cast with
		// a scale per block.
		nb := (cols + BlockSize - 1) / BlockSize
		if cols%BlockSize == 0 {
			// Rows of whole blocks follow one another: the slices'
			// blocks as one run, a chunk at a time.
			for b0 := lo * nb; b0 < hi*nb; b0 += chunk {
				w := min(chunk, hi*nb-b0)
				o := b0 * BlockSize
				kernels.Amax32(acc[:w], src[o:o+w*BlockSize])
				total = max(total, mxScales(scales[b0:], 1, inv[:w], acc[:w], f, rule))
				kernels.QuantizeFP8Blocks32(cast, dst[o:o+w*BlockSize], src[o:o+w*BlockSize], inv[:w])
			}
			return fromAmaxBits(total), nil
		}
		for r := lo; r < hi; r++ {
			for b0 := 0; b0 < nb; b0 += chunk {
				w := min(chunk, nb-b0)
				o := r*cols + b0*BlockSize
				n := min(w*BlockSize, cols-b0*BlockSize)
				full := n / BlockSize
				kernels.Amax32(acc[:full], src[o:o+full*BlockSize])
				if full < w {
					acc[full] = kernels.AmaxBits(src[o+full*BlockSize : o+n])
				}
				total = max(total, mxScales(scales[r*nb+b0:], 1, inv[:w], acc[:w], f, rule))
				kernels.QuantizeFP8Blocks32(cast, dst[o:o+n], src[o:o+n], inv[:w])
			}
		}
		return fromAmaxBits(total), nil
	}
	// Axis 0: a band of up to 32 rows, its columns a chunk at a time:
	// the column amaxes (NaN left out, and a NaN seen), the scales,
	// the cast with a scale per column.
	nbr := (rows + BlockSize - 1) / BlockSize
	for b := lo; b < hi; b++ {
		r0 := b * BlockSize
		nr := min(BlockSize, rows-r0)
		for c0 := 0; c0 < cols; c0 += chunk {
			w := min(chunk, cols-c0)
			o := r0*cols + c0
			if kernels.AmaxColsBand(acc[:w], src[o:], cols, nr, w) > 0x7F800000 {
				// A NaN in the chunk: its columns one by one, each
				// column's own amax (a NaN making it NaN).
				for j := 0; j < w; j++ {
					m := uint32(0)
					for r := 0; r < nr; r++ {
						m = max(m, math.Float32bits(src[o+r*cols+j])&^(1<<31))
					}
					acc[j] = m
				}
			}
			total = max(total, mxScales(scales[c0*nbr+b:], nbr, inv[:w], acc[:w], f, rule))
			kernels.QuantizeFP8Cols(cast, dst[o:], cols, src[o:], cols, inv[:w], nr, w)
		}
	}
	return fromAmaxBits(total), nil
}

// mxScales sets scales[j·stride] to the E8M0 scale of block j, whose
// amax bits are amax[j] (a NaN pattern above +inf's), and inv[j] to the
// factor its values are cast with (2^−e, NaN for the NaN scale); it
// returns the largest amax bits. E4M3 and E5M2 take kernels.MXScales,
// BlockScale's integer form on whole vectors (a call per block cost 4%
// of an MXFP8 training step, the loop a further 3%); len(amax) is at
// most 256 when stride is not 1.
func mxScales(scales []E8M0, stride int, inv []float32, amax []uint32, f Format, rule ExpRule) uint32 {
	n := len(amax)
	if n == 0 {
		return 0
	}
	if f == E4M3 || f == E5M2 {
		ceil := rule != ExpOCPFloor
		if stride == 1 {
			return kernels.MXScales(unsafe.Slice((*uint8)(unsafe.Pointer(&scales[:n][0])), n), inv, amax, mxEmax(f), ceil)
		}
		var sc [256]uint8
		total := kernels.MXScales(sc[:n], inv, amax, mxEmax(f), ceil)
		for j, s := range sc[:n] {
			scales[j*stride] = E8M0(s)
		}
		return total
	}
	var total uint32
	for j, m := range amax {
		total = max(total, m)
		s := BlockScale(fromAmaxBits(m), f, rule)
		scales[j*stride] = s
		inv[j] = mxInv[s]
	}
	return total
}

// mxInv holds 2^−e of every E8M0 scale 2^e as float32 (NaN for the NaN
// scale): the factor an MXFP8 block's values are cast with.
var mxInv = func() (t [256]float32) {
	for s := range t {
		t[s] = float32(math.Ldexp(1, -E8M0(s).Exp()))
	}
	t[E8M0NaN] = float32(math.NaN())
	return t
}()

// DequantizeMX inverts QuantizeMX: Decode(q)·2^e of the element's block.
func DequantizeMX(dst []float32, src []uint8, scales []E8M0, rows, cols, axis int, f Format) error {
	if axis != 0 && axis != 1 {
		return fmt.Errorf("fp8: dequantize MXFP8: axis %d, want 0 or 1", axis)
	}
	if err := checkMatrix("dequantize MXFP8", rows, cols, map[string][2]int{
		"src": {len(src), rows * cols}, "dst": {len(dst), rows * cols}, "scales": {len(scales), MXScaleCount(rows, cols, axis)}}); err != nil {
		return err
	}
	t := decodeTable(f)
	forEachBlock(rows, cols, axis, func(k, start, stride, n int) {
		s := scales[k].Float32()
		for i := 0; i < n; i++ {
			dst[start+i*stride] = t[src[start+i*stride]] * s
		}
	})
	return nil
}

// forEachBlock calls fn for every MXFP8 block of a [rows cols] matrix
// blocked along axis, with the block's scale index, its first element,
// the stride between its elements and its length.
func forEachBlock(rows, cols, axis int, fn func(k, start, stride, n int)) {
	k := 0
	if axis == 1 {
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c += BlockSize {
				fn(k, r*cols+c, 1, min(BlockSize, cols-c))
				k++
			}
		}
		return
	}
	for c := 0; c < cols; c++ {
		for r := 0; r < rows; r += BlockSize {
			fn(k, r*cols+c, cols, min(BlockSize, rows-r))
			k++
		}
	}
}
