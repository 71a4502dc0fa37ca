package ops

import (
	"fmt"
	"hash/fnv"
	"math"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/parallel"
)

// scaling is how a cast picks its scale: the families of fp8.Quantizer
// a graph casts with, the current-scaling one split by granularity.
type scaling uint8

const (
	// scDelayed uses the scale of an fp8.Meta computed from earlier steps
	// and records the amax of this step into it (Transformer Engine).
	scDelayed scaling = iota
	// scCurrent computes one scale from this tensor's amax (torchao
	// tensorwise dynamic scaling).
	scCurrent
	// scAxiswise computes one scale per slice along the GEMM's
	// contraction axis (torchao rowwise).
	scAxiswise
	// scMXFP8: one E8M0 scale per 32 values along the contraction axis.
	scMXFP8
	// scFloat8Block is Transformer Engine's Float8BlockScaling: a float32
	// scale per 128 values along the contraction axis (BlockDim 1) or per
	// 128×128 tile (BlockDim 2), computed from the block's own amax at
	// every cast (fp8.QuantizeFloat8BlockAxis).
	scFloat8Block
	// scNVFP4 is Transformer Engine's NVFP4BlockScaling: 4-bit E2M1
	// elements (dtype Float4E2M1, two per byte) with an E4M3 scale per 16
	// values along the contraction axis (BlockDim 1) or per 16×16 tile
	// (BlockDim 2) and a float32 scale per tensor, optionally after the
	// random Hadamard transform along the contraction axis (RHT) and
	// with stochastic rounding (Stochastic, keyed by Seed, the node's
	// name, the step and the element, so a resumed run draws the same).
	scNVFP4
	// scNone: a quantizer kind no graph cast has (high precision, bf16).
	scNone
)

var scalingNames = [...]string{"delayed", "current", "axiswise", "mxfp8", "float8block", "nvfp4"}

// String names the scaling as dumps show it.
func (s scaling) String() string {
	if int(s) < len(scalingNames) {
		return scalingNames[s]
	}
	return "none"
}

// QuantizeConfig describes one cast to FP8 (or NVFP4) in a graph: the
// cast, an fp8.Quantizer — its Kind DelayedScaling, CurrentScaling
// (Axiswise for one scale per slice along the contraction axis),
// MXFP8Blocks, Float8Blocks or NVFP4Blocks, with its format, power-of-two
// scales, exponent rule, block dimension (1 or 2, given), float32 block
// scales, amax epsilon, transform, stochastic rounding and seed — and
// what the compiler adds: the delayed-scaling state, the contraction
// axis and the tensor's role. graph.SettingsOf[QuantizeConfig] reads it
// from every node that casts.
type QuantizeConfig struct {
	fp8.Quantizer
	// Meta is the delayed-scaling state (DelayedScaling only). Several
	// nodes may share one; it is updated once at the end of each
	// training step.
	Meta *fp8.Meta
	// Axis is the contraction axis of the tensor's 2-D view [rows, last]
	// for axiswise and block casts: 1 when the GEMM contracts over the
	// last axis, 0 when it contracts over the rows.
	Axis int
	// Tensor is the role of the tensor in its layer (input, weight,
	// grad_output), shown in dumps and reports; zero for none.
	Tensor fp8.TensorRole
}

// scaling is the cast's family, scNone for a kind no graph cast has.
func (c QuantizeConfig) scaling() scaling {
	switch c.Kind {
	case fp8.DelayedScaling:
		return scDelayed
	case fp8.CurrentScaling:
		if c.Axiswise {
			return scAxiswise
		}
		return scCurrent
	case fp8.MXFP8Blocks:
		return scMXFP8
	case fp8.Float8Blocks:
		return scFloat8Block
	case fp8.NVFP4Blocks:
		return scNVFP4
	}
	return scNone
}

// scalesKey is the metadata an FP8 value carries for its consumers.
var scalesKey = graph.NewValueKey[*fp8Scales]("fp8 scales")

// fp8Scales travel with an FP8 value in a compiled program (its
// graph.Value's metadata under scalesKey): what a consumer needs to
// decode it.
type fp8Scales struct {
	Config QuantizeConfig
	// Rows and Cols are the value's 2-D view.
	Rows, Cols int
	// ScaleInv is the tensorwise factor (Delayed, Current).
	ScaleInv float32
	// AxisScaleInv has one factor per slice along Config.Axis (Axiswise).
	AxisScaleInv []float32
	// Block holds MXFP8 scales (Block).
	Block []fp8.E8M0
	// BlockScaleInv holds Float8BlockScaling decode factors in
	// fp8.QuantizeFloat8BlockAxis's layout (Float8Block); tilesT is the
	// transposed tile grid a GEMM contracting a 2-D operand along its rows
	// reads, and work the cast's scratch.
	BlockScaleInv []float32
	tilesT, work  []float32
	// FP4 is the NVFP4 tensor (NVFP4): its codes are the value's bytes,
	// stored transposed for a 1-D cast along axis 0; key and step seed its
	// stochastic rounding.
	FP4  *fp8.NVFP4
	nvq  *fp8.NVFP4Quantizer
	key  uint64
	step *int64
	// Amax is the amax of the last cast.
	Amax float32
}

// Operand returns the fp8.Operand for codes, transposed or not; kRows
// says the GEMM contracts the stored matrix along its rows (A
// transposed, or B not transposed), which turns a 2-D operand's tile
// grid around.
func (s *fp8Scales) Operand(codes []uint8, trans, kRows bool) fp8.Operand {
	o := fp8.Operand{Codes: codes, Format: s.Config.Format, Trans: trans,
		ScaleInv: s.ScaleInv, AxisScaleInv: s.AxisScaleInv, Block: s.Block}
	if s.FP4 != nil {
		// A column-wise copy is stored transposed: op(X) flips.
		if s.Config.Axis == 0 && s.Config.BlockDim == 1 {
			trans = !trans
		}
		return fp8.Operand{FP4: s.FP4, Trans: trans}
	}
	if s.Config.scaling() == scFloat8Block {
		o.BlockScaleInv, o.BlockTiles = s.BlockScaleInv, s.Config.BlockDim == 2
		if o.BlockTiles && kRows {
			// Tiles [⌈rows/128⌉][⌈cols/128⌉] with k along the rows: the
			// GEMM wants [outer = cols][k].
			tr, tc := fp8.Float8BlockScaleShape(s.Rows, s.Cols, 2)
			for i := 0; i < tr; i++ {
				for j := 0; j < tc; j++ {
					s.tilesT[j*tr+i] = s.BlockScaleInv[i*tc+j]
				}
			}
			o.BlockScaleInv = s.tilesT
		}
	}
	return o
}

// float8BlockCast is the fp8 cast of a Float8Block config.
func (c QuantizeConfig) float8BlockCast() fp8.Quantizer {
	return fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: c.BlockDim, Format: c.Format, FP32Scales: c.FP32Scales, Eps: c.Eps}
}

// castDType is the dtype a cast per cfg produces.
func castDType(cfg QuantizeConfig) graph.DType {
	if cfg.scaling() == scNVFP4 {
		return graph.Float4E2M1
	}
	return formatDType(cfg.Format)
}

func formatDType(f fp8.Format) graph.DType {
	if f == fp8.E5M2 {
		return graph.Float8E5M2
	}
	return graph.Float8E4M3
}

// view2D returns the [rows, last] view of a shape.
func view2D(s graph.Shape) (rows, cols int) {
	if len(s) == 0 {
		return 1, 1
	}
	cols = s[len(s)-1]
	return s.Numel() / cols, cols
}

// quantizeOp casts a float32 tensor to FP8 per its config.
type quantizeOp struct{ cfg QuantizeConfig }

func (o quantizeOp) Type() string     { return KindQuantize.String() }
func (o quantizeOp) Kind() graph.Kind { return KindQuantize }
func (o quantizeOp) Attrs() string {
	s := fmt.Sprintf("%v,%v", o.cfg.Format, o.cfg.scaling())
	switch {
	case o.cfg.scaling() == scNVFP4 && o.cfg.BlockDim == 2:
		s += ",16x16"
	case o.cfg.scaling() == scNVFP4:
		s += fmt.Sprintf(",1x16,axis=%d", o.cfg.Axis)
	case o.cfg.scaling() == scFloat8Block && o.cfg.BlockDim == 2:
		s += ",128x128"
	case o.cfg.scaling() == scFloat8Block:
		s += fmt.Sprintf(",1x128,axis=%d", o.cfg.Axis)
	case o.cfg.scaling() == scAxiswise || o.cfg.scaling() == scMXFP8:
		s += fmt.Sprintf(",axis=%d", o.cfg.Axis)
	}
	if o.cfg.scaling() == scFloat8Block && o.cfg.FP32Scales {
		s += ",fp32-scales"
	}
	if o.cfg.scaling() == scNVFP4 && o.cfg.RHT {
		s += ",rht"
	}
	if o.cfg.scaling() == scNVFP4 && o.cfg.Stochastic {
		s += ",stochastic"
	}
	if o.cfg.scaling() == scFloat8Block && o.cfg.Eps != 0 {
		s += fmt.Sprintf(",eps=%g", o.cfg.Eps)
	}
	if o.cfg.Tensor != 0 {
		s += "," + o.cfg.Tensor.String()
	}
	return s
}

// Config returns the cast's configuration.
func (o quantizeOp) Config() QuantizeConfig { return o.cfg }

func validateQuantize(cfg QuantizeConfig) error {
	switch {
	case cfg.Format > fp8.E5M2:
		return fmt.Errorf("unknown FP8 format %v", cfg.Format)
	case cfg.scaling() == scNone:
		return fmt.Errorf("the quantizer is %v, which does not cast in a graph (want delayed or current scaling, MXFP8, Float8BlockScaling or NVFP4)", cfg.Kind)
	case cfg.scaling() == scNVFP4 && cfg.BlockDim != 1 && cfg.BlockDim != 2:
		return fmt.Errorf("NVFP4 block dimension %d, want 1 (1×16) or 2 (16×16)", cfg.BlockDim)
	case cfg.scaling() == scFloat8Block && cfg.BlockDim != 1 && cfg.BlockDim != 2:
		return fmt.Errorf("Float8BlockScaling block dimension %d, want 1 (1×128) or 2 (128×128)", cfg.BlockDim)
	case cfg.scaling() == scFloat8Block && (!(cfg.Eps >= 0) || math.IsInf(float64(cfg.Eps), 0)):
		return fmt.Errorf("Float8BlockScaling amax epsilon %v, want a finite number ≥ 0", cfg.Eps)
	case cfg.scaling() == scDelayed && cfg.Meta == nil:
		return fmt.Errorf("delayed scaling needs an fp8.Meta")
	case cfg.scaling() == scDelayed && cfg.Meta.Format != cfg.Format:
		return fmt.Errorf("meta format %v differs from cast format %v", cfg.Meta.Format, cfg.Format)
	case (cfg.scaling() == scAxiswise || cfg.scaling() == scMXFP8 || cfg.scaling() == scFloat8Block || cfg.scaling() == scNVFP4) && cfg.Axis != 0 && cfg.Axis != 1:
		return fmt.Errorf("axis %d, want 0 or 1", cfg.Axis)
	}
	return nil
}

func (o quantizeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if in[0].Shape().Rank() == 0 {
		return nil, graph.Invalid, fmt.Errorf("input %q is a scalar", in[0].Name())
	}
	if err := validateQuantize(o.cfg); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkNVFP4Shape(o.cfg, in[0]); err != nil {
		return nil, graph.Invalid, err
	}
	return in[0].Shape(), castDType(o.cfg), nil
}

// checkNVFP4Shape refuses an NVFP4 cast whose transform would run along
// a length that is not a multiple of 16.
func checkNVFP4Shape(cfg QuantizeConfig, x *graph.Node) error {
	if cfg.scaling() != scNVFP4 || !cfg.RHT {
		return nil
	}
	rows, cols := view2D(x.Shape())
	n := cols
	if cfg.Axis == 0 && cfg.BlockDim == 1 {
		n = rows
	}
	if n%fp8.NVFP4Block != 0 {
		return fmt.Errorf("the random Hadamard transform of %q runs along %d values, not a multiple of 16", x.Name(), n)
	}
	return nil
}

// bindScales is newScales for a node being bound: an NVFP4 cast's codes
// are the output's bytes, and its stochastic rounding is keyed by the
// seed, the node's name and the program's step.
func bindScales(b *graph.Binding, cfg QuantizeConfig, s graph.Shape) *fp8Scales {
	sc := newScales(cfg, s)
	if sc.FP4 != nil {
		sc.FP4.Codes = b.Out.U8[:len(sc.FP4.Codes)]
		h := fnv.New64a()
		h.Write([]byte(b.Node.Name()))
		sc.key, sc.step = cfg.Seed^h.Sum64(), b.Step()
	}
	return sc
}

// newScales allocates the scales of a value of shape s cast per cfg.
func newScales(cfg QuantizeConfig, s graph.Shape) *fp8Scales {
	rows, cols := view2D(s)
	sc := &fp8Scales{Config: cfg, Rows: rows, Cols: cols, ScaleInv: 1}
	switch cfg.scaling() {
	case scAxiswise:
		n := rows
		if cfg.Axis == 0 {
			n = cols
		}
		sc.AxisScaleInv = make([]float32, n)
	case scMXFP8:
		sc.Block = make([]fp8.E8M0, fp8.MXScaleCount(rows, cols, cfg.Axis))
	case scNVFP4:
		r, c := rows, cols
		if cfg.Axis == 0 && cfg.BlockDim == 1 {
			r, c = cols, rows // the column-wise copy, stored transposed
		}
		sc.FP4 = fp8.NewNVFP4(r, c, cfg.BlockDim == 2)
		// The shape was checked when the node was built (checkNVFP4Shape).
		sc.nvq, _ = fp8.NewNVFP4Quantizer(rows, cols, cfg.Axis, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: cfg.BlockDim, RHT: cfg.RHT, Stochastic: cfg.Stochastic})
	case scFloat8Block:
		n := fp8.Float8BlockScaleCount(rows, cols, cfg.Axis, cfg.BlockDim)
		sc.BlockScaleInv = make([]float32, n)
		if cfg.BlockDim == 2 {
			sc.tilesT = make([]float32, n)
		} else if cfg.Axis == 0 {
			sc.work = make([]float32, cols)
		}
	}
	return sc
}

// castKernel returns the function that casts src into dst and fills sc,
// recording amaxes into a delayed meta when record is set. Quantize and
// the fused LayerNormQuantize share it.
func castKernel(cfg QuantizeConfig, sc *fp8Scales, dst []uint8, src []float32, record bool) func() error {
	rows, cols, f := sc.Rows, sc.Cols, cfg.Format
	// Tensorwise casts split over the workers, each piece keeping its
	// amax (as float32 bits, so that NaN sorts above +inf).
	if cfg.scaling() == scNVFP4 {
		return func() error {
			var key uint64
			if cfg.Stochastic {
				key = nvfp4Key(sc.key, *sc.step)
			}
			if sc.nvq == nil {
				return fmt.Errorf("NVFP4 cast of a %d × %d tensor along axis %d: the transform needs a multiple of 16", rows, cols, cfg.Axis)
			}
			if err := sc.nvq.Quantize(sc.FP4, src, key); err != nil {
				return err
			}
			sc.Amax = sc.FP4.Amax
			return nil
		}
	}
	var scale float32
	amax := make([]uint32, parallel.Workers())
	if len(dst) < len(src) {
		return func() error { return fmt.Errorf("FP8 buffer of %d values for %d inputs", len(dst), len(src)) }
	}
	cast := newPartChunker(len(src), len(src), func(p, lo, hi int) {
		a, _ := fp8.Quantize(dst[lo:hi], src[lo:hi], f, scale) // lengths checked above, format by the op
		amax[p] = math.Float32bits(a)
	})
	measure := newPartChunker(len(src), len(src), func(p, lo, hi int) {
		amax[p] = math.Float32bits(fp8.Amax(src[lo:hi]))
	})
	run := func(c *chunker) float32 {
		c.group.For(c.parts, c.run)
		return partsAmax(amax[:c.parts])
	}
	switch cfg.scaling() {
	case scDelayed:
		m := cfg.Meta
		return func() error {
			sc.ScaleInv, scale = m.ScaleInv, m.Scale
			sc.Amax = run(cast)
			if record {
				m.Record(sc.Amax)
				if !m.Start.Done {
					m.CountStart(dst[:len(src)], fp8.CountZeros(src))
				}
			}
			return nil
		}
	case scCurrent:
		return func() error {
			sc.Amax = run(measure)
			scale = fp8.CurrentScale(sc.Amax, f, cfg.Pow2)
			run(cast)
			sc.ScaleInv = 1 / scale
			return nil
		}
	case scAxiswise:
		// The slices split over the workers: rows, or columns in strips
		// of 16 (the vector cast's width).
		inv := sc.AxisScaleInv
		outer, unit := rows, 1
		if cfg.Axis == 0 {
			outer, unit = cols, 16
		}
		errs := make([]error, parallel.Workers())
		c := newPartChunker((outer+unit-1)/unit, len(src), func(p, lo, hi int) {
			lo, hi = lo*unit, min(outer, hi*unit)
			errs[p] = fp8.QuantizeAxiswiseRange(dst, inv, nil, src, rows, cols, cfg.Axis, f, cfg.Pow2, lo, hi)
			for i := lo; i < hi; i++ { // the cast wrote the scales
				inv[i] = 1 / inv[i]
			}
		})
		return func() error {
			c.group.For(c.parts, c.run)
			for _, err := range errs[:c.parts] {
				if err != nil {
					return err
				}
			}
			return nil
		}
	case scFloat8Block:
		// The cast's independent slices (rows, bands of 128 rows, or
		// columns) split over the workers, each with its own scratch.
		bc := cfg.float8BlockCast()
		slices := fp8.Float8BlockSlices(rows, cols, cfg.Axis, cfg.BlockDim)
		errs := make([]error, parallel.Workers())
		nb := (cols + fp8.Float8BlockSize - 1) / fp8.Float8BlockSize
		partWork := make([][]float32, parallel.Workers())
		perPart := (rows + parallel.Workers() - 1) / parallel.Workers()
		for i := range partWork {
			partWork[i] = make([]float32, max(cols, (fp8.Float8BlockSize+1)*nb, perPart*nb))
		}
		// A column-wise cast splits into bands of 128 rows when there
		// are enough of them — each part reads the rows the same part
		// of the producer wrote — and otherwise at strips of 16
		// columns, so that each part's columns are whole vectors.
		colWise := cfg.BlockDim == 1 && cfg.Axis == 0
		bands := colWise && (rows+fp8.Float8BlockSize-1)/fp8.Float8BlockSize >= parallel.Workers()
		units := slices
		switch {
		case bands:
			units = (rows + fp8.Float8BlockSize - 1) / fp8.Float8BlockSize
		case colWise:
			units = (cols + 15) / 16
		}
		split := newPartChunker(units, len(src), func(p, lo, hi int) {
			work := partWork[p]
			var a float32
			var err error
			switch {
			case bands:
				a, err = fp8.QuantizeFloat8BlockBands(dst, sc.BlockScaleInv, src, rows, cols, bc, lo, hi, work)
			case colWise:
				lo, hi = 16*lo, min(cols, 16*hi)
				a, err = fp8.QuantizeFloat8BlockRange(dst, sc.BlockScaleInv, src, rows, cols, cfg.Axis, bc, lo, hi, sc.work[lo:hi])
			default:
				a, err = fp8.QuantizeFloat8BlockRange(dst, sc.BlockScaleInv, src, rows, cols, cfg.Axis, bc, lo, hi, work)
			}
			amax[p], errs[p] = math.Float32bits(a), err
		})
		return func() error {
			sc.Amax = run(split)
			for _, err := range errs[:split.parts] {
				if err != nil {
					return err
				}
			}
			return nil
		}
	default:
		// MXFP8: the cast's independent slices (rows, or bands of 32
		// rows) split over the workers.
		errs := make([]error, parallel.Workers())
		split := newPartChunker(fp8.MXSlices(rows, cols, cfg.Axis), len(src), func(p, lo, hi int) {
			a, err := fp8.QuantizeMXRange(dst, sc.Block, src, rows, cols, cfg.Axis, f, cfg.Rule, lo, hi)
			amax[p], errs[p] = math.Float32bits(a), err
		})
		return func() error {
			sc.Amax = run(split)
			for _, err := range errs[:split.parts] {
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
}

func (o quantizeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	sc := bindScales(b, o.cfg, b.In[0].Shape)
	graph.SetMeta(b.Out, scalesKey, sc)
	record := b.Training && o.cfg.scaling() == scDelayed
	if record {
		b.AtStepEnd(func() error { o.cfg.Meta.Update(); return nil })
	}
	return castKernel(o.cfg, sc, b.Out.U8, b.In[0].F32, record), nil
}

// Grad is the straight-through estimator: the cast's gradient is dy.
func (o quantizeOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	return []*graph.Node{dy}
}

// Quantize casts x to FP8 per cfg. The result carries its scales to the
// ScaledMatMul nodes that read it. In a training program a Delayed cast
// records its amax and updates its meta at the end of each step; in an
// evaluation program it records nothing.
func Quantize(x *graph.Node, cfg QuantizeConfig) *graph.Node {
	return apply(quantizeOp{cfg}, "", x)
}

// QuantizeNamed is Quantize with an explicit node name.
func QuantizeNamed(name string, x *graph.Node, cfg QuantizeConfig) *graph.Node {
	return apply(quantizeOp{cfg}, name, x)
}

// partsAmax combines the amaxes the parts of a cast recorded (float32
// bits, so that a NaN sorts above +inf) into the cast's.
func partsAmax(parts []uint32) float32 {
	a := parts[0]
	for _, v := range parts[1:] {
		a = max(a, v)
	}
	return math.Float32frombits(a)
}

// nvfp4Key is the stochastic rounding's key of one cast at one step.
func nvfp4Key(key uint64, step int64) uint64 {
	z := key ^ uint64(step)*0xd1b54a32d192ed03
	z = (z ^ z>>33) * 0xff51afd7ed558ccd
	return z ^ z>>33
}
