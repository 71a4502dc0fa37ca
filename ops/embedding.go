package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// embeddingOp gathers rows of a table [V, D] by int32 ids [...], giving
// [..., D].
type embeddingOp struct{}

func (embeddingOp) Type() string     { return KindEmbedding.String() }
func (embeddingOp) Kind() graph.Kind { return KindEmbedding }

func (embeddingOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := wantDType(in, graph.Float32, graph.Int32); err != nil {
		return nil, graph.Invalid, err
	}
	ts := in[0].Shape()
	if len(ts) != 2 {
		return nil, graph.Invalid, fmt.Errorf("table %q has shape %v, want [vocab dim]", in[0].Name(), ts)
	}
	return append(in[1].Shape().Clone(), ts[1]), graph.Float32, nil
}

func idError(id int32, pos, vocab int) error {
	return fmt.Errorf("id %d at position %d is outside [0, %d)", id, pos, vocab)
}

func (embeddingOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	table, ids, out := b.In[0].F32, b.In[1].I32, b.Out.F32
	v, d := b.In[0].Shape[0], b.In[0].Shape[1]
	return func() error {
		for i, id := range ids {
			if id < 0 || int(id) >= v {
				return idError(id, i, v)
			}
			copy(out[i*d:i*d+d], table[int(id)*d:int(id)*d+d])
		}
		return nil
	}, nil
}

func (embeddingOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	t := n.Input(0)
	return []*graph.Node{apply(embeddingGradOp{vocab: t.Shape()[0]}, n.Name()+".dtable", n.Input(1), dy), nil}
}

// embeddingGradOp scatter-adds dy [..., D] into a zeroed [V, D] by ids.
type embeddingGradOp struct{ vocab int }

func (embeddingGradOp) Type() string     { return KindEmbeddingGrad.String() }
func (embeddingGradOp) Kind() graph.Kind { return KindEmbeddingGrad }
func (o embeddingGradOp) Attrs() string  { return fmt.Sprintf("vocab=%d", o.vocab) }

func (o embeddingGradOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	if err := wantDType(in, graph.Int32, graph.Float32); err != nil {
		return nil, graph.Invalid, err
	}
	is, gs := in[0].Shape(), in[1].Shape()
	if len(gs) != len(is)+1 || !gs[:len(is)].Equal(is) {
		return nil, graph.Invalid, fmt.Errorf("gradient %q %v does not match ids %q %v", in[1].Name(), gs, in[0].Name(), is)
	}
	return graph.Shape{o.vocab, gs[len(gs)-1]}, graph.Float32, nil
}

func (o embeddingGradOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	ids, dy, out := b.In[0].I32, b.In[1].F32, b.Out.F32
	d := b.Out.Shape[1]
	v := o.vocab
	// The table's rows split over the workers: each clears its rows and
	// adds, in token order, the gradients of the tokens that select
	// them (the same sums, in the same order, as one pass).
	c := newChunkerCost(v, v*d, func(lo, hi int) {
		clear(out[lo*d : hi*d])
		for i, id := range ids {
			if r := int(id); r >= lo && r < hi {
				kernels.AddTo(out[r*d:r*d+d], dy[i*d:i*d+d])
			}
		}
	})
	run := c.kernel()
	return func() error {
		for i, id := range ids {
			if id < 0 || int(id) >= v {
				return idError(id, i, v)
			}
		}
		return run()
	}, nil
}

// Embedding returns the rows of table [V, D] selected by int32 ids,
// shaped [ids..., D]; name is the layer's fully qualified name. An id
// outside [0, V) makes Program.Run fail with an error naming its position.
func Embedding(name string, table, ids *graph.Node) *graph.Node {
	return apply(embeddingOp{}, name, table, ids)
}
