package ops

import (
	"fmt"
	"hash/fnv"
	"math"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
)

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

// scalesKey is the metadata an FP8 value carries for its consumers.
var scalesKey = graph.NewValueKey[*fp8Scales]("fp8 scales")

// fp8Scales travel with an FP8 value in a compiled program (its
// graph.Value's metadata under scalesKey): the value's cast (its
// fp8.Cast, which keeps the scales a consumer decodes with and hands a
// GEMM its operand) and what the graph adds.
type fp8Scales struct {
	Config QuantizeConfig
	*fp8.Cast
	// key and step seed an NVFP4 cast's stochastic rounding.
	key  uint64
	step *int64
}

// float8BlockCast is the fp8 cast of a Float8Block config.
func (c QuantizeConfig) float8BlockCast() fp8.Quantizer {
	return fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: c.BlockDim, Format: c.Format, FP32Scales: c.FP32Scales, Eps: c.Eps}
}

// castDType is the dtype a cast per cfg produces.
func castDType(cfg QuantizeConfig) graph.DType {
	if cfg.Kind == fp8.NVFP4Blocks {
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
	s := fmt.Sprintf("%v,%v", o.cfg.Format, o.cfg.Scaling())
	switch {
	case o.cfg.Kind == fp8.NVFP4Blocks && o.cfg.BlockDim == 2:
		s += ",16x16"
	case o.cfg.Kind == fp8.NVFP4Blocks:
		s += fmt.Sprintf(",1x16,axis=%d", o.cfg.Axis)
	case o.cfg.Kind == fp8.Float8Blocks && o.cfg.BlockDim == 2:
		s += ",128x128"
	case o.cfg.Kind == fp8.Float8Blocks:
		s += fmt.Sprintf(",1x128,axis=%d", o.cfg.Axis)
	case o.cfg.Kind == fp8.CurrentScaling && o.cfg.Axiswise || o.cfg.Kind == fp8.MXFP8Blocks:
		s += fmt.Sprintf(",axis=%d", o.cfg.Axis)
	}
	if o.cfg.Kind == fp8.Float8Blocks && o.cfg.FP32Scales {
		s += ",fp32-scales"
	}
	if o.cfg.Kind == fp8.NVFP4Blocks && o.cfg.RHT {
		s += ",rht"
	}
	if o.cfg.Kind == fp8.NVFP4Blocks && o.cfg.Stochastic {
		s += ",stochastic"
	}
	if o.cfg.Kind == fp8.Float8Blocks && o.cfg.Eps != 0 {
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
	case !cfg.Casts():
		return fmt.Errorf("the quantizer is %v, which does not cast in a graph (want delayed or current scaling, MXFP8, Float8BlockScaling or NVFP4)", cfg.Kind)
	case cfg.Kind == fp8.NVFP4Blocks && cfg.BlockDim != 1 && cfg.BlockDim != 2:
		return fmt.Errorf("NVFP4 block dimension %d, want 1 (1×16) or 2 (16×16)", cfg.BlockDim)
	case cfg.Kind == fp8.Float8Blocks && cfg.BlockDim != 1 && cfg.BlockDim != 2:
		return fmt.Errorf("Float8BlockScaling block dimension %d, want 1 (1×128) or 2 (128×128)", cfg.BlockDim)
	case cfg.Kind == fp8.Float8Blocks && (!(cfg.Eps >= 0) || math.IsInf(float64(cfg.Eps), 0)):
		return fmt.Errorf("Float8BlockScaling amax epsilon %v, want a finite number ≥ 0", cfg.Eps)
	case cfg.Kind == fp8.DelayedScaling && cfg.Meta == nil:
		return fmt.Errorf("delayed scaling needs an fp8.Meta")
	case cfg.Kind == fp8.DelayedScaling && cfg.Meta.Format != cfg.Format:
		return fmt.Errorf("meta format %v differs from cast format %v", cfg.Meta.Format, cfg.Format)
	case cfg.Axis != 0 && cfg.Axis != 1:
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
	if cfg.Kind != fp8.NVFP4Blocks || !cfg.RHT {
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
func bindScales(b *graph.Binding, cfg QuantizeConfig, s graph.Shape) (*fp8Scales, error) {
	sc, err := newScales(cfg, s)
	if err != nil {
		return nil, err
	}
	if sc.FP4 != nil {
		sc.FP4.Codes = b.Out.U8[:len(sc.FP4.Codes)]
		h := fnv.New64a()
		h.Write([]byte(b.Node.Name()))
		sc.key, sc.step = cfg.Seed^h.Sum64(), b.Step()
	}
	return sc, nil
}

// newScales builds the cast of a value of shape s per cfg.
func newScales(cfg QuantizeConfig, s graph.Shape) (*fp8Scales, error) {
	rows, cols := view2D(s)
	c, err := fp8.NewCast(cfg.Quantizer, rows, cols, cfg.Axis, cfg.Meta)
	if err != nil {
		return nil, err
	}
	return &fp8Scales{Config: cfg, Cast: c}, nil
}

// castKernel returns the function that casts src into dst with sc's
// cast, recording amaxes into a delayed meta when record is set.
// Quantize and the fused casts (LayerNormQuantize, GELUQuantize) share
// it.
func castKernel(cfg QuantizeConfig, sc *fp8Scales, dst []uint8, src []float32, record bool) func() error {
	return func() error {
		var key uint64
		if cfg.Stochastic && sc.step != nil {
			key = nvfp4Key(sc.key, *sc.step)
		}
		return sc.Quantize(dst, src, key, record)
	}
}

func (o quantizeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	sc, err := bindScales(b, o.cfg, b.In[0].Shape)
	if err != nil {
		return nil, err
	}
	graph.SetMeta(b.Out, scalesKey, sc)
	record := b.Training && o.cfg.Kind == fp8.DelayedScaling
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
