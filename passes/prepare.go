package passes

import (
	"fmt"
	"io"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
)

// Config configures Prepare.
type Config struct {
	// Recipe chooses the backend: fp8.TERecipe, fp8.AORecipe,
	// fp8.MSAMPRecipe, or fp8.BF16Recipe for bf16 mixed precision. A nil
	// Recipe converts nothing (float32 training, Accelerate's
	// mixed_precision="no"): only Passes run before compiling.
	Recipe fp8.Recipe
	// TrainOutputs are the training program's outputs (the loss and the
	// gradients); EvalOutputs the evaluation program's.
	TrainOutputs, EvalOutputs []*graph.Node
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
	// (for example fsdp.Pass, which shards the parameters).
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
// fp8.BF16Recipe it is Accelerator(mixed_precision="bf16").prepare, and
// with no recipe Accelerator(mixed_precision="no").prepare.
func Prepare(g *graph.Graph, store *graph.Store, cfg Config) (*Prepared, error) {
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
	evalFP8 := true
	if te, ok := cfg.Recipe.(fp8.TERecipe); ok {
		evalFP8 = te.UseAutocastDuringEval
	}
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
	pl.Passes = append(pl.Passes, cfg.Passes...)
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
	p := &Prepared{Report: rep}
	var err error
	if len(cfg.TrainOutputs) > 0 {
		outs := append(append([]*graph.Node(nil), cfg.TrainOutputs...), statNodes...)
		if p.Train, err = graph.Compile(g, store, graph.Options{Training: true}, outs...); err != nil {
			return nil, fmt.Errorf("passes: prepare: training program: %w", err)
		}
	}
	if len(cfg.EvalOutputs) > 0 {
		if p.Eval, err = graph.Compile(g, store, graph.Options{}, cfg.EvalOutputs...); err != nil {
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
		r, err := ConvertLinear(g, store, LinearConfig{Recipe: cfg.Recipe, Filter: cfg.Filter, Debug: cfg.Debug})
		*rep = r
		return fmt.Sprintf("%d of %d linear layers converted (%s)", len(r.Converted()), len(r.Layers), r.Backend), err
	}}}
	if !cfg.NoLayerNormFusion {
		ps = append(ps, Pass{Name: "ConvertLN", Check: checkFused, Run: func(g *graph.Graph) (string, error) {
			r, err := ConvertLN(g, live...)
			rep.Notes = append(rep.Notes, r.Notes...)
			return fmt.Sprintf("%d LayerNorm fusion(s)", len(r.Notes)), err
		}})
	}
	return append(ps, Pass{Name: "Autowrap", Check: checkWrapped, Run: func(g *graph.Graph) (string, error) {
		r, err := Autowrap(g, AutowrapConfig{EvalFP8: evalFP8})
		rep.Notes = append(rep.Notes, r.Notes...)
		if len(r.Notes) > 0 {
			return r.Notes[0], err
		}
		return "", err
	}})
}
