package nn

import (
	"fmt"

	"github.com/octetml/octet/graph"
)

// Builder creates a model's nodes in a graph under a name scope and
// records its parameters with their initialisers. Scopes share one
// parameter list.
type Builder struct {
	g      *graph.Graph
	prefix string
	params *[]param
}

type param struct {
	node   *graph.Node
	init   Initializer
	buffer bool // state the optimizer does not train
}

// NewBuilder returns a builder for g with an empty scope.
func NewBuilder(g *graph.Graph) *Builder { return &Builder{g: g, params: new([]param)} }

// Graph returns the graph being built.
func (b *Builder) Graph() *graph.Graph { return b.g }

// Name returns the fully qualified name of name in this scope.
func (b *Builder) Name(name string) string {
	if b.prefix == "" {
		return name
	}
	if name == "" {
		return b.prefix
	}
	return b.prefix + "." + name
}

// Scope returns a builder whose names are prefixed with name
// ("mlp" → "mlp.fc1").
func (b *Builder) Scope(name string) *Builder {
	return &Builder{g: b.g, prefix: b.Name(name), params: b.params}
}

// Param adds a parameter named in this scope.
func (b *Builder) Param(name string, init Initializer, shape ...int) *graph.Node {
	n := b.g.Param(b.Name(name), shape...)
	*b.params = append(*b.params, param{node: n, init: init})
	return n
}

// Buffer adds a buffer named in this scope: a value kept in the
// parameter store (so checkpoints save it, and Init draws it) that the
// optimizer does not train — an op updates it, as a router's selection
// bias (PyTorch's register_buffer).
func (b *Builder) Buffer(name string, init Initializer, shape ...int) *graph.Node {
	n := b.g.Param(b.Name(name), shape...)
	*b.params = append(*b.params, param{node: n, init: init, buffer: true})
	return n
}

// Params returns every parameter created through this builder or its
// scopes, in creation order: the values the optimizer trains (not the
// buffers).
func (b *Builder) Params() []*graph.Node {
	var out []*graph.Node
	for _, p := range *b.params {
		if !p.buffer {
			out = append(out, p.node)
		}
	}
	return out
}

// Buffers returns every buffer created through this builder or its
// scopes, in creation order.
func (b *Builder) Buffers() []*graph.Node {
	var out []*graph.Node
	for _, p := range *b.params {
		if p.buffer {
			out = append(out, p.node)
		}
	}
	return out
}

// Init gives every parameter and buffer that has no value in store one drawn by its
// initialiser from a generator seeded by seed and the parameter's name.
// Parameters already in the store (say, from a checkpoint) are kept.
func (b *Builder) Init(store *graph.Store, seed uint64) error {
	if err := b.g.Err(); err != nil {
		return fmt.Errorf("nn: init: graph has errors: %w", err)
	}
	for _, p := range *b.params {
		name := p.node.Name()
		if _, ok := store.Shape(name); ok {
			if sh, _ := store.Shape(name); !sh.Equal(p.node.Shape()) {
				return fmt.Errorf("nn: init: stored %q has shape %v, the model wants %v", name, sh, p.node.Shape())
			}
			continue
		}
		data := make([]float32, p.node.Shape().Numel())
		if p.init != nil {
			p.init(paramRNG(seed, name), p.node.Shape(), data)
		}
		if err := store.SetFloat32(name, data, p.node.Shape()...); err != nil {
			return err
		}
	}
	return nil
}

// NumParams returns the number of parameter values (buffers not
// counted).
func (b *Builder) NumParams() int {
	n := 0
	for _, p := range *b.params {
		if !p.buffer {
			n += p.node.Shape().Numel()
		}
	}
	return n
}
