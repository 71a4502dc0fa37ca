package train

import (
	"fmt"
	"slices"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// maskInput is the name of the row-mask input the trainer adds to a
// model whose Loss is per row and that has no Mask of its own.
const maskInput = "train.mask"

// lossRows is what the trainer knows of how a model's loss treats the
// padded rows of a batch.
type lossRows struct {
	// readsMask: the loss depends on Model.Mask.
	readsMask bool
	// labelInputs are the Inputs keys whose nodes are the labels of a
	// cross-entropy in the loss: a label field's padded rows are
	// IgnoreLabel, which cross-entropy leaves out.
	labelInputs []string
}

// finishLoss checks the model's Mask and turns a per-row Loss (one value
// per row, or per row and position) into the mean over the rows the mask
// keeps, adding the mask input when the model has none.
func finishLoss(m *Model, rows int) error {
	g := m.Builder.Graph()
	if m.Mask != nil {
		if s := m.Mask.Shape(); m.Mask.DType() != graph.Float32 || len(s) != 1 || s[0] != rows || !m.Mask.IsInput() {
			return fmt.Errorf("train: model: Mask %q is %v %v; want a float32 input [%d] (one weight per row)", m.Mask.Name(), m.Mask.DType(), s, rows)
		}
		for name, n := range m.Inputs {
			if n == m.Mask {
				return fmt.Errorf("train: model: Mask %q is also Inputs[%q]: the trainer feeds the mask itself", m.Mask.Name(), name)
			}
		}
	}
	if m.Loss == nil || len(m.Loss.Shape()) == 0 {
		return nil
	}
	if s := m.Loss.Shape(); s[0] != rows {
		return fmt.Errorf("train: model: Loss %q is %v: want a scalar, or a loss per row [%d …] that the trainer averages over the real rows", m.Loss.Name(), s, rows)
	}
	if m.Loss.DType() != graph.Float32 {
		return fmt.Errorf("train: model: Loss %q is %v, want float32", m.Loss.Name(), m.Loss.DType())
	}
	if m.Mask == nil {
		if g.Lookup(maskInput) != nil {
			return fmt.Errorf("train: model: the graph has a node named %q already; name it otherwise, or give it as Model.Mask", maskInput)
		}
		m.Mask = g.Input(maskInput, graph.Float32, rows)
	}
	m.Loss = ops.MaskedMean(m.Loss, m.Mask)
	return g.Err()
}

// labelKinds are the ops whose second input is int32 labels, rows
// labelled data.IgnoreLabel left out.
var labelKinds = []graph.Kind{ops.KindCrossEntropy, ops.KindClassifierLoss, ops.KindClassifierCrossEntropy}

// inspectLoss finds how m's loss treats padded rows.
func inspectLoss(m *Model) lossRows {
	var lr lossRows
	if m.Loss == nil {
		return lr
	}
	seen := map[*graph.Node]bool{}
	stack := []*graph.Node{m.Loss}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		if n == m.Mask {
			lr.readsMask = true
		}
		if slices.ContainsFunc(labelKinds, n.Is) && n.NumInputs() > 1 {
			for name, in := range m.Inputs {
				if in == n.Input(1) && !slices.Contains(lr.labelInputs, name) {
					lr.labelInputs = append(lr.labelInputs, name)
				}
			}
		}
		stack = append(stack, n.Inputs()...)
	}
	slices.Sort(lr.labelInputs)
	return lr
}

// padded returns how many rows of the last batch of n examples are
// padding, in batches of size (0: none).
func padded(n, size int) int {
	if r := n % size; r != 0 {
		return size - r
	}
	return 0
}

// checkPadding refuses a loss that would average padded rows in: the last
// batch of ds in batches of size has pad rows of padding, and the loss
// reads neither the mask nor labels that cross-entropy leaves out. what
// names the phase ("training", "evaluation").
func checkPadding(m *Model, lr lossRows, ds data.Dataset, size, pad int, what string) error {
	if pad == 0 || m.Loss == nil || lr.readsMask {
		return nil
	}
	fields := ds.Fields()
	for _, name := range lr.labelInputs {
		for _, f := range fields {
			if f.Name == name && f.Label {
				return nil
			}
		}
	}
	return configErrorf("%s: the loss %q averages over every row of a batch, and the last batch of the %d examples in batches of %d has %d padded rows, which it would count: "+
		"pass Model.Mask to the loss (ops.MSELoss(pred, target, mask), ops.MaskedMean), return a loss per row (the trainer averages it over the real rows), or choose a batch that divides the examples",
		what, m.Loss.Name(), ds.Len(), size, pad)
}
