package data_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/stretchr/testify/require"
)

func writeFile(t testing.TB, name, body string) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestReadCSV(t *testing.T) {
	p := writeFile(t, "iris.csv", "\uFEFFa, b ,species,c\n1,2,0,3\n4,5.5,2,-6e-1\n\n7,8,1,9\n")
	tab, err := data.ReadCSV(p, data.CSVConfig{Label: "species"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, tab.Features)
	require.Equal(t, []float32{1, 2, 3, 4, 5.5, -0.6, 7, 8, 9}, tab.X)
	require.Equal(t, []int32{0, 2, 1}, tab.Y)
	require.Equal(t, 3, tab.Classes)
	// Chosen features, in the order given.
	tab, err = data.ReadCSV(p, data.CSVConfig{Label: "species", Features: []string{"c", "a"}, Classes: 4})
	require.NoError(t, err)
	require.Equal(t, []float32{3, 1, -0.6, 4, 9, 7}, tab.X)
	require.Equal(t, 4, tab.Classes)
	f := tab.Fields()
	require.Equal(t, "x", f[0].Name)
	require.Equal(t, []int{2}, f[0].Shape)
	require.True(t, f[1].Label)
	// Semicolons.
	tab, err = data.ParseCSV(strings.NewReader("x;y\n1;0\n"), "s.csv", data.CSVConfig{Label: "y", Comma: ';'})
	require.NoError(t, err)
	require.Equal(t, []float32{1}, tab.X)
}

// TestReadCSVRefusesBadFiles: every bad case names the file, and the line
// and column where there is one.
func TestReadCSVRefusesBadFiles(t *testing.T) {
	for _, c := range []struct {
		name, body string
		cfg        data.CSVConfig
		line, col  int
		want       string
	}{
		{"empty", "", data.CSVConfig{Label: "y"}, 0, 0, "the file is empty"},
		{"header only", "a,y\n", data.CSVConfig{Label: "y"}, 0, 0, "no data rows"},
		{"no label column", "a,b\n1,2\n", data.CSVConfig{Label: "y"}, 1, 0, `no label column "y" in the header (columns: a, b)`},
		{"no label given", "a,b\n1,2\n", data.CSVConfig{}, 0, 0, "no label column given"},
		{"unknown feature", "a,y\n1,2\n", data.CSVConfig{Label: "y", Features: []string{"q"}}, 1, 0, `no feature column "q"`},
		{"label as feature", "a,y\n1,2\n", data.CSVConfig{Label: "y", Features: []string{"y"}}, 1, 2, "is the label"},
		{"repeated header", "a,a,y\n1,2,3\n", data.CSVConfig{Label: "y"}, 1, 2, "named twice"},
		{"ragged short", "a,b,y\n1,2,0\n3,4\n", data.CSVConfig{Label: "y"}, 3, 3, "2 fields, the header has 3"},
		{"ragged long", "a,y\n1,0\n3,4,5\n", data.CSVConfig{Label: "y"}, 3, 3, "3 fields, the header has 2"},
		{"non-numeric", "a,b,y\n1,2,0\n3,x4,1\n", data.CSVConfig{Label: "y"}, 3, 2, `"x4" is not a number`},
		{"empty cell", "a,b,y\n1,,0\n", data.CSVConfig{Label: "y"}, 2, 2, "empty cell"},
		{"NaN", "a,b,y\n1,2,0\n1,NaN,0\n", data.CSVConfig{Label: "y"}, 3, 2, "NaN is not finite"},
		{"Inf", "a,b,y\n-inf,2,0\n", data.CSVConfig{Label: "y"}, 2, 1, "-inf is not finite"},
		{"too large", "a,y\n1e39,0\n", data.CSVConfig{Label: "y"}, 2, 1, "out of float32's range"},
		{"label not integer", "a,y\n1,0\n1,1.5\n", data.CSVConfig{Label: "y"}, 3, 2, `label "1.5" is not an integer`},
		{"label negative", "a,y\n1,-1\n", data.CSVConfig{Label: "y"}, 2, 2, "label -1 is outside"},
		{"label too large", "a,y\n1,3\n", data.CSVConfig{Label: "y", Classes: 3}, 2, 2, "label 3 is outside [0, 3)"},
		{"empty label", "a,y\n1, \n", data.CSVConfig{Label: "y"}, 2, 2, "empty label"},
		{"bad quote", "a,y\n\"1,0\n", data.CSVConfig{Label: "y"}, 2, 0, "extraneous or missing"},
		{"all dropped", "a,y\nnan,0\n", data.CSVConfig{Label: "y", DropNonFinite: true}, 0, 0, "every one of the 1 data rows"},
		{"label and targets", "a,y\n1,0\n", data.CSVConfig{Label: "y", Targets: []string{"y"}}, 0, 0, "set Label (one column) or Targets"},
		{"no target column", "a,y\n1,0\n", data.CSVConfig{Targets: []string{"z"}}, 1, 0, `no target column "z"`},
		{"target twice", "a,y\n1,0\n", data.CSVConfig{Targets: []string{"y", "y"}}, 1, 2, "listed twice"},
		{"target as feature", "a,y\n1,0\n", data.CSVConfig{Targets: []string{"y"}, Features: []string{"y"}}, 1, 2, "is a target"},
		{"target not a number", "a,y\n1,0\n2,x\n", data.CSVConfig{Label: "y", Task: data.Regression}, 3, 2, `"x" is not a number`},
		{"target NaN", "a,y\n1,nan\n", data.CSVConfig{Targets: []string{"y"}}, 2, 2, "nan is not finite"},
		{"auto label too large", "a,y\n1,3\n", data.CSVConfig{Label: "y", Task: data.AutoTask, Classes: 3}, 0, 0, "label 3 is outside [0, 3)"},
		{"bad task", "a,y\n1,3\n", data.CSVConfig{Label: "y", Task: 7}, 0, 0, "task Task(7)"},
	} {
		p := writeFile(t, "bad.csv", c.body)
		_, err := data.ReadCSV(p, c.cfg)
		require.Error(t, err, c.name)
		var de *data.Error
		require.True(t, errors.As(err, &de), "%s: %v", c.name, err)
		require.Equal(t, p, de.File, c.name)
		require.Equal(t, c.line, de.Line, "%s: %v", c.name, err)
		require.Equal(t, c.col, de.Column, "%s: %v", c.name, err)
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, p, c.name)
	}
	_, err := data.ReadCSV(filepath.Join(t.TempDir(), "missing.csv"), data.CSVConfig{Label: "y"})
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestReadCSVDropsNonFiniteRows(t *testing.T) {
	tab, err := data.ParseCSV(strings.NewReader("a,y\n1,0\nnan,1\n2,1\n"), "d.csv", data.CSVConfig{Label: "y", DropNonFinite: true})
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2}, tab.X)
	require.Equal(t, 1, tab.Dropped)
}

func TestSplitAndStandardize(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("a,b,y\n")
	for i := 0; i < 100; i++ {
		sb.WriteString(strings.Join([]string{strconv.Itoa(i), "5", strconv.Itoa(i % 3)}, ",") + "\n")
	}
	tab, err := data.ParseCSV(strings.NewReader(sb.String()), "s.csv", data.CSVConfig{Label: "y"})
	require.NoError(t, err)
	train, test, err := tab.Split(0.2, 1)
	require.NoError(t, err)
	require.Equal(t, 80, train.Len())
	require.Equal(t, 20, test.Len())
	seen := map[float32]bool{}
	for _, tb := range []*data.Table{train, test} {
		for r := 0; r < tb.Len(); r++ {
			v := tb.X[2*r]
			require.False(t, seen[v])
			seen[v] = true
			require.Equal(t, int32(int(v)%3), tb.Y[r])
		}
	}
	require.Len(t, seen, 100)
	st := train.FitStandardizer()
	require.Equal(t, float32(1), st.Std[1], "a constant feature keeps scale 1")
	require.NoError(t, st.Apply(train))
	var mean, sq float64
	for r := 0; r < train.Len(); r++ {
		mean += float64(train.X[2*r])
		sq += float64(train.X[2*r]) * float64(train.X[2*r])
		require.Zero(t, train.X[2*r+1])
	}
	require.InDelta(t, 0, mean/80, 1e-6)
	require.InDelta(t, 1, sq/80, 1e-5)
	_, _, err = tab.Split(1, 1)
	require.Error(t, err)
	other := &data.Table{Features: []string{"q"}}
	require.Error(t, st.Apply(other))
}

// TestReadCSVRegression: float targets from one or several columns, by
// Targets, Task Regression, or AutoTask finding a value that is not a
// class; an all-integer column under AutoTask stays a classification.
func TestReadCSVRegression(t *testing.T) {
	body := "a,y,b,z\n1,0.5,2,-1\n3,-0.69918,4,2e3\n5,7,6,0\n"
	tab, err := data.ParseCSV(strings.NewReader(body), "r.csv", data.CSVConfig{Targets: []string{"z", "y"}})
	require.NoError(t, err)
	require.Equal(t, data.Regression, tab.Task())
	require.Equal(t, []string{"a", "b"}, tab.Features)
	require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, tab.X)
	require.Equal(t, []float32{-1, 0.5, 2000, -0.69918, 0, 7}, tab.T)
	require.Nil(t, tab.Y)
	require.Zero(t, tab.Classes)
	f := tab.Fields()
	require.Equal(t, data.Field{Name: "target", DType: f[1].DType, Shape: []int{2}}, f[1])
	ds, err := data.NewLoader(tab, data.Config{BatchSize: 2})
	require.NoError(t, err)
	b, err := ds.Next()
	require.NoError(t, err)
	require.Equal(t, []float32{-1, 0.5, 2000, -0.69918}, b.Float32("target"))
	for _, task := range []data.Task{data.Regression, data.AutoTask} {
		tab, err = data.ParseCSV(strings.NewReader(body), "r.csv", data.CSVConfig{Label: "y", Task: task})
		require.NoError(t, err)
		require.Equal(t, []float32{0.5, -0.69918, 7}, tab.T, task.String())
		require.Equal(t, []string{"a", "b", "z"}, tab.Features)
		train, test, err := tab.Split(0.34, 1)
		require.NoError(t, err)
		require.Equal(t, 2, train.Len())
		require.Len(t, train.T, 2)
		require.Len(t, test.T, 1)
		require.Equal(t, []string{"y"}, test.Targets)
	}
	tab, err = data.ParseCSV(strings.NewReader("a,y\n1,2\n3,0\n"), "c.csv", data.CSVConfig{Label: "y", Task: data.AutoTask})
	require.NoError(t, err)
	require.Equal(t, data.Classification, tab.Task())
	require.Equal(t, []int32{2, 0}, tab.Y)
	require.Equal(t, 3, tab.Classes)
	// A negative integer is no class: a regression.
	tab, err = data.ParseCSV(strings.NewReader("a,y\n1,2\n3,-1\n"), "c.csv", data.CSVConfig{Label: "y", Task: data.AutoTask})
	require.NoError(t, err)
	require.Equal(t, data.Regression, tab.Task())
	for _, name := range []string{"classification", "Regression", " auto "} {
		_, err := data.ParseTask(name)
		require.NoError(t, err)
	}
	_, err = data.ParseTask("cluster")
	require.ErrorContains(t, err, `task "cluster"`)
}

// TestStandardizerOfAnyDataset: FitStandardizer over a dataset's field
// equals a table's, ApplyRow and Invert undo each other, and a wrapped
// dataset standardises its field as it is filled.
func TestStandardizerOfAnyDataset(t *testing.T) {
	x := []float32{1, 10, 2, 20, 3, 30, 4, 40, 5, 50}
	y := []float32{0.5, 1.5, 2.5, 3.5, 4.5}
	ds, err := data.NewTensors(data.Float32Column("x", x, 2), data.Float32Column("y", y))
	require.NoError(t, err)
	s, err := data.FitStandardizer(ds, "x")
	require.NoError(t, err)
	require.Equal(t, []float32{3, 30}, s.Mean)
	require.InDelta(t, 1.4142135, s.Std[0], 1e-6)
	tab := &data.Table{X: append([]float32(nil), x...), Features: []string{"p", "q"}, Y: make([]int32, 5)}
	ts := tab.FitStandardizer()
	require.Equal(t, s.Mean, ts.Mean)
	require.Equal(t, s.Std, ts.Std)
	row := []float32{4, 40}
	require.NoError(t, s.ApplyRow(row))
	require.InDelta(t, 0.70710678, row[0], 1e-6)
	require.NoError(t, s.Invert(row))
	require.InDelta(t, 4, row[0], 1e-6)
	require.InDelta(t, 40, row[1], 1e-5)
	require.ErrorContains(t, s.ApplyRow([]float32{1}), "2 values a row, given 1")
	ys, err := data.FitStandardizer(ds, "y")
	require.NoError(t, err)
	wrapped, err := ys.Dataset(ds)
	require.NoError(t, err)
	l, err := data.NewLoader(wrapped, data.Config{BatchSize: 5})
	require.NoError(t, err)
	b, err := l.Next()
	require.NoError(t, err)
	require.InDelta(t, -1.4142135, b.Float32("y")[0], 1e-6)
	require.Equal(t, float32(1), b.Float32("x")[0], "other fields untouched")
	require.Equal(t, float32(0.5), y[0], "the source untouched")
	_, err = data.FitStandardizer(ds, "label")
	require.ErrorContains(t, err, `no float32 field "label"`)
	_, err = s.Dataset(ds)
	require.NoError(t, err)
	bad := s
	bad.Field = "y"
	_, err = bad.Dataset(ds)
	require.ErrorContains(t, err, `2 values for field "y"`)
}

func itoa(i int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+i/10%10)) + string(rune('0'+i%10)))
}

// FuzzReadCSV: any input is read or refused with an *Error, never a
// panic; what is read is consistent.
func FuzzReadCSV(f *testing.F) {
	for _, s := range []string{"a,y\n1,0\n", "a,b,y\n1,2,0\n3,4,1\n", "y\n0\n", "\"a\",y\n\"1\",0\n", "a,y\nnan,0\n1e40,1\n", ""} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, drop bool) {
		tab, err := data.ParseCSV(strings.NewReader(body), "f.csv", data.CSVConfig{Label: "y", DropNonFinite: drop})
		if err != nil {
			var de *data.Error
			if !errors.As(err, &de) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if len(tab.X) != len(tab.Y)*len(tab.Features) || tab.Len() == 0 {
			t.Fatalf("%d values for %d rows of %d features", len(tab.X), len(tab.Y), len(tab.Features))
		}
		for _, y := range tab.Y {
			if y < 0 || int(y) >= tab.Classes {
				t.Fatalf("label %d of %d classes", y, tab.Classes)
			}
		}
	})
}
