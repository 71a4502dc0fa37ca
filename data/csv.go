package data

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/octetml/octet/graph"
)

// CSVConfig says how to read a CSV file of numeric features and either an
// integer class label (classification) or float targets (regression),
// with a header row naming the columns.
type CSVConfig struct {
	// Label names the label column: integers in [0, Classes) for
	// classification, or one float target with Task Regression (or
	// AutoTask finding a value that is not an integer). Set Label or
	// Targets.
	Label string
	// Task says what Label holds: Classification (the zero value),
	// Regression, or AutoTask (regression when any label is not an
	// integer or is negative, else classification).
	Task Task
	// Targets names the target columns of a regression (float values,
	// field "target" of len(Targets) values a row); it excludes Label.
	Targets []string
	// Features names the feature columns, in the order the model reads
	// them; nil takes every column but Label, in file order.
	Features []string
	// Classes, when above 0, is the number of classes (a larger label is
	// an error); 0 takes the largest label plus one.
	Classes int
	// DropNonFinite drops rows with a NaN or infinite feature (counted in
	// Table.Dropped) instead of refusing the file.
	DropNonFinite bool
	// Comma is the field separator; 0 means ','.
	Comma rune
}

// Task is what a table's examples are to be predicted as.
type Task uint8

const (
	// Classification: an integer class label per row (field "label").
	Classification Task = iota
	// Regression: float targets per row (field "target").
	Regression
	// AutoTask reads Label as Regression when any of its values is not a
	// non-negative integer, else as Classification.
	AutoTask
)

func (t Task) String() string {
	switch t {
	case Classification:
		return "classification"
	case Regression:
		return "regression"
	case AutoTask:
		return "auto"
	}
	return fmt.Sprintf("Task(%d)", int(t))
}

// ParseTask reads a task's name: "classification", "regression" or
// "auto".
func ParseTask(s string) (Task, error) {
	for _, t := range []Task{Classification, Regression, AutoTask} {
		if strings.EqualFold(strings.TrimSpace(s), t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("data: task %q: want classification, regression or auto", s)
}

// Table is a CSV file read into memory: a Dataset with the fields "x"
// (float32, one value per feature) and, for a classification, "label"
// (int32 class labels) or, for a regression, "target" (float32, one value
// per target column).
type Table struct {
	// X holds the features, row after row; Y the labels (classification)
	// or T the targets, row after row (regression).
	X []float32
	Y []int32
	T []float32
	// Features names X's columns; Label the label column
	// (classification), Targets the target columns (regression).
	Features []string
	Label    string
	Targets  []string
	// Classes is the number of classes (0 for a regression).
	Classes int
	// Source is the file read ("" for a split of no file).
	Source string
	// Dropped counts the rows left out for non-finite features
	// (CSVConfig.DropNonFinite).
	Dropped int
}

// ReadCSV reads a CSV file (see CSVConfig). Every problem is an *Error
// naming the file, line and column: an empty file, a header without data
// rows, an unknown or repeated column, a ragged row, an empty or
// non-numeric cell, a NaN or infinite value (unless DropNonFinite), a
// value out of float32's range, a label that is not an integer or lies
// outside [0, Classes) (classification), a target that is not a finite
// number (regression).
func ReadCSV(path string, cfg CSVConfig) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	return ParseCSV(f, path, cfg)
}

// ParseCSV is ReadCSV on a reader; name is the file name errors give.
func ParseCSV(r io.Reader, name string, cfg CSVConfig) (*Table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	if cfg.Comma != 0 {
		cr.Comma = cfg.Comma
	}
	fail := func(line, col int, colName, format string, args ...any) error {
		return &Error{File: name, Line: line, Column: col, ColumnName: colName, Msg: fmt.Sprintf(format, args...)}
	}
	task := cfg.Task
	targets := cfg.Targets
	switch {
	case len(cfg.Targets) > 0 && cfg.Label != "":
		return nil, fail(0, 0, "", "both a label column %q and target columns %v: set Label (one column) or Targets", cfg.Label, cfg.Targets)
	case len(cfg.Targets) > 0:
		task = Regression
	case cfg.Label == "":
		return nil, fail(0, 0, "", "no label column given (Label, or Targets for a regression)")
	case task > AutoTask:
		return nil, fail(0, 0, "", "task %v: want classification, regression or auto", task)
	case task != Classification:
		targets = []string{cfg.Label}
	}
	header, err := cr.Read()
	if err == io.EOF {
		return nil, fail(0, 0, "", "the file is empty (want a header row naming the columns)")
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	header = slices.Clone(header) // encoding/csv gives at least one field
	header[0] = strings.TrimPrefix(header[0], "\uFEFF")
	index := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		if h == "" {
			return nil, fail(1, i+1, "", "the header names no column here")
		}
		if _, dup := index[h]; dup {
			return nil, fail(1, i+1, h, "column %q is named twice in the header", h)
		}
		index[h] = i
	}
	// outputs are the label's or the targets' columns.
	outNames := targets
	if task == Classification {
		outNames = []string{cfg.Label}
	}
	outCols := make([]int, len(outNames))
	isOut := map[string]bool{}
	for i, o := range outNames {
		c, ok := index[o]
		what := "label"
		if task == Regression || len(cfg.Targets) > 0 {
			what = "target"
		}
		switch {
		case !ok:
			return nil, fail(1, 0, "", "no %s column %q in the header (columns: %s)", what, o, strings.Join(header, ", "))
		case isOut[o]:
			return nil, fail(1, c+1, o, "target column %q is listed twice", o)
		}
		isOut[o] = true
		outCols[i] = c
	}
	feats := cfg.Features
	if feats == nil {
		for _, h := range header {
			if !isOut[h] {
				feats = append(feats, h)
			}
		}
	}
	if len(feats) == 0 {
		return nil, fail(1, 0, "", "no feature columns (the header has only %s)", strings.Join(outNames, ", "))
	}
	cols := make([]int, len(feats))
	seen := map[string]bool{}
	for i, f := range feats {
		c, ok := index[f]
		switch {
		case !ok:
			return nil, fail(1, 0, "", "no feature column %q in the header (columns: %s)", f, strings.Join(header, ", "))
		case isOut[f] && task == Classification:
			return nil, fail(1, c+1, f, "column %q is the label; it cannot be a feature too", f)
		case isOut[f]:
			return nil, fail(1, c+1, f, "column %q is a target; it cannot be a feature too", f)
		case seen[f]:
			return nil, fail(1, c+1, f, "feature column %q is listed twice", f)
		}
		seen[f] = true
		cols[i] = c
	}
	if cfg.Classes < 0 {
		return nil, fail(0, 0, "", "classes %d, want at least 1 (or 0 to count them)", cfg.Classes)
	}
	t := &Table{Features: slices.Clone(feats), Source: name}
	row := make([]float32, len(feats))
	outRow := make([]float32, len(outCols))
	maxLabel := int64(-1)
	integral := true // AutoTask: every label a non-negative integer so far
	rows := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue // a blank line (a file has two columns or more)
		}
		if len(rec) != len(header) {
			return nil, fail(line, min(len(rec), len(header))+1, "", "%d fields, the header has %d", len(rec), len(header))
		}
		cell := func(c int) (string, int) {
			l, _ := cr.FieldPos(c)
			return strings.TrimSpace(rec[c]), l
		}
		// number reads column c's cell as a float32; drop reports a
		// non-finite value that DropNonFinite drops.
		number := func(c int) (v float32, drop bool, err error) {
			s, l := cell(c)
			if s == "" {
				return 0, false, fail(l, c+1, header[c], "empty cell")
			}
			f, perr := strconv.ParseFloat(s, 64)
			if perr != nil && !errors.Is(perr, strconv.ErrRange) {
				return 0, false, fail(l, c+1, header[c], "%q is not a number", s)
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				if cfg.DropNonFinite && perr == nil {
					return 0, true, nil
				}
				if perr == nil {
					return 0, false, fail(l, c+1, header[c], "%s is not finite (set DropNonFinite to drop such rows)", s)
				}
			}
			if math.IsInf(float64(float32(f)), 0) {
				return 0, false, fail(l, c+1, header[c], "%s is out of float32's range", s)
			}
			return float32(f), false, nil
		}
		drop := false
		for i, c := range cols {
			v, d, err := number(c)
			if err != nil {
				return nil, err
			}
			drop = drop || d
			row[i] = v
		}
		if task != Classification {
			for i, c := range outCols {
				v, d, err := number(c)
				if err != nil {
					return nil, err
				}
				drop = drop || d
				outRow[i] = v
				if s, _ := cell(c); integral {
					lab, err := strconv.ParseInt(s, 10, 32)
					integral = err == nil && lab >= 0
					maxLabel = max(maxLabel, lab)
				}
			}
			if drop {
				t.Dropped++
				continue
			}
			t.X = append(t.X, row...)
			t.T = append(t.T, outRow...)
			rows++
			continue
		}
		labelCol := outCols[0]
		s, l := cell(labelCol)
		lab, err := strconv.ParseInt(s, 10, 32)
		switch {
		case s == "":
			return nil, fail(l, labelCol+1, cfg.Label, "empty label")
		case err != nil:
			hint := ""
			if _, ferr := strconv.ParseFloat(s, 64); ferr == nil {
				hint = " (a regression target? read it with Task Regression or AutoTask)"
			}
			return nil, fail(l, labelCol+1, cfg.Label, "label %q is not an integer%s", s, hint)
		case lab < 0 || (cfg.Classes > 0 && lab >= int64(cfg.Classes)):
			hi := "∞"
			if cfg.Classes > 0 {
				hi = strconv.Itoa(cfg.Classes)
			}
			return nil, fail(l, labelCol+1, cfg.Label, "label %d is outside [0, %s)", lab, hi)
		}
		if drop {
			t.Dropped++
			continue
		}
		t.X = append(t.X, row...)
		t.Y = append(t.Y, int32(lab))
		maxLabel = max(maxLabel, lab)
		rows++
	}
	if rows == 0 {
		if t.Dropped > 0 {
			return nil, fail(0, 0, "", "every one of the %d data rows has a non-finite value", t.Dropped)
		}
		return nil, fail(0, 0, "", "the header has no data rows after it")
	}
	if task == AutoTask && integral {
		if cfg.Classes > 0 && maxLabel >= int64(cfg.Classes) {
			return nil, fail(0, 0, cfg.Label, "label %d is outside [0, %d)", maxLabel, cfg.Classes)
		}
		task = Classification
		t.Y = make([]int32, len(t.T))
		for i, v := range t.T {
			t.Y[i] = int32(v)
		}
		t.T = nil
	}
	if task == Classification {
		t.Label = cfg.Label
		t.Classes = cfg.Classes
		if t.Classes == 0 {
			t.Classes = int(maxLabel) + 1
		}
		return t, nil
	}
	t.Targets = slices.Clone(outNames)
	return t, nil
}

// csvError turns encoding/csv's errors into an *Error.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Line, Msg: fmt.Sprintf("character %d: %v", pe.Column, pe.Err)}
	}
	return &Error{File: name, Msg: err.Error()}
}

// Task returns Regression for a table of targets, else Classification.
func (t *Table) Task() Task {
	if len(t.Targets) > 0 {
		return Regression
	}
	return Classification
}

// Len returns the number of rows.
func (t *Table) Len() int { return len(t.X) / max(1, len(t.Features)) }

// Fields returns "x" (float32 [features]) and "label" (classification)
// or "target" (float32 [targets], regression).
func (t *Table) Fields() []Field {
	x := Field{Name: "x", DType: graph.Float32, Shape: []int{len(t.Features)}}
	if t.Task() == Regression {
		return []Field{x, {Name: "target", DType: graph.Float32, Shape: []int{len(t.Targets)}}}
	}
	return []Field{x, {Name: "label", DType: graph.Int32, Label: true, Classes: t.Classes}}
}

// Fill copies rows idx into b.
func (t *Table) Fill(b *Batch, idx []int) error {
	f := len(t.Features)
	x := b.Float32At(0)
	if k := len(t.Targets); k > 0 {
		y := b.Float32At(1)
		for r, e := range idx {
			copy(x[r*f:(r+1)*f], t.X[e*f:(e+1)*f])
			copy(y[r*k:(r+1)*k], t.T[e*k:(e+1)*k])
		}
		return nil
	}
	y := b.Int32At(1)
	for r, e := range idx {
		copy(x[r*f:(r+1)*f], t.X[e*f:(e+1)*f])
		y[r] = t.Y[e]
	}
	return nil
}

// Split shuffles the rows with seed and returns the first 1−heldOut of
// them as one table and the rest as another (copies), for a training and a
// held-out split.
func (t *Table) Split(heldOut float64, seed uint64) (train, test *Table, err error) {
	n := t.Len()
	k := int(math.Round(heldOut * float64(n)))
	if math.IsNaN(heldOut) || heldOut <= 0 || heldOut >= 1 || k < 1 || k >= n {
		return nil, nil, fmt.Errorf("data: split %v of %d rows: want a fraction in (0, 1) that leaves rows on both sides", heldOut, n)
	}
	perm := rand.New(rand.NewPCG(seed, 1)).Perm(n)
	take := func(rows []int) *Table {
		out := &Table{Features: t.Features, Label: t.Label, Targets: t.Targets, Classes: t.Classes, Source: t.Source}
		f, nt := len(t.Features), len(t.Targets)
		for _, r := range rows {
			out.X = append(out.X, t.X[r*f:(r+1)*f]...)
			if nt > 0 {
				out.T = append(out.T, t.T[r*nt:(r+1)*nt]...)
			} else {
				out.Y = append(out.Y, t.Y[r])
			}
		}
		return out
	}
	return take(perm[:n-k]), take(perm[n-k:]), nil
}

// Standardizer maps each value of an example's float32 field to
// (x − Mean)/Std, position by position: the features of a Table, or any
// dataset's field (FitStandardizer). Fit it on the training examples and
// apply it to every split, and to each row a trained model is given.
type Standardizer struct {
	// Features names the positions (a table's feature columns; nil for
	// a field fitted by FitStandardizer); Field is the field fitted
	// ("x" for a table's features).
	Features []string
	Field    string
	// Mean and Std hold one value per position of the field.
	Mean, Std []float32
}

// FitStandardizer computes the mean and (population) standard deviation
// of each position of ds's float32 field over all its examples, in
// float64; a constant position gets Std 1.
func FitStandardizer(ds Dataset, field string) (Standardizer, error) {
	fields := ds.Fields()
	fi := -1
	for i, f := range fields {
		if f.Name == field {
			fi = i
		}
	}
	if fi < 0 || fields[fi].DType != graph.Float32 {
		return Standardizer{}, fmt.Errorf("data: standardize: the dataset has no float32 field %q", field)
	}
	n, k := ds.Len(), fields[fi].Size()
	if n < 1 {
		return Standardizer{}, fmt.Errorf("data: standardize %q: the dataset is empty", field)
	}
	const chunk = 256
	b := NewBatch(fields, chunk)
	idx := make([]int, 0, chunk)
	// each calls fn on every example's values of the field, in order.
	each := func(fn func(v []float32)) error {
		for lo := 0; lo < n; lo += chunk {
			idx = idx[:0]
			for e := lo; e < min(n, lo+chunk); e++ {
				idx = append(idx, e)
			}
			if err := ds.Fill(b, idx); err != nil {
				return err
			}
			vals := b.Float32At(fi)
			for r := range idx {
				fn(vals[r*k : (r+1)*k])
			}
		}
		return nil
	}
	sum, ss := make([]float64, k), make([]float64, k)
	if err := each(func(v []float32) {
		for j, x := range v {
			sum[j] += float64(x)
		}
	}); err != nil {
		return Standardizer{}, err
	}
	for j := range sum {
		sum[j] /= float64(n) // the mean
	}
	if err := each(func(v []float32) {
		for j, x := range v {
			d := float64(x) - sum[j]
			ss[j] += float64(d * d)
		}
	}); err != nil {
		return Standardizer{}, err
	}
	s := Standardizer{Field: field, Mean: make([]float32, k), Std: make([]float32, k)}
	for j := range k {
		std := math.Sqrt(ss[j] / float64(n))
		if std == 0 || math.IsNaN(std) {
			std = 1
		}
		s.Mean[j], s.Std[j] = float32(sum[j]), float32(std)
	}
	return s, nil
}

// FitStandardizer computes each feature's mean and (population) standard
// deviation over t, in float64 (FitStandardizer of its field "x"); a
// constant feature gets Std 1.
func (t *Table) FitStandardizer() Standardizer {
	s, err := FitStandardizer(t, "x")
	if err != nil { // a table always has rows and the field x
		return Standardizer{Features: t.Features, Field: "x"}
	}
	s.Features = t.Features
	return s
}

// Apply standardises t's features in place; t must have the features the
// standardizer was fitted on.
func (s Standardizer) Apply(t *Table) error {
	if !slices.Equal(s.Features, t.Features) {
		return fmt.Errorf("data: standardizer fitted on features %v, table has %v", s.Features, t.Features)
	}
	f := len(t.Features)
	for i := range t.X {
		j := i % f
		t.X[i] = (t.X[i] - s.Mean[j]) / s.Std[j]
	}
	return nil
}

func (s Standardizer) checkRow(row []float32) error {
	if len(row) != len(s.Mean) {
		return fmt.Errorf("data: standardizer of %d values a row, given %d", len(s.Mean), len(row))
	}
	return nil
}

// ApplyRow standardises one example's values in place (a row a trained
// model is to be given).
func (s Standardizer) ApplyRow(row []float32) error {
	if err := s.checkRow(row); err != nil {
		return err
	}
	for j := range row {
		row[j] = (row[j] - s.Mean[j]) / s.Std[j]
	}
	return nil
}

// Invert maps standardised values back in place: x·Std + Mean (a
// regression's standardised predictions to the targets' units).
func (s Standardizer) Invert(row []float32) error {
	if err := s.checkRow(row); err != nil {
		return err
	}
	for j := range row {
		row[j] = float32(row[j]*s.Std[j]) + s.Mean[j]
	}
	return nil
}

// Dataset returns ds with the standardizer's field standardised as it is
// filled (ds itself unchanged): for datasets that are not tables, or to
// standardise a regression's targets.
func (s Standardizer) Dataset(ds Dataset) (Dataset, error) {
	for i, f := range ds.Fields() {
		if f.Name == s.Field {
			if f.DType != graph.Float32 || f.Size() != len(s.Mean) {
				return nil, fmt.Errorf("data: standardizer of %d values for field %q, which is %v %v", len(s.Mean), s.Field, f.DType, f.Shape)
			}
			return &standardized{ds, s, i}, nil
		}
	}
	return nil, fmt.Errorf("data: standardize: the dataset has no field %q", s.Field)
}

// standardized is a dataset whose field is standardised on Fill.
type standardized struct {
	Dataset
	s     Standardizer
	field int
}

func (d *standardized) Fill(b *Batch, idx []int) error {
	if err := d.Dataset.Fill(b, idx); err != nil {
		return err
	}
	vals, k := b.Float32At(d.field), len(d.s.Mean)
	for r := range idx {
		row := vals[r*k : (r+1)*k]
		for j := range row {
			row[j] = (row[j] - d.s.Mean[j]) / d.s.Std[j]
		}
	}
	return nil
}
