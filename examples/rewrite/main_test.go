package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRewriteRecipes(t *testing.T) {
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	stdout := os.Stdout
	os.Stdout, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	defer func() { os.Stdout = stdout }()
	for _, c := range []struct {
		recipe, ao, format string
		mx                 bool
	}{
		{"te", "", "HYBRID", false}, {"te", "", "E4M3", true}, {"ao", "rowwise", "", false}, {"msamp", "", "", false},
	} {
		r, err := makeRecipe(c.recipe, c.ao, c.format, c.mx)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := run(r, dir, true); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.dot"))
		if len(files) != 5 { // input and after ConvertLinear, ConvertLN, Autowrap, Fuse
			t.Fatalf("%+v: %d DOT files", c, len(files))
		}
	}
	if _, err := makeRecipe("bf16", "", "", false); err == nil {
		t.Fatal("unknown recipe accepted")
	}
}
