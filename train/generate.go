package train

import (
	"fmt"
	"math"
	"math/rand/v2"

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
	is, ls := ids.Shape(), logits.Shape()
	if len(is) != 2 || is[0] != 1 || len(ls) != 3 || ls[0] != 1 || ls[1] != is[1] {
		return nil, fmt.Errorf("train: generate: ids %v and logits %v are not [1 T] and [1 T vocab]", is, ls)
	}
	t, vocab := is[1], ls[2]
	switch {
	case len(prompt) == 0:
		return nil, fmt.Errorf("train: generate: an empty prompt (give one token or more)")
	case !(temperature >= 0) || math.IsInf(temperature, 0):
		return nil, fmt.Errorf("train: generate: temperature %v, want a finite value of at least 0 (0: the most likely token)", temperature)
	}
	if len(prompt) > t {
		prompt = prompt[len(prompt)-t:]
	}
	ctx := make([]int32, t)
	filled := copy(ctx, prompt) // the window's tokens; the rest are 0
	out := make([]int32, 0, n)
	probs := make([]float64, vocab)
	for len(out) < n {
		if err := p.FeedInt32(ids, ctx); err != nil {
			return nil, err
		}
		if err := p.Run(); err != nil {
			return nil, err
		}
		last := p.Float32(logits)[(filled-1)*vocab : filled*vocab]
		if temperature == 0 {
			best := 0
			for i, l := range last {
				if l > last[best] {
					best = i
				}
			}
			out = append(out, int32(best))
			filled = slide(ctx, filled, int32(best))
			continue
		}
		mx := float64(last[0])
		for _, l := range last {
			mx = math.Max(mx, float64(l))
		}
		var sum float64
		for i, l := range last {
			probs[i] = kernels.Exp64((float64(l) - mx) / temperature) // the same bits on every machine
			sum += probs[i]
		}
		u, next := rng.Float64()*sum, vocab-1
		for i, pr := range probs {
			if u < pr {
				next = i
				break
			}
			u -= pr
		}
		out = append(out, int32(next))
		filled = slide(ctx, filled, int32(next))
	}
	return out, nil
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
