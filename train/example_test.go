package train_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/recipe"
	"github.com/octetml/octet/train"
)

// A classifier trained in FP8 (TE's HYBRID recipe) on two interleaved
// classes held in memory, evaluated on held-out rows.
func ExampleTrainer_Fit() {
	rng := rand.New(rand.NewPCG(1, 2))
	points := func(n int) *data.Tensors {
		x, y := make([]float32, n*16), make([]int32, n)
		for i := range y {
			y[i] = int32(rng.IntN(2))
			for j := range 16 {
				x[i*16+j] = float32(rng.NormFloat64()) + 2*float32(y[i])*float32(j%2)
			}
		}
		ds, _ := data.NewTensors(data.Float32Column("x", x, 16), data.LabelColumn("label", y, 2))
		return ds
	}
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x, y := g.Input("x", graph.Float32, rows, 16), g.Input("label", graph.Int32, rows)
		mlp, err := nn.NewMLP(b, "mlp", []int{16, 32, 32, 2}, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		logits := mlp.Forward(x)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(logits, y), Logits: logits}, nil
	}
	trainer, err := train.New(train.Config{Model: model, Precision: precision.Config{MixedPrecision: "fp8"}, BatchSize: 32, LR: 1e-2, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := trainer.Fit(points(640), train.Run{Epochs: 3, Eval: points(200)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, %d steps, held-out accuracy above 95%%: %v\n", res.Recipe, res.End, res.Eval.Accuracy > 0.95)
	// Output: te/HYBRID, 60 steps, held-out accuracy above 95%: true
}

// Precision settings come from Go, the flags, the environment and an
// Accelerate config file; each says where it came from.
func ExamplePrecision_Resolve() {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	p := precision.Config{MixedPrecision: "fp8", Margin: 1}
	p.RegisterFlags(fs)
	if err := fs.Parse([]string{"-format", "E4M3"}); err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Resolve(); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := p.Recipe()
	fmt.Printf("%s, margin %d\n", precision.Label(r), r.(recipe.TE).Margin)
	fmt.Println(p.Describe())
	// Output:
	// te/E4M3, margin 1
	// margin 1 (code), fp8_format E4M3 (-format); the rest defaults
}

// A loop of one's own: Start prepares the model and its loader, Step runs
// one step at a time.
func ExampleTrainer_Start() {
	x := make([]float32, 64*4)
	y := make([]int32, 64)
	for i := range y {
		y[i] = int32(i % 2)
		x[i*4] = float32(y[i])
	}
	ds, _ := data.NewTensors(data.Float32Column("x", x, 4), data.LabelColumn("label", y, 2))
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		in, lab := g.Input("x", graph.Float32, rows, 4), g.Input("label", graph.Int32, rows)
		fc := nn.NewLinear(b, "fc", 4, 2)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": in, "label": lab}, Loss: ops.CrossEntropy(fc.Forward(in), lab)}, nil
	}
	trainer, _ := train.New(train.Config{Model: model, BatchSize: 16, LR: 0.1, Seed: 1})
	s, err := trainer.Start(ds)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	first, _ := s.Step()
	var last float32
	for range 50 {
		last, _ = s.Step()
	}
	fmt.Println(s.Steps(), last < first/2)
	// Output: 51 true
}

// A regression whose batches of 16 leave the last of 50 rows padded: the
// model gives its loss the row mask (Model.Mask), so padded rows never
// count, and evaluation reports RMSE and R² of Predictions against
// Targets.
func ExampleModel_regression() {
	rng := rand.New(rand.NewPCG(3, 3))
	x, y := make([]float32, 50*2), make([]float32, 50)
	for i := range y {
		x[2*i], x[2*i+1] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		y[i] = 2*x[2*i] - x[2*i+1] + 0.5 + 0.1*float32(rng.NormFloat64())
	}
	ds, _ := data.NewTensors(data.Float32Column("x", x, 2), data.Float32Column("y", y, 1))
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		in, target := g.Input("x", graph.Float32, rows, 2), g.Input("y", graph.Float32, rows, 1)
		mask := g.Input("mask", graph.Float32, rows)
		pred := nn.NewLinear(b, "fc", 2, 1).Forward(in)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": in, "y": target}, Mask: mask,
			Loss: ops.MSELoss(pred, target, mask), Predictions: pred, Targets: target}, g.Err()
	}
	tr, _ := train.New(train.Config{Model: model, BatchSize: 16, LR: 0.05, Seed: 1})
	res, err := tr.Fit(ds, train.Run{Epochs: 60, Eval: ds})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("RMSE below 0.15: %v, R² above 0.99: %v\n", res.Eval.RMSE < 0.15, res.Eval.R2 > 0.99)
	// Output: RMSE below 0.15: true, R² above 0.99: true
}

// keepFirstLayer is a recipe of one's own: Transformer Engine's delayed
// scaling (every method of recipe.TE, embedded), except that layers
// named "*.fc1" stay in float32 and the recipe says so in its label.
type keepFirstLayer struct{ recipe.TE }

func (r keepFirstLayer) Label() string { return "te-but-fc1/" + r.Format.String() }

func (r keepFirstLayer) Lower(l recipe.Layer) (recipe.LayerPlan, error) {
	if strings.HasSuffix(l.FQN, ".fc1") {
		return recipe.LayerPlan{Skip: "fc1 stays in float32 (keepFirstLayer)"}, nil
	}
	return r.TE.Lower(l)
}

// Precision.Use trains with any recipe.Recipe, a program's own included:
// here TE's recipe with its first layer kept in float32.
func ExamplePrecision_use() {
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x, y := g.Input("x", graph.Float32, rows, 32), g.Input("label", graph.Int32, rows)
		mlp, err := nn.NewMLP(b, "mlp", []int{32, 32, 32, 16}, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		logits := mlp.Forward(x)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(logits, y), Logits: logits}, nil
	}
	x, y := make([]float32, 64*32), make([]int32, 64)
	for i := range y {
		y[i] = int32(i % 16)
		x[i*32+i%16] = 1
	}
	ds, _ := data.NewTensors(data.Float32Column("x", x, 32), data.LabelColumn("label", y, 16))
	tr, _ := train.New(train.Config{Model: model, BatchSize: 32, Seed: 1,
		Precision: precision.Config{MixedPrecision: "fp8", Use: keepFirstLayer{}}})
	res, err := tr.Fit(ds, train.Run{Steps: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Recipe)
	for _, l := range res.Report.Layers {
		fmt.Println(strings.TrimSpace(fmt.Sprint(l.FQN, " ", l.FP8, " ", l.Reason)))
	}
	// Output:
	// te-but-fc1/HYBRID
	// mlp.fc1 [] fc1 stays in float32 (keepFirstLayer)
	// mlp.fc2 [fprop dgrad wgrad]
	// mlp.fc3 [fprop dgrad wgrad]
}

// Delayed scaling's first FP8 step casts with scale 1; two calibration
// steps in float32 record the amaxes first, and the run says how its
// first FP8 step went. Evaluate before Fit scores the starting weights.
func ExampleFP8Start() {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float32, 512*16), make([]int32, 512)
	for i := range y {
		y[i] = int32(rng.IntN(2))
		for j := range 16 {
			x[i*16+j] = float32(rng.NormFloat64()) + 2*float32(y[i])*float32(j%2)
		}
	}
	ds, _ := data.NewTensors(data.Float32Column("x", x, 16), data.LabelColumn("label", y, 2))
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		in, lab := g.Input("x", graph.Float32, rows, 16), g.Input("label", graph.Int32, rows)
		mlp, err := nn.NewMLP(b, "mlp", []int{16, 32, 32, 2}, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		logits := mlp.Forward(in)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": in, "label": lab}, Loss: ops.CrossEntropy(logits, lab), Logits: logits}, nil
	}
	trainer, err := train.New(train.Config{Model: model, BatchSize: 256, LR: 1e-2, Seed: 1,
		Precision: precision.Config{MixedPrecision: "fp8", CalibrationSteps: 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	before, _ := trainer.Evaluate(ds)
	res, err := trainer.Fit(ds, train.Run{Steps: 6})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("first FP8 step %d, calibrated %v, under 1%% flushed: %v; loss fell from the start: %v\n",
		res.FP8Start.Step, res.FP8Start.Calibrated, res.FP8Start.Flushed < 0.01, res.Losses[len(res.Losses)-1] < float32(before.Loss))
	// Output: first FP8 step 2, calibrated true, under 1% flushed: true; loss fell from the start: true
}

// A Mixture-of-Experts classifier trained with its experts sharded over
// three in-process ranks (expert parallelism), in FP8 with block
// scaling: the losses are one process's, bit for bit.
func ExampleConfig_expertParallel() {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float32, 120*16), make([]int32, 120)
	for i := range y {
		y[i] = int32(rng.IntN(3))
		for j := range 16 {
			x[i*16+j] = float32(rng.NormFloat64()) + float32(y[i])*float32(j%3)
		}
	}
	ds, _ := data.NewTensors(data.Float32Column("x", x, 16), data.LabelColumn("label", y, 3))
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		in, lbl := g.Input("x", graph.Float32, rows, 16), g.Input("label", graph.Int32, rows)
		moe, err := nn.NewMoE(b, "moe", nn.MoEConfig{Experts: 6, TopK: 2, Hidden: 16, Intermediate: 32})
		if err != nil {
			return nil, err
		}
		out := nn.NewLinear(b, "out", 16, 3)
		h, _ := moe.Forward(in)
		logits := out.Forward(ops.Add(in, h))
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": in, "label": lbl}, Loss: ops.CrossEntropy(logits, lbl), Logits: logits}, nil
	}
	losses := map[int][]float32{}
	for _, ep := range []int{0, 3} {
		tr, err := train.New(train.Config{Model: model, BatchSize: 24, Seed: 1, EP: ep,
			Precision: precision.Config{MixedPrecision: "fp8", Backend: "block"}})
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := tr.Fit(ds, train.Run{Steps: 10})
		if err != nil {
			fmt.Println(err)
			return
		}
		losses[ep] = res.Losses
		if ep > 0 {
			fmt.Printf("%d ranks, %s, exchanging tokens: %v\n", res.Ranks, res.Recipe, res.CommBytesPerStep > 0)
		}
	}
	same := len(losses[0]) == 10
	for i := range losses[0] {
		same = same && math.Float32bits(losses[0][i]) == math.Float32bits(losses[3][i])
	}
	fmt.Println("losses equal to one process's, bit for bit:", same)
	// Output:
	// 3 ranks, block/E4M3/x1w2g1, exchanging tokens: true
	// losses equal to one process's, bit for bit: true
}
