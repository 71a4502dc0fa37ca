package ops

import (
	"fmt"
	"math"

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
	Log      *inspect.Log
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

func (o statsOp) Type() string {
	if o.fp8 {
		return "FP8TensorStats"
	}
	return "TensorStats"
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
		if !in[1].DType().IsFloat8() || !in[1].Shape().Equal(in[0].Shape()) {
			return nil, graph.Invalid, fmt.Errorf("input %q %v %v is not an FP8 cast of %q %v", in[1].Name(), in[1].Shape(), in[1].DType(), in[0].Name(), in[0].Shape())
		}
	}
	if o.cfg.Log == nil {
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
	var counts inspect.FP8Counts
	var fp8Stats func()
	if o.fp8 {
		sc, ok := b.In[1].Aux.(*fp8Scales)
		if !ok {
			return nil, fmt.Errorf("input %q carries no FP8 scales", b.Node.Input(1).Name())
		}
		codes := b.In[1].U8
		fp8Stats = func() { fp8CastStats(&counts, sc, codes, x) }
	}
	log := o.cfg.Log
	return func() error {
		s := *step
		done := false
		for i, r := range o.cfg.Requests {
			if !r.Active(s) {
				continue
			}
			if o.fp8 {
				if !done {
					fp8Stats()
					done = true
				}
				counts.Stats(r.Stats, outs[i])
			} else {
				inspect.TensorStatsOf(x, r.Stats, outs[i])
			}
			for j, name := range r.Stats {
				log.Write(s, o.cfg.Layer, o.cfg.Tensor, name, outs[i][j])
			}
		}
		b.Out.F32[0] = 0
		return nil
	}, nil
}

// fp8CastStats counts, over the last cast into codes with scales sc of
// the source x, the values sent to zero and saturated, the squared
// error of the dequantized values and the range of the inverse scales.
func fp8CastStats(c *inspect.FP8Counts, sc *fp8Scales, codes []uint8, x []float32) {
	c.Reset()
	f := sc.Config.Format
	tab := f.DecodeTable()
	maxV := float64(f.Max())
	rows, cols := sc.Rows, sc.Cols
	nb := (cols + fp8.BlockSize - 1) / fp8.BlockSize // blocks per row (axis 1)
	nbr := (rows + fp8.BlockSize - 1) / fp8.BlockSize
	inv := func(r, col int) float32 {
		switch {
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
			c.Add(x[i], dq, sat)
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
