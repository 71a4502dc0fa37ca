package graph

// Typed state that a package keeps on a graph or hands from kernel to
// kernel on a value: the package makes a key once (a package variable,
// usually unexported), and only code holding the key reads or writes
// what is stored under it, with its type.

// Key names one kind of annotation of a graph, holding a T.
type Key[T any] struct{ name string }

// NewKey returns a new key for annotations of type T (name is for
// reading code and errors only: two keys are never the same key).
func NewKey[T any](name string) *Key[T] { return &Key[T]{name} }

// String returns the key's name.
func (k *Key[T]) String() string { return k.name }

// Annotation returns what g holds under k, and whether it holds anything.
func Annotation[T any](g *Graph, k *Key[T]) (T, bool) {
	v, ok := g.attrs[k].(T)
	return v, ok
}

// Annotate stores v on g under k (compiler passes keep what they know
// about a graph this way, for example which layers they converted).
func Annotate[T any](g *Graph, k *Key[T], v T) { g.attrs[k] = v }

// ValueKey names one kind of metadata a kernel attaches to the value it
// writes, for the kernels that read that value (the scales that travel
// with an FP8 value), holding a T.
type ValueKey[T any] struct{ name string }

// NewValueKey returns a new key for value metadata of type T.
func NewValueKey[T any](name string) *ValueKey[T] { return &ValueKey[T]{name} }

// String returns the key's name.
func (k *ValueKey[T]) String() string { return k.name }

// Meta returns the metadata v carries under k, and whether it carries
// any (set at bind time by the kernel that writes v).
func Meta[T any](v *Value, k *ValueKey[T]) (T, bool) {
	for _, m := range v.meta {
		if m.key == k {
			t, ok := m.v.(T)
			return t, ok
		}
	}
	var zero T
	return zero, false
}

// SetMeta attaches x to v under k (replacing what k held).
func SetMeta[T any](v *Value, k *ValueKey[T], x T) {
	for i, m := range v.meta {
		if m.key == k {
			v.meta[i].v = x
			return
		}
	}
	v.meta = append(v.meta, valueMeta{k, x})
}

type valueMeta struct {
	key any
	v   any
}
