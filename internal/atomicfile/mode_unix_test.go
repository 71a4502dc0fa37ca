//go:build unix

package atomicfile_test

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/octetml/octet/internal/atomicfile"
)

func TestWriteGivesReadableMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
	syscall.Umask(0o077)
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "y"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("with umask 077: mode %v, want 0600", fi.Mode().Perm())
	}
}
