package main

import (
	"fmt"
	"os"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/examples/internal/trainloop"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/fsdp"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/passes"
)

// world names the ranks of a sharded run in messages: "-fsdp 3", or "the
// MPI world of 3 ranks" under mpirun.
func (c config) world(n int) string {
	if c.mpiComm != nil {
		return fmt.Sprintf("the MPI world of %d ranks", n)
	}
	return fmt.Sprintf("-fsdp %d", n)
}

// trainFSDP trains with cfg.fsdp in-process ranks (or this process's rank
// of an MPI job), each holding a shard of every parameter and its rows of
// each global batch (an uneven split gives the first ranks one row more,
// and weights each rank's gradients by its rows); rank 0 evaluates. With
// the AO tensorwise recipe (and enable_fsdp_float8_all_gather, its
// default) FP8 weights are gathered one byte per element.
func trainFSDP(cfg config, precision string, recipe fp8.Recipe, train, test *mnist.Set) (*result, error) {
	n := cfg.fsdp
	if cfg.mpiComm != nil {
		n = cfg.mpiComm.Size()
	}
	if cfg.batch < n {
		return nil, fmt.Errorf("%s: the batch of %d leaves ranks without rows", cfg.world(n), cfg.batch)
	}
	res := &result{}
	var rep0 *replica
	if cfg.mpiComm != nil { // this process is one rank of an MPI job
		r, err := fsdpRank(cfg, precision, recipe, cfg.mpiComm, train, res)
		if err != nil {
			return nil, fmt.Errorf("rank %d of %s: %w", cfg.mpiComm.Rank(), cfg.world(n), err)
		}
		rep0 = r
	} else {
		reps := make([]*replica, n)
		if err := dist.RunLocal(n, func(c dist.Communicator) (err error) {
			r := res // rank 0 reports
			if c.Rank() > 0 {
				r = &result{}
			}
			reps[c.Rank()], err = fsdpRank(cfg, precision, recipe, c, train, r)
			return err
		}); err != nil {
			return nil, err
		}
		rep0 = reps[0]
	}
	return res, rep0.evaluate(cfg, recipe, res, test)
}

// fsdpRank trains one rank over comm and fills res. It returns the rank's
// replica, whose store holds the gathered full parameters.
func fsdpRank(cfg config, precision string, recipe fp8.Recipe, comm dist.Communicator, train *mnist.Set, res *result) (*replica, error) {
	n, rank := comm.Size(), comm.Rank()
	rows := shardOf(cfg.batch, n, rank)
	float8AG := false
	if ao, ok := recipe.(fp8.AORecipe); ok {
		float8AG = ao.EnableFSDPFloat8AllGather
	}
	// Sharding is the last stage of the checked pipeline, after the FP8
	// passes.
	var sh *fsdp.Sharded
	var srep fsdp.Report
	rep, err := newReplica(cfg, precision, comm, recipe, rows.hi-rows.lo, func(m *model, store *graph.Store) []passes.Pass {
		return []passes.Pass{fsdp.Pass(store, comm, m.params, fsdp.Config{Float8AllGather: float8AG, Precompute: true}, &sh, &srep)}
	})
	if err != nil {
		return nil, err
	}
	*res = *rep.result(precision, recipe)
	res.Ranks = n
	drv, err := fsdp.NewRank(sh, rep.prog, rep.m.grads)
	if err != nil {
		return nil, err
	}
	if err := drv.SetBatchShare(rows.hi-rows.lo, cfg.batch); err != nil {
		return nil, err
	}
	rep.params = drv.Params()
	opt, ms, err := recipes.Optimizer(recipe, rep.params, float32(cfg.weightDecay), nil)
	if err != nil {
		return nil, err
	}
	res.Memory = &ms
	// Each rank checkpoints its own shards, optimizer state and loader.
	shardStore, err := sh.ShardStore(rep.store)
	if err != nil {
		return nil, err
	}
	ckpt := &trainloop.Checkpoint{Name: fmt.Sprintf("mnist-%s-rank%d-of-%d", precision, rank, n), Store: shardStore, Opt: opt, Prog: rep.prog,
		Meta: cfg.checkpointMeta(res.Recipe, fmt.Sprintf(" fsdp %d", n)), Notes: os.Stderr}
	if sh.Precomputed() {
		rep.resumed = drv.AfterUpdate // the FP8 weights' scales from the loaded shards
	}
	var gathered int64
	err = rep.train(cfg, train, res, rows, comm, ckpt, func() error {
		comm.ResetStats()
		if err := drv.Run(); err != nil {
			return err
		}
		opt.Step(rep.lr)
		if err := drv.AfterUpdate(); err != nil {
			return err
		}
		gathered = comm.Stats().AllGatherBytes
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := sh.Gather(rep.store); err != nil {
		return nil, err
	}
	res.AllGatherBytes = gathered
	res.Float8AllGatherBytes = int64(srep.Float8Bytes)
	return rep, nil
}
