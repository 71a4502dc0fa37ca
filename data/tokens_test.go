package data_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/stretchr/testify/require"
)

func tokenFile(magic, version, count int32, tokens []uint16) []byte {
	b := make([]byte, 1024+2*len(tokens))
	binary.LittleEndian.PutUint32(b[0:], uint32(magic))
	binary.LittleEndian.PutUint32(b[4:], uint32(version))
	binary.LittleEndian.PutUint32(b[8:], uint32(count))
	for i, t := range tokens {
		binary.LittleEndian.PutUint16(b[1024+2*i:], t)
	}
	return b
}

func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.bin")
	toks := []uint16{5, 0, 65535, 7, 7}
	require.NoError(t, data.WriteTokenFile(p, toks))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, tokenFile(20240520, 1, 5, toks), b, "llm.c's layout")
	got, err := data.ReadTokenFile(p)
	require.NoError(t, err)
	require.Equal(t, toks, got)

	raw := filepath.Join(dir, "raw.bin")
	require.NoError(t, os.WriteFile(raw, []byte{1, 0, 2, 1}, 0o644))
	got, err = data.ReadRawTokens(raw)
	require.NoError(t, err)
	require.Equal(t, []uint16{1, 258}, got)

	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"bad magic", tokenFile(20240521, 1, 1, []uint16{1}), "magic 20240521"},
		{"bad version", tokenFile(20240520, 2, 1, []uint16{1}), "version 2"},
		{"short", tokenFile(20240520, 1, 3, []uint16{1, 2}), "truncated: the header says 3 tokens, the file holds 2"},
		{"long", tokenFile(20240520, 1, 1, []uint16{1, 2}), "2 bytes after the 1 tokens"},
		{"no tokens", tokenFile(20240520, 1, 0, nil), "says 0 tokens"},
		{"no header", []byte{1, 2, 3}, "shorter than the 1024-byte header"},
	} {
		bad := filepath.Join(dir, "bad.bin")
		require.NoError(t, os.WriteFile(bad, c.body, 0o644))
		_, err := data.ReadTokenFile(bad)
		var de *data.Error
		require.True(t, errors.As(err, &de), c.name)
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, bad, c.name)
	}
	odd := filepath.Join(dir, "odd.bin")
	require.NoError(t, os.WriteFile(odd, []byte{1, 2, 3}, 0o644))
	_, err = data.ReadRawTokens(odd)
	require.ErrorContains(t, err, "not a whole number")
	require.NoError(t, os.WriteFile(odd, nil, 0o644))
	_, err = data.ReadRawTokens(odd)
	require.ErrorContains(t, err, "empty")
}

func TestWindows(t *testing.T) {
	toks := []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	w, err := data.NewWindows(toks, 3, 0, 10)
	require.NoError(t, err)
	require.Equal(t, 3, w.Len()) // [0..3], [3..6], [6..9]
	l, err := data.NewLoader(w, data.Config{BatchSize: 2})
	require.NoError(t, err)
	b, err := l.Next()
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2, 3, 4, 5}, b.Int32("x"))
	require.Equal(t, []int32{1, 2, 3, 4, 5, 6}, b.Int32("y"))
	b, err = l.Next()
	require.NoError(t, err)
	require.Equal(t, 1, b.Rows)
	require.Equal(t, []int32{6, 7, 8, 0, 0, 0}, b.Int32("x"))
	require.Equal(t, []int32{7, 8, 9, data.IgnoreLabel, data.IgnoreLabel, data.IgnoreLabel}, b.Int32("y"))
	w2, err := data.NewWindows([]int32{0, 1, 2, 3, 4}, 2, 1, 0)
	require.NoError(t, err)
	require.Equal(t, 3, w2.Len())
	_, err = data.NewWindows(toks, 3, 0, 9)
	require.ErrorContains(t, err, "token 9 at position 9 is outside the vocabulary [0, 9)")
	_, err = data.NewWindows(toks[:3], 3, 0, 0)
	require.ErrorContains(t, err, "too few")
	_, err = data.NewWindows([]int32{-1, 0, 0}, 1, 0, 0)
	require.ErrorContains(t, err, "token -1")
}
