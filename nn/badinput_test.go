package nn_test

import (
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// TestBadSizesAreErrors builds layers with sizes that cannot work: each
// must leave an error on the graph (or return one) naming the layer,
// never panic.
func TestBadSizesAreErrors(t *testing.T) {
	cases := map[string]func(b *nn.Builder) error{
		"Linear in 0":     func(b *nn.Builder) error { nn.NewLinear(b, "fc", 0, 3); return nil },
		"Linear out -1":   func(b *nn.Builder) error { nn.NewLinear(b, "fc", 3, -1); return nil },
		"LayerNorm 0":     func(b *nn.Builder) error { nn.NewLayerNorm(b, "ln", 0, ops.LayerNormConfig{}); return nil },
		"Embedding vocab": func(b *nn.Builder) error { nn.NewEmbedding(b, "wte", 0, 4, nn.Zeros); return nil },
		"MLP one size": func(b *nn.Builder) error {
			_, err := nn.NewMLP(b, "mlp", []int{784}, nn.ReLU, nn.Dropout{})
			return err
		},
		"MLP zero width": func(b *nn.Builder) error {
			_, err := nn.NewMLP(b, "mlp", []int{784, 0, 10}, nn.ReLU, nn.Dropout{})
			return err
		},
		"Attention heads": func(b *nn.Builder) error {
			_, err := nn.NewCausalSelfAttention(b, "attn", 10, 3, nn.Dropout{}, nil)
			return err
		},
		"GPT zero layers": func(b *nn.Builder) error {
			_, err := nn.NewGPT(b, "gpt", nn.GPTConfig{Heads: 1, Embd: 4, Block: 4, Vocab: 5})
			return err
		},
		"Linear forward shape": func(b *nn.Builder) error {
			l := nn.NewLinear(b, "fc", 3, 2)
			l.Forward(b.Graph().Input("x", graph.Float32, 4, 5))
			return nil
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			g := graph.New()
			b := nn.NewBuilder(g)
			var err error
			require.NotPanics(t, func() { err = build(b) })
			if err == nil {
				err = g.Err()
			}
			require.Error(t, err, name)
			require.NotPanics(t, func() { _ = b.Init(graph.NewStore(), 1) })
		})
	}
}
