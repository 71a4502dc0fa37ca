package atomicfile_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/internal/atomicfile"
)

func TestWriteKeepsOldFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := atomicfile.Write(path, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	b, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(dir)
	if string(b) != "old" || len(entries) != 1 {
		t.Fatalf("after a failed write: %q, %d entries", b, len(entries))
	}
	if err := atomicfile.Write(filepath.Join(dir, "missing", "f"), func(io.Writer) error { return nil }); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "atomic")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "report.txt")
	err := atomicfile.Write(path, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, "loss 0.42")
		return err
	})
	b, _ := os.ReadFile(path)
	fmt.Print(string(b), err)
	// Output:
	// loss 0.42
	// <nil>
}

// TestWriteNamesThePathAndSweepsStaleTemporaries: errors name the
// target, never the temporary; a directory target is refused with no
// file left behind; temporaries of a killed earlier write are removed.
func TestWriteNamesThePathAndSweepsStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "out")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	err := atomicfile.Write(sub, func(io.Writer) error { return nil })
	if err == nil || !strings.Contains(err.Error(), sub) || strings.Contains(err.Error(), ".tmp-") {
		t.Fatalf("writing over a directory: %v", err)
	}
	err = atomicfile.Write(filepath.Join(dir, "missing", "f.png"), func(io.Writer) error { return nil })
	if err == nil || strings.Contains(err.Error(), ".tmp-") || !strings.Contains(err.Error(), "f.png") {
		t.Fatalf("writing into a missing directory: %v", err)
	}
	path := filepath.Join(dir, "ckpt")
	stale := filepath.Join(dir, ".ckpt.tmp-123")
	if err := os.WriteFile(stale, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "ckpt" || names[1] != "out" {
		t.Fatalf("directory holds %v, want [ckpt out]", names)
	}
}
