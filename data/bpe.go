package data

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tiktoken-go/tokenizer"
)

// BPE turns text into tokens with one of OpenAI's byte-pair encodings
// (tiktoken's vocabularies, embedded in the module: nothing is fetched):
// r50k_base, GPT-2's 50,257 tokens, or cl100k_base, GPT-4's 100,277.
// Special tokens such as <|endoftext|> are encoded as plain text. Invalid
// UTF-8 is encoded byte by byte, as tiktoken does by default.
type BPE struct {
	name  string
	vocab int
	codec tokenizer.Codec
}

// ErrEncoding is the error NewBPE returns for an encoding it does not
// know.
var ErrEncoding = errors.New("unknown BPE encoding")

// bpeVocab gives each supported encoding's vocabulary size (its largest
// token id + 1, special tokens included).
var bpeVocab = map[string]int{"r50k_base": 50257, "cl100k_base": 100277}

// BPEEncodings lists the encodings NewBPE takes.
func BPEEncodings() []string {
	names := make([]string, 0, len(bpeVocab))
	for n := range bpeVocab {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewBPE returns the tokenizer of encoding (see BPEEncodings; "gpt2" is
// r50k_base).
func NewBPE(encoding string) (*BPE, error) {
	name := strings.ToLower(strings.TrimSpace(encoding))
	if name == "gpt2" {
		name = "r50k_base"
	}
	vocab, ok := bpeVocab[name]
	if !ok {
		return nil, fmt.Errorf("data: %w %q; want one of %s", ErrEncoding, encoding, strings.Join(BPEEncodings(), ", "))
	}
	c, err := tokenizer.Get(tokenizer.Encoding(name))
	if err != nil {
		return nil, fmt.Errorf("data: BPE %s: %w", name, err)
	}
	return &BPE{name: name, vocab: vocab, codec: c}, nil
}

// Name returns the encoding's name.
func (b *BPE) Name() string { return b.name }

// VocabSize returns the number of token ids the encoding uses.
func (b *BPE) VocabSize() int { return b.vocab }

// Encode returns text's tokens.
func (b *BPE) Encode(text string) ([]int32, error) {
	ids, _, err := b.codec.Encode(text)
	if err != nil {
		return nil, fmt.Errorf("data: BPE %s: %w", b.name, err)
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out, nil
}

// Decode returns the text of tokens; an id outside the vocabulary is an
// error naming its position.
func (b *BPE) Decode(ids []int32) (string, error) {
	u := make([]uint, len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= b.vocab {
			return "", fmt.Errorf("data: BPE %s: token %d at position %d is outside the vocabulary of %d", b.name, id, i, b.vocab)
		}
		u[i] = uint(id)
	}
	s, err := b.codec.Decode(u)
	if err != nil {
		return "", fmt.Errorf("data: BPE %s: %w", b.name, err)
	}
	return s, nil
}

// Uint16 returns tokens as llm.c's token files store them, or an error
// naming the first token that does not fit (cl100k_base's ids above
// 65,535 do not: such text needs r50k_base for a token file).
func Uint16(tokens []int32) ([]uint16, error) {
	out := make([]uint16, len(tokens))
	for i, t := range tokens {
		if t < 0 || t > 0xFFFF {
			return nil, fmt.Errorf("data: token %d at position %d does not fit a token file's uint16", t, i)
		}
		out[i] = uint16(t)
	}
	return out, nil
}
