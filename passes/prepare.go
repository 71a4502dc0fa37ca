package passes

import (
	"fmt"
	"io"
	"strings"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/recipe"
)

// Config configures Prepare.
type Config struct {
	// Recipe lowers the linear layers: recipe.TE,
	// recipe.Float8Block, recipe.NVFP4, recipe.Custom,
	// recipe.AO, recipe.MSAMP, recipe.BF16 for bf16 mixed
	// precision, or a recipe of one's own (recipe.Recipe). A nil Recipe
	// converts nothing (float32 training, Accelerate's
	// mixed_precision="no"): only Passes run before compiling.
	Recipe recipe.Recipe
	// Seed is the run's seed, which a recipe that draws (NVFP4's
	// stochastic rounding) uses unless it has a seed of its own.
	Seed uint64
	// TrainOutputs are the training program's outputs (the loss first,
	// then the gradients); EvalOutputs the evaluation program's.
	TrainOutputs, EvalOutputs []*graph.Node
	// Loss and Params, when Loss is set, hand Prepare the forward graph
	// instead: it runs ForwardPasses on it (a checked pipeline of their
	// own), then builds the backward (graph.Grad of the loss with respect
	// to Params), so that a forward rewrite is differentiated as it is;
	// the training program then outputs the loss and its gradients, then
	// any TrainOutputs (Prepared.Loss and Prepared.Grads return them).
	Loss          *graph.Node
	Params        []*graph.Node
	ForwardPasses []Pass
	// Filter restricts which linear layers convert (see LinearConfig).
	Filter func(n *graph.Node, fqn string) bool
	// NoLayerNormFusion skips ConvertLN.
	NoLayerNormFusion bool
	// Debug, if set, is a debug config (see package inspect): its
	// precision switches apply to the conversion, and its statistics
	// nodes, written to DebugLog, join the training program (a Debug
	// stage after Autowrap).
	Debug    *inspect.Config
	DebugLog *inspect.Log
	// DebugComm merges the statistics across the ranks of a parallel run
	// (see DebugConfig).
	DebugComm dist.Communicator
	// Passes run after Autowrap (and Debug), in the same checked pipeline
	// (for example fsdp.Pass, which shards the parameters), on the joint
	// forward and backward graph. One that rewrites forward values the
	// backward still reads (the backward was built from the old ones)
	// gets a warning naming them (Prepared.Warnings, and Log): such a
	// rewrite belongs in ForwardPasses.
	Passes []Pass
	// NoFusion skips the last stage, Fuse (elementwise chains and GEMM
	// epilogues).
	NoFusion bool
	// Dump, DOTDir and Log are the pipeline's (see Pipeline).
	Dump   io.Writer
	DOTDir string
	Log    io.Writer
}

// Prepared is what Prepare returns.
type Prepared struct {
	// Train and Eval are the compiled programs (nil when no outputs were
	// given for one); they share the store.
	Train, Eval *graph.Program
	// Report says what happened to each linear layer.
	Report Report
	// Loss and Grads are the loss and its gradients (one per
	// Config.Params) when Prepare built the backward (Config.Loss).
	Loss  *graph.Node
	Grads []*graph.Node
	// Warnings are what the checks of the joint-graph passes found.
	Warnings []string
}

// Prepare does for a graph what Accelerate's
// Accelerator(mixed_precision="fp8", kwargs_handlers=[recipe]).prepare
// does for a model: it picks the backend from the recipe, runs the FP8
// pipeline (ConvertLinear, ConvertLN, Autowrap) with a verifier between
// stages, fuses elementwise chains (Fuse, last), and compiles a training
// and an evaluation program. Evaluation
// runs float32 unless a TE recipe sets UseAutocastDuringEval; AO and
// MS-AMP layers stay FP8 in evaluation, as their module swaps do, and
// bf16 layers stay bf16, as under Accelerate's autocast. With
// recipe.BF16 it is Accelerator(mixed_precision="bf16").prepare, and
// with no recipe Accelerator(mixed_precision="no").prepare.
func Prepare(g *graph.Graph, store *graph.Store, cfg Config) (*Prepared, error) {
	var loss *graph.Node
	var grads []*graph.Node
	if cfg.Loss != nil {
		var err error
		if loss, grads, err = forward(g, cfg); err != nil {
			return nil, err
		}
		cfg.TrainOutputs = append(append([]*graph.Node{loss}, grads...), cfg.TrainOutputs...)
		for i, n := range cfg.EvalOutputs {
			cfg.EvalOutputs[i] = g.Resolve(n)
		}
	} else if len(cfg.ForwardPasses) > 0 {
		return nil, fmt.Errorf("passes: prepare: ForwardPasses need the forward graph's Loss (and Params)")
	}
	if len(cfg.TrainOutputs) == 0 && len(cfg.EvalOutputs) == 0 {
		return nil, fmt.Errorf("passes: prepare: no outputs")
	}
	// A graph prepared before is converted from its layers' own nodes
	// (and fused again at the end).
	if _, err := Unfuse(g); err != nil {
		return nil, fmt.Errorf("passes: prepare: %w", err)
	}
	// A graph built for evaluation only (say, with a larger batch) is
	// converted the same way; its layers find their scaling state in the
	// store under the same names.
	live := cfg.TrainOutputs
	if len(live) == 0 {
		live = cfg.EvalOutputs
	}
	evalFP8 := cfg.Recipe != nil && cfg.Recipe.EvalQuantized()
	var rep Report
	pl := Pipeline{Outputs: live, Dump: cfg.Dump, DOTDir: cfg.DOTDir, Log: cfg.Log}
	if cfg.Recipe != nil {
		pl.Passes = fp8Passes(store, cfg, live, evalFP8, &rep)
	}
	var statNodes []*graph.Node
	if cfg.Debug != nil && len(cfg.Debug.Sections) > 0 && len(cfg.TrainOutputs) > 0 {
		pl.Passes = append(pl.Passes, Pass{Name: "Debug", Run: func(g *graph.Graph) (string, error) {
			r, nodes, err := Debug(g, DebugConfig{Config: cfg.Debug, Log: cfg.DebugLog, Comm: cfg.DebugComm}, live...)
			statNodes = nodes
			rep.Notes = append(rep.Notes, r.Notes...)
			pl.Outputs = append(append([]*graph.Node(nil), live...), nodes...) // the dumps show them
			return fmt.Sprintf("%d statistics node(s) for %d layer(s)", len(nodes), len(r.Notes)), err
		}})
	}
	var warnings []string
	for _, p := range cfg.Passes {
		pl.Passes = append(pl.Passes, staleForwardCheck(p, cfg, &warnings))
	}
	if !cfg.NoFusion {
		pl.Passes = append(pl.Passes, Pass{Name: "Fuse", Run: func(g *graph.Graph) (string, error) {
			outs := append(append(append([]*graph.Node(nil), cfg.TrainOutputs...), cfg.EvalOutputs...), statNodes...)
			r, err := Fuse(g, outs...)
			return r.String(), err
		}})
	}
	if err := pl.Run(g); err != nil {
		return nil, err
	}
	p := &Prepared{Report: rep, Warnings: warnings}
	if loss != nil {
		p.Loss = g.Resolve(loss)
		for _, gr := range grads {
			p.Grads = append(p.Grads, g.Resolve(gr))
		}
	}
	var err error
	if len(cfg.TrainOutputs) > 0 {
		outs := append(append([]*graph.Node(nil), cfg.TrainOutputs...), statNodes...)
		if p.Train, err = graph.Compile(g, store, graph.Options{Training: true, Sums: ops.VectorSums()}, outs...); err != nil {
			return nil, fmt.Errorf("passes: prepare: training program: %w", err)
		}
	}
	if len(cfg.EvalOutputs) > 0 {
		if p.Eval, err = graph.Compile(g, store, graph.Options{Sums: ops.VectorSums()}, cfg.EvalOutputs...); err != nil {
			return nil, fmt.Errorf("passes: prepare: evaluation program: %w", err)
		}
	}
	return p, nil
}

// fp8Passes is the conversion pipeline of a recipe: ConvertLinear,
// ConvertLN (unless switched off) and Autowrap, each with its stage
// check; the passes fill rep.
func fp8Passes(store *graph.Store, cfg Config, live []*graph.Node, evalFP8 bool, rep *Report) []Pass {
	ps := []Pass{{Name: "ConvertLinear", Check: checkConverted, Run: func(g *graph.Graph) (string, error) {
		r, err := ConvertLinear(g, store, LinearConfig{Recipe: cfg.Recipe, Filter: cfg.Filter, Debug: cfg.Debug, Seed: cfg.Seed})
		*rep = r
		return fmt.Sprintf("%d of %d linear layers converted (%s)", len(r.Converted()), len(r.Layers), r.Backend), err
	}}}
	if !cfg.NoLayerNormFusion {
		ps = append(ps, Pass{Name: "ConvertLN", Check: checkFused, Run: func(g *graph.Graph) (string, error) {
			r, err := ConvertLN(g, live...)
			rep.Notes = append(rep.Notes, r.Notes...)
			rep.Fusions = append(rep.Fusions, r.Fusions...)
			// Count the fusions by kind: LayerNorms always, the others
			// when there are any.
			counts := make([]int, FusedClassifier+1)
			for _, f := range r.Fusions {
				counts[f.Kind]++
			}
			msg := fmt.Sprintf("%d LayerNorm fusion(s)", counts[FusedLayerNorm])
			for k := FusedRMSNorm; k <= FusedClassifier; k++ {
				if counts[k] > 0 {
					msg += fmt.Sprintf(", %d %s fusion(s)", counts[k], k)
				}
			}
			return msg, err
		}})
	}
	return append(ps, Pass{Name: "Autowrap", Check: checkWrapped, Run: func(g *graph.Graph) (string, error) {
		ac := AutowrapConfig{EvalFP8: evalFP8}
		if cfg.Recipe.Backend() == fp8.BackendBF16 {
			ac.Precision = "bf16"
		}
		r, err := Autowrap(g, ac)
		rep.Notes = append(rep.Notes, r.Notes...)
		if len(r.Notes) > 0 {
			return r.Notes[0], err
		}
		return "", err
	}})
}

// forward runs the forward passes on the forward graph of cfg.Loss and
// builds the backward of the result.
func forward(g *graph.Graph, cfg Config) (*graph.Node, []*graph.Node, error) {
	if len(cfg.Params) == 0 {
		return nil, nil, fmt.Errorf("passes: prepare: a Loss without Params to differentiate it by")
	}
	outs := append([]*graph.Node{cfg.Loss}, cfg.EvalOutputs...)
	if len(cfg.ForwardPasses) > 0 {
		pl := Pipeline{Passes: cfg.ForwardPasses, Outputs: outs, Dump: cfg.Dump, DOTDir: cfg.DOTDir, Log: cfg.Log}
		if err := pl.Run(g); err != nil {
			return nil, nil, fmt.Errorf("passes: prepare: forward: %w", err)
		}
	}
	loss := g.Resolve(cfg.Loss)
	grads, err := graph.Grad(loss, cfg.Params...)
	if err != nil {
		return nil, nil, fmt.Errorf("passes: prepare: %w", err)
	}
	return loss, grads, nil
}

// staleForwardCheck wraps a joint-graph pass: afterwards, forward values
// (live for the loss and the evaluation outputs before the pass) that the
// forward no longer computes but the training program still does (for the
// backward, built from them) are named in a warning.
func staleForwardCheck(p Pass, cfg Config, warnings *[]string) Pass {
	fwd := append([]*graph.Node(nil), cfg.EvalOutputs...)
	if len(cfg.TrainOutputs) > 0 {
		fwd = append(fwd, cfg.TrainOutputs[0]) // the loss
	}
	if len(fwd) == 0 || len(cfg.TrainOutputs) == 0 {
		return p
	}
	run := p.Run
	p.Run = func(g *graph.Graph) (string, error) {
		before := map[*graph.Node]bool{}
		for _, n := range graph.Live(graph.Options{Training: true}, fwd...) {
			before[n] = true
		}
		summary, err := run(g)
		if err != nil {
			return summary, err
		}
		now := map[*graph.Node]bool{}
		for _, n := range graph.Live(graph.Options{Training: true}, fwd...) {
			now[n] = true
		}
		var stale []string
		train := graph.Live(graph.Options{Training: true}, cfg.TrainOutputs...)
		consumers := g.Consumers(train...)
		for _, n := range train {
			if before[n] && !now[n] && !n.Is(graph.KindParam) && !n.Is(graph.KindInput) {
				var readers []string
				for _, c := range consumers[n] {
					readers = append(readers, fmt.Sprintf("%q", c.Name()))
				}
				stale = append(stale, fmt.Sprintf("%q (read by %s)", n.Name(), strings.Join(readers, ", ")))
			}
		}
		if len(stale) > 0 {
			w := fmt.Sprintf("pass %s rewrote forward values that the backward still reads, built before it: %s; rewrite the forward graph with Config.ForwardPasses so that the backward follows", p.Name, strings.Join(stale, "; "))
			*warnings = append(*warnings, w)
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "warning: %s\n", w)
			}
		}
		return summary, nil
	}
	return p
}
