package train

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/errkind"
	"github.com/octetml/octet/internal/kernels"
)

// Checks collects a command's flag problems, so that a training program
// can refuse bad values before any work, naming each flag. The zero value
// is ready to use.
type Checks struct{ errs []string }

// AtLeast requires flag's value to be at least lo.
func (c *Checks) AtLeast(flag string, v, lo int) {
	if v < lo {
		c.errs = append(c.errs, fmt.Sprintf("-%s %d: want at least %d", flag, v, lo))
	}
}

// Positive requires a finite value above zero.
func (c *Checks) Positive(flag string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		c.errs = append(c.errs, fmt.Sprintf("-%s %v: want a finite value above 0", flag, v))
	}
}

// NonNegative requires a finite value of at least zero.
func (c *Checks) NonNegative(flag string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		c.errs = append(c.errs, fmt.Sprintf("-%s %v: want a finite value of at least 0", flag, v))
	}
}

// Fraction requires a value in [0, 1).
func (c *Checks) Fraction(flag string, v float64) {
	if math.IsNaN(v) || v < 0 || v >= 1 {
		c.errs = append(c.errs, fmt.Sprintf("-%s %v: want a probability in [0, 1)", flag, v))
	}
}

// Environment checks the environment variables the kernels read
// (OCTET_GEMM_KERNEL), which would otherwise fail only when the first
// program is compiled.
func (c *Checks) Environment() {
	if err := kernels.CheckEnv(); err != nil {
		c.errs = append(c.errs, err.Error())
	}
}

// Fail records a problem of its own.
func (c *Checks) Fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// Err returns every problem found (an error wrapping ErrConfig), or nil.
func (c *Checks) Err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return errkind.With(errors.New(strings.Join(c.errs, "; ")), ErrConfig)
}

// MemoryAvailable returns the memory the system reports available
// (MemAvailable in /proc/meminfo), or 0 when it cannot tell.
func MemoryAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// CheckMemory refuses a run whose estimated need exceeds the memory
// available, with both figures.
func (c *Checks) CheckMemory(what string, need float64) {
	if avail := MemoryAvailable(); avail > 0 && need > float64(avail) {
		c.errs = append(c.errs, fmt.Sprintf("%s needs about %.1f GiB, and %.1f GiB are available", what, need/(1<<30), float64(avail)/(1<<30)))
	}
}

// OutputFile checks, before any work, that path can be written: its
// directory exists and path is not a directory.
func (c *Checks) OutputFile(flag, path string) {
	if path == "" {
		return
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		c.Fail("-%s %s: is a directory; give a file name", flag, path)
		return
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		c.Fail("-%s %s: directory %s does not exist", flag, path, filepath.Dir(path))
	}
}

// OutputDir checks, before any work, that dir is (or can be made) a
// directory this process can write into.
func (c *Checks) OutputDir(flag, dir string) {
	if dir == "" {
		return
	}
	if err := writableDir(dir); err != nil {
		c.Fail("-%s %s: %v", flag, dir, err)
	}
}

// InputFiles checks, before any work, that each of paths exists.
func (c *Checks) InputFiles(flag string, paths ...string) {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			c.Fail("-%s: %s: %v", flag, p, errors.Unwrap(err))
		}
	}
}

// InputCheckpoint checks, before any work, that dir holds a whole
// checkpoint whose files are called name (Config.Name): name.safetensors,
// or one file per rank of a parallel run, any number of ranks (a resume
// re-cuts them for its own).
func (c *Checks) InputCheckpoint(flag, dir, name string) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		c.Fail("-%s %s: not a directory (want one holding %s.safetensors, or the files of a parallel run, %s-rank0-of-N.safetensors …)", flag, dir, name, name)
		return
	}
	if _, _, err := savedFiles(dir, name, 1); err != nil {
		c.Fail("-%s: %s", flag, strings.TrimPrefix(err.Error(), "train: resume "))
	}
}

// DebugConfig reads the -fp8-debug file (a debug config in Transformer
// Engine's YAML schema, see package inspect), or returns nil for no path.
// logDir is -fp8-log, which a config needs.
func (c *Checks) DebugConfig(path, logDir string) *inspect.Config {
	if path == "" {
		if logDir != "" {
			c.Fail("-fp8-log %s: it needs -fp8-debug CONFIG.yaml (which statistics to write)", logDir)
		}
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		c.Fail("-fp8-debug: %v", err)
		return nil
	}
	defer f.Close()
	cfg, err := inspect.ParseConfig(f, path)
	if err != nil {
		c.Fail("-fp8-debug: %v", err)
		return nil
	}
	if logDir == "" {
		c.Fail("-fp8-debug %s: give -fp8-log DIR for the statistics", path)
	}
	c.OutputDir("fp8-log", logDir)
	return cfg
}
