package ops

import (
	"fmt"
	"math"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
)

// Shard is one rank's part of a flattened parameter in sharded
// (FSDP-style) training: this rank owns Data, the values at its offset;
// the full tensor exists only while a step gathers it.
type Shard struct {
	Comm   dist.Communicator
	Counts []int
	Data   []float32
	// Amax, when Precomputed is set, is the parameter's global amax for
	// the FP8 all-gather, computed with every other layer's in one
	// all-reduce after the optimizer step.
	Amax        float32
	Precomputed bool
}

// invalid reports a missing shard or communicator.
func (sh *Shard) invalid() bool { return sh == nil || sh.Comm == nil }

// allGatherOp gathers a float32 parameter from its shards. Its input is
// the parameter node, which gives the shape; the values come from the
// shards.
type allGatherOp struct{ sh *Shard }

func (o allGatherOp) Type() string     { return KindAllGather.String() }
func (o allGatherOp) Kind() graph.Kind { return KindAllGather }
func (o allGatherOp) Attrs() string {
	if o.sh.invalid() {
		return "no shard"
	}
	return fmt.Sprintf("rank=%d/%d", o.sh.Comm.Rank(), o.sh.Comm.Size())
}

func (o allGatherOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if o.sh.invalid() {
		return nil, graph.Invalid, fmt.Errorf("%q has no shard with a communicator to gather from", in[0].Name())
	}
	n := 0
	for _, c := range o.sh.Counts {
		n += c
	}
	if n != in[0].Shape().Numel() {
		return nil, graph.Invalid, fmt.Errorf("shards hold %d values, %q has %d", n, in[0].Name(), in[0].Shape().Numel())
	}
	return in[0].Shape(), graph.Float32, nil
}

func (o allGatherOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	out, sh := b.Out.F32, o.sh
	return func() error { return sh.Comm.AllGatherF32(out, sh.Data, sh.Counts) }, nil
}

// AllGather returns the full value of parameter p gathered from shards.
func AllGather(p *graph.Node, sh *Shard) *graph.Node {
	return apply(allGatherOp{sh}, scopedName(p, "all_gather"), p)
}

// fp8AllGatherOp is torchao's float8 all-gather: every rank casts its
// float32 shard with one global tensorwise scale (from the amax
// all-reduced with MAX, or precomputed), the ranks gather one byte per
// element, and the result feeds the FP8 GEMM with no second cast.
type fp8AllGatherOp struct {
	sh  *Shard
	cfg QuantizeConfig
}

func (o fp8AllGatherOp) Type() string     { return KindFP8AllGather.String() }
func (o fp8AllGatherOp) Kind() graph.Kind { return KindFP8AllGather }
func (o fp8AllGatherOp) Attrs() string {
	if o.sh.invalid() {
		return "no shard"
	}
	return fmt.Sprintf("%v,rank=%d/%d", o.cfg.Format, o.sh.Comm.Rank(), o.sh.Comm.Size())
}

func (o fp8AllGatherOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	s, _, err := allGatherOp{o.sh}.Infer(in)
	if err != nil {
		return nil, graph.Invalid, err
	}
	if !(o.cfg.Kind == fp8.CurrentScaling && !o.cfg.Axiswise) && o.cfg.Kind != fp8.Float8Blocks {
		return nil, graph.Invalid, fmt.Errorf("float8 all-gather needs tensorwise current scaling or Float8BlockScaling, not %v", o.cfg.Scaling())
	}
	if err := validateQuantize(o.cfg); err != nil {
		return nil, graph.Invalid, err
	}
	return s, formatDType(o.cfg.Format), nil
}

// bindBlock is the kernel of a Float8BlockScaling all-gather: every rank
// takes the block amaxes of its own elements, the ranks all-reduce them
// with MAX (a block's amax is then the whole block's, NaN left out, as
// one cast of the full tensor computes it), each rank casts its
// elements with their blocks' scales and the ranks gather one byte per
// element: the codes and scales of the full tensor's cast.
func (o fp8AllGatherOp) bindBlock(b *graph.Binding, sc *fp8Scales) graph.Kernel {
	sh, cfg := o.sh, o.cfg
	rows, cols := sc.Rows, sc.Cols
	off := 0
	for _, c := range sh.Counts[:sh.Comm.Rank()] {
		off += c
	}
	block := func(e int) int { return fp8.Float8BlockIndex(rows, cols, cfg.Axis, cfg.BlockDim, e/cols, e%cols) }
	amax := make([]float32, len(sc.BlockScaleInv))
	scale := make([]float32, len(sc.BlockScaleInv))
	idx := make([]int32, len(sh.Data)) // each element's block, fixed
	for i := range idx {
		idx[i] = int32(block(off + i))
	}
	codes := make([]uint8, len(sh.Data))
	out := b.Out.U8
	bc := cfg.float8BlockCast()
	return func() error {
		clear(amax)
		for i, v := range sh.Data {
			if a := float32(math.Abs(float64(v))); a > amax[idx[i]] {
				amax[idx[i]] = a // NaN compares false: left out
			}
		}
		if err := sh.Comm.AllReduceF32(amax, dist.Max); err != nil {
			return err
		}
		sc.Amax = 0
		for k, a := range amax {
			scale[k], sc.BlockScaleInv[k] = fp8.Float8BlockScale(a, bc.Format, bc.Eps, bc.FP32Scales)
			sc.Amax = max(sc.Amax, a)
		}
		for i, v := range sh.Data {
			codes[i] = bc.Format.Encode(v * scale[idx[i]])
		}
		return sh.Comm.AllGatherU8(out, codes, sh.Counts)
	}
}

func (o fp8AllGatherOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	sh, cfg := o.sh, o.cfg
	sc, err := newScales(cfg, b.Out.Shape)
	if err != nil {
		return nil, err
	}
	graph.SetMeta(b.Out, scalesKey, sc)
	if cfg.Kind == fp8.Float8Blocks {
		return o.bindBlock(b, sc), nil
	}
	codes := make([]uint8, len(sh.Data))
	amax := make([]float32, 1)
	out := b.Out.U8
	return func() error {
		if sh.Precomputed {
			amax[0] = sh.Amax
		} else {
			amax[0] = fp8.Amax(sh.Data)
			if err := sh.Comm.AllReduceF32(amax, dist.Max); err != nil {
				return err
			}
		}
		s := fp8.CurrentScale(amax[0], cfg.Format, cfg.Pow2)
		if _, err := fp8.Quantize(codes, sh.Data, cfg.Format, s); err != nil {
			return err
		}
		sc.ScaleInv, sc.Amax = 1/s, amax[0]
		return sh.Comm.AllGatherU8(out, codes, sh.Counts)
	}, nil
}

// FP8AllGather returns parameter p cast to FP8 per cfg (tensorwise
// current scaling, or Float8BlockScaling blocks or tiles) and gathered
// from shards one byte per element.
func FP8AllGather(p *graph.Node, sh *Shard, cfg QuantizeConfig) *graph.Node {
	return apply(fp8AllGatherOp{sh: sh, cfg: cfg}, scopedName(p, "fp8_all_gather"), p)
}
