// Package fsdp trains data-parallel with every parameter sharded across
// ranks, as PyTorch's FSDP (and torchao's float8 all-gather) do: each rank
// keeps only its shard of every parameter and of the optimizer state,
// gathers full parameters as the step needs them, reduce-scatters the
// gradients after backward, and updates its shard only.
//
// Shard is the graph rewrite (a pass over one rank's graph): every
// parameter read goes through an AllGather node, and with float8
// all-gather the weight cast of each FP8 layer with tensorwise current
// scaling becomes an FP8AllGather node that casts the shard with one
// global scale and gathers one byte per element. Rank is the training
// driver. Ranks run as goroutines over a dist.Communicator; see package
// dist for running them across machines.
package fsdp

import (
	"fmt"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
)

// Config configures sharding.
type Config struct {
	// Float8AllGather gathers the weights of FP8 layers (tensorwise
	// current scaling, torchao's tensorwise recipe) in FP8.
	Float8AllGather bool
	// Precompute computes all layers' float8 all-gather scales in one
	// all-reduce after the optimizer step instead of one per layer in the
	// step.
	Precompute bool
}

// Report says what Shard did.
type Report struct {
	Params        int // parameters sharded
	Float8Weights int // weights gathered in FP8
	Float8Bytes   int // bytes per step those gathers move (numel × 1)
	Float32Bytes  int // bytes per step of the float32 gathers that training runs (numel × 4)
}

// Sharded is one rank's sharded parameters.
type Sharded struct {
	comm   dist.Communicator
	cfg    Config
	params []*graph.Node
	shards []*ops.Shard
	fp8    []*ops.Shard
}

// Shard rewrites one rank's graph g for sharded training: the rank keeps
// the segment dist.Split gives it of each parameter of params (flattened,
// taken from store, whose full values must be the same on every rank),
// and every reader of a parameter reads its all-gathered value instead.
// With cfg.Float8AllGather, FP8 weight casts with tensorwise current
// scaling become FP8 all-gathers; other scalings are refused. The store
// keeps its full buffers only because programs need one per parameter;
// the shards are authoritative.
func Shard(g *graph.Graph, store *graph.Store, comm dist.Communicator, params []*graph.Node, cfg Config) (*Sharded, Report, error) {
	var rep Report
	s := &Sharded{comm: comm, cfg: cfg, params: params}
	if err := g.Err(); err != nil {
		return nil, rep, fmt.Errorf("fsdp: graph has errors: %w", err)
	}
	rank, size := comm.Rank(), comm.Size()
	shardOf := map[*graph.Node]*ops.Shard{}
	for _, p := range params {
		full := store.Float32(p.Name())
		if full == nil {
			return nil, rep, fmt.Errorf("fsdp: parameter %q has no value in the store", p.Name())
		}
		counts := dist.Split(len(full), size)
		off := dist.Offsets(counts)[rank]
		sh := &ops.Shard{Comm: comm, Counts: counts, Data: append([]float32(nil), full[off:off+counts[rank]]...)}
		s.shards = append(s.shards, sh)
		shardOf[p] = sh
		rep.Params++
	}
	sharded := func(n *graph.Node) bool { return shardOf[n] != nil }
	if cfg.Float8AllGather {
		// A weight cast of a sharded parameter becomes a float8 all-gather.
		weightCast := func(n *graph.Node) bool {
			qc, _ := graph.SettingsOf[ops.QuantizeConfig](n)
			return qc.Tensor == fp8.RoleWeight
		}
		_, err := passes.Rewrite(g, g.Nodes(), passes.Rule{
			Name:    "float8-allgather",
			Pattern: &passes.Pattern{Kind: ops.KindQuantize, Where: weightCast, Inputs: []*passes.Pattern{{Bind: "w", Where: sharded}}},
			Apply: func(q *graph.Node, m passes.Match) (*graph.Node, error) {
				p := m["w"]
				qc, _ := graph.SettingsOf[ops.QuantizeConfig](q)
				if !(qc.Kind == fp8.CurrentScaling && !qc.Axiswise) && qc.Kind != fp8.Float8Blocks {
					return nil, fmt.Errorf("fsdp: float8 all-gather of %q needs tensorwise current scaling (torchao's tensorwise recipe) or Float8BlockScaling, its cast is %v; turn float8 all-gather off or use one of those recipes", p.Name(), qc.Quantizer)
				}
				sh := shardOf[p]
				ag := ops.FP8AllGather(p, sh, qc)
				if qc.Kind == fp8.Float8Blocks {
					// Block scales come from the gathered blocks' amaxes,
					// all-reduced by the gather itself: nothing to
					// precompute. A 1-D weight is gathered once per axis.
					rep.Float8Weights++
					rep.Float8Bytes += p.Shape().Numel()
					return ag, g.Err()
				}
				if len(s.fp8) == 0 || s.fp8[len(s.fp8)-1] != sh {
					s.fp8 = append(s.fp8, sh)
					rep.Float8Weights++
					rep.Float8Bytes += p.Shape().Numel()
				}
				return ag, g.Err()
			},
		})
		if err != nil {
			return nil, rep, err
		}
	}
	// Every other reader of a sharded parameter reads its all-gather; the
	// parameter itself stays for the gathers.
	_, err := passes.Rewrite(g, params, passes.Rule{
		Name:    "allgather",
		Pattern: &passes.Pattern{Where: sharded},
		Apply: func(p *graph.Node, _ passes.Match) (*graph.Node, error) {
			return ops.AllGather(p, shardOf[p]), g.Err()
		},
		Keep: func(c *graph.Node) bool { return c.Is(ops.KindFP8AllGather) },
	})
	if err != nil {
		return nil, rep, err
	}
	return s, rep, graph.Verify(g)
}

// Pass returns sharding as a stage of passes.Prepare's pipeline (run
// after the FP8 passes, checked like them): it shards params over comm,
// sets *out and *rep, and its check states that no sharded parameter is
// read other than through a gather.
func Pass(store *graph.Store, comm dist.Communicator, params []*graph.Node, cfg Config, out **Sharded, rep *Report) passes.Pass {
	return passes.Pass{
		Name: "Shard",
		Run: func(g *graph.Graph) (string, error) {
			s, r, err := Shard(g, store, comm, params, cfg)
			*out, *rep = s, r
			return fmt.Sprintf("%d parameters sharded over %d ranks, %d weights gathered in FP8", r.Params, comm.Size(), r.Float8Weights), err
		},
		Check: func(g *graph.Graph) error {
			set := map[*graph.Node]bool{}
			for _, p := range params {
				set[p] = true
			}
			for _, n := range g.Nodes() {
				if n.Is(ops.KindAllGather) || n.Is(ops.KindFP8AllGather) {
					continue
				}
				for i := 0; i < n.NumInputs(); i++ {
					if set[n.Input(i)] {
						return fmt.Errorf("check: %q reads sharded parameter %q directly, not through a gather", n.Name(), n.Input(i).Name())
					}
				}
			}
			return nil
		},
	}
}

// Rank drives one rank's training: run the step (gathers happen inside),
// reduce-scatter and average the gradients into the shards, update the
// shards, and with Precompute refresh the float8 scales.
type Rank struct {
	s          *Sharded
	prog       *graph.Program
	grads      []*graph.Node
	gradShards [][]float32
	params     []optim.Param
	amaxes     []float32
	scale      float32
	// weight, when weighted, multiplies this rank's gradients before the
	// sum (in place of scale after it).
	weight   float32
	weighted bool
}

// NewRank prepares the driver for a compiled training program whose
// outputs include grads (one per sharded parameter, in order).
func NewRank(s *Sharded, prog *graph.Program, grads []*graph.Node) (*Rank, error) {
	if len(grads) != len(s.params) {
		return nil, fmt.Errorf("fsdp: %d gradients for %d parameters", len(grads), len(s.params))
	}
	r := &Rank{s: s, prog: prog, grads: grads, scale: 1 / float32(s.comm.Size()), amaxes: make([]float32, len(s.fp8))}
	for i, p := range s.params {
		if prog.Float32(grads[i]) == nil {
			return nil, fmt.Errorf("fsdp: the gradient of %q is not an output of the program", p.Name())
		}
		g := make([]float32, len(s.shards[i].Data))
		r.gradShards = append(r.gradShards, g)
		r.params = append(r.params, optim.Param{Name: p.Name(), W: s.shards[i].Data, G: g, Decay: p.Shape().Rank() >= 2})
	}
	if s.cfg.Precompute {
		if err := r.precompute(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Params returns the shard parameters, for an optimizer.
func (r *Rank) Params() []optim.Param { return r.params }

// SetBatchShare says that this rank's loss averages rows of a global batch
// of batch rows, when ranks hold different numbers of rows: its gradients
// are then weighted by rows/batch before they are summed, so that the
// shards receive the gradient of the global batch's mean loss. Without it
// (or with an even split) the gradients are summed and divided by the
// number of ranks.
func (r *Rank) SetBatchShare(rows, batch int) error {
	if rows < 1 {
		return fmt.Errorf("fsdp: batch share %d of %d rows", rows, batch)
	}
	return r.SetStepShare(rows, batch)
}

// SetStepShare is SetBatchShare for the next step only, where a rank may
// hold no real rows (the padded end of an epoch): its gradients then
// count for nothing.
func (r *Rank) SetStepShare(rows, batch int) error {
	if rows < 0 || batch < 1 || batch < rows {
		return fmt.Errorf("fsdp: batch share %d of %d rows", rows, batch)
	}
	r.weight, r.weighted = 0, false
	if rows*r.s.comm.Size() != batch {
		r.weight, r.weighted = float32(rows)/float32(batch), true
	}
	return nil
}

// Run runs the step and leaves each shard's averaged gradient in Params.
func (r *Rank) Run() error {
	if err := r.prog.Run(); err != nil {
		return err
	}
	for i, g := range r.grads {
		sh := r.s.shards[i]
		full := r.prog.Float32(g)
		if r.weighted {
			for j := range full {
				full[j] *= r.weight
			}
		}
		if err := r.s.comm.ReduceScatterF32(r.gradShards[i], full, sh.Counts, dist.Sum); err != nil {
			return fmt.Errorf("fsdp: reduce-scatter of %q: %w", r.params[i].Name, err)
		}
		if !r.weighted {
			for j := range r.gradShards[i] {
				r.gradShards[i][j] *= r.scale
			}
		}
	}
	return nil
}

// AfterUpdate is called after the optimizer step: with Precompute, it
// computes every FP8 weight's global amax in one all-reduce.
func (r *Rank) AfterUpdate() error {
	if !r.s.cfg.Precompute {
		return nil
	}
	return r.precompute()
}

func (r *Rank) precompute() error {
	for i, sh := range r.s.fp8 {
		r.amaxes[i] = fp8.Amax(sh.Data)
	}
	if len(r.amaxes) > 0 {
		if err := r.s.comm.AllReduceF32(r.amaxes, dist.Max); err != nil {
			return fmt.Errorf("fsdp: precomputed amax all-reduce: %w", err)
		}
	}
	for i, sh := range r.s.fp8 {
		sh.Amax, sh.Precomputed = r.amaxes[i], true
	}
	return nil
}

// Precomputed reports whether float8 all-gather scales are precomputed.
func (s *Sharded) Precomputed() bool { return s.cfg.Precompute }

// ShardStore returns a store that holds this rank's shards (no copies,
// "<param>" with the shard's length) and the FP8 layer states of store,
// for checkpoint.Save and checkpoint.Load: each rank checkpoints its own
// part of the parameters and of the optimizer state.
func (s *Sharded) ShardStore(store *graph.Store) (*graph.Store, error) {
	out := graph.NewStore()
	for i, p := range s.params {
		if err := out.Bind(p.Name(), s.shards[i].Data, len(s.shards[i].Data)); err != nil {
			return nil, err
		}
	}
	for _, k := range store.StateKeys() {
		out.SetState(k, store.State(k))
	}
	return out, nil
}

// Part is the slice of one parameter a rank holds: the parameter's
// global shape and the flat (row-major) offset of the rank's elements.
type Part struct {
	Name   string
	Shape  []int
	Offset int
}

// Parts returns this rank's slice of every sharded parameter, in
// parameter order (what a checkpoint records so that another layout can
// re-cut the shards).
func (s *Sharded) Parts() []Part {
	rank := s.comm.Rank()
	out := make([]Part, len(s.params))
	for i, p := range s.params {
		out[i] = Part{Name: p.Name(), Shape: append([]int(nil), p.Shape()...), Offset: dist.Offsets(s.shards[i].Counts)[rank]}
	}
	return out
}

// Gather writes the full parameters into store (for evaluation or a
// checkpoint on one rank); every rank must call it.
func (s *Sharded) Gather(store *graph.Store) error {
	for i, p := range s.params {
		sh := s.shards[i]
		if err := s.comm.AllGatherF32(store.Float32(p.Name()), sh.Data, sh.Counts); err != nil {
			return err
		}
	}
	return nil
}
