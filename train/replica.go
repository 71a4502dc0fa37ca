package train

import (
	"fmt"
	"math"
	"strings"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fsdp"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// replica is one rank's model: its store, compiled training program,
// optimizer and (with FSDP) shard driver.
type replica struct {
	t      *Trainer
	comm   dist.Communicator // nil for one process
	rank   int
	m      *Model
	grads  []*graph.Node
	store  *graph.Store
	prog   *graph.Program
	report passes.Report
	// params are what the optimizer updates: the program's gradients
	// (or, with accumulation, the accumulators) and the store's (or the
	// shards') values.
	params []optim.Param
	opt    optim.Stateful
	lowBit *optim.LowBitAdam
	memory optim.MemoryStats
	// With expert parallelism: the expert weights' slices this rank
	// holds, and for each the index into params and the full gradient
	// buffer (zero outside the slice).
	experts     []passes.ExpertShard
	epComm      dist.Communicator // this rank's expert-parallel group
	dpComm      dist.Communicator // the ranks at its place in every group (nil: one group)
	expertParam []int
	expertFull  [][]float32
	expertLo    []int // where each expert weight's slice starts and ends
	expertHi    []int
	normParams  []optim.Param // params with the experts' full gradients (the clipping norm)
	stateBuf    []float32     // an expert's packed scaling state (gatherExpertStates)
	// The clipping norm's chunk sums, and the experts' exchanged.
	chunkSums            []float64
	chunkStarts          []int
	chunkSend, chunkRecv []byte
	expertOf             map[int]int // params index → experts index
	onePar               [1]optim.Param
	chunkCounts          [][]int // each expert weight's chunk-sum bytes per rank
	// With FSDP.
	sh   *fsdp.Sharded
	drv  *fsdp.Rank
	srep fsdp.Report
	// ckptStore is what a checkpoint of this rank saves: the store, or
	// with FSDP the rank's shards.
	ckptStore *graph.Store
	// feeds pairs the program's inputs with the batch's fields.
	feeds []feed
	// grad accumulation: acc[i] sums the weighted gradients of params[i].
	acc      [][]float32
	src      [][]float32 // the gradients each micro-batch leaves
	accum    *accumulator
	log      *inspect.Log
	lbuf     []float32
	warnings []string     // Prepare's, about the joint-graph passes
	amax     *amaxReducer // the data-parallel amax all-reduce (nil: none)
	// cal is delayed scaling's calibration program (nil: none);
	// calibrating says the current step is one of its steps.
	cal         *calibration
	calibrating bool
	calGrads    [][]float32 // progGrads, where calibration steps leave theirs
	startMetas  []namedMeta // the delayed-scaling metas (first-step report, amax all-reduce)
	lossRows    lossRows    // how the loss treats padded rows
}

type feed struct {
	node  *graph.Node
	field int // -1: the batch's row mask
	f32   bool
}

// newReplica builds, initialises and prepares rank's model for rows rows.
func (t *Trainer) newReplica(comm dist.Communicator, rows int, log *inspect.Log) (*replica, error) {
	r := &replica{t: t, comm: comm, store: graph.NewStore(), lbuf: make([]float32, 2), log: log}
	if comm != nil {
		r.rank = comm.Rank()
	}
	m, err := t.build(rows, true)
	if err != nil {
		return nil, err
	}
	if t.dataRanks() > 1 {
		for _, n := range m.Builder.Graph().Nodes() {
			if rc, ok := graph.SettingsOf[ops.RouterConfig](n); ok && rc.BiasUpdateSpeed > 0 && len(n.Inputs()) > 1 {
				return nil, fmt.Errorf("train: selection bias %q: auxiliary-loss-free balancing (bias update speed %g) under data parallelism is not supported yet: each rank would move the bias by its own tokens' load", n.Inputs()[1].Name(), rc.BiasUpdateSpeed)
			}
		}
	}
	r.m, r.lossRows = m, inspectLoss(m)
	params := m.Builder.Params()
	if t.cfg.Init != nil {
		if err := t.cfg.Init(r.store); err != nil {
			return nil, fmt.Errorf("train: Init: %w", err)
		}
	}
	if err := m.Builder.Init(r.store, t.cfg.Seed); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	// Prepare runs the forward passes on the forward graph, then builds
	// the backward (the same graph.Grad as without any).
	pc := passes.Config{Recipe: t.rec, Seed: t.cfg.Seed, Filter: t.cfg.Filter, Debug: t.cfg.Debug, DebugComm: comm, DebugLog: log, NoFusion: t.cfg.NoFusion,
		Passes: t.cfg.Passes, Loss: m.Loss, Params: params, ForwardPasses: t.cfg.ForwardPasses}
	if t.ep {
		if err := r.splitGroups(); err != nil {
			return nil, err
		}
		pc.ForwardPasses = append(append([]passes.Pass(nil), pc.ForwardPasses...), passes.ExpertParallelPass(&ops.ExpertParallel{Comm: r.epComm, Dispatch: t.cfg.EPDispatch}, &r.experts))
	}
	if t.fsdp {
		f8 := t.rec != nil && t.rec.Float8AllGather()
		fc := fsdp.Config{Float8AllGather: f8, Precompute: true}
		if t.ep {
			// The layers around the experts are sharded over the
			// data-parallel group (the same shard on every rank of an
			// expert-parallel group, which runs the same batch); the
			// experts are the expert-parallel pass's.
			pc.Passes = append(pc.Passes, passes.Pass{Name: "Shard", Run: func(g *graph.Graph) (string, error) {
				sh, rep, err := fsdp.Shard(g, r.store, r.dpComm, r.denseParams(params), fc)
				r.sh, r.srep = sh, rep
				return fmt.Sprintf("%d parameters around the experts sharded over %d data-parallel ranks", rep.Params, t.dataRanks()), err
			}})
		} else {
			pc.Passes = append(pc.Passes, fsdp.Pass(r.store, comm, params, fc, &r.sh, &r.srep))
		}
	}
	prep, err := passes.Prepare(m.Builder.Graph(), r.store, pc)
	if err != nil {
		return nil, err
	}
	r.prog, r.report, r.warnings = prep.Train, prep.Report, prep.Warnings
	m.Loss, r.grads = prep.Loss, prep.Grads
	if m.Fixed != nil {
		if err := m.Fixed(r.prog); err != nil {
			return nil, fmt.Errorf("train: Fixed: %w", err)
		}
	}
	r.startMetas = r.namedMetas()
	if t.ep && len(r.experts) == 0 {
		return nil, configErrorf("%s: the model has no Mixture-of-Experts layer to shard", t.worldName())
	}
	// Expert-parallel ranks of a group hold one process's scaling states
	// (the layers around the experts see the group's rows on every rank,
	// each expert's rows are on its rank alone): the amaxes are reduced
	// across the data-parallel groups only.
	if dc := r.dataComm(); dc != nil && t.dataRanks() > 1 && t.rec != nil && recipe.ReducesAmax(t.rec) {
		if r.amax = newAmaxReducer(dc, r.startMetas); r.amax != nil {
			r.prog.BeforeStepEnd(r.amax.reduce)
		}
	}
	r.ckptStore = r.store
	if t.fsdp && t.ep {
		if err := r.bindShardedExperts(params); err != nil {
			return nil, err
		}
	} else if t.fsdp {
		if r.drv, err = fsdp.NewRank(r.sh, r.prog, r.grads); err != nil {
			return nil, err
		}
		r.params = append([]optim.Param(nil), r.drv.Params()...)
		if r.ckptStore, err = r.sh.ShardStore(r.store); err != nil {
			return nil, err
		}
	} else if r.params, err = optim.Bind(r.store, r.prog, params, r.grads); err != nil {
		return nil, err
	} else if t.ep {
		if err := r.shardExperts(); err != nil {
			return nil, err
		}
	}
	if t.accum > 1 {
		for i := range r.params {
			r.src = append(r.src, r.params[i].G)
			r.acc = append(r.acc, make([]float32, len(r.params[i].G)))
			r.params[i].G = r.acc[i]
		}
		r.accum = newAccumulator(r.acc, r.src)
	}
	if n := t.cfg.Precision.CalibrationSteps; n > 0 && t.rec != nil {
		if r.cal, err = t.newCalibration(r, rows, n); err != nil {
			return nil, err
		}
		r.calGrads = r.progGrads()
	}
	return r, r.newOptimizer()
}

// progGrads returns the buffers the FP8 program leaves its gradients in,
// in parameter order.
func (r *replica) progGrads() [][]float32 {
	if r.acc != nil {
		return r.src
	}
	out := make([][]float32, len(r.params))
	for i, p := range r.params {
		out[i] = p.G
	}
	return out
}

// build calls the model function and checks what it returned.
func (t *Trainer) build(rows int, training bool) (*Model, error) {
	m, err := t.cfg.Model(rows, training)
	if err != nil {
		return nil, fmt.Errorf("train: model: %w", err)
	}
	switch {
	case m == nil || m.Builder == nil:
		return nil, fmt.Errorf("train: model: no Builder")
	case training && m.Loss == nil:
		return nil, fmt.Errorf("train: model: no Loss to train")
	}
	if err := m.Builder.Graph().Err(); err != nil {
		return nil, fmt.Errorf("train: model: %w", err)
	}
	if err := finishLoss(m, rows); err != nil {
		return nil, err
	}
	if err := checkPredictions(m); err != nil {
		return nil, err
	}
	return m, nil
}

// newOptimizer picks the optimizer the recipe needs: MS-AMP's low-bit
// AdamW for its recipe (its FP8 gradient all-reduce when data-parallel),
// else the configured one.
func (r *replica) newOptimizer() error {
	cfg := r.t.cfg
	wd := float32(cfg.WeightDecay)
	r.memory = optim.Float32MemoryStats()
	if ms, ok := r.lowBitRecipe(); ok {
		var comm dist.Communicator
		if !r.t.fsdp {
			comm = r.comm
		}
		lb, err := optim.NewLowBitAdam(r.params, ms, wd, comm)
		if err != nil {
			return err
		}
		r.opt, r.lowBit, r.memory = lb, lb, lb.MemoryStats()
		return nil
	}
	switch strings.ToLower(cfg.Optimizer) {
	case "", "adamw":
		r.opt = optim.NewAdamW(r.params, wd)
	case "adam":
		r.opt = optim.NewAdam(r.params, wd)
	case "sgd":
		r.opt = optim.NewSGD(r.params, float32(cfg.Momentum), wd, false)
	}
	return nil
}

// lowBitRecipe returns the recipe's low-bit optimizer, if it has one.
func (r *replica) lowBitRecipe() (recipe.MSAMP, bool) {
	if r.t.rec == nil {
		return recipe.MSAMP{}, false
	}
	return r.t.rec.LowBitOptimizer()
}

// bindFeeds pairs the model's inputs with the dataset's fields, refusing
// an input with no field, a field of another dtype or shape, and an input
// of the graph the model does not list.
func bindFeeds(m *Model, fields []data.Field, rows int) ([]feed, error) {
	var out []feed
	for name, n := range m.Inputs {
		idx := -1
		for i, f := range fields {
			if f.Name == name {
				idx = i
			}
		}
		if idx < 0 {
			var have []string
			for _, f := range fields {
				have = append(have, f.Name)
			}
			return nil, fmt.Errorf("train: model input %q has no dataset field of that name (fields: %s)", name, strings.Join(have, ", "))
		}
		f := fields[idx]
		if n.DType() != f.DType || n.Shape().Numel() != rows*f.Size() || (len(n.Shape()) > 0 && n.Shape()[0] != rows) {
			return nil, fmt.Errorf("train: model input %q is %v %v; the dataset's field is %v %v per example, %d rows a batch", name, n.DType(), n.Shape(), f.DType, f.Shape, rows)
		}
		out = append(out, feed{node: n, field: idx, f32: f.DType == graph.Float32})
	}
	if m.Mask != nil {
		out = append(out, feed{node: m.Mask, field: -1, f32: true})
	}
	return out, nil
}

// feed copies a batch into the program's inputs.
func feedBatch(p *graph.Program, feeds []feed, b *data.Batch) error {
	for _, f := range feeds {
		if !p.HasInput(f.node) {
			continue // a listed input the program does not read
		}
		var err error
		switch {
		case f.field < 0:
			err = p.FeedFloat32(f.node, b.Mask)
		case f.f32:
			err = p.FeedFloat32(f.node, b.Float32At(f.field))
		default:
			err = p.FeedInt32(f.node, b.Int32At(f.field))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// microStep runs the program on one batch: forward, backward, and with
// several ranks the weighted gradient reduction. It returns the rank's
// loss and real rows.
func (r *replica) microStep(b *data.Batch) (float32, error) {
	if err := feedBatch(r.prog, r.feeds, b); err != nil {
		return 0, err
	}
	n := r.t.dataRanks()
	even := b.Rows*n == b.GlobalRows
	if r.calibrating {
		loss, err := r.cal.run(b, r.calGrads)
		// One step counter for both programs (dropout masks and
		// checkpoints read it).
		r.prog.SetStep(r.cal.prog.Step())
		if err == nil && n > 1 {
			err = r.reduceGrads(b, even)
		}
		return loss, err
	}
	if r.drv != nil {
		if err := r.drv.SetStepShare(b.Rows, b.GlobalRows); err != nil {
			return 0, err
		}
		if err := r.drv.Run(); err != nil {
			return 0, err
		}
		if r.experts != nil {
			if err := r.reduceExpertGrads(b); err != nil {
				return 0, err
			}
		}
	} else {
		if err := r.prog.Run(); err != nil {
			return 0, err
		}
		if n > 1 {
			if err := r.reduceGrads(b, even); err != nil {
				return 0, err
			}
		}
	}
	return r.prog.Scalar(r.m.Loss)
}

// reduceGrads averages the data-parallel gradients over the ranks, each
// weighted by its rows when the split is uneven (MS-AMP's optimizer
// all-reduces in FP8 itself).
func (r *replica) reduceGrads(b *data.Batch, even bool) error {
	n := r.t.dataRanks()
	w := float32(b.Rows) * float32(n) / float32(b.GlobalRows)
	inv := 1 / float32(n)
	for i, p := range r.params {
		g := p.G
		if r.acc != nil {
			g = r.src[i]
		}
		if !even {
			kernels.Scale(g, w)
		}
		if r.lowBit != nil {
			continue
		}
		if err := r.dataComm().AllReduceF32(g, dist.Sum); err != nil {
			return err
		}
		kernels.Scale(g, inv)
	}
	return nil
}

// globalLoss is the global batch's mean loss from each rank's: summed and
// divided on an even split, weighted by rows otherwise.
func (r *replica) globalLoss(loss float32, rows, global int) (float32, error) {
	n := r.t.dataRanks()
	if n == 1 {
		return loss, nil
	}
	r.lbuf[0] = loss
	if rows*n != global {
		r.lbuf[0] *= float32(rows) * float32(n) / float32(global)
	}
	if err := r.dataComm().AllReduceF32(r.lbuf[:1], dist.Sum); err != nil {
		return 0, err
	}
	return r.lbuf[0] / float32(n), nil
}

// clip scales the gradients to the configured global norm; with FSDP the
// norm is summed over the ranks' shards.
func (r *replica) clip() error {
	maxNorm := float32(r.t.cfg.ClipGradNorm)
	if maxNorm <= 0 {
		return nil
	}
	if r.t.ep {
		return r.clipExperts(maxNorm)
	}
	if r.drv == nil {
		optim.ClipGradNorm(r.params, maxNorm)
		return nil
	}
	r.lbuf[1] = float32(optim.GradSumSquares(r.params))
	if err := r.comm.AllReduceF32(r.lbuf[1:2], dist.Sum); err != nil {
		return err
	}
	norm := float32(math.Sqrt(float64(r.lbuf[1])))
	if norm > maxNorm && !math.IsInf(float64(norm), 0) && !math.IsNaN(float64(norm)) {
		optim.ScaleGrads(r.params, maxNorm/(norm+1e-6))
	}
	return nil
}
