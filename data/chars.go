package data

import (
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// Chars is a character-level tokenizer: each distinct character of a
// text is a token, numbered in character order.
type Chars struct {
	runes []rune
	ids   map[rune]int32
}

// NewChars returns the vocabulary of text's characters.
func NewChars(text string) *Chars {
	c := &Chars{ids: map[rune]int32{}}
	for _, r := range text {
		if _, ok := c.ids[r]; !ok {
			c.ids[r] = 0
			c.runes = append(c.runes, r)
		}
	}
	slices.Sort(c.runes)
	for i, r := range c.runes {
		c.ids[r] = int32(i)
	}
	return c
}

// Len returns the vocabulary's size.
func (c *Chars) Len() int { return len(c.runes) }

// Checksum identifies the vocabulary: the CRC-32C of its characters in id
// order (a checkpoint's model key can name it).
func (c *Chars) Checksum() uint32 {
	return crc32.Checksum([]byte(string(c.runes)), crc32.MakeTable(crc32.Castagnoli))
}

// Encode returns the tokens of text; a character outside the vocabulary
// is an error naming it and its offset.
func (c *Chars) Encode(text string) ([]int32, error) {
	out := make([]int32, 0, len(text))
	for i, r := range text {
		id, ok := c.ids[r]
		if !ok {
			return nil, fmt.Errorf("data: character %q at byte %d is not in the vocabulary", r, i)
		}
		out = append(out, id)
	}
	return out, nil
}

// Decode returns the text of tokens; a token outside the vocabulary is an
// error naming it.
func (c *Chars) Decode(ids []int32) (string, error) {
	var sb strings.Builder
	for i, id := range ids {
		if id < 0 || int(id) >= len(c.runes) {
			return "", fmt.Errorf("data: token %d at %d is outside the vocabulary of %d", id, i, len(c.runes))
		}
		sb.WriteRune(c.runes[id])
	}
	return sb.String(), nil
}
