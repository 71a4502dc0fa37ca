// Package atomicfile writes files so that a reader never sees a partial
// one: through a temporary file in the same directory, synced, then
// renamed over the target (and the directory synced, so the rename
// survives a crash). A failure leaves the old file, if any, and no
// temporary file.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write creates or replaces path with what write writes.
func Write(path string, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}
