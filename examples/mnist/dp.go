package main

import (
	"fmt"
	"math"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/optim"
)

// trainDP trains plain data-parallel over cfg.dp in-process ranks, each
// with a full replica and its rows of every global batch (an uneven split
// gives the first ranks one row more). Gradients are averaged across
// ranks, each weighted by its rows: with -recipe msamp by MS-AMP's FP8
// all-reduce inside the low-bit optimizer (overflows and underflows
// counted), else by a float32 all-reduce. Rank 0 evaluates.
func trainDP(cfg config, precision string, recipe fp8.Recipe, train, test *mnist.Set) (*result, error) {
	n := cfg.dp
	if cfg.batch < n {
		return nil, fmt.Errorf("-dp %d: the batch of %d leaves ranks without rows", n, cfg.batch)
	}
	results := make([]*result, n)
	reps := make([]*replica, n)
	if err := dist.RunLocal(n, func(c dist.Communicator) (err error) {
		results[c.Rank()], reps[c.Rank()], err = dpRank(cfg, precision, recipe, c, train)
		return err
	}); err != nil {
		return nil, err
	}
	// Every rank applied the same averaged gradients: the replicas must be
	// identical to the bit.
	s0 := reps[0].store
	for rank := 1; rank < n; rank++ {
		for _, name := range s0.Names() {
			a, b := s0.Float32(name), reps[rank].store.Float32(name)
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					return nil, fmt.Errorf("replica %d diverged from rank 0 at %s[%d]", rank, name, i)
				}
			}
		}
	}
	res := results[0]
	res.Ranks = n
	return res, reps[0].evaluate(cfg, recipe, res, test)
}

func dpRank(cfg config, precision string, recipe fp8.Recipe, comm dist.Communicator, train *mnist.Set) (*result, *replica, error) {
	n := comm.Size()
	rows := shardOf(cfg.batch, n, comm.Rank())
	rep, err := newReplica(cfg, precision, comm, recipe, rows.hi-rows.lo, nil)
	if err != nil {
		return nil, nil, err
	}
	res := rep.result(precision, recipe)
	opt, ms, err := recipes.Optimizer(recipe, rep.params, float32(cfg.weightDecay), comm)
	if err != nil {
		return nil, nil, err
	}
	res.Memory = &ms
	lowBit, _ := opt.(*optim.LowBitAdam) // it all-reduces (averages) the gradients itself
	res.dp = lowBit != nil
	inv := 1 / float32(n)
	w := rows.weight(n) // an uneven split weights each rank's gradients by its rows
	err = rep.train(cfg, train, res, rows, comm, nil, func() error {
		if err := rep.prog.Run(); err != nil {
			return err
		}
		for _, p := range rep.params {
			if !rows.even(n) {
				for i := range p.G {
					p.G[i] *= w
				}
			}
			if lowBit != nil {
				continue
			}
			// float32 gradient all-reduce (mean)
			if err := comm.AllReduceF32(p.G, dist.Sum); err != nil {
				return err
			}
			for i := range p.G {
				p.G[i] *= inv
			}
		}
		opt.Step(rep.lr)
		if lowBit != nil && lowBit.Err() != nil {
			return lowBit.Err()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if lowBit != nil {
		res.FP8AllReduceOverflows, res.FP8AllReduceUnderflows = lowBit.Overflows, lowBit.Underflows
	}
	return res, rep, nil
}
