package data_test

import (
	"testing"

	"github.com/octetml/octet/data"
	"github.com/stretchr/testify/require"
)

func TestChars(t *testing.T) {
	c := data.NewChars("gopher ∀x")
	require.Equal(t, 9, c.Len())
	ids, err := c.Encode("hog ∀")
	require.NoError(t, err)
	require.Equal(t, []int32{3, 4, 2, 0, 8}, ids) // ' ' < 'e' < 'g' < 'h' < 'o' < 'p' < 'r' < 'x' < '∀'
	s, err := c.Decode(ids)
	require.NoError(t, err)
	require.Equal(t, "hog ∀", s)
	_, err = c.Encode("hoz")
	require.ErrorContains(t, err, `character 'z' at byte 2`)
	_, err = c.Decode([]int32{9})
	require.ErrorContains(t, err, "token 9")
	require.NotEqual(t, c.Checksum(), data.NewChars("gopher ∀y").Checksum())
	require.Equal(t, c.Checksum(), data.NewChars("x∀ rehpog").Checksum())
}
