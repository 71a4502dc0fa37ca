package main

import (
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gorgoniaMLP returns one training step of the same MLP built with
// gorgonia v0.9.18: tape machine forward and backward, then its Adam
// solver.
func gorgoniaMLP(batch int) (step func() error, cleanup func(), err error) {
	g := G.NewGraph()
	rng := rand.New(rand.NewPCG(3, 3))
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(batch, mlpSizes[0]), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(batch, mlpSizes[0]), tensor.WithBacking(randn(rng, batch*mlpSizes[0], 1)))))
	onehot := make([]float32, batch*10)
	for i := 0; i < batch; i++ {
		onehot[i*10+i%10] = 1
	}
	oh := G.NewConstant(tensor.New(tensor.WithShape(batch, 10), tensor.WithBacking(onehot)), G.WithName("onehot"))
	h := x
	var params G.Nodes
	for i := 0; i+1 < len(mlpSizes); i++ {
		in, out := mlpSizes[i], mlpSizes[i+1]
		w := G.NewMatrix(g, tensor.Float32, G.WithShape(in, out), G.WithInit(G.GlorotU(1)))
		b := G.NewVector(g, tensor.Float32, G.WithShape(out), G.WithInit(G.Zeroes()))
		params = append(params, w, b)
		h, err = G.Mul(h, w)
		if err == nil {
			h, err = G.BroadcastAdd(h, b, nil, []byte{0})
		}
		if err == nil && i+2 < len(mlpSizes) {
			h, err = G.Rectify(h)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	logp, err := G.LogSoftMax(h)
	if err != nil {
		return nil, nil, err
	}
	prod, err := G.HadamardProd(logp, oh)
	if err != nil {
		return nil, nil, err
	}
	sum, err := G.Sum(prod)
	if err != nil {
		return nil, nil, err
	}
	loss, err := G.Mul(sum, G.NewConstant(float32(-1)/float32(batch)))
	if err != nil {
		return nil, nil, err
	}
	if _, err := G.Grad(loss, params...); err != nil {
		return nil, nil, err
	}
	vm := G.NewTapeMachine(g, G.BindDualValues(params...))
	solver := G.NewAdamSolver(G.WithLearnRate(1e-3))
	return func() error {
			if err := vm.RunAll(); err != nil {
				return err
			}
			if err := solver.Step(G.NodesToValueGrads(params)); err != nil {
				return err
			}
			vm.Reset()
			return nil
		}, func() {
			vm.Close()
		}, nil
}
