package data

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/atomicfile"
)

// The header of an llm.c token file: 256 little-endian int32, of which the
// first three are the magic, the version and the number of tokens.
const (
	TokenFileMagic   = 20240520
	TokenFileVersion = 1
	tokenHeaderInts  = 256
)

// ReadTokenFile reads an llm.c / nanoGPT-style token file as llm.c's
// dev/data scripts write it: a header of 256 int32 (magic 20240520,
// version 1, the token count) followed by that many uint16 tokens. A bad
// magic, another version, or a file with fewer (or more) tokens than its
// header says is an *Error naming the file.
func ReadTokenFile(path string) ([]uint16, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	fail := func(format string, args ...any) error {
		return &Error{File: path, Msg: fmt.Sprintf(format, args...)}
	}
	if len(b) < 4*tokenHeaderInts {
		return nil, fail("%d bytes, shorter than the %d-byte header of a token file", len(b), 4*tokenHeaderInts)
	}
	word := func(i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }
	if m := word(0); m != TokenFileMagic {
		return nil, fail("magic %d, want %d (not an llm.c token file; ReadRawTokens reads headerless uint16 files)", m, TokenFileMagic)
	}
	if v := word(1); v != TokenFileVersion {
		return nil, fail("version %d, want %d (uint16 tokens)", v, TokenFileVersion)
	}
	n := int64(word(2))
	body := int64(len(b) - 4*tokenHeaderInts)
	switch {
	case n < 1:
		return nil, fail("the header says %d tokens", n)
	case body < 2*n:
		return nil, fail("truncated: the header says %d tokens, the file holds %d", n, body/2)
	case body > 2*n:
		return nil, fail("%d bytes after the %d tokens its header says", body-2*n, n)
	}
	return decodeU16(b[4*tokenHeaderInts:]), nil
}

// ReadRawTokens reads a headerless file of little-endian uint16 tokens
// (nanoGPT's train.bin).
func ReadRawTokens(path string) ([]uint16, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	switch {
	case len(b) == 0:
		return nil, &Error{File: path, Msg: "the file is empty"}
	case len(b)%2 != 0:
		return nil, &Error{File: path, Msg: fmt.Sprintf("%d bytes is not a whole number of uint16 tokens", len(b))}
	}
	return decodeU16(b), nil
}

func decodeU16(b []byte) []uint16 {
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return out
}

// Token is a token id type Windows reads.
type Token interface{ ~uint16 | ~int32 }

// Windows is a Dataset of windows of a token stream for next-token
// prediction: example i is the Length+1 tokens from i·Stride, with the
// fields "x" (int32 [Length], the first Length tokens) and "y" (int32
// labels [Length], the last Length: each position's next token).
type Windows[T Token] struct {
	tokens         []T
	length, stride int
	vocab          int
	n              int
}

// NewWindows cuts tokens into windows of length+1 tokens every stride
// tokens (0: length, contiguous windows as llm.c's loader reads them).
// With vocab above 0 every token must lie in [0, vocab); the first that
// does not is an error naming its position.
func NewWindows[T Token](tokens []T, length, stride, vocab int) (*Windows[T], error) {
	if stride == 0 {
		stride = length
	}
	switch {
	case length < 1 || stride < 1:
		return nil, fmt.Errorf("data: windows of %d tokens every %d", length, stride)
	case len(tokens) < length+1:
		return nil, fmt.Errorf("data: %d tokens are too few for one window of %d and its next token", len(tokens), length)
	case vocab < 0:
		return nil, fmt.Errorf("data: vocabulary of %d", vocab)
	}
	for i, t := range tokens {
		if int64(t) < 0 || (vocab > 0 && int64(t) >= int64(vocab)) {
			return nil, fmt.Errorf("data: token %d at position %d is outside the vocabulary [0, %d)", t, i, vocab)
		}
	}
	return &Windows[T]{tokens: tokens, length: length, stride: stride, vocab: vocab, n: (len(tokens)-length-1)/stride + 1}, nil
}

// Len returns the number of windows.
func (w *Windows[T]) Len() int { return w.n }

// Fields returns "x" and "y".
func (w *Windows[T]) Fields() []Field {
	return []Field{
		{Name: "x", DType: graph.Int32, Shape: []int{w.length}},
		{Name: "y", DType: graph.Int32, Shape: []int{w.length}, Label: true, Classes: w.vocab},
	}
}

// Fill copies windows idx into b.
func (w *Windows[T]) Fill(b *Batch, idx []int) error {
	x, y := b.Int32At(0), b.Int32At(1)
	t := w.length
	for r, e := range idx {
		src := w.tokens[e*w.stride : e*w.stride+t+1]
		for j := 0; j < t; j++ {
			x[r*t+j] = int32(src[j])
			y[r*t+j] = int32(src[j+1])
		}
	}
	return nil
}

// WriteTokenFile writes tokens as an llm.c token file (see ReadTokenFile),
// atomically.
func WriteTokenFile(path string, tokens []uint16) error {
	if len(tokens) == 0 || len(tokens) > math.MaxInt32 {
		return fmt.Errorf("data: write %s: %d tokens", path, len(tokens))
	}
	b := make([]byte, 4*tokenHeaderInts+2*len(tokens))
	binary.LittleEndian.PutUint32(b[0:], TokenFileMagic)
	binary.LittleEndian.PutUint32(b[4:], TokenFileVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(tokens)))
	for i, t := range tokens {
		binary.LittleEndian.PutUint16(b[4*tokenHeaderInts+2*i:], t)
	}
	return atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(b); return err })
}
