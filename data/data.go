// Package data feeds training programs: a Dataset fills caller-owned batch
// buffers by example index, and a Loader draws batches from it — a seeded
// shuffle per epoch, a dropped or padded-and-masked last batch, a disjoint
// shard of every batch per rank, prefetch on a goroutine — without
// allocating per batch, with a State that a checkpoint keeps so that a
// resumed run continues mid-epoch in the same order.
//
// Sources: in-memory tensors (NewTensors), CSV files (ReadCSV), and token
// streams cut into windows (NewWindows) from llm.c / nanoGPT token files
// (ReadTokenFile, ReadRawTokens), and text turned into tokens by
// characters (NewChars) or by OpenAI's byte-pair encodings (NewBPE:
// r50k_base, cl100k_base). Package data/mnist's sets are Datasets too.
//
// Bad input is refused when it is read, before any training step, with an
// *Error naming the file, line and column.
package data

import (
	"errors"
	"fmt"

	"github.com/octetml/octet/graph"
)

// IgnoreLabel is the label a padded row of a last batch gets in every
// label field: ops.CrossEntropy leaves such rows out (PyTorch's
// ignore_index).
const IgnoreLabel = -100

// Field is one named column of a dataset's examples: a float32 or int32
// tensor of the same shape for every example.
type Field struct {
	// Name is what the batch is asked for ("x", "label").
	Name string
	// DType is graph.Float32 or graph.Int32.
	DType graph.DType
	// Shape is one example's shape; empty for a scalar (a class label).
	Shape []int
	// Label marks int32 class labels (or next-token targets): padded rows
	// get IgnoreLabel instead of 0.
	Label bool
	// Classes, when above 0, is the number of classes: labels lie in
	// [0, Classes).
	Classes int
}

// Size returns the number of values of one example.
func (f Field) Size() int {
	n := 1
	for _, d := range f.Shape {
		n *= d
	}
	return n
}

func checkFields(fields []Field) error {
	if len(fields) == 0 {
		return fmt.Errorf("data: a dataset with no fields")
	}
	seen := map[string]bool{}
	for _, f := range fields {
		if f.Name == "" || seen[f.Name] {
			return fmt.Errorf("data: field name %q is empty or repeated", f.Name)
		}
		seen[f.Name] = true
		if f.DType != graph.Float32 && f.DType != graph.Int32 {
			return fmt.Errorf("data: field %q: dtype %v, want float32 or int32", f.Name, f.DType)
		}
		if f.Label && f.DType != graph.Int32 {
			return fmt.Errorf("data: field %q: labels are int32", f.Name)
		}
		for _, d := range f.Shape {
			if d < 1 {
				return fmt.Errorf("data: field %q: shape %v", f.Name, f.Shape)
			}
		}
	}
	return nil
}

// Dataset is a finite set of examples, each with a value for every field.
type Dataset interface {
	// Len returns the number of examples.
	Len() int
	// Fields describes the examples.
	Fields() []Field
	// Fill writes examples idx[0], idx[1], … into rows 0, 1, … of b's
	// fields. It must not keep b or idx.
	Fill(b *Batch, idx []int) error
}

// Batch holds the buffers of one batch: every field of Size rows, of
// which the first Rows are examples and the rest padding (Mask 0).
type Batch struct {
	fields []Field
	f32    [][]float32
	i32    [][]int32
	size   int
	// Rows is the number of real examples; rows [Rows, Size) are padding
	// (zeros, IgnoreLabel in label fields).
	Rows int
	// GlobalRows is the number of real examples of the global batch
	// across all ranks (Rows with one rank).
	GlobalRows int
	// Mask is 1 for each real row and 0 for each padded one.
	Mask []float32
	// Epoch and Index say where the batch is: epoch (from 0) and batch
	// within the epoch (from 0).
	Epoch, Index int
	err          error // a prefetched batch's failure
}

// NewBatch returns a batch of size rows for fields.
func NewBatch(fields []Field, size int) *Batch {
	b := &Batch{fields: append([]Field(nil), fields...), size: size, Mask: make([]float32, size)}
	b.f32 = make([][]float32, len(fields))
	b.i32 = make([][]int32, len(fields))
	for i, f := range fields {
		if f.DType == graph.Float32 {
			b.f32[i] = make([]float32, size*f.Size())
		} else {
			b.i32[i] = make([]int32, size*f.Size())
		}
	}
	return b
}

// Size returns the batch's rows, padding included.
func (b *Batch) Size() int { return b.size }

// Fields returns the batch's fields.
func (b *Batch) Fields() []Field { return b.fields }

func (b *Batch) index(name string) int {
	for i := range b.fields {
		if b.fields[i].Name == name {
			return i
		}
	}
	return -1
}

// Float32 returns the buffer of a float32 field (Size rows), or nil when
// the batch has no such field.
func (b *Batch) Float32(name string) []float32 {
	if i := b.index(name); i >= 0 {
		return b.f32[i]
	}
	return nil
}

// Int32 returns the buffer of an int32 field (Size rows), or nil when
// the batch has no such field.
func (b *Batch) Int32(name string) []int32 {
	if i := b.index(name); i >= 0 {
		return b.i32[i]
	}
	return nil
}

// Float32At and Int32At return field i's buffer (nil when it has the other
// dtype).
func (b *Batch) Float32At(i int) []float32 { return b.f32[i] }

// Int32At returns field i's int32 buffer (nil for a float32 field).
func (b *Batch) Int32At(i int) []int32 { return b.i32[i] }

// pad fills rows [from, Size) with padding and sets the mask.
func (b *Batch) pad(from int) {
	b.Rows = from
	for r := range b.Mask {
		b.Mask[r] = 0
		if r < from {
			b.Mask[r] = 1
		}
	}
	for i, f := range b.fields {
		n := f.Size()
		if f.DType == graph.Float32 {
			clear(b.f32[i][from*n:])
			continue
		}
		v := int32(0)
		if f.Label {
			v = IgnoreLabel
		}
		for j := from * n; j < len(b.i32[i]); j++ {
			b.i32[i][j] = v
		}
	}
}

// Error is a problem with a data file (or another source), naming where it
// is: the file, and when they apply the line (from 1) and the column (from
// 1, with its name when the file has a header).
type Error struct {
	File       string
	Line       int
	Column     int
	ColumnName string
	// Msg says what is wrong.
	Msg string
}

func (e *Error) Error() string {
	s := "data: " + e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Column > 0 {
		s += fmt.Sprintf(": column %d", e.Column)
		if e.ColumnName != "" {
			s += fmt.Sprintf(" (%q)", e.ColumnName)
		}
	}
	return s + ": " + e.Msg
}

// ErrState is wrapped by the errors of Loader.Restore and UnmarshalBinary
// for a state that does not belong to the loader.
var ErrState = errors.New("the loader state does not fit this loader")
