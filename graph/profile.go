package graph

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// profile holds per-kernel timings while profiling is on.
type profile struct {
	on      bool
	calls   []int64
	nanos   []int64
	endNano int64 // step-end hooks (FP8 scale updates)
	steps   int64
}

// SetProfiling turns per-node timing on or off (off by default); turning
// it on clears earlier timings. Timing costs two clock reads per kernel
// and allocates nothing.
func (p *Program) SetProfiling(on bool) {
	p.prof = profile{on: on}
	if on {
		p.prof.calls = make([]int64, len(p.kernels))
		p.prof.nanos = make([]int64, len(p.kernels))
	}
}

// runProfiled is Run's kernel loop with timings.
func (p *Program) runProfiled() error {
	for i, k := range p.kernels {
		if k == nil {
			continue
		}
		t0 := time.Now()
		err := k()
		p.prof.nanos[i] += int64(time.Since(t0))
		p.prof.calls[i]++
		if err != nil {
			n := p.schedule[i]
			return fmt.Errorf("graph: run: node %q (%s): %w", n.name, n.op.Type(), err)
		}
	}
	t0 := time.Now()
	if err := p.runStepEnd(); err != nil {
		return err
	}
	p.prof.endNano += int64(time.Since(t0))
	p.prof.steps++
	return nil
}

// ProfileRow is the time one node, op type or layer took over the
// profiled steps.
type ProfileRow struct {
	// Name is the node's name, the op type, or the layer.
	Name  string
	Calls int64
	Total time.Duration
}

// Profile is what a profiled program measured: per node, and totals per
// op type and per layer (a node's name up to its first "/", without the
// suffixes the compiler adds: ".fp8", ".bf16", ".dgrad", ".wgrad",
// ".autocast", ".fakequant"), each sorted by time, largest first.
type Profile struct {
	Steps               int64
	Total               time.Duration
	Nodes, Ops, Layers  []ProfileRow
	StepEnd             time.Duration // the step-end hooks (FP8 scale updates)
	nodeOps, nodeLayers map[string]string
}

// Profile returns the timings since SetProfiling(true).
func (p *Program) Profile() Profile {
	pr := Profile{Steps: p.prof.steps, StepEnd: time.Duration(p.prof.endNano)}
	if !p.prof.on {
		return pr
	}
	ops, layers := map[string]*ProfileRow{}, map[string]*ProfileRow{}
	add := func(m map[string]*ProfileRow, key string, calls int64, d time.Duration) {
		r, ok := m[key]
		if !ok {
			r = &ProfileRow{Name: key}
			m[key] = r
		}
		r.Calls += calls
		r.Total += d
	}
	for i, n := range p.schedule {
		if p.kernels[i] == nil || p.prof.calls[i] == 0 {
			continue
		}
		d := time.Duration(p.prof.nanos[i])
		pr.Total += d
		pr.Nodes = append(pr.Nodes, ProfileRow{Name: n.name, Calls: p.prof.calls[i], Total: d})
		add(ops, n.op.Type(), p.prof.calls[i], d)
		add(layers, LayerOf(n.name), p.prof.calls[i], d)
	}
	pr.Total += pr.StepEnd
	for _, r := range ops {
		pr.Ops = append(pr.Ops, *r)
	}
	for _, r := range layers {
		pr.Layers = append(pr.Layers, *r)
	}
	for _, rows := range [][]ProfileRow{pr.Nodes, pr.Ops, pr.Layers} {
		sort.Slice(rows, func(a, b int) bool {
			if rows[a].Total != rows[b].Total {
				return rows[a].Total > rows[b].Total
			}
			return rows[a].Name < rows[b].Name
		})
	}
	return pr
}

// layerSuffixes are the suffixes compiler passes add to a layer's node
// names.
var layerSuffixes = []string{".fp8", ".bf16", ".fakequant", ".autocast", ".dgrad", ".wgrad"}

// LayerOf returns the layer a node name belongs to: the name up to its
// first "/", without the suffixes compiler passes add ("mlp.fc1.dgrad.fp8"
// and "mlp.fc1/relu" are both "mlp.fc1").
func LayerOf(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		name = name[:i]
	}
	for changed := true; changed; {
		changed = false
		for _, s := range layerSuffixes {
			if strings.HasSuffix(name, s) {
				name, changed = strings.TrimSuffix(name, s), true
			}
		}
	}
	return name
}

// Share returns the fraction of the profiled time that op types named
// in types took; a type t also counts the fused ops named "t+…" (a GEMM
// with its epilogue, "Linear+Add").
func (pr Profile) Share(types ...string) float64 {
	if pr.Total == 0 {
		return 0
	}
	var d time.Duration
	for _, r := range pr.Ops {
		for _, t := range types {
			if r.Name == t || strings.HasPrefix(r.Name, t+"+") {
				d += r.Total
				break
			}
		}
	}
	return float64(d) / float64(pr.Total)
}

// WriteTable writes the op-type and layer tables (the top rows of each),
// like PyTorch's key_averages(): calls, total and mean time per step,
// and share of the step.
func (pr Profile) WriteTable(w io.Writer, top int) {
	if pr.Steps == 0 {
		fmt.Fprintln(w, "no profiled steps")
		return
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(pr.Steps) / 1e6 }
	table := func(title string, rows []ProfileRow) {
		fmt.Fprintf(w, "%-34s %9s %12s %7s\n", title, "calls", "ms/step", "share")
		for i, r := range rows {
			if i == top {
				fmt.Fprintf(w, "  … %d more\n", len(rows)-top)
				break
			}
			fmt.Fprintf(w, "%-34s %9d %12.3f %6.1f%%\n", r.Name, r.Calls, per(r.Total), 100*float64(r.Total)/float64(pr.Total))
		}
	}
	fmt.Fprintf(w, "profile: %d steps, %.3f ms/step\n", pr.Steps, per(pr.Total))
	ops := append(append([]ProfileRow(nil), pr.Ops...), ProfileRow{Name: "(step end: scale updates)", Total: pr.StepEnd})
	sort.SliceStable(ops, func(a, b int) bool { return ops[a].Total > ops[b].Total })
	table("op type", ops)
	table("layer", pr.Layers)
}
