package recipes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/train/report"
)

// Checks collects flag problems, so an example can refuse bad values
// before any work, naming each flag.
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

// Err returns every problem found, or nil.
func (c *Checks) Err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(c.errs, "; "))
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.Fail("-%s %s: %v", flag, dir, err)
		return
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		c.Fail("-%s %s: cannot write there: %v", flag, dir, errors.Unwrap(err))
		return
	}
	f.Close()
	os.Remove(f.Name())
}

// InputFiles checks, before any work, that each of paths exists.
func (c *Checks) InputFiles(flag string, paths ...string) {
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			c.Fail("-%s: %s: %v", flag, p, errors.Unwrap(err))
		}
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

// DebugLog opens the statistics log of one run (a precision; rank 0
// writes for all ranks, whose statistics are merged) in a subdirectory
// of dir named after the precision.
func DebugLog(dir, precision string, rank int) (*inspect.Log, error) {
	l, err := inspect.OpenLog(filepath.Join(dir, precision), rank)
	if err != nil {
		return nil, fmt.Errorf("-fp8-log: %w", err)
	}
	return l, nil
}

// StartReport prepares a -report run: without a debug config of its own
// the run logs the report's statistics (report.Config, every 10 steps)
// to a temporary directory. The function it returns reads each run's
// statistics back, writes the report to path, says so on w unless quiet,
// and removes the temporary directory; it does nothing when path is "".
func StartReport(debug **inspect.Config, logDir *string, path string) (func(w io.Writer, quiet bool, title string, runs []report.Run) error, error) {
	if path == "" {
		return func(io.Writer, bool, string, []report.Run) error { return nil }, nil
	}
	tmp := ""
	if *debug == nil {
		cfg, err := report.DebugConfig(10)
		if err != nil {
			return nil, err
		}
		if tmp, err = os.MkdirTemp("", "octet-report-*"); err != nil {
			return nil, fmt.Errorf("-report: %w", err)
		}
		*debug, *logDir = cfg, tmp
	}
	dir := *logDir
	return func(w io.Writer, quiet bool, title string, runs []report.Run) error {
		if tmp != "" {
			defer os.RemoveAll(tmp)
		}
		for i := range runs {
			if st, err := inspect.ReadStats(filepath.Join(dir, runs[i].Precision)); err == nil {
				runs[i].Stats = st
			}
		}
		if err := report.Write(path, title, runs); err != nil {
			return fmt.Errorf("-report: %w", err)
		}
		if !quiet {
			fmt.Fprintf(w, "run report written to %s\n", path)
		}
		return nil
	}, nil
}
