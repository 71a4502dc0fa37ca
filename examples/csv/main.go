// Command csv trains an MLP on any CSV file with a header row: numeric
// feature columns and a label column, integer classes (classification) or
// numbers (regression, the task found from the values unless -task says).
// 80% of the rows train (features standardised), 20% are held out.
//
//	go run ./examples/csv -data examples/csv/testdata/iris.csv -label species
//	go run ./examples/csv -data examples/csv/testdata/iris.csv -label petal_width -precision bf16 -dp 2
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
)

func main() {
	file := flag.String("data", "", "the CSV file (a header row, then one example per row)")
	label := flag.String("label", "label", "the label column: integer classes 0, 1, … or a regression target")
	taskName := flag.String("task", "auto", "classification, regression, or auto (regression when a label is not a class)")
	hidden := flag.Int("hidden", 64, "units in each of the two hidden layers")
	epochs := flag.Int("epochs", 20, "passes over the training rows")
	batch := flag.Int("batch", 32, "rows per step")
	lr := flag.Float64("lr", 3e-3, "AdamW learning rate")
	save := flag.String("save", "", "write checkpoints to this directory")
	resume := flag.String("resume", "", "continue from the newest checkpoint in this directory")
	dp, fsdp := flag.Int("dp", 0, "train data-parallel over N in-process ranks"), flag.Int("fsdp", 0, "train sharded (FSDP) over N in-process ranks")
	prec := precision.Config{MixedPrecision: "fp8"}
	prec.RegisterFlags(flag.CommandLine) // -precision -recipe -format -ao -opt-level -config
	flag.Parse()
	if *file == "" {
		check(errors.New("give -data FILE, a CSV file with a header row (examples/csv/testdata/iris.csv, say)"))
	}
	task, err := data.ParseTask(*taskName)
	check(err)
	check(prec.Resolve())
	table, err := data.ReadCSV(*file, data.CSVConfig{Label: *label, Task: task})
	check(err)
	trainRows, testRows, err := table.Split(0.2, 1)
	check(err)
	std := trainRows.FitStandardizer()
	check(errors.Join(std.Apply(trainRows), std.Apply(testRows)))
	regression := table.Task() == data.Regression
	outputs := table.Classes
	var ys data.Standardizer // the model learns standardised targets
	if regression {
		ys, err = data.FitStandardizer(trainRows, "target")
		check(err)
		outputs = len(table.Targets)
	}
	sizes := []int{len(table.Features), *hidden, *hidden, outputs}
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x := g.Input("x", graph.Float32, rows, sizes[0])
		mlp, err := nn.NewMLP(b, "mlp", sizes, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		out := mlp.Forward(x)
		if !regression {
			y := g.Input("label", graph.Int32, rows)
			return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(out, y), Logits: out}, nil
		}
		y, mask := g.Input("target", graph.Float32, rows, outputs), g.Input("mask", graph.Float32, rows)
		mean, sd := g.Input("mean", graph.Float32, outputs), g.Input("std", graph.Float32, outputs)
		fixed := func(p *graph.Program) error {
			return errors.Join(p.FeedFloat32(mean, ys.Mean), p.FeedFloat32(sd, ys.Std))
		}
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "target": y}, Mask: mask, Fixed: fixed,
			Loss:        ops.MSELoss(out, ops.Div(ops.Sub(y, mean), sd), mask),
			Predictions: ops.Add(ops.Mul(out, sd), mean), Targets: y}, nil
	}
	trainer, err := train.New(train.Config{Model: model, Precision: prec, BatchSize: *batch, LR: *lr, WeightDecay: 0.01,
		DP: *dp, FSDP: *fsdp, Seed: 1, Meta: map[string]string{"model": fmt.Sprint("csv mlp ", sizes, " ", table.Task())}})
	check(err)
	res, err := trainer.Fit(trainRows, train.Run{Epochs: *epochs, Eval: testRows, SaveDir: *save, Resume: *resume,
		Hooks: []train.Hook{train.Progress(os.Stderr, train.ProgressOptions{})}})
	check(err)
	fmt.Print(trainer.Report())
	score := fmt.Sprintf("accuracy %.2f%%", 100*res.Eval.Accuracy)
	if regression {
		score = fmt.Sprintf("RMSE %.4g, R² %.4f", res.Eval.RMSE, res.Eval.R2)
	}
	fmt.Printf("%s %s: held-out %s (%d rows), loss %.4f; steps %d–%d of %d, %.2f ms/step\n", res.Precision, res.Recipe,
		score, res.Eval.Examples, res.Eval.Loss, res.First+1, res.End, res.Total, res.MsPerStep())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "csv:", err)
		os.Exit(1)
	}
}
