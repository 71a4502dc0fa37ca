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
