// Package clitest runs an example program as a user does — arguments,
// environment, exit status, output — by starting the package's own test
// binary as the program, so that tables of command lines can be tested
// without building anything.
package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// envMain carries the arguments to the child process, separated by
// argSep.
const (
	envMain = "OCTET_CLITEST_ARGS"
	argSep  = "\x1f"
)

// Main is the body of a TestMain: in a child started by Run it runs the
// program's main with Run's arguments (and exits 0 if main returns);
// otherwise it runs the tests.
func Main(m *testing.M, main func()) {
	if args, ok := os.LookupEnv(envMain); ok {
		os.Args = []string{os.Args[0]}
		if args != "" {
			os.Args = append(os.Args, strings.Split(args, argSep)...)
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Result is what one run of the program did.
type Result struct {
	Code           int // exit status
	Stdout, Stderr string
	// Dir is the working directory the program ran in (empty at the
	// start).
	Dir string
}

// ExecWrapperEnv names a variable holding a command (with its
// arguments, space-separated) that runs the program instead of the
// system: "qemu-aarch64-static -cpu max" when the test binary was built
// for another architecture and runs under qemu.
const ExecWrapperEnv = "OCTET_TEST_EXEC_WRAPPER"

// Run runs the program with args and the environment of the test minus
// every OCTET_* variable, plus env (KEY=VALUE), in a new empty working
// directory.
func Run(t *testing.T, env []string, args ...string) Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res := Result{Dir: t.TempDir()}
	cmd := exec.Command(exe)
	if w := strings.Fields(os.Getenv(ExecWrapperEnv)); len(w) > 0 {
		cmd = exec.Command(w[0], append(w[1:], exe)...)
	}
	cmd.Dir = res.Dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OCTET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envMain+"="+strings.Join(args, argSep))
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	return res
}

// Panicked reports whether the run died of a panic or a runtime error
// (Go prints a goroutine trace for both).
func (r Result) Panicked() bool {
	return strings.Contains(r.Stderr, "panic:") || strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "fatal error:")
}

// Left lists what the run left in its working directory.
func (r Result) Left(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// Case is one row of a command-line table: arguments and environment,
// the exit status, and what the program must say (on stderr for a
// refusal, on stdout for a run). Quick rows get the table's quick-run
// arguments first.
type Case struct {
	Name  string
	Env   []string
	Args  []string
	Code  int
	Says  string
	Quick bool
}

// Table runs every case as a subtest of t and requires of each: no panic,
// the exit status, the message, and nothing left in the working
// directory. A refusal must be one line prefixed with program's name once
// ("mnist: …", never "mnist: mnist: …"), and for a row without the
// quick-run arguments beforeWork checks it came before any work.
func Table(t *testing.T, program string, quick []string, cases []Case, beforeWork func(t *testing.T, r Result)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			args := c.Args
			if c.Quick {
				args = append(append([]string{}, quick...), args...)
			}
			r := Run(t, c.Env, args...)
			if r.Panicked() {
				t.Fatalf("panicked:\n%s", r.Stderr)
			}
			if r.Code != c.Code {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", r.Code, c.Code, r.Stderr)
			}
			out := r.Stdout + r.Stderr // a warning of a run that goes on
			if c.Code != 0 {
				out = r.Stderr
				if !strings.HasPrefix(r.Stderr, program+": ") || strings.Contains(r.Stderr, program+": "+program+":") {
					t.Fatalf("stderr does not start with %q once: %s", program+": ", r.Stderr)
				}
				if !c.Quick && beforeWork != nil {
					beforeWork(t, r)
				}
			}
			if !strings.Contains(out, c.Says) {
				t.Fatalf("output does not contain %q:\n%s", c.Says, out)
			}
			if left := r.Left(t); len(left) > 0 {
				t.Fatalf("files left behind: %v", left)
			}
		})
	}
}
