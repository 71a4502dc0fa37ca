package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/precision"
	"github.com/octetml/octet/train"
)

// Finish writes a started report: it reads each run's statistics back,
// writes the page to its path, says so on w unless quiet, and removes the
// statistics it logged itself.
type Finish func(w io.Writer, quiet bool, title string, runs []Run) error

// Start prepares a report to path for runs that log FP8 debug statistics
// under *logDir/<precision> (train.Config.Debug and DebugLogDir): without
// a debug config of the run's own (*debug nil) it sets one that logs what
// the report shows (DebugConfig, every 10 steps) into a temporary
// directory. With path "" it does nothing and its Finish neither.
func Start(debug **inspect.Config, logDir *string, path string) (Finish, error) {
	if path == "" {
		return func(io.Writer, bool, string, []Run) error { return nil }, nil
	}
	tmp := ""
	if *debug == nil {
		cfg, err := DebugConfig(10)
		if err != nil {
			return nil, err
		}
		if tmp, err = os.MkdirTemp("", "octet-report-*"); err != nil {
			return nil, fmt.Errorf("-report: %w", err)
		}
		*debug, *logDir = cfg, tmp
	}
	dir := *logDir
	return func(w io.Writer, quiet bool, title string, runs []Run) error {
		if tmp != "" {
			defer os.RemoveAll(tmp)
		}
		for i := range runs {
			if st, err := inspect.ReadStats(filepath.Join(dir, runs[i].Precision)); err == nil {
				runs[i].Stats = st
			}
		}
		if err := Write(path, title, runs); err != nil {
			return fmt.Errorf("-report: %w", err)
		}
		if !quiet {
			fmt.Fprintf(w, "run report written to %s\n", path)
		}
		return nil
	}, nil
}

// RunOf is the report's entry for a training result, with summary lines
// (final loss, accuracy).
func RunOf(res *train.Result, summary ...string) Run {
	return Run{Precision: res.Precision, Name: precision.DisplayName(res.Precision), Recipe: res.Recipe, Settings: res.Settings,
		Losses: res.Losses, FirstStep: res.First, MsPerStep: res.MsPerStep(), Conversion: res.Report.String(), Profile: res.Profile, Summary: summary}
}
