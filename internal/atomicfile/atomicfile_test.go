package atomicfile_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
