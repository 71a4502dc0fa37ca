package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuickstartLearns(t *testing.T) {
	dot := filepath.Join(t.TempDir(), "g.dot")
	acc, err := run(1500, 128, 64, 0.05, 1, false, dot)
	if err != nil {
		t.Fatal(err)
	}
	if acc < 0.9 {
		t.Fatalf("held-out accuracy %.3f, want ≥ 0.9", acc)
	}
	b, err := os.ReadFile(dot)
	if err != nil || !strings.HasPrefix(string(b), "digraph") {
		t.Fatalf("DOT file not written: %v", err)
	}
}
