package ops

import (
	"fmt"
	"math"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
)

// StatsConfig configures a statistics node: the layer and tensor it
// describes, the requests for that tensor (statistics on schedules) and
// the log they go to.
type StatsConfig struct {
	Layer    string
	Tensor   inspect.Tensor
	Requests []inspect.StatRequest
	// Log receives the values; with Comm only rank 0 writes (the others
	// may leave it nil).
	Log *inspect.Log
	// Comm, when set, merges the ranks' partial statistics (a
	// data-parallel or sharded run), so that the values describe the
	// global batch. Replicated marks a tensor every rank holds whole (a
	// weight), whose statistics are its own.
	Comm       dist.Communicator
	Replicated bool
}

// statsOp computes statistics of a tensor on the steps its requests
// select and writes them to the log; on other steps it does nothing.
// With fp8 set it reads a float32 source and the FP8 cast of it (whose
// scales travel with the value) and computes LogFp8TensorStats'
// statistics of that very cast. Its output is one float32 zero, so that
// a program can list it among its outputs.
type statsOp struct {
	cfg StatsConfig
	fp8 bool
}

func (o statsOp) Type() string { return o.Kind().String() }
func (o statsOp) Kind() graph.Kind {
	if o.fp8 {
		return KindFP8TensorStats
	}
	return KindTensorStats
}

func (o statsOp) Attrs() string { return fmt.Sprintf("%s %s", o.cfg.Layer, o.cfg.Tensor) }

func (o statsOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	want := 1
	if o.fp8 {
		want = 2
	}
	if len(in) != want {
		return nil, graph.Invalid, fmt.Errorf("got %d inputs, want %d", len(in), want)
	}
	if in[0].DType() != graph.Float32 {
		return nil, graph.Invalid, fmt.Errorf("input %q is %v, want float32", in[0].Name(), in[0].DType())
	}
	if o.fp8 {
		if !in[1].DType().IsQuantized() || !in[1].Shape().Equal(in[0].Shape()) {
			return nil, graph.Invalid, fmt.Errorf("input %q %v %v is not an FP8 cast of %q %v", in[1].Name(), in[1].Shape(), in[1].DType(), in[0].Name(), in[0].Shape())
		}
	}
	if o.cfg.Log == nil && (o.cfg.Comm == nil || o.cfg.Comm.Rank() == 0) {
		return nil, graph.Invalid, fmt.Errorf("no log for the statistics")
	}
	return graph.Shape{1}, graph.Float32, nil
}

func (o statsOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	outs := make([][]float64, len(o.cfg.Requests))
	for i, r := range o.cfg.Requests {
		outs[i] = make([]float64, len(r.Stats))
	}
	step := b.Step()
	x := b.In[0].F32
	var part inspect.Partial
	local := func() { part.Reset(); part.AddTensor(x) }
	if o.fp8 {
		sc, ok := graph.Meta(b.In[1], scalesKey)
		if !ok {
			return nil, fmt.Errorf("input %q carries no FP8 scales", b.Node.Input(1).Name())
		}
		codes := b.In[1].U8
		local = func() { fp8CastStats(&part, sc, codes, x) }
	}
	var err error // a failed gather, reported by the kernel
	compute, log := local, o.cfg.Log
	if c := o.cfg.Comm; c != nil && !o.cfg.Replicated && c.Size() > 1 {
		mine := make([]float32, inspect.PartialLen)
		all := make([]float32, inspect.PartialLen*c.Size())
		counts := make([]int, c.Size())
		for i := range counts {
			counts[i] = inspect.PartialLen
		}
		var other inspect.Partial
		compute = func() {
			local()
			part.Encode(mine)
			if err = c.AllGatherF32(all, mine, counts); err != nil {
				return
			}
			part.Reset()
			for r := range counts {
				other.Decode(all[r*inspect.PartialLen : (r+1)*inspect.PartialLen])
				part.Merge(&other)
			}
		}
	}
	if c := o.cfg.Comm; c != nil && c.Rank() != 0 {
		log = nil // rank 0 writes
	}
	return o.kernel(b, step, outs, &part, compute, &err, log), nil
}

// kernel runs compute on the steps a request selects and writes the
// statistics (to log, when not nil).
func (o statsOp) kernel(b *graph.Binding, step *int64, outs [][]float64, part *inspect.Partial, compute func(), errp *error, log *inspect.Log) graph.Kernel {
	return func() error {
		s := *step
		done := false
		for i, r := range o.cfg.Requests {
			if !r.Active(s) {
				continue
			}
			if !done {
				compute()
				if *errp != nil {
					return fmt.Errorf("statistics of %s %s: %w", o.cfg.Layer, o.cfg.Tensor, *errp)
				}
				done = true
			}
			if o.fp8 {
				part.FP8Stats(r.Stats, outs[i])
			} else {
				part.TensorStats(r.Stats, outs[i])
			}
			if log != nil {
				for j, name := range r.Stats {
					log.Write(s, o.cfg.Layer, o.cfg.Tensor, name, outs[i][j])
				}
			}
		}
		b.Out.F32[0] = 0
		return nil
	}
}

// fp8CastStats counts, over the last cast into codes with scales sc of
// the source x, the values sent to zero and saturated, the squared
// error of the dequantized values and the range of the inverse scales.
func fp8CastStats(c *inspect.Partial, sc *fp8Scales, codes []uint8, x []float32) {
	if sc.FP4 != nil {
		nvfp4CastStats(c, sc, x)
		return
	}
	c.Reset()
	f := sc.Config.Format
	tab := f.DecodeTable()
	maxV := float64(f.Max())
	rows, cols := sc.Rows, sc.Cols
	nb := (cols + fp8.BlockSize - 1) / fp8.BlockSize // blocks per row (axis 1)
	nbr := (rows + fp8.BlockSize - 1) / fp8.BlockSize
	inv := func(r, col int) float32 {
		switch {
		case sc.BlockScaleInv != nil:
			return sc.BlockScaleInv[fp8.Float8BlockIndex(rows, cols, sc.Config.Axis, sc.Config.BlockDim, r, col)]
		case sc.Block != nil:
			if sc.Config.Axis == 1 {
				return sc.Block[r*nb+col/fp8.BlockSize].Float32()
			}
			return sc.Block[col*nbr+r/fp8.BlockSize].Float32()
		case sc.AxisScaleInv != nil:
			if sc.Config.Axis == 1 {
				return sc.AxisScaleInv[r]
			}
			return sc.AxisScaleInv[col]
		}
		return sc.ScaleInv
	}
	switch {
	case sc.BlockScaleInv != nil:
		for _, s := range sc.BlockScaleInv {
			c.Scale(s)
		}
	case sc.Block != nil:
		for _, e := range sc.Block {
			c.Scale(e.Float32())
		}
	case sc.AxisScaleInv != nil:
		for _, s := range sc.AxisScaleInv {
			c.Scale(s)
		}
	default:
		c.Scale(sc.ScaleInv)
	}
	for r := 0; r < rows; r++ {
		for col := 0; col < cols; col++ {
			i := r*cols + col
			s := inv(r, col)
			dq := tab[codes[i]] * s
			limit := maxV * float64(s)
			sat := math.Abs(float64(x[i])) > limit && math.Abs(float64(dq)) == limit
			c.AddCast(x[i], dq, sat)
		}
	}
}

// TensorStats adds a node that logs statistics of x (LogTensorStats) on
// the steps cfg's requests select.
func TensorStats(name string, x *graph.Node, cfg StatsConfig) *graph.Node {
	return apply(statsOp{cfg: cfg}, name, x)
}

// FP8TensorStats adds a node that logs statistics of the FP8 cast q of x
// (LogFp8TensorStats): what the GEMM reading q really got.
func FP8TensorStats(name string, x, q *graph.Node, cfg StatsConfig) *graph.Node {
	return apply(statsOp{cfg: cfg, fp8: true}, name, x, q)
}

// nvfp4CastStats is fp8CastStats of an NVFP4 cast: each element's
// dequantized value e2m1·decode(sf)·S_dec against the value it was cast
// from — the transformed one when the cast ran the Hadamard transform
// (its scratch holds them, in the stored layout) — saturated at ±6
// times its block's scale; the inverse scales are decode(sf)·S_dec.
func nvfp4CastStats(c *inspect.Partial, sc *fp8Scales, x []float32) {
	c.Reset()
	q := sc.FP4
	src := x
	if t := sc.Transformed(); t != nil {
		src = t
	}
	_, bc := fp8.NVFP4ScaleShape(q.Rows, q.Cols, q.TwoD)
	for _, sf := range q.BlockScales {
		c.Scale(fp8.E4M3.Decode(sf) * q.SDec)
	}
	for r := 0; r < q.Rows; r++ {
		br := r
		if q.TwoD {
			br = r / fp8.NVFP4Block
		}
		for j := 0; j < q.Cols; j++ {
			s := fp8.E4M3.Decode(q.BlockScales[br*bc+j/fp8.NVFP4Block]) * q.SDec
			v := src[r*q.Cols+j]
			dq := fp8.E2M1Decode(q.Code(r, j)) * s
			limit := 6 * float64(s)
			c.AddCast(v, dq, math.Abs(float64(v)) > limit && math.Abs(float64(dq)) == limit)
		}
	}
}
