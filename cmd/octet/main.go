// Command octet is Octet's command-line tool.
//
//	octet tokenize [-encoding r50k_base] IN.txt OUT.bin
//
// tokenize turns a UTF-8 text file into BPE tokens (r50k_base, GPT-2's
// encoding, or cl100k_base; the vocabularies are built in) and writes
// them as an llm.c token file: a header of 256 int32 (magic 20240520,
// version 1, the token count) and the tokens as uint16, which
// data.ReadTokenFile and the examples' -data flag read. cl100k_base ids
// above 65,535 do not fit the format and are refused, naming the first.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/octetml/octet/data"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "octet:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command line that cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: octet <command> [flags] [arguments]

commands:
  tokenize [-encoding r50k_base|cl100k_base] IN.txt OUT.bin
      write IN.txt's BPE tokens as an llm.c token file
`

// run runs one command line (without the program name).
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "tokenize":
		return tokenize(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func tokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("octet tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	enc := fs.String("encoding", "r50k_base", "BPE encoding: "+strings.Join(data.BPEEncodings(), " or "))
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("tokenize wants IN.txt OUT.bin, got %d argument(s)", fs.NArg())}
	}
	in, out := fs.Arg(0), fs.Arg(1)
	bpe, err := data.NewBPE(*enc)
	if err != nil {
		return usageError{"-encoding: " + err.Error()}
	}
	text, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if len(text) == 0 {
		return fmt.Errorf("%s: empty file: no tokens to write", in)
	}
	ids, err := bpe.Encode(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	toks, err := data.Uint16(ids)
	if err != nil {
		return fmt.Errorf("%s with %s: %w", in, bpe.Name(), err)
	}
	if err := data.WriteTokenFile(out, toks); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d bytes → %d %s tokens → %s\n", in, len(text), len(toks), bpe.Name(), out)
	return nil
}
