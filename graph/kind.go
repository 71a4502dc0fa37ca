package graph

// Kind names one kind of op so that a compiler pass can match it as a
// typed value (ops.KindLinear) rather than by its name. Each kind is made
// once, by NewKind in a package variable; two kinds are equal only if
// they are the same variable's value. The zero Kind is no kind.
type Kind struct{ k *kindName }

type kindName struct{ name string }

// NewKind returns a new kind called name (what Op.Type returns for it).
func NewKind(name string) Kind { return Kind{&kindName{name}} }

// String returns the kind's name ("" for the zero Kind).
func (k Kind) String() string {
	if k.k == nil {
		return ""
	}
	return k.k.name
}

// IsZero reports whether k is no kind.
func (k Kind) IsZero() bool { return k.k == nil }

// Kinded is implemented by ops that declare their kind (every op of this
// module does; an op of one's own may).
type Kinded interface {
	Kind() Kind
}

// KindOf returns op's kind, or the zero Kind for an op that declares
// none.
func KindOf(op Op) Kind {
	if k, ok := op.(Kinded); ok {
		return k.Kind()
	}
	return Kind{}
}

// Is reports whether n's op is of kind k (never, for the zero Kind).
func (n *Node) Is(k Kind) bool { return n != nil && !k.IsZero() && KindOf(n.op) == k }

// The kinds of the structural ops.
var (
	KindInput  = NewKind("Input")
	KindParam  = NewKind("Param")
	KindFill   = NewKind("Fill")
	KindAddN   = NewKind("AddN")
	KindSwitch = NewKind("Switch")
)
