// Package output shapes the example programs' -json output.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/octetml/octet/train"
)

// Summary is the object -json prints for the fields of each run, in
// order: the last run's fields at the top level, and, when there was
// more than one run, every run under "runs".
func Summary(runs []map[string]any) map[string]any {
	if len(runs) == 0 {
		return map[string]any{}
	}
	out := make(map[string]any, len(runs[len(runs)-1])+1)
	for k, v := range runs[len(runs)-1] {
		out[k] = v
	}
	if len(runs) > 1 {
		out["runs"] = runs
	}
	return out
}

// DecodeLast decodes the last non-empty line of a program's output (the
// object -json prints) into v.
func DecodeLast(out string, v any) error {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), v); err != nil {
		return fmt.Errorf("report: last output line %q: %w", last, err)
	}
	return nil
}

// Fatal prints err on stderr after the program's name, once (an error
// that already starts with it, such as one from package data/mnist, is
// not prefixed again), and exits with status 1.
func Fatal(program string, err error) {
	fmt.Fprintln(os.Stderr, Message(program, err))
	os.Exit(1)
}

// Message is the line Fatal prints.
func Message(program string, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, program+": ") {
		return msg
	}
	return program + ": " + msg
}

// Finish ends a program's output: with a plot path, it writes the plot
// (plot) and, unless jsonOut, says where; with jsonOut it prints the
// Summary of the runs' fields as the last line, otherwise the kernels
// that ran (train.Kernels).
func Finish(w io.Writer, jsonOut bool, plotPath string, plot func(path string) error, runs []map[string]any) error {
	if plotPath != "" {
		if err := plot(plotPath); err != nil {
			return err
		}
		if !jsonOut {
			fmt.Fprintf(w, "loss curves written to %s\n", plotPath)
		}
	}
	if jsonOut {
		return json.NewEncoder(w).Encode(Summary(runs))
	}
	_, err := fmt.Fprintln(w, train.Kernels())
	return err
}
