package data_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/graph"
	"github.com/stretchr/testify/require"
)

// Tests of edges the mutation run found untested.

func TestCSVEdges(t *testing.T) {
	// All labels 0: one class.
	tab, err := data.ParseCSV(strings.NewReader("a,y\n1,0\n2,0\n"), "z.csv", data.CSVConfig{Label: "y"})
	require.NoError(t, err)
	require.Equal(t, 1, tab.Classes)
	// A line of spaces in a two-column file is blank; in a one-column
	// file it is an empty cell.
	tab, err = data.ParseCSV(strings.NewReader("a,y\n1,0\n   \n2,1\n"), "b.csv", data.CSVConfig{Label: "y"})
	require.NoError(t, err)
	require.Equal(t, 2, tab.Len())
	_, err = data.ParseCSV(strings.NewReader("y\n0\n  \n"), "one.csv", data.CSVConfig{Label: "y", Features: []string{}})
	require.Error(t, err)
	_, err = data.ParseCSV(strings.NewReader("a,y\n1,0\nx\n"), "r.csv", data.CSVConfig{Label: "y"})
	require.ErrorContains(t, err, "1 fields, the header has 2")
	// Without Classes a negative label's range has no upper end.
	_, err = data.ParseCSV(strings.NewReader("a,y\n1,-2\n"), "n.csv", data.CSVConfig{Label: "y"})
	require.ErrorContains(t, err, "label -2 is outside [0, ∞)")
	// Split needs rows on both sides.
	var sb strings.Builder
	sb.WriteString("a,y\n")
	for range 100 {
		sb.WriteString("1,0\n")
	}
	tab, err = data.ParseCSV(strings.NewReader(sb.String()), "s.csv", data.CSVConfig{Label: "y"})
	require.NoError(t, err)
	for _, f := range []float64{0, -0.1, 0.001, 0.999, 1} {
		_, _, err := tab.Split(f, 1)
		require.Error(t, err, "%v", f)
	}
	a, b, err := tab.Split(0.01, 1)
	require.NoError(t, err)
	require.Equal(t, [2]int{99, 1}, [2]int{a.Len(), b.Len()})
	a, b, err = tab.Split(0.99, 1)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 99}, [2]int{a.Len(), b.Len()})
}

func TestErrorFormat(t *testing.T) {
	require.Equal(t, "data: f: m", (&data.Error{File: "f", Msg: "m"}).Error())
	require.Equal(t, "data: f:1: m", (&data.Error{File: "f", Line: 1, Msg: "m"}).Error())
	require.Equal(t, `data: f:2: column 1 ("a"): m`, (&data.Error{File: "f", Line: 2, Column: 1, ColumnName: "a", Msg: "m"}).Error())
	require.Equal(t, "data: f: column 3: m", (&data.Error{File: "f", Column: 3, Msg: "m"}).Error())
}

func TestFieldShapes(t *testing.T) {
	_, err := data.NewTensors(data.Float32Column("x", nil, 2, 0))
	require.ErrorContains(t, err, "shape")
	// Multi-value int32 columns and label columns of several values.
	x := []int32{1, 2, 3, 4, 5, 6}
	lab := data.Column{Field: data.Field{Name: "y", DType: graph.Int32, Shape: []int{3}, Label: true, Classes: 4}, I32: []int32{0, 1, 2, 3, 0, 9}}
	_, err = data.NewTensors(data.Int32Column("x", x, 3), lab)
	require.ErrorContains(t, err, "label 9 of example 1")
	lab.I32[5] = 3
	ds, err := data.NewTensors(data.Int32Column("x", x, 3), lab)
	require.NoError(t, err)
	l, err := data.NewLoader(ds, data.Config{BatchSize: 2})
	require.NoError(t, err)
	bt, err := l.Next()
	require.NoError(t, err)
	require.Equal(t, x, bt.Int32("x"))
	// Labels with no Classes have no upper end.
	_, err = data.NewTensors(data.LabelColumn("y", []int32{0, 7}, 0))
	require.NoError(t, err)
	// Columns of different example sizes and counts.
	_, err = data.NewTensors(data.Float32Column("a", make([]float32, 8), 2), data.Float32Column("b", make([]float32, 15), 3))
	require.ErrorContains(t, err, `column "b" has 5 examples, column "a" 4`)
}

// TestRestoreAnyPosition: a fresh loader moved to any epoch, earlier
// ones included, serves what a loader that got there in order serves.
func TestRestoreAnyPosition(t *testing.T) {
	ds := ids(t, 40)
	cfg := data.Config{BatchSize: 8, Shuffle: true, Seed: 2}
	ref, err := data.NewLoader(ds, cfg)
	require.NoError(t, err)
	var batches [][]int
	for range 4 * 5 {
		b, err := ref.Next()
		require.NoError(t, err)
		batches = append(batches, seen(t, b))
	}
	l, err := data.NewLoader(ds, cfg)
	require.NoError(t, err)
	for _, pos := range []int{12, 13, 3, 17, 8, 7, 0, 19} {
		require.NoError(t, l.Restore(data.State{Epoch: pos / 5, Index: pos % 5}))
		b, err := l.Next()
		require.NoError(t, err)
		require.Equal(t, batches[pos], seen(t, b), "batch %d", pos)
	}
	for _, st := range []data.State{{Epoch: -1}, {Index: -1}, {Index: 5}} {
		require.ErrorIs(t, l.Restore(st), data.ErrState, "%+v", st)
	}
	require.NoError(t, l.Restore(data.State{Epoch: 1 << 40, Index: 4}))
	// A forged state beyond the bound is refused.
	saved, err := l.MarshalBinary()
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(saved[len(saved)-16:], 1<<40+1)
	require.ErrorIs(t, l.UnmarshalBinary(saved), data.ErrState)
}

// TestPrefetchBuffersSurviveRestores: restoring a prefetching loader
// many times keeps all its buffers (none is lost, nothing hangs), and
// without prefetch no goroutine is started.
func TestPrefetchBuffersSurviveRestores(t *testing.T) {
	ds := ids(t, 40)
	l, err := data.NewLoader(ds, data.Config{BatchSize: 8, Prefetch: 2})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			if _, err := l.Next(); err != nil {
				t.Error(err)
				return
			}
			if err := l.Restore(data.State{Index: i % 5}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the loader hung after restores")
	}
	l.Close()
	before := runtime.NumGoroutine()
	s, err := data.NewLoader(ds, data.Config{BatchSize: 8})
	require.NoError(t, err)
	_, err = s.Next()
	require.NoError(t, err)
	require.Equal(t, before, runtime.NumGoroutine(), "no prefetch, no goroutine")
}

func TestTokenEdges(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.bin")
	require.NoError(t, os.WriteFile(p, tokenFile(20240520, 1, 2, []uint16{1, 2, 3}), 0o644))
	_, err := data.ReadTokenFile(p)
	require.ErrorContains(t, err, "2 bytes after the 2 tokens")
	require.Error(t, data.WriteTokenFile(filepath.Join(dir, "e.bin"), nil))
}
