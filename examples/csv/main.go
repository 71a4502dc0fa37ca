// Command csv trains an MLP classifier on any CSV file with a header row:
// numeric feature columns and an integer label column. 80% of the rows
// train (features standardised), 20% are held out.
//
//	go run ./examples/csv -data iris.csv -label species
//	go run ./examples/csv -data iris.csv -label species -precision bf16 -dp 2
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/train"
)

func main() {
	file := flag.String("data", "", "the CSV file (a header row, then one example per row)")
	label := flag.String("label", "label", "the label column: integer classes 0, 1, …")
	hidden := flag.Int("hidden", 64, "units in each of the two hidden layers")
	epochs := flag.Int("epochs", 20, "passes over the training rows")
	batch := flag.Int("batch", 32, "rows per step")
	lr := flag.Float64("lr", 3e-3, "AdamW learning rate")
	save := flag.String("save", "", "write checkpoints to this directory")
	resume := flag.String("resume", "", "continue from the newest checkpoint in this directory")
	dp := flag.Int("dp", 0, "train data-parallel over N in-process ranks")
	fsdp := flag.Int("fsdp", 0, "train sharded (FSDP) over N in-process ranks")
	prec := train.Precision{MixedPrecision: "fp8"}
	prec.RegisterFlags(flag.CommandLine) // -precision -recipe -format -ao -opt-level -config
	flag.Parse()
	if err := prec.Resolve(); err != nil {
		fail(err)
	}
	table, err := data.ReadCSV(*file, data.CSVConfig{Label: *label})
	if err != nil {
		fail(err)
	}
	trainRows, testRows, err := table.Split(0.2, 1)
	if err != nil {
		fail(err)
	}
	std := trainRows.FitStandardizer()
	if err := std.Apply(trainRows); err != nil {
		fail(err)
	}
	if err := std.Apply(testRows); err != nil {
		fail(err)
	}
	sizes := []int{len(table.Features), *hidden, *hidden, table.Classes}
	model := func(rows int, training bool) (*train.Model, error) {
		g := graph.New()
		b := nn.NewBuilder(g)
		x := g.Input("x", graph.Float32, rows, sizes[0])
		y := g.Input("label", graph.Int32, rows)
		mlp, err := nn.NewMLP(b, "mlp", sizes, nn.ReLU, nn.Dropout{})
		if err != nil {
			return nil, err
		}
		logits := mlp.Forward(x)
		return &train.Model{Builder: b, Inputs: map[string]*graph.Node{"x": x, "label": y}, Loss: ops.CrossEntropy(logits, y), Logits: logits}, nil
	}
	trainer, err := train.New(train.Config{Model: model, Precision: prec, BatchSize: *batch, LR: *lr, WeightDecay: 0.01,
		DP: *dp, FSDP: *fsdp, Seed: 1, Meta: map[string]string{"model": fmt.Sprint("csv mlp ", sizes)}})
	if err != nil {
		fail(err)
	}
	res, err := trainer.Fit(trainRows, train.Run{Epochs: *epochs, Eval: testRows, SaveDir: *save, Resume: *resume,
		Hooks: []train.Hook{train.Progress(os.Stderr, train.ProgressOptions{})}})
	if err != nil {
		fail(err)
	}
	fmt.Print(trainer.Report())
	fmt.Printf("%s %s: held-out accuracy %.2f%% (%d rows), loss %.4f; steps %d–%d of %d, %.2f ms/step\n", res.Precision, res.Recipe,
		100*res.Eval.Accuracy, res.Eval.Examples, res.Eval.Loss, res.First+1, res.End, res.Total, res.MsPerStep())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "csv:", err)
	os.Exit(1)
}
