package main

import (
	"fmt"
	"math"
	"time"

	"github.com/octetml/octet/data/mnist"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/examples/internal/recipes"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
)

// trainDP trains plain data-parallel over cfg.dp in-process ranks, each
// with a full replica and a 1/N slice of every global batch. Gradients are
// averaged across ranks: with -recipe msamp by MS-AMP's FP8 all-reduce
// inside the low-bit optimizer (overflows and underflows counted), else
// by a float32 all-reduce. Rank 0 evaluates.
func trainDP(cfg config, precision string, train, test *mnist.Set) (*result, error) {
	n := cfg.dp
	if cfg.batch%n != 0 {
		return nil, fmt.Errorf("-dp %d: the batch of %d does not split evenly", n, cfg.batch)
	}
	recipe, err := cfg.recipeFor(precision)
	if err != nil {
		return nil, err
	}
	results := make([]*result, n)
	stores := make([]*graph.Store, n)
	if err := dist.RunLocal(n, func(c dist.Communicator) (err error) {
		results[c.Rank()], stores[c.Rank()], err = dpRank(cfg, precision, recipe, c, train)
		return err
	}); err != nil {
		return nil, err
	}
	// Every rank applied the same averaged gradients: the replicas must be
	// identical to the bit.
	for rank := 1; rank < n; rank++ {
		for _, name := range stores[0].Names() {
			a, b := stores[0].Float32(name), stores[rank].Float32(name)
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					return nil, fmt.Errorf("replica %d diverged from rank 0 at %s[%d]", rank, name, i)
				}
			}
		}
	}
	res := results[0]
	em, err := buildModel(cfg, evalBatch, false)
	if err != nil {
		return nil, err
	}
	var evalProg *graph.Program
	if recipe != nil {
		eprep, err := passes.Prepare(em.g, stores[0], passes.Config{Recipe: recipe, EvalOutputs: []*graph.Node{em.logits}})
		if err != nil {
			return nil, err
		}
		evalProg = eprep.Eval
	} else if evalProg, err = graph.Compile(em.g, stores[0], graph.Options{}, em.logits); err != nil {
		return nil, err
	}
	res.FinalLoss = recipes.MeanTail(res.Losses, 100)
	res.TestAccuracy, err = evaluate(evalProg, em, test)
	return res, err
}

func dpRank(cfg config, precision string, recipe fp8.Recipe, comm dist.Communicator, train *mnist.Set) (*result, *graph.Store, error) {
	n, rank := comm.Size(), comm.Rank()
	res := &result{Precision: precision, Recipe: recipes.Label(recipe)}
	m, err := buildModel(cfg, cfg.batch/n, true)
	if err != nil {
		return nil, nil, err
	}
	store := graph.NewStore()
	if err := m.b.Init(store, cfg.seed); err != nil {
		return nil, nil, err
	}
	outs := append([]*graph.Node{m.loss}, m.grads...)
	var prog *graph.Program
	if recipe != nil {
		prep, err := passes.Prepare(m.g, store, passes.Config{Recipe: recipe, TrainOutputs: outs})
		if err != nil {
			return nil, nil, err
		}
		prog, res.Converted, res.Kept = prep.Train, prep.Report.Converted(), keptLayers(prep.Report)
	} else if prog, err = graph.Compile(m.g, store, graph.Options{Training: true}, outs...); err != nil {
		return nil, nil, err
	}
	params, err := optim.Bind(store, prog, m.params, m.grads)
	if err != nil {
		return nil, nil, err
	}
	opt, ms, err := recipes.Optimizer(recipe, params, float32(cfg.weightDecay), comm)
	if err != nil {
		return nil, nil, err
	}
	res.Memory = &ms
	lowBit, _ := opt.(*optim.LowBitAdam) // it all-reduces the gradients itself
	loader, err := mnist.NewLoader(train, cfg.batch, true, cfg.seed)
	if err != nil {
		return nil, nil, err
	}
	steps := cfg.epochs * loader.BatchesPerEpoch()
	sched := optim.WarmupCosine{Base: float32(cfg.lr), Min: float32(cfg.lr) / 50, Warmup: min(200, steps/10), Total: steps}
	local := cfg.batch / n
	xb, yb := make([]float32, cfg.batch*mnist.Pixels), make([]int32, cfg.batch)
	lossBuf := make([]float32, 1)
	inv := 1 / float32(n)
	var busy time.Duration
	for step := 0; step < steps; step++ {
		loader.Next(xb, yb)
		start := time.Now()
		if err := prog.FeedFloat32(m.x, xb[rank*local*mnist.Pixels:(rank+1)*local*mnist.Pixels]); err != nil {
			return nil, nil, err
		}
		if err := prog.FeedInt32(m.y, yb[rank*local:(rank+1)*local]); err != nil {
			return nil, nil, err
		}
		if err := prog.Run(); err != nil {
			return nil, nil, err
		}
		if lowBit == nil { // float32 gradient all-reduce (mean)
			for _, p := range params {
				if err := comm.AllReduceF32(p.G, dist.Sum); err != nil {
					return nil, nil, err
				}
				for i := range p.G {
					p.G[i] *= inv
				}
			}
		}
		opt.Step(sched.LR(step))
		if lowBit != nil && lowBit.Err() != nil {
			return nil, nil, lowBit.Err()
		}
		busy += time.Since(start)
		lossBuf[0], _ = prog.Scalar(m.loss)
		if err := comm.AllReduceF32(lossBuf, dist.Sum); err != nil {
			return nil, nil, err
		}
		res.Losses = append(res.Losses, lossBuf[0]*inv)
		if err := checkLoss(step, lossBuf[0], cfg.lr); err != nil {
			return nil, nil, err
		}
	}
	res.Steps = steps
	res.MsPerStep = float64(busy.Microseconds()) / 1000 / float64(steps)
	if lowBit != nil {
		res.FP8AllReduceOverflows, res.FP8AllReduceUnderflows = lowBit.Overflows, lowBit.Underflows
	}
	return res, store, nil
}
