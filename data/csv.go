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

// CSVConfig says how to read a CSV file of numeric features and an integer
// class label, with a header row naming the columns.
type CSVConfig struct {
	// Label names the label column (required): integers in [0, Classes).
	Label string
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

// Table is a CSV file read into memory: a Dataset with the fields "x"
// (float32, one value per feature) and "label" (int32 class labels).
type Table struct {
	// X holds the features, row after row; Y the labels.
	X []float32
	Y []int32
	// Features names X's columns; Label the label column.
	Features []string
	Label    string
	// Classes is the number of classes.
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
// outside [0, Classes).
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
	if cfg.Label == "" {
		return nil, fail(0, 0, "", "no label column given")
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
	labelCol, ok := index[cfg.Label]
	if !ok {
		return nil, fail(1, 0, "", "no label column %q in the header (columns: %s)", cfg.Label, strings.Join(header, ", "))
	}
	feats := cfg.Features
	if feats == nil {
		for _, h := range header {
			if h != cfg.Label {
				feats = append(feats, h)
			}
		}
	}
	if len(feats) == 0 {
		return nil, fail(1, 0, "", "no feature columns (the header has only the label %q)", cfg.Label)
	}
	cols := make([]int, len(feats))
	seen := map[string]bool{}
	for i, f := range feats {
		c, ok := index[f]
		switch {
		case !ok:
			return nil, fail(1, 0, "", "no feature column %q in the header (columns: %s)", f, strings.Join(header, ", "))
		case f == cfg.Label:
			return nil, fail(1, c+1, f, "column %q is the label; it cannot be a feature too", f)
		case seen[f]:
			return nil, fail(1, c+1, f, "feature column %q is listed twice", f)
		}
		seen[f] = true
		cols[i] = c
	}
	if cfg.Classes < 0 {
		return nil, fail(0, 0, "", "classes %d, want at least 1 (or 0 to count them)", cfg.Classes)
	}
	t := &Table{Features: slices.Clone(feats), Label: cfg.Label, Source: name}
	row := make([]float32, len(feats))
	maxLabel := int64(-1)
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
		drop := false
		for i, c := range cols {
			s, l := cell(c)
			if s == "" {
				return nil, fail(l, c+1, header[c], "empty cell")
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, fail(l, c+1, header[c], "%q is not a number", s)
			}
			f := float32(v)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				if cfg.DropNonFinite && err == nil {
					drop = true
					continue
				}
				if err == nil {
					return nil, fail(l, c+1, header[c], "%s is not finite (set DropNonFinite to drop such rows)", s)
				}
			}
			if math.IsInf(float64(f), 0) {
				return nil, fail(l, c+1, header[c], "%s is out of float32's range", s)
			}
			row[i] = f
		}
		s, l := cell(labelCol)
		lab, err := strconv.ParseInt(s, 10, 32)
		switch {
		case s == "":
			return nil, fail(l, labelCol+1, cfg.Label, "empty label")
		case err != nil:
			return nil, fail(l, labelCol+1, cfg.Label, "label %q is not an integer", s)
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
	}
	if len(t.Y) == 0 {
		if t.Dropped > 0 {
			return nil, fail(0, 0, "", "every one of the %d data rows has a non-finite feature", t.Dropped)
		}
		return nil, fail(0, 0, "", "the header has no data rows after it")
	}
	t.Classes = cfg.Classes
	if t.Classes == 0 {
		t.Classes = int(maxLabel) + 1
	}
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

// Len returns the number of rows.
func (t *Table) Len() int { return len(t.Y) }

// Fields returns "x" (float32 [features]) and "label".
func (t *Table) Fields() []Field {
	return []Field{
		{Name: "x", DType: graph.Float32, Shape: []int{len(t.Features)}},
		{Name: "label", DType: graph.Int32, Label: true, Classes: t.Classes},
	}
}

// Fill copies rows idx into b.
func (t *Table) Fill(b *Batch, idx []int) error {
	f := len(t.Features)
	x, y := b.Float32At(0), b.Int32At(1)
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
		out := &Table{Features: t.Features, Label: t.Label, Classes: t.Classes, Source: t.Source}
		f := len(t.Features)
		for _, r := range rows {
			out.X = append(out.X, t.X[r*f:(r+1)*f]...)
			out.Y = append(out.Y, t.Y[r])
		}
		return out
	}
	return take(perm[:n-k]), take(perm[n-k:]), nil
}

// Standardizer maps each feature to (x − Mean)/Std.
type Standardizer struct {
	Features  []string
	Mean, Std []float32
}

// FitStandardizer computes each feature's mean and (population) standard
// deviation over t, in float64; a constant feature gets Std 1.
func (t *Table) FitStandardizer() Standardizer {
	f := len(t.Features)
	s := Standardizer{Features: t.Features, Mean: make([]float32, f), Std: make([]float32, f)}
	n := float64(t.Len())
	for j := 0; j < f; j++ {
		var sum float64
		for r := 0; r < t.Len(); r++ {
			sum += float64(t.X[r*f+j])
		}
		mean := sum / n
		var ss float64
		for r := 0; r < t.Len(); r++ {
			d := float64(t.X[r*f+j]) - mean
			ss += d * d
		}
		std := math.Sqrt(ss / n)
		if std == 0 || math.IsNaN(std) {
			std = 1
		}
		s.Mean[j], s.Std[j] = float32(mean), float32(std)
	}
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
