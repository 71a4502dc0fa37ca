package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/data"
)

// TestTokenize: the tokens written are the encoding's, in a file the
// data loader reads back; bad command lines and inputs are refused
// naming what is wrong.
func TestTokenize(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.bin")
	require.NoError(t, os.WriteFile(in, []byte("hello world"), 0o644))
	var so, se bytes.Buffer
	require.NoError(t, run([]string{"tokenize", "-encoding", "r50k_base", in, out}, &so, &se))
	require.Contains(t, so.String(), "2 r50k_base tokens")
	toks, err := data.ReadTokenFile(out)
	require.NoError(t, err)
	require.Equal(t, []uint16{31373, 995}, toks)

	// Default encoding, and cl100k_base when the ids fit.
	require.NoError(t, run([]string{"tokenize", in, out}, &so, &se))
	require.NoError(t, run([]string{"tokenize", "-encoding", "cl100k_base", in, out}, &so, &se))
	toks, err = data.ReadTokenFile(out)
	require.NoError(t, err)
	require.Equal(t, []uint16{15339, 1917}, toks)

	big := filepath.Join(dir, "big.txt")
	require.NoError(t, os.WriteFile(big, []byte("Thunderstruck counterintuitively"), 0o644))
	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, c := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{nil, "no command", true},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, true},
		{[]string{"tokenize", in}, "got 1 argument", true},
		{[]string{"tokenize", "-encoding", "o300k", in, out}, "-encoding", true},
		{[]string{"tokenize", "-bogus", in, out}, "bogus", true},
		{[]string{"tokenize", filepath.Join(dir, "missing.txt"), out}, "missing.txt", false},
		{[]string{"tokenize", empty, out}, "empty file", false},
		{[]string{"tokenize", "-encoding", "cl100k_base", big, out}, "does not fit", false},
		{[]string{"tokenize", in, filepath.Join(dir, "no", "such", "dir", "out.bin")}, "out.bin", false},
	} {
		err := run(c.args, &so, &se)
		require.Error(t, err, "%v", c.args)
		require.Contains(t, err.Error(), c.want)
		_, isUsage := err.(usageError)
		require.Equal(t, c.usage, isUsage, "%v: %v", c.args, err)
	}
}

func TestKernelsCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run([]string{"kernels"}, &out, &errOut))
	require.Contains(t, out.String(), " kernels (GEMM ")
	require.Contains(t, out.String(), "OCTET_GEMM_KERNEL accepts: ")
	require.Contains(t, out.String(), "fp32\n")
	require.Error(t, run([]string{"kernels", "extra"}, &out, &errOut))
}
