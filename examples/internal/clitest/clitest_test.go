package clitest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/octetml/octet/examples/internal/clitest"
	"github.com/stretchr/testify/require"
)

// fakeMain stands for a program's main: it prints its arguments and an
// environment variable, and exits with status 3 when asked to fail.
func fakeMain() {
	fmt.Println(strings.Join(os.Args[1:], "|"), os.Getenv("DEMO"), os.Getenv("OCTET_LEAK"))
	if len(os.Args) > 1 && os.Args[1] == "fail" {
		fmt.Fprintln(os.Stderr, "demo: failed")
		os.Exit(3)
	}
	if len(os.Args) > 1 && os.Args[1] == "panic" {
		panic("boom")
	}
	if len(os.Args) > 1 && os.Args[1] == "write" {
		_ = os.WriteFile("left.txt", nil, 0o644)
	}
}

func TestMain(m *testing.M) { clitest.Main(m, fakeMain) }

func TestRun(t *testing.T) {
	t.Setenv("OCTET_LEAK", "parent")
	r := clitest.Run(t, []string{"DEMO=1"}, "a b", "", "c")
	require.Equal(t, 0, r.Code)
	require.Equal(t, "a b||c 1 \n", r.Stdout, "arguments kept whole, OCTET_* of the parent dropped")
	require.Empty(t, r.Left(t))

	r = clitest.Run(t, nil, "fail")
	require.Equal(t, 3, r.Code)
	require.Equal(t, "demo: failed\n", r.Stderr)
	require.False(t, r.Panicked())

	r = clitest.Run(t, nil, "panic")
	require.Equal(t, 2, r.Code)
	require.True(t, r.Panicked())

	r = clitest.Run(t, nil, "write")
	require.Equal(t, []string{"left.txt"}, r.Left(t))

	r = clitest.Run(t, nil)
	require.Equal(t, "  \n", r.Stdout, "no arguments")
}
