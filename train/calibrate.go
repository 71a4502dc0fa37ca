package train

import (
	"fmt"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
)

// calibration is delayed scaling's calibration (Transformer Engine's
// fp8_autocast(calibrating=True)): for the first steps of a run, the
// model trains in float32 while AmaxRecord nodes record the amaxes of
// every FP8 layer's input, weight and output gradient into the same
// metas the FP8 program casts with, and update their scales at each
// step's end; the FP8 program then starts from those scales instead of
// scale 1.
type calibration struct {
	steps int
	m     *Model
	prog  *graph.Program
	feeds []feed
	// grads are the float32 program's gradients, in the FP8 program's
	// parameter order; each step copies them into its buffers.
	grads []optim.Param
}

// newCalibration compiles the calibration program of replica r (rows
// rows a rank), over r's store and FP8 layer states.
func (t *Trainer) newCalibration(r *replica, rows, steps int) (*calibration, error) {
	states := map[string]*fp8.LayerState{}
	for _, k := range r.store.StateKeys() {
		if ls, ok := r.store.State(k).(*fp8.LayerState); ok && ls.Input != nil {
			states[ls.FQN] = ls
		}
	}
	if len(states) == 0 {
		return nil, configErrorf("calibration_steps %d: the %s recipe converted no layer with delayed scaling (nothing to calibrate)", steps, r.report.Backend)
	}
	if t.fsdp {
		return nil, configErrorf("calibration_steps %d: calibration does not combine with FSDP (its float32 program would need its own all-gathers); use DP", steps)
	}
	m, err := t.build(rows, true)
	if err != nil {
		return nil, err
	}
	params := m.Builder.Params()
	if err := m.Builder.Init(r.store, t.cfg.Seed); err != nil { // no-op: r's values are there
		return nil, fmt.Errorf("train: calibration: %w", err)
	}
	grads, err := graph.Grad(m.Loss, params...)
	if err != nil {
		return nil, fmt.Errorf("train: calibration: %w", err)
	}
	g := m.Builder.Graph()
	backward := map[*graph.Node]*graph.Node{}
	for _, n := range g.Nodes() {
		if f := n.Forward(); f != nil && (n.Role() == graph.Dgrad || n.Role() == graph.Wgrad) && backward[f] == nil {
			backward[f] = n
		}
	}
	var records []*graph.Node
	seen := map[string]bool{}
	for _, n := range g.Nodes() {
		ls := states[n.Name()]
		if n.Role() != graph.Fprop || ls == nil || seen[n.Name()] {
			continue
		}
		seen[n.Name()] = true
		records = append(records,
			ops.AmaxRecord(n.Name()+"/calibrate.input", n.Input(0), ls.Input),
			ops.AmaxRecord(n.Name()+"/calibrate.weight", n.Input(1), ls.Weight))
		if bw := backward[n]; bw != nil {
			records = append(records, ops.AmaxRecord(n.Name()+"/calibrate.grad_output", bw.Input(0), ls.GradOutput))
		}
	}
	if err := g.Err(); err != nil {
		return nil, fmt.Errorf("train: calibration: %w", err)
	}
	for fqn := range states {
		if !seen[fqn] {
			return nil, fmt.Errorf("train: calibration: FP8 layer %q has no linear layer of that name in the float32 model", fqn)
		}
	}
	outs := append(append([]*graph.Node{m.Loss}, grads...), records...)
	prog, err := graph.Compile(g, r.store, graph.Options{Training: true, Sums: ops.VectorSums()}, outs...)
	if err != nil {
		return nil, fmt.Errorf("train: calibration: %w", err)
	}
	if m.Fixed != nil {
		if err := m.Fixed(prog); err != nil {
			return nil, fmt.Errorf("train: Fixed (calibration): %w", err)
		}
	}
	if r.amax != nil {
		prog.BeforeStepEnd(r.amax.reduce) // the ranks calibrate on the global batch's amaxes
	}
	cp, err := optim.Bind(r.store, prog, params, grads)
	if err != nil {
		return nil, fmt.Errorf("train: calibration: %w", err)
	}
	return &calibration{steps: steps, m: m, prog: prog, grads: cp}, nil
}

// run runs one calibration micro-batch and leaves its gradients where
// the FP8 program leaves its own (dst, in parameter order); it returns
// the rank's loss.
func (c *calibration) run(b *data.Batch, dst [][]float32) (float32, error) {
	if err := feedBatch(c.prog, c.feeds, b); err != nil {
		return 0, err
	}
	if err := c.prog.Run(); err != nil {
		return 0, err
	}
	for i, p := range c.grads {
		copy(dst[i], p.G)
	}
	return c.prog.Scalar(c.m.Loss)
}
