package data

import (
	"fmt"

	"github.com/octetml/octet/graph"
)

// Column is one field of an in-memory dataset with its values: F32 for a
// float32 field, I32 for an int32 one, examples one after another.
type Column struct {
	Field
	F32 []float32
	I32 []int32
}

// Float32Column returns a float32 column of examples of the given shape.
func Float32Column(name string, values []float32, shape ...int) Column {
	return Column{Field: Field{Name: name, DType: graph.Float32, Shape: shape}, F32: values}
}

// Int32Column returns an int32 column of examples of the given shape.
func Int32Column(name string, values []int32, shape ...int) Column {
	return Column{Field: Field{Name: name, DType: graph.Int32, Shape: shape}, I32: values}
}

// LabelColumn returns a column of class labels in [0, classes).
func LabelColumn(name string, labels []int32, classes int) Column {
	return Column{Field: Field{Name: name, DType: graph.Int32, Label: true, Classes: classes}, I32: labels}
}

// Tensors is a Dataset held in memory, one Column per field.
type Tensors struct {
	cols   []Column
	fields []Field
	n      int
}

// NewTensors checks that the columns hold the same number of examples
// (and labels their range) and returns them as a dataset. The values are
// shared, not copied.
func NewTensors(cols ...Column) (*Tensors, error) {
	t := &Tensors{cols: cols}
	for _, c := range cols {
		t.fields = append(t.fields, c.Field)
	}
	if err := checkFields(t.fields); err != nil {
		return nil, err
	}
	for i, c := range cols {
		size := c.Size()
		have := len(c.F32)
		if c.DType == graph.Int32 {
			have = len(c.I32)
		}
		if have%size != 0 {
			return nil, fmt.Errorf("data: column %q: %d values are not whole examples of %v", c.Name, have, c.Shape)
		}
		if i == 0 {
			t.n = have / size
		} else if have/size != t.n {
			return nil, fmt.Errorf("data: column %q has %d examples, column %q %d", c.Name, have/size, cols[0].Name, t.n)
		}
		if c.Label {
			for j, v := range c.I32 {
				if v < 0 || (c.Classes > 0 && int(v) >= c.Classes) {
					return nil, fmt.Errorf("data: column %q: label %d of example %d is outside [0, %d)", c.Name, v, j/size, c.Classes)
				}
			}
		}
	}
	return t, nil
}

// Len returns the number of examples.
func (t *Tensors) Len() int { return t.n }

// Fields returns the columns' fields.
func (t *Tensors) Fields() []Field { return t.fields }

// Fill copies the examples idx into b's first rows.
func (t *Tensors) Fill(b *Batch, idx []int) error {
	for i, c := range t.cols {
		size := c.Size()
		if c.DType == graph.Float32 {
			dst := b.Float32At(i)
			for r, e := range idx {
				copy(dst[r*size:(r+1)*size], c.F32[e*size:(e+1)*size])
			}
			continue
		}
		dst := b.Int32At(i)
		for r, e := range idx {
			copy(dst[r*size:(r+1)*size], c.I32[e*size:(e+1)*size])
		}
	}
	return nil
}

// Subset returns the examples [lo, hi) (sharing memory).
func (t *Tensors) Subset(lo, hi int) (*Tensors, error) {
	if lo < 0 || hi > t.n || lo >= hi {
		return nil, fmt.Errorf("data: subset [%d, %d) of %d examples", lo, hi, t.n)
	}
	cols := make([]Column, len(t.cols))
	for i, c := range t.cols {
		size := c.Size()
		cols[i] = c
		if c.DType == graph.Float32 {
			cols[i].F32 = c.F32[lo*size : hi*size]
		} else {
			cols[i].I32 = c.I32[lo*size : hi*size]
		}
	}
	return &Tensors{cols: cols, fields: t.fields, n: hi - lo}, nil
}
