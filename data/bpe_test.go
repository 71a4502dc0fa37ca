package data_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/data"
)

// TestBPEEncodings: GPT-2's and GPT-4's encodings give tiktoken's ids
// for known text (offline: the vocabularies are embedded) and decode
// back; unknown encodings and out-of-vocabulary ids are refused.
func TestBPEEncodings(t *testing.T) {
	for _, c := range []struct {
		enc   string
		text  string
		ids   []int32
		vocab int
	}{
		// tiktoken: enc.encode("hello world")
		{"r50k_base", "hello world", []int32{31373, 995}, 50257},
		{"gpt2", "hello world", []int32{31373, 995}, 50257},
		{"cl100k_base", "hello world", []int32{15339, 1917}, 100277},
	} {
		b, err := data.NewBPE(c.enc)
		require.NoError(t, err)
		require.Equal(t, c.vocab, b.VocabSize())
		ids, err := b.Encode(c.text)
		require.NoError(t, err)
		require.Equal(t, c.ids, ids, c.enc)
		text, err := b.Decode(ids)
		require.NoError(t, err)
		require.Equal(t, c.text, text)
		_, err = b.Decode([]int32{1, int32(c.vocab)})
		require.ErrorContains(t, err, "position 1")
	}
	_, err := data.NewBPE("o300k")
	require.True(t, errors.Is(err, data.ErrEncoding))
	require.ErrorContains(t, err, "cl100k_base, r50k_base")
	u, err := data.Uint16([]int32{0, 65535})
	require.NoError(t, err)
	require.Equal(t, []uint16{0, 65535}, u)
	_, err = data.Uint16([]int32{3, 70000})
	require.ErrorContains(t, err, "token 70000 at position 1")
}
