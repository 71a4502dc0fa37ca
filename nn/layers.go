package nn

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
)

// Linear is a fully connected layer y = x·Wᵀ + b with W [out in].
type Linear struct {
	Name    string
	In, Out int
	Weight  *graph.Node
	Bias    *graph.Node // nil without bias
}

// LinearOption adjusts a Linear layer.
type LinearOption func(*linearOpts)

type linearOpts struct {
	bias       bool
	init, bini Initializer
}

// NoBias drops the bias.
func NoBias() LinearOption { return func(o *linearOpts) { o.bias = false } }

// WithInit sets the weight initialiser (PyTorch's LinearDefault
// otherwise).
func WithInit(init Initializer) LinearOption { return func(o *linearOpts) { o.init = init } }

// WithBiasInit sets the bias initialiser.
func WithBiasInit(init Initializer) LinearOption { return func(o *linearOpts) { o.bini = init } }

// NewLinear creates the parameters name.weight [out in] and name.bias
// [out] in b's scope.
func NewLinear(b *Builder, name string, in, out int, opts ...LinearOption) *Linear {
	o := linearOpts{bias: true, init: LinearDefault, bini: BiasDefault(in)}
	for _, f := range opts {
		f(&o)
	}
	s := b.Scope(name)
	l := &Linear{Name: s.Name(""), In: in, Out: out}
	l.Weight = s.Param("weight", o.init, out, in)
	if o.bias {
		l.Bias = s.Param("bias", o.bini, out)
	}
	return l
}

// Forward returns x·Wᵀ + b, the node named after the layer.
func (l *Linear) Forward(x *graph.Node) *graph.Node { return ops.Linear(l.Name, x, l.Weight, l.Bias) }

// LayerNorm normalises the last axis with learned γ (name.weight) and β
// (name.bias).
type LayerNorm struct {
	Name        string
	Weight      *graph.Node
	Bias        *graph.Node
	Config      ops.LayerNormConfig
	NumFeatures int
}

// NewLayerNorm creates a LayerNorm over d features. With
// cfg.ZeroCenteredGamma, γ starts at 0 (the layer computes x̂·(1+γ)+β).
func NewLayerNorm(b *Builder, name string, d int, cfg ops.LayerNormConfig) *LayerNorm {
	s := b.Scope(name)
	gi := Ones
	if cfg.ZeroCenteredGamma {
		gi = Zeros
	}
	return &LayerNorm{Name: s.Name(""), Weight: s.Param("weight", gi, d), Bias: s.Param("bias", Zeros, d), Config: cfg, NumFeatures: d}
}

// Forward normalises x.
func (l *LayerNorm) Forward(x *graph.Node) *graph.Node {
	return ops.LayerNorm(l.Name, x, l.Weight, l.Bias, l.Config)
}

// RMSNorm normalises the last axis by its root mean square with learned γ
// (name.weight, no bias): Llama's LlamaRMSNorm.
type RMSNorm struct {
	Name        string
	Weight      *graph.Node
	Config      ops.RMSNormConfig
	NumFeatures int
}

// NewRMSNorm creates an RMSNorm over d features, γ starting at 1 (at 0
// with cfg.ZeroCenteredGamma, where the layer computes x̂·(1+γ)).
func NewRMSNorm(b *Builder, name string, d int, cfg ops.RMSNormConfig) *RMSNorm {
	s := b.Scope(name)
	gi := Ones
	if cfg.ZeroCenteredGamma {
		gi = Zeros
	}
	return &RMSNorm{Name: s.Name(""), Weight: s.Param("weight", gi, d), Config: cfg, NumFeatures: d}
}

// Forward normalises x.
func (l *RMSNorm) Forward(x *graph.Node) *graph.Node {
	return ops.RMSNorm(l.Name, x, l.Weight, l.Config)
}

// Embedding maps int32 ids to rows of a table name.weight [vocab dim].
type Embedding struct {
	Name       string
	Vocab, Dim int
	Weight     *graph.Node
}

// NewEmbedding creates an embedding table initialised N(0, 0.02²) (GPT-2's
// choice) unless init is given.
func NewEmbedding(b *Builder, name string, vocab, dim int, init Initializer) *Embedding {
	if init == nil {
		init = Normal(0.02)
	}
	s := b.Scope(name)
	return &Embedding{Name: s.Name(""), Vocab: vocab, Dim: dim, Weight: s.Param("weight", init, vocab, dim)}
}

// Forward gathers the rows for ids.
func (e *Embedding) Forward(ids *graph.Node) *graph.Node { return ops.Embedding(e.Name, e.Weight, ids) }

// Dropout zeroes values with probability P while training.
type Dropout struct {
	P    float32
	Seed uint64
}

// Forward applies dropout (identity when P is 0 or in evaluation).
func (d Dropout) Forward(x *graph.Node) *graph.Node { return ops.Dropout(x, d.P, d.Seed) }

// Activation names a pointwise nonlinearity.
type Activation string

// The activations an MLP can use.
const (
	ReLU Activation = "relu"
	GELU Activation = "gelu"
	Tanh Activation = "tanh"
)

// Apply applies the activation.
func (a Activation) Apply(x *graph.Node) (*graph.Node, error) {
	switch a {
	case ReLU, "":
		return ops.ReLU(x), nil
	case GELU:
		return ops.GELU(x), nil
	case Tanh:
		return ops.Tanh(x), nil
	}
	return nil, fmt.Errorf("nn: unknown activation %q (want relu, gelu or tanh)", a)
}

// MLP is a stack of Linear layers named fc1, fc2, … with an activation
// (and optional dropout) between them and none after the last.
type MLP struct {
	Layers  []*Linear
	Act     Activation
	Dropout Dropout
}

// NewMLP creates an MLP with the given layer sizes (input first, output
// last) in scope name. Layers followed by a ReLU get Kaiming-uniform
// weights, the others PyTorch's default.
func NewMLP(b *Builder, name string, sizes []int, act Activation, dropout Dropout) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("nn: MLP %q needs at least input and output sizes, got %v", name, sizes)
	}
	for _, d := range sizes {
		if d <= 0 {
			return nil, fmt.Errorf("nn: MLP %q: size %d in %v is not positive", name, d, sizes)
		}
	}
	if _, err := act.Apply(nil); err != nil {
		return nil, err
	}
	s := b.Scope(name)
	m := &MLP{Act: act, Dropout: dropout}
	for i := 0; i+1 < len(sizes); i++ {
		var opts []LinearOption
		if (act == ReLU || act == "") && i+2 < len(sizes) { // the output layer keeps the default
			opts = append(opts, WithInit(KaimingUniform))
		}
		m.Layers = append(m.Layers, NewLinear(s, fmt.Sprintf("fc%d", i+1), sizes[i], sizes[i+1], opts...))
	}
	return m, nil
}

// Forward runs x through the layers.
func (m *MLP) Forward(x *graph.Node) *graph.Node {
	h := x
	for i, l := range m.Layers {
		h = l.Forward(h)
		if i+1 < len(m.Layers) {
			h, _ = m.Act.Apply(h)
			h = m.Dropout.Forward(h)
		}
	}
	return h
}
