package fp8

import (
	"fmt"
	"math"

	"github.com/octetml/octet/internal/parallel"
)

// castSplitMin is the element count from which a Cast splits its work
// over the workers.
const castSplitMin = 1 << 15

// Cast is one GEMM operand's cast: the one object between a Quantizer
// and the GEMM. Built once for the quantizer, the operand's 2-D shape
// [rows, cols] and the axis its GEMM contracts along (1: along each
// row; 0: down the columns), it picks the kernel, splits the work over
// the workers, keeps the scales its last cast produced (for
// DelayedScaling it reads the Meta's scale and records the amax into
// it) and hands the GEMM its Operand. Casting allocates nothing.
//
// A Cast may cast fewer rows than it was built for (QuantizeRows; not
// NVFP4, whose quantizer is built for one shape): a grouped GEMM casts
// each expert's tokens with that expert's Cast, and the result is the
// cast a Cast built for exactly those rows gives, bit for bit.
type Cast struct {
	// Quantizer is the cast; Meta its delayed-scaling state
	// (DelayedScaling only); Axis the contraction axis.
	Quantizer Quantizer
	Meta      *Meta
	Axis      int
	// Rows and Cols are the shape of the last cast (Rows at most
	// MaxRows, the rows it was built for).
	Rows, Cols, MaxRows int
	// The scales of the last cast, one kind per quantizer family:
	// ScaleInv (delayed and tensorwise current scaling), AxisScaleInv
	// (axiswise: one per slice along the axis), Block (MXFP8's E8M0
	// scales, in QuantizeMX's layout), BlockScaleInv (Float8BlockScaling,
	// in QuantizeFloat8BlockAxis's layout), FP4 (the NVFP4 tensor; its
	// Codes may be pointed at the caller's buffer, as a column-wise
	// copy is stored transposed).
	ScaleInv      float32
	AxisScaleInv  []float32
	Block         []E8M0
	BlockScaleInv []float32
	FP4           *NVFP4
	// Amax is the amax of the last cast's input.
	Amax float32

	nvq      *NVFP4Quantizer
	tilesT   []float32   // a 2-D operand's tile grid turned around
	colWork  []float32   // a column-wise Float8BlockScaling cast's columns
	partWork [][]float32 // each part's scratch
	amax     []uint32    // each part's amax, as float32 bits (NaN above +inf)
	errs     []error
	group    parallel.Group
	partFn   func(int)

	// the cast being run, for its parts
	dst          []uint8
	src          []float32
	scale        float32
	units, parts int
	body         func(p, lo, hi int)
	castBody     func(p, lo, hi int)
	amaxBody     func(p, lo, hi int)
	axisBody     func(p, lo, hi int)
	blockBody    func(p, lo, hi int)
	mxBody       func(p, lo, hi int)
	unit         int  // axiswise: slices per unit (16 columns, or 1 row)
	bands, cwise bool // Float8BlockScaling: split the rows in bands of 128; column-wise
}

// NewCast returns the cast per q of operands of up to rows × cols
// values whose GEMM contracts along axis (0 or 1), with meta the
// delayed-scaling state of a DelayedScaling quantizer. High precision
// and bf16 quantizers do not cast to codes and are refused, as are an
// NVFP4 transform along a length not a multiple of 16, a meta of another
// format and a missing one.
func NewCast(q Quantizer, rows, cols, axis int, meta *Meta) (*Cast, error) {
	if err := q.Check(); err != nil {
		return nil, fmt.Errorf("fp8: cast: %w", err)
	}
	switch {
	case rows < 0 || cols < 0:
		return nil, fmt.Errorf("fp8: cast: negative shape [%d %d]", rows, cols)
	case axis != 0 && axis != 1:
		return nil, fmt.Errorf("fp8: cast: axis %d, want 0 or 1", axis)
	case q.Kind == HighPrecision || q.Kind == BF16Rounding:
		return nil, fmt.Errorf("fp8: cast: the quantizer is %v, which does not cast to FP8 codes (want delayed or current scaling, MXFP8, Float8BlockScaling or NVFP4)", q.Kind)
	case q.Kind == DelayedScaling && meta == nil:
		return nil, fmt.Errorf("fp8: cast: delayed scaling needs an fp8.Meta")
	case q.Kind == DelayedScaling && meta.Format != q.Format:
		return nil, fmt.Errorf("fp8: cast: meta format %v differs from cast format %v", meta.Format, q.Format)
	}
	w := parallel.Workers()
	c := &Cast{Quantizer: q, Meta: meta, Axis: axis, Rows: rows, Cols: cols, MaxRows: rows, ScaleInv: 1,
		amax: make([]uint32, w), errs: make([]error, w)}
	switch q.Kind {
	case CurrentScaling:
		if q.Axiswise {
			n := rows
			if axis == 0 {
				n = cols
			}
			c.AxisScaleInv = make([]float32, n)
		}
	case MXFP8Blocks:
		c.Block = make([]E8M0, MXScaleCount(rows, cols, axis))
	case NVFP4Blocks:
		r, cc := rows, cols
		if axis == 0 && q.Dim() == 1 {
			r, cc = cols, rows // the column-wise copy, stored transposed
		}
		c.FP4 = NewNVFP4(r, cc, q.Dim() == 2)
		nvq, err := NewNVFP4Quantizer(rows, cols, axis, Quantizer{Kind: NVFP4Blocks, BlockDim: q.Dim(), RHT: q.RHT, Stochastic: q.Stochastic})
		if err != nil {
			return nil, err
		}
		c.nvq = nvq
	case Float8Blocks:
		n := Float8BlockScaleCount(rows, cols, axis, q.Dim())
		c.BlockScaleInv = make([]float32, n)
		if q.Dim() == 2 {
			c.tilesT = make([]float32, n)
		} else if axis == 0 {
			c.colWork = make([]float32, cols)
		}
		nb := (cols + Float8BlockSize - 1) / Float8BlockSize
		perPart := (rows + w - 1) / w
		c.partWork = make([][]float32, w)
		for i := range c.partWork {
			c.partWork[i] = make([]float32, max(cols, (Float8BlockSize+1)*nb, perPart*nb))
		}
	}
	c.partFn = c.part
	c.castBody = c.castPart
	c.amaxBody = c.amaxPart
	c.axisBody = c.axisPart
	c.blockBody = c.blockPart
	c.mxBody = c.mxPart
	return c, nil
}

// Quantize casts src (MaxRows × Cols values) into dst, as QuantizeRows.
func (c *Cast) Quantize(dst []uint8, src []float32, key uint64, record bool) error {
	return c.QuantizeRows(dst, src, c.MaxRows, key, record)
}

// QuantizeRows casts the first rows × Cols values of src into dst
// (NVFP4: into FP4) and keeps their scales. key seeds NVFP4's stochastic
// rounding; record records the amax into a delayed-scaling Meta (a
// training step's cast, not an evaluation's).
func (c *Cast) QuantizeRows(dst []uint8, src []float32, rows int, key uint64, record bool) error {
	n := rows * c.Cols
	switch {
	case rows < 0 || rows > c.MaxRows:
		return fmt.Errorf("fp8: cast: %d rows, want 0 to %d", rows, c.MaxRows)
	case len(src) < n:
		return fmt.Errorf("fp8: cast: %d inputs for %d × %d", len(src), rows, c.Cols)
	case c.FP4 == nil && len(dst) < n:
		return fmt.Errorf("fp8: cast: FP8 buffer of %d values for %d inputs", len(dst), n)
	case c.FP4 != nil && rows != c.MaxRows:
		return fmt.Errorf("fp8: cast: NVFP4 casts of %d rows, not %d", c.MaxRows, rows)
	}
	c.Rows, c.dst, c.src = rows, dst, src[:n]
	defer func() { c.dst, c.src = nil, nil }()
	q, f := c.Quantizer, c.Quantizer.Format
	switch q.Kind {
	case NVFP4Blocks:
		if err := c.nvq.Quantize(c.FP4, c.src, key); err != nil {
			return err
		}
		c.Amax = c.FP4.Amax
		return nil
	case DelayedScaling:
		m := c.Meta
		c.ScaleInv, c.scale = m.ScaleInv, m.Scale
		c.Amax = c.run(n, c.castBody)
		if record {
			m.Record(c.Amax)
			if !m.Start.Done {
				m.CountStart(dst[:n], CountZeros(c.src))
			}
		}
		return nil
	case CurrentScaling:
		if q.Axiswise {
			outer, unit := rows, 1
			if c.Axis == 0 {
				outer, unit = c.Cols, 16
			}
			c.unit = unit
			c.run((outer+unit-1)/unit, c.axisBody)
			return c.firstErr()
		}
		c.Amax = c.run(n, c.amaxBody)
		c.scale = CurrentScale(c.Amax, f, q.Pow2)
		c.run(n, c.castBody)
		c.ScaleInv = 1 / c.scale
		return nil
	case Float8Blocks:
		// The cast's independent slices (rows, bands of 128 rows, or
		// columns) split over the workers, each with its own scratch. A
		// column-wise cast splits into bands of 128 rows when there are
		// enough of them — each part reads the rows the same part of
		// the producer wrote — and otherwise at strips of 16 columns, so
		// that each part's columns are whole vectors.
		c.cwise = q.Dim() == 1 && c.Axis == 0
		bandsN := (rows + Float8BlockSize - 1) / Float8BlockSize
		c.bands = c.cwise && bandsN >= parallel.Workers()
		units := float8BlockSlices(rows, c.Cols, c.Axis, q.Dim())
		switch {
		case c.bands:
			units = bandsN
		case c.cwise:
			units = (c.Cols + 15) / 16
		}
		c.Amax = c.run(units, c.blockBody)
		return c.firstErr()
	default: // MXFP8: rows, or bands of 32 rows
		c.Amax = c.run(mXSlices(rows, c.Cols, c.Axis), c.mxBody)
		return c.firstErr()
	}
}

// run splits units over the workers (one part for small casts) and
// returns the parts' amax.
func (c *Cast) run(units int, body func(p, lo, hi int)) float32 {
	c.units, c.body, c.parts = units, body, 1
	if w := parallel.Workers(); len(c.src) >= castSplitMin && units >= w {
		c.parts = min(w, len(c.amax))
	}
	for i := range c.parts {
		c.amax[i], c.errs[i] = 0, nil
	}
	c.group.For(c.parts, c.partFn)
	a := c.amax[0]
	for _, v := range c.amax[1:c.parts] {
		a = max(a, v)
	}
	return math.Float32frombits(a)
}

func (c *Cast) part(i int) {
	c.body(i, i*c.units/c.parts, (i+1)*c.units/c.parts)
}

func (c *Cast) firstErr() error {
	for _, err := range c.errs[:c.parts] {
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Cast) castPart(p, lo, hi int) {
	a, _ := Quantize(c.dst[lo:hi], c.src[lo:hi], c.Quantizer.Format, c.scale) // lengths checked, format by Check
	c.amax[p] = math.Float32bits(a)
}

func (c *Cast) amaxPart(p, lo, hi int) {
	c.amax[p] = math.Float32bits(Amax(c.src[lo:hi]))
}

func (c *Cast) axisPart(p, lo, hi int) {
	outer := c.Rows
	if c.Axis == 0 {
		outer = c.Cols
	}
	lo, hi = lo*c.unit, min(outer, hi*c.unit)
	inv := c.AxisScaleInv
	c.errs[p] = quantizeAxiswiseRange(c.dst, inv, nil, c.src, c.Rows, c.Cols, c.Axis, c.Quantizer.Format, c.Quantizer.Pow2, lo, hi)
	for i := lo; i < hi; i++ { // the cast wrote the scales
		inv[i] = 1 / inv[i]
	}
}

func (c *Cast) blockPart(p, lo, hi int) {
	q := c.Quantizer
	bc := Quantizer{Kind: Float8Blocks, BlockDim: q.BlockDim, Format: q.Format, FP32Scales: q.FP32Scales, Eps: q.Eps}
	work := c.partWork[p]
	var a float32
	var err error
	switch {
	case c.bands:
		a, err = quantizeFloat8BlockBands(c.dst, c.BlockScaleInv, c.src, c.Rows, c.Cols, bc, lo, hi, work)
	case c.cwise:
		lo, hi = 16*lo, min(c.Cols, 16*hi)
		a, err = quantizeFloat8BlockRange(c.dst, c.BlockScaleInv, c.src, c.Rows, c.Cols, c.Axis, bc, lo, hi, c.colWork[lo:hi])
	default:
		a, err = quantizeFloat8BlockRange(c.dst, c.BlockScaleInv, c.src, c.Rows, c.Cols, c.Axis, bc, lo, hi, work)
	}
	c.amax[p], c.errs[p] = math.Float32bits(a), err
}

func (c *Cast) mxPart(p, lo, hi int) {
	a, err := quantizeMXRange(c.dst, c.Block, c.src, c.Rows, c.Cols, c.Axis, c.Quantizer.Format, c.Quantizer.Rule, lo, hi)
	c.amax[p], c.errs[p] = math.Float32bits(a), err
}

// Transformed returns the values an NVFP4 cast with the random Hadamard
// transform or a column-wise copy quantized (nil otherwise): what its
// codes approximate.
func (c *Cast) Transformed() []float32 {
	if c.nvq == nil {
		return nil
	}
	return c.nvq.Cast()
}

// Operand returns the GEMM operand of the last cast's codes, stored
// transposed or not; kRows says the GEMM contracts the stored matrix
// along its rows (A transposed, or B not transposed), which turns a
// 2-D operand's tile grid around.
func (c *Cast) Operand(codes []uint8, trans, kRows bool) Operand {
	q := c.Quantizer
	if c.FP4 != nil {
		// A column-wise copy is stored transposed: op(X) flips.
		if c.Axis == 0 && q.Dim() == 1 {
			trans = !trans
		}
		return Operand{FP4: c.FP4, Trans: trans}
	}
	o := Operand{Codes: codes, Format: q.Format, Trans: trans, ScaleInv: c.ScaleInv, AxisScaleInv: c.AxisScaleInv, Block: c.Block}
	if q.Kind == Float8Blocks {
		o.BlockScaleInv, o.BlockTiles = c.BlockScaleInv, q.Dim() == 2
		if o.BlockTiles && kRows {
			// Tiles [⌈rows/128⌉][⌈cols/128⌉] with k along the rows: the
			// GEMM wants [outer = cols][k].
			tr, tc := Float8BlockScaleShape(c.Rows, c.Cols, 2)
			for i := 0; i < tr; i++ {
				for j := 0; j < tc; j++ {
					c.tilesT[j*tr+i] = c.BlockScaleInv[i*tc+j]
				}
			}
			o.BlockScaleInv = c.tilesT
		}
	}
	return o
}
