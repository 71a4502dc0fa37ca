package train

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/errkind"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// Model is a model built on its own graph for one batch size: what the
// Trainer feeds, prepares, optimises and reads.
type Model struct {
	// Builder built the model's layers: its parameters are the ones
	// trained, initialised by Builder.Init with the run's seed.
	Builder *nn.Builder
	// Inputs maps a dataset field name ("x", "label") to the input node
	// fed from it; every input of the graph must be listed, and every
	// field it names must exist in the dataset.
	Inputs map[string]*graph.Node
	// Loss is the loss: required for training, optional for evaluation
	// (the evaluation loss). Either a scalar that leaves padded rows out
	// itself — ops.CrossEntropy against a label field (padded rows are
	// data.IgnoreLabel), or a loss given Mask (ops.MSELoss(pred, y,
	// mask), ops.MaskedMean) — or a loss per row ([rows] or [rows, …]),
	// which the trainer averages over the real rows (ops.MaskedMean).
	// A scalar loss that reads neither is refused when the dataset's last
	// batch would be padded (training without DropLast, or evaluation),
	// since it would count the padding.
	Loss *graph.Node
	// Mask, when set, is a float32 input [rows] (graph.Graph.Input, not
	// listed in Inputs) that the trainer feeds with each batch's row
	// mask, data.Batch.Mask: 1 for a real example, 0 for a padded row of
	// a last batch. Losses take it to average over the real rows only.
	// With a per-row Loss and no Mask, the trainer adds one.
	Mask *graph.Node
	// Logits, when set, are class scores [..., classes] whose leading
	// dims are those of the dataset's label field: evaluation reports
	// their accuracy.
	Logits *graph.Node
	// Predictions and Targets, when set, are a regression's outputs and
	// the input (one of Inputs) holding their targets, of the same
	// shape: evaluation reports the RMSE and R² over the real rows.
	Predictions, Targets *graph.Node
	// Fixed feeds inputs that are not dataset fields (position ids) once
	// per compiled program.
	Fixed func(p *graph.Program) error
}

// ModelFunc builds the model for a batch of rows, for training (with its
// loss) or evaluation. It is called once per rank and once for
// evaluation; every call must build the same parameters.
type ModelFunc func(rows int, training bool) (*Model, error)

// Config configures a Trainer. The zero value of each field but Model and
// BatchSize works: float32, AdamW with learning rate 1e-3 and no weight
// decay, one process, shuffled batches with a padded last batch.
type Config struct {
	// Model builds the model (required).
	Model ModelFunc
	// Precision is the mixed precision and FP8 recipe. Resolve it first
	// (flags, environment, config file); New resolves it otherwise.
	Precision Precision
	// BatchSize is the global batch (all ranks together, one micro-batch
	// of an accumulated step).
	BatchSize int
	// NoShuffle keeps the dataset's order; DropLast drops an epoch's
	// last batch when it is not full (else it is padded and masked);
	// Prefetch prepares that many batches ahead on a goroutine.
	NoShuffle bool
	DropLast  bool
	Prefetch  int
	// Replacement draws every row at random with replacement (nanoGPT's
	// random windows) instead of epochs of a shuffled order; Stream is
	// the data generator's stream (see data.Config).
	Replacement bool
	Stream      uint64
	// Seed seeds the parameters, the data order and dropout.
	Seed uint64
	// Init, when set, gives parameters their first values (weights
	// loaded from a file, say hf.LoadLlama) in each rank's fresh store
	// before the model's initialisers draw the rest; an error stops New's
	// caller before training. A resumed run's checkpoint replaces them.
	Init func(store *graph.Store) error
	// LR is the learning rate (1e-3 when 0), or Schedule, when set, gives
	// it per step.
	LR       float64
	Schedule optim.Schedule
	// Optimizer is "adamw" (the default), "adam" or "sgd"; the MS-AMP
	// recipe takes MS-AMP's low-bit AdamW at its level. Momentum is
	// SGD's.
	Optimizer   string
	WeightDecay float64
	Momentum    float64
	// ClipGradNorm, when above 0, scales the gradients to that global L2
	// norm (PyTorch's clip_grad_norm_).
	ClipGradNorm float64
	// GradientAccumulationSteps is the number of micro-batches per
	// optimizer step (Accelerate's gradient_accumulation_steps; 0 or 1:
	// none). Their gradients are averaged weighted by their rows, so the
	// step equals one of the whole batch.
	GradientAccumulationSteps int
	// DP trains data-parallel over DP in-process ranks, each a full
	// replica; FSDP trains sharded over FSDP in-process ranks (float8
	// all-gather with the AO tensorwise recipe). Comm, when set, makes
	// this process one rank of a world (MPI): FSDP when FSDP is -1, else
	// data-parallel. Uneven splits of a batch weight each rank by its rows.
	DP, FSDP int
	Comm     dist.Communicator
	// EP shards the experts of every Mixture-of-Experts layer over EP
	// in-process ranks (expert parallelism, passes.ShardExperts): each
	// rank runs the whole batch through the other layers and its own
	// experts on the tokens routed to them (all-to-all), so the losses
	// and parameters equal one process's bit for bit while each rank
	// keeps the optimizer state of its experts only. With DP the world is
	// DP groups of EP ranks, data-parallel across the groups (each
	// group's batch, and the ranks at the same place in each group
	// averaging their gradients): the run equals DP alone bit for bit.
	// With FSDP instead the layers around the experts are sharded over
	// the data-parallel groups (the run equals FSDP alone bit for bit
	// without gradient clipping). With Comm, EP -1 makes the world's ranks
	// one expert-parallel group and EP n > 0 splits it into groups of n
	// (data-parallel, or with FSDP -1 sharded, across them). It does not
	// combine with the MS-AMP recipe or calibration steps yet.
	EP int
	// EPDispatch is how tokens travel to the experts' ranks under EP:
	// float32 (the zero value, exact), bf16, or FP8 (E4M3 with a scale per
	// 1×128 tile, DeepSeek-V3's dispatch); see ops.ExpertParallel.
	EPDispatch ops.WireFormat
	// EvalBatchSize is the batch of evaluation (BatchSize when 0).
	EvalBatchSize int
	// Debug and DebugLogDir turn on FP8 precision debugging (see package
	// inspect): statistics nodes in the training program, written as JSON
	// lines under DebugLogDir.
	Debug       *inspect.Config
	DebugLogDir string
	// Filter restricts which linear layers convert (passes.Config.Filter);
	// NoFusion skips Prepare's Fuse stage (to compare fused and unfused
	// programs).
	Filter   func(n *graph.Node, fqn string) bool
	NoFusion bool
	// ForwardPasses rewrite the forward graph before the backward is
	// built from it (passes.Config.ForwardPasses); Passes run on the
	// joint graph after the FP8 conversion (passes.Config.Passes).
	ForwardPasses, Passes []passes.Pass
	// Profile times every op of rank 0's training step (Result.Profile).
	Profile bool
	// Name names the run's checkpoint files ("state" when empty); Meta
	// is recorded in checkpoints and must match on resume (a "model"
	// key describing the model guards against loading another's).
	Name string
	Meta map[string]string
}

// ErrConfig is wrapped by the errors New returns for a configuration that
// cannot train.
var ErrConfig = errors.New("training configuration")

func configErrorf(format string, args ...any) error {
	return errkind.With(fmt.Errorf("train: "+format, args...), ErrConfig)
}

// Trainer runs training for one precision.
type Trainer struct {
	cfg    Config
	rec    recipe.Recipe
	world  int
	fsdp   bool
	ep     bool // expert parallelism: groups of epSize ranks, data-parallel across them
	epSize int
	accum  int
	// after a run: rank 0's replica (its store holds the trained,
	// gathered parameters).
	rep *replica
	ev  *evaluator // rank 0's evaluation program (built on demand)
}

// New checks cfg and returns a trainer; no model is built yet.
func New(cfg Config) (*Trainer, error) {
	if cfg.Model == nil {
		return nil, configErrorf("no Model function")
	}
	if cfg.BatchSize < 1 {
		return nil, configErrorf("batch size %d, want at least 1", cfg.BatchSize)
	}
	for _, f := range []struct {
		name string
		v    float64
		min  float64
	}{{"learning rate", cfg.LR, 0}, {"weight decay", cfg.WeightDecay, 0}, {"momentum", cfg.Momentum, 0}, {"ClipGradNorm", cfg.ClipGradNorm, 0}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < f.min {
			return nil, configErrorf("%s %v: want a finite value ≥ %v", f.name, f.v, f.min)
		}
	}
	if cfg.LR == 0 {
		cfg.LR = 1e-3
	}
	switch strings.ToLower(cfg.Optimizer) {
	case "", "adamw", "adam", "sgd":
	default:
		return nil, configErrorf("optimizer %q: want adamw, adam or sgd", cfg.Optimizer)
	}
	if cfg.GradientAccumulationSteps < 0 || cfg.DP < 0 || cfg.FSDP < -1 || cfg.EP < -1 || cfg.Prefetch < 0 || cfg.EvalBatchSize < 0 {
		return nil, configErrorf("negative GradientAccumulationSteps, DP, FSDP, EP, Prefetch or EvalBatchSize")
	}
	if cfg.EP != 0 && cfg.DP > 0 && cfg.FSDP != 0 {
		return nil, configErrorf("EP %d with DP %d and FSDP %d: give DP or FSDP for the data-parallel groups", cfg.EP, cfg.DP, cfg.FSDP)
	}
	t := &Trainer{cfg: cfg, accum: max(1, cfg.GradientAccumulationSteps), world: 1}
	if !cfg.Precision.Resolved() {
		if err := t.cfg.Precision.Resolve(); err != nil {
			return nil, err
		}
	}
	r, err := t.cfg.Precision.Recipe()
	if err != nil {
		return nil, err
	}
	t.rec = r
	switch {
	case cfg.Comm != nil:
		if cfg.DP > 0 || cfg.FSDP > 0 {
			return nil, configErrorf("Comm (one rank of a world) does not combine with in-process DP or FSDP ranks")
		}
		t.world, t.fsdp, t.ep = cfg.Comm.Size(), cfg.FSDP == -1, cfg.EP != 0
		t.epSize = t.world
		if cfg.EP > 0 {
			if t.world%cfg.EP != 0 {
				return nil, configErrorf("EP %d: the world of %d ranks does not split into expert-parallel groups of %d", cfg.EP, t.world, cfg.EP)
			}
			t.epSize = cfg.EP
		}
	case cfg.EP == -1:
		return nil, configErrorf("EP -1 (a rank of a world) needs Comm")
	case cfg.EP > 0:
		t.world, t.ep, t.epSize, t.fsdp = cfg.EP*max(1, cfg.DP, cfg.FSDP), true, cfg.EP, cfg.FSDP > 0
	case cfg.DP > 0 && cfg.FSDP > 0:
		return nil, configErrorf("DP %d and FSDP %d: choose one", cfg.DP, cfg.FSDP)
	case cfg.FSDP == -1:
		return nil, configErrorf("FSDP -1 (a rank of a world) needs Comm")
	case cfg.FSDP > 0:
		t.world, t.fsdp = cfg.FSDP, true
	case cfg.DP > 0:
		t.world = cfg.DP
	case cfg.Precision.NumProcesses > 1:
		t.world = cfg.Precision.NumProcesses // the config file's num_processes
	}
	if t.lowBit() && t.fsdp {
		return nil, configErrorf("the MS-AMP recipe does not combine with FSDP: MS-AMP shards nothing; use the AO recipe for float8 all-gather")
	}
	if t.ep && t.fsdp && t.dataRanks() < 2 {
		return nil, configErrorf("%s: FSDP with expert parallelism shards over the data-parallel groups; give more than one", t.worldName())
	}
	if t.ep && t.lowBit() {
		return nil, configErrorf("the MS-AMP recipe does not combine with expert parallelism yet")
	}
	if t.ep && cfg.Precision.CalibrationSteps > 0 {
		return nil, configErrorf("calibration steps do not combine with expert parallelism yet")
	}
	if cfg.BatchSize < t.dataRanks() {
		return nil, configErrorf("%s: the batch of %d leaves ranks without rows", t.worldName(), cfg.BatchSize)
	}
	if t.cfg.Optimizer != "" && !strings.EqualFold(t.cfg.Optimizer, "adamw") {
		if t.lowBit() {
			return nil, configErrorf("optimizer %q: the MS-AMP recipe trains with its low-bit AdamW", cfg.Optimizer)
		}
	}
	return t, nil
}

// lowBit reports whether the recipe trains with its own low-bit
// optimizer (MS-AMP's).
func (t *Trainer) lowBit() bool {
	if t.rec == nil {
		return false
	}
	_, ok := t.rec.LowBitOptimizer()
	return ok
}

// worldName names the ranks in messages: "FSDP over 3 ranks", "DP over 2
// ranks", "the MPI world of 3 ranks".
func (t *Trainer) worldName() string {
	switch {
	case t.cfg.Comm != nil:
		return fmt.Sprintf("the world of %d ranks", t.world)
	case t.ep && t.fsdp:
		return fmt.Sprintf("EP over %d ranks in %d FSDP groups", t.epSize, t.dataRanks())
	case t.fsdp:
		return fmt.Sprintf("FSDP over %d ranks", t.world)
	case t.ep && t.dataRanks() > 1:
		return fmt.Sprintf("EP over %d ranks in %d data-parallel groups", t.epSize, t.dataRanks())
	case t.ep:
		return fmt.Sprintf("EP over %d ranks", t.world)
	case t.world > 1:
		return fmt.Sprintf("DP over %d ranks", t.world)
	}
	return "one process"
}

// dataRanks is the number of ranks that share each global batch (every
// expert-parallel rank runs the whole batch).
func (t *Trainer) dataRanks() int {
	if t.ep {
		return t.world / t.epSize
	}
	return t.world
}

// layout names how the parameters are laid out over the ranks, as a
// checkpoint records it: "one process", "DP 2", "FSDP 3" (in-process
// or MPI alike: the files do not differ).
func (t *Trainer) layout() string {
	switch {
	case t.world == 1:
		return "one process"
	case t.ep && t.fsdp:
		return fmt.Sprintf("EP %d × FSDP %d", t.epSize, t.dataRanks())
	case t.fsdp:
		return fmt.Sprintf("FSDP %d", t.world)
	case t.ep && t.dataRanks() > 1:
		return fmt.Sprintf("EP %d × DP %d", t.epSize, t.dataRanks())
	case t.ep:
		return fmt.Sprintf("EP %d", t.world)
	}
	return fmt.Sprintf("DP %d", t.world)
}

// Recipe returns the recipe the trainer prepares its model with (nil for
// float32).
func (t *Trainer) Recipe() recipe.Recipe { return t.rec }

// Ranks returns the number of ranks training runs on.
func (t *Trainer) Ranks() int { return t.world }

// Store returns rank 0's parameter store after Fit (with FSDP, the
// gathered full parameters), for evaluation or sampling; nil before.
func (t *Trainer) Store() *graph.Store {
	if t.rep == nil {
		return nil
	}
	return t.rep.store
}

// Report returns what the conversion did to each linear layer (after
// Fit).
func (t *Trainer) Report() passes.Report {
	if t.rep == nil {
		return passes.Report{}
	}
	return t.rep.report
}

// Model returns rank 0's training model after Fit.
func (t *Trainer) Model() *Model {
	if t.rep == nil {
		return nil
	}
	return t.rep.m
}

// WriteGraph writes rank 0's compiled training graph as text (the
// conversion's result: Quantize, ScaledMatMul, fused nodes) for its
// outputs, the loss and the gradients. Call it during or after Fit.
func (t *Trainer) WriteGraph(w io.Writer) error {
	if t.rep == nil {
		return configErrorf("write graph: no model yet")
	}
	return t.rep.m.Builder.Graph().WriteText(w, append([]*graph.Node{t.rep.m.Loss}, t.rep.grads...)...)
}

// Program returns rank 0's compiled training program (during or after
// Fit; nil before).
func (t *Trainer) Program() *graph.Program {
	if t.rep == nil {
		return nil
	}
	return t.rep.prog
}
