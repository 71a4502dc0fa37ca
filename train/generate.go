package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// Generate samples n tokens from a causal language model: p is its
// evaluation program for one sequence of the model's context length,
// ids its token input [1, T] and logits its output [1, T, vocab]. The
// prompt takes one token or more. The window starts as the prompt's
// last T tokens (a longer prompt loses its beginning, as Hugging Face's
// generate does); each new token is drawn from the softmax of the
// logits at the window's last token, at temperature with rng — or, at
// temperature 0, is the most likely token (the lowest id among equals;
// rng is not used) — and added to the window, which slides once it
// holds T tokens. A prompt shorter than T runs on that prefix: the
// positions after it hold token 0 and, the model being causal (each
// position's logits depend on the tokens at or before it, as in GPT and
// Llama), change nothing.
func Generate(p *graph.Program, ids, logits *graph.Node, prompt []int32, n int, temperature float64, rng *rand.Rand) ([]int32, error) {
	if n < 0 {
		return nil, fmt.Errorf("train: generate: %d tokens", n)
	}
	if n == 0 {
		return []int32{}, nil
	}
	return GenerateWith(p, ids, logits, prompt, GenerateOptions{MaxTokens: n, Temperature: temperature, Rand: rng})
}

// GenerateOptions configure GenerateWith. The zero value of each field
// but MaxTokens keeps everything and samples at temperature 0 (greedy).
type GenerateOptions struct {
	// MaxTokens is how many tokens to generate at most (at least 1).
	MaxTokens int
	// Temperature divides the logits before the softmax; 0 takes the most
	// likely token (the lowest id among equals).
	Temperature float64
	// TopK, when above 0, keeps the K most likely tokens (the lower ids
	// first among equals); TopP, in (0, 1), keeps the smallest set of the
	// most likely tokens whose probability reaches it (nucleus sampling).
	// Both apply after the temperature, top-k first, as Hugging Face's
	// generate does.
	TopK int
	TopP float64
	// Stop ends the generation after one of these tokens (which is
	// returned).
	Stop []int32
	// Rand draws the samples (nil: a PCG seeded with Seed).
	Rand *rand.Rand
	Seed uint64
	// OnToken, if set, is called with each token as it is drawn
	// (streaming); an error it returns stops the generation and is
	// returned.
	OnToken func(id int32) error
}

// GenerateWith is Generate with top-k, top-p, stop tokens and streaming
// (see GenerateOptions); Generate(…, n, t, rng) is GenerateWith with
// MaxTokens n, Temperature t and Rand rng.
func GenerateWith(p *graph.Program, ids, logits *graph.Node, prompt []int32, o GenerateOptions) ([]int32, error) {
	is, ls := ids.Shape(), logits.Shape()
	if len(is) != 2 || is[0] != 1 || len(ls) != 3 || ls[0] != 1 || ls[1] != is[1] {
		return nil, fmt.Errorf("train: generate: ids %v and logits %v are not [1 T] and [1 T vocab]", is, ls)
	}
	t, vocab := is[1], ls[2]
	temperature := o.Temperature
	switch {
	case len(prompt) == 0:
		return nil, fmt.Errorf("train: generate: an empty prompt (give one token or more)")
	case !(temperature >= 0) || math.IsInf(temperature, 0):
		return nil, fmt.Errorf("train: generate: temperature %v, want a finite value of at least 0 (0: the most likely token)", temperature)
	case o.MaxTokens < 1:
		return nil, fmt.Errorf("train: generate: MaxTokens %d, want at least 1", o.MaxTokens)
	case o.TopK < 0:
		return nil, fmt.Errorf("train: generate: TopK %d, want 0 (all) or more", o.TopK)
	case !(o.TopP >= 0 && o.TopP <= 1):
		return nil, fmt.Errorf("train: generate: TopP %v, want a probability in [0, 1] (0 or 1: all)", o.TopP)
	}
	for _, id := range append(append([]int32(nil), prompt...), o.Stop...) {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("train: generate: token %d is outside the vocabulary of %d", id, vocab)
		}
	}
	rng := o.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(o.Seed, 0))
	}
	if len(prompt) > t {
		prompt = prompt[len(prompt)-t:]
	}
	ctx := make([]int32, t)
	filled := copy(ctx, prompt) // the window's tokens; the rest are 0
	out := make([]int32, 0, o.MaxTokens)
	probs := make([]float64, vocab)
	var order []int // token ids by probability, for top-k and top-p
	if o.TopK > 0 || (o.TopP > 0 && o.TopP < 1) {
		order = make([]int, vocab)
	}
	for len(out) < o.MaxTokens {
		if err := p.FeedInt32(ids, ctx); err != nil {
			return nil, err
		}
		if err := p.Run(); err != nil {
			return nil, err
		}
		last := p.Float32(logits)[(filled-1)*vocab : filled*vocab]
		next := 0
		if temperature == 0 {
			for i, l := range last {
				if l > last[next] {
					next = i
				}
			}
		} else {
			next = sample(last, probs, order, temperature, o.TopK, o.TopP, rng)
		}
		out = append(out, int32(next))
		filled = slide(ctx, filled, int32(next))
		if o.OnToken != nil {
			if err := o.OnToken(int32(next)); err != nil {
				return out, err
			}
		}
		if slices.Contains(o.Stop, int32(next)) {
			break
		}
	}
	return out, nil
}

// sample draws a token from the softmax of logits at temperature, kept
// to the top k and the top p when set (order: scratch for the ids).
func sample(logits []float32, probs []float64, order []int, temperature float64, topK int, topP float64, rng *rand.Rand) int {
	mx := float64(logits[0])
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var sum float64
	for i, l := range logits {
		probs[i] = kernels.Exp64((float64(l) - mx) / temperature) // the same bits on every machine
		sum += probs[i]
	}
	if order != nil {
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
		keep := len(order)
		if topK > 0 {
			keep = min(keep, topK)
		}
		if topP > 0 && topP < 1 {
			var c float64
			for i, id := range order[:keep] {
				c += probs[id] / sum
				if c >= topP {
					keep = i + 1
					break
				}
			}
		}
		for _, id := range order[keep:] {
			probs[id] = 0
		}
		sum = 0
		for _, v := range probs {
			sum += v
		}
	}
	u, next := rng.Float64()*sum, len(probs)-1
	for i, pr := range probs {
		if u < pr {
			return i
		}
		u -= pr
	}
	for next > 0 && probs[next] == 0 {
		next-- // rounding left u past the last kept token
	}
	return next
}

// slide adds token to the window ctx holding filled tokens, dropping its
// first once it is full, and returns how many it holds.
func slide(ctx []int32, filled int, token int32) int {
	if filled < len(ctx) {
		ctx[filled] = token
		return filled + 1
	}
	copy(ctx, ctx[1:])
	ctx[len(ctx)-1] = token
	return filled
}
