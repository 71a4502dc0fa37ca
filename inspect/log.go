package inspect

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// LogFile is the name of the statistics file in a log directory; a run
// of several ranks writes one per rank (LogFile with ".rankN" before the
// extension for ranks above 0).
const LogFile = "octet_fp8_stats.jsonl"

// Stat is one logged value: one statistic of one tensor of one layer at
// one step.
type Stat struct {
	Step   int64   `json:"step"`
	Layer  string  `json:"layer"`
	Tensor Tensor  `json:"tensor"`
	Stat   string  `json:"stat"`
	Value  float64 `json:"-"`
}

// Log writes statistics as JSON lines, without allocating per line. It
// is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	buf  []byte
	path string
	err  error
}

// OpenLog creates (or truncates) the statistics file of a rank in dir,
// making dir if needed.
func OpenLog(dir string, rank int) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("inspect: log directory: %w", err)
	}
	name := LogFile
	if rank > 0 {
		name = strings.TrimSuffix(LogFile, ".jsonl") + ".rank" + strconv.Itoa(rank) + ".jsonl"
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return &Log{f: f, w: bufio.NewWriterSize(f, 1<<16), buf: make([]byte, 0, 256), path: path}, nil
}

// Path returns the file the log writes.
func (l *Log) Path() string { return l.path }

// Write logs one value. A non-finite value is written as the string
// "NaN", "+Inf" or "-Inf" (JSON has no such numbers).
func (l *Log) Write(step int64, layer string, tensor Tensor, stat string, v float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[:0]
	b = append(b, `{"step":`...)
	b = strconv.AppendInt(b, step, 10)
	b = append(b, `,"layer":`...)
	b = strconv.AppendQuote(b, layer)
	b = append(b, `,"tensor":`...)
	b = strconv.AppendQuote(b, string(tensor))
	b = append(b, `,"stat":`...)
	b = strconv.AppendQuote(b, stat)
	b = append(b, `,"value":`...)
	switch {
	case math.IsNaN(v):
		b = append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		b = append(b, `"+Inf"`...)
	case math.IsInf(v, -1):
		b = append(b, `"-Inf"`...)
	default:
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	b = append(b, "}\n"...)
	l.buf = b
	if _, err := l.w.Write(b); err != nil && l.err == nil {
		l.err = err
	}
}

// Flush writes buffered lines to the file.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}

// Close flushes and closes the file, returning the first write error.
func (l *Log) Close() error {
	err := l.Flush()
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// ReadStats reads every statistics file in dir (all ranks), in file
// order within each file, ranks in order.
func ReadStats(dir string) ([]Stat, error) {
	files, err := filepath.Glob(filepath.Join(dir, strings.TrimSuffix(LogFile, ".jsonl")+"*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("inspect: no %s in %s", LogFile, dir)
	}
	sort.Strings(files)
	var out []Stat
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		sc := bufio.NewScanner(f)
		line := 0
		for sc.Scan() {
			line++
			var raw struct {
				Stat
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
				f.Close()
				return nil, fmt.Errorf("inspect: %s:%d: %w", path, line, err)
			}
			s := raw.Stat
			if s.Value, err = parseValue(raw.Value); err != nil {
				f.Close()
				return nil, fmt.Errorf("inspect: %s:%d: %w", path, line, err)
			}
			out = append(out, s)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("inspect: %s: %w", path, err)
		}
	}
	return out, nil
}

func parseValue(raw json.RawMessage) (float64, error) {
	var v float64
	if err := json.Unmarshal(raw, &v); err == nil {
		return v, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, errors.New("value is neither a number nor NaN/±Inf")
	}
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	return 0, fmt.Errorf("value %q is not a number", s)
}
