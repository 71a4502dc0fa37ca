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
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Mode is the permission a written file gets, less the process's umask
// (as os.Create gives): readable by all, writable by its owner.
const Mode = 0o644

// createTemp creates a new file dir/pattern<random> with Mode (os.CreateTemp
// would give 0600, and a checkpoint or report is meant to be shared).
func createTemp(dir, pattern string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, pattern+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, Mode)
		if os.IsExist(err) {
			continue
		}
		return f, err
	}
	return nil, &os.PathError{Op: "createtemp", Path: filepath.Join(dir, pattern+"*"), Err: os.ErrExist}
}

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
	f, err := createTemp(dir, pattern)
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
