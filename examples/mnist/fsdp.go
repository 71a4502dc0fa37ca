package main

import (
	"fmt"
	"time"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/fsdp"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
)

// trainFSDP trains with cfg.fsdp in-process ranks, each holding a shard of
// every parameter and a 1/N slice of each global batch; rank 0 evaluates.
// With the AO tensorwise recipe (and enable_fsdp_float8_all_gather, its
// default) FP8 weights are gathered one byte per element.
func trainFSDP(cfg config, precision string, train, test *mnist.Set, mpiComm dist.Communicator) (*result, error) {
	n := cfg.fsdp
	if mpiComm != nil {
		n = mpiComm.Size()
	}
	if cfg.batch%n != 0 {
		return nil, fmt.Errorf("-fsdp %d: the batch of %d does not split evenly", n, cfg.batch)
	}
	recipe, err := cfg.recipeFor(precision)
	if err != nil {
		return nil, err
	}
	float8AG := false
	if ao, ok := recipe.(fp8.AORecipe); ok {
		float8AG = ao.EnableFSDPFloat8AllGather
	}
	res := &result{Precision: precision, Recipe: recipes.Label(recipe)}
	var store0 *graph.Store
	if mpiComm != nil { // this process is one rank of an MPI job
		store, err := fsdpRank(cfg, precision, recipe, float8AG, mpiComm, train, res)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", mpiComm.Rank(), err)
		}
		store0 = store
	} else {
		stores := make([]*graph.Store, n)
		if err := dist.RunLocal(n, func(c dist.Communicator) (err error) {
			r := res // rank 0 reports
			if c.Rank() > 0 {
				r = &result{}
			}
			stores[c.Rank()], err = fsdpRank(cfg, precision, recipe, float8AG, c, train, r)
			return err
		}); err != nil {
			return nil, err
		}
		store0 = stores[0]
	}
	em, err := buildModel(cfg, evalBatch, false)
	if err != nil {
		return nil, err
	}
	var evalProg *graph.Program
	if recipe != nil {
		eprep, err := passes.Prepare(em.g, store0, passes.Config{Recipe: recipe, EvalOutputs: []*graph.Node{em.logits}})
		if err != nil {
			return nil, err
		}
		evalProg = eprep.Eval
	} else if evalProg, err = graph.Compile(em.g, store0, graph.Options{}, em.logits); err != nil {
		return nil, err
	}
	res.FinalLoss = recipes.MeanTail(res.Losses, 100)
	res.TestAccuracy, err = evaluate(evalProg, em, test)
	return res, err
}

// fsdpRank trains one rank over comm; rank 0 fills res. It returns the
// rank's store holding the gathered full parameters.
func fsdpRank(cfg config, precision string, recipe fp8.Recipe, float8AG bool, comm dist.Communicator, train *mnist.Set, res *result) (*graph.Store, error) {
	n, rank := comm.Size(), comm.Rank()
	m, err := buildModel(cfg, cfg.batch/n, true)
	if err != nil {
		return nil, err
	}
	store := graph.NewStore()
	if err := m.b.Init(store, cfg.seed); err != nil { // the same full values on every rank
		return nil, err
	}
	outs := append([]*graph.Node{m.loss}, m.grads...)
	// Sharding is the last stage of the checked pipeline, after the FP8
	// passes.
	var sh *fsdp.Sharded
	var rep fsdp.Report
	shard := fsdp.Pass(store, comm, m.params, fsdp.Config{Float8AllGather: float8AG, Precompute: true}, &sh, &rep)
	var prog *graph.Program
	if recipe != nil {
		prep, err := passes.Prepare(m.g, store, passes.Config{Recipe: recipe, TrainOutputs: outs, Passes: []passes.Pass{shard}})
		if err != nil {
			return nil, err
		}
		prog, res.Converted, res.Kept = prep.Train, prep.Report.Converted(), keptLayers(prep.Report)
	} else {
		pl := passes.Pipeline{Outputs: outs, Passes: []passes.Pass{shard}}
		if err := pl.Run(m.g); err != nil {
			return nil, err
		}
		if prog, err = graph.Compile(m.g, store, graph.Options{Training: true}, outs...); err != nil {
			return nil, err
		}
	}
	drv, err := fsdp.NewRank(sh, prog, m.grads)
	if err != nil {
		return nil, err
	}
	opt := optim.NewAdamW(drv.Params(), float32(cfg.weightDecay))
	loader, err := mnist.NewLoader(train, cfg.batch, true, cfg.seed) // every rank draws the same global batches
	if err != nil {
		return nil, err
	}
	steps := cfg.epochs * loader.BatchesPerEpoch()
	sched := optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 50, Warmup: min(200, steps/10), Total: steps}
	local := cfg.batch / n
	// Each rank checkpoints its own shards, optimizer state and loader.
	shardStore, err := sh.ShardStore(store)
	if err != nil {
		return nil, err
	}
	ckpt := &checkpointer{store: shardStore, opt: opt, loader: loader, prog: prog,
		name: fmt.Sprintf("mnist-%s-rank%d-of-%d", precision, rank, n),
		meta: map[string]string{"model": fmt.Sprintf("mlp %v fsdp %d", append(append([]int{mnist.Pixels}, cfg.hidden...), 10), n), "recipe": recipes.Label(recipe)}}
	first := 0
	if cfg.resumeDir != "" {
		if first, err = ckpt.resume(cfg.resumeDir); err != nil {
			return nil, err
		}
		if sh.Precomputed() {
			if err := drv.AfterUpdate(); err != nil { // scales from the loaded shards
				return nil, err
			}
		}
	}
	end := steps
	if cfg.stopAfter > 0 {
		end = min(end, cfg.stopAfter)
	}
	xb, yb := make([]float32, cfg.batch*mnist.Pixels), make([]int32, cfg.batch)
	lossBuf := make([]float32, 1)
	var busy time.Duration
	var gathered int64
	for step := first; step < end; step++ {
		loader.Next(xb, yb)
		start := time.Now()
		if err := prog.FeedFloat32(m.x, xb[rank*local*mnist.Pixels:(rank+1)*local*mnist.Pixels]); err != nil {
			return nil, err
		}
		if err := prog.FeedInt32(m.y, yb[rank*local:(rank+1)*local]); err != nil {
			return nil, err
		}
		comm.ResetStats()
		if err := drv.Run(); err != nil {
			return nil, err
		}
		opt.Step(sched.LR(step))
		if err := drv.AfterUpdate(); err != nil {
			return nil, err
		}
		busy += time.Since(start)
		gathered = comm.Stats().AllGatherBytes
		lossBuf[0], _ = prog.Scalar(m.loss)
		if err := comm.AllReduceF32(lossBuf, dist.Sum); err != nil {
			return nil, err
		}
		res.Losses = append(res.Losses, lossBuf[0]/float32(n))
		if err := checkLoss(step, lossBuf[0], cfg.lr); err != nil {
			return nil, err
		}
		if cfg.saveDir != "" && cfg.saveEvery > 0 && (step+1)%cfg.saveEvery == 0 && step+1 < end {
			if err := ckpt.save(cfg.saveDir); err != nil {
				return nil, err
			}
		}
	}
	if cfg.saveDir != "" {
		if err := ckpt.save(cfg.saveDir); err != nil {
			return nil, err
		}
	}
	if first >= end {
		return nil, fmt.Errorf("-resume: the checkpoint is at step %d, nothing left to train", first)
	}
	if err := sh.Gather(store); err != nil {
		return nil, err
	}
	res.Steps = steps
	res.MsPerStep = float64(busy.Microseconds()) / 1000 / float64(end-first)
	res.AllGatherBytes = gathered
	res.Float8AllGatherBytes = int64(rep.Float8Bytes)
	return store, nil
}
