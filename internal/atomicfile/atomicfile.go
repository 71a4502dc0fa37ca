// Package atomicfile writes files so that a reader never sees a partial
// one: through a temporary file in the same directory, synced, then
// renamed over the target (and the directory synced, so the rename
// survives a crash). A failure leaves the old file, if any, and no
// temporary file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates or replaces path with what write writes. Errors name
// path (not the temporary file); temporaries left for path by an earlier
// write that was killed are removed first.
func Write(path string, write func(io.Writer) error) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("it is a directory")
	}
	dir, pattern := filepath.Dir(path), "."+filepath.Base(path)+".tmp-"
	if stale, _ := filepath.Glob(filepath.Join(dir, pattern+"*")); len(stale) > 0 {
		for _, s := range stale {
			os.Remove(s)
		}
	}
	f, err := os.CreateTemp(dir, pattern+"*")
	if err != nil {
		return errors.Unwrap(err) // the cause, without the temporary's name
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
