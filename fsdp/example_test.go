package fsdp_test

import (
	"fmt"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fsdp"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
)

// Two in-process ranks train a linear layer sharded: each keeps half of
// every parameter, the step all-gathers them, the gradients are
// reduce-scattered (averaged) and each rank updates its shard. Each rank
// runs its own half of the batch.
func ExampleShard() {
	losses := make([]float32, 2)
	err := dist.RunLocal(2, func(comm dist.Communicator) error {
		rank := comm.Rank()
		g := graph.New()
		x := g.Input("x", graph.Float32, 2, 4) // this rank's half of a batch of 4
		w := g.Param("fc.weight", 3, 4)
		loss := ops.Mean(ops.Mul(ops.Linear("fc", x, w, nil), ops.Linear("fc", x, w, nil)))
		grads, _ := graph.Grad(loss, w)
		store := graph.NewStore()
		_ = store.SetFloat32("fc.weight", []float32{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, 3, 4)
		sh, rep, err := fsdp.Shard(g, store, comm, []*graph.Node{w}, fsdp.Config{})
		if err != nil {
			return err
		}
		prog, _ := graph.Compile(g, store, graph.Options{Training: true}, loss, grads[0])
		drv, _ := fsdp.NewRank(sh, prog, grads)
		opt := optim.NewSGD(drv.Params(), 0, 0, false)
		_ = prog.FeedFloat32(x, []float32{1, 1, 1, 1, 0, 1, 0, float32(rank)})
		if err := drv.Run(); err != nil {
			return err
		}
		opt.Step(0.1)
		losses[rank], _ = prog.Scalar(loss)
		if rank == 0 {
			fmt.Println("sharded parameters:", rep.Params)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Printf("losses %.4f %.4f\n", losses[0], losses[1])
	// Output:
	// sharded parameters: 1
	// losses 0.6667 0.6667
}
