package graph

// SettingsReader is implemented by an op whose settings compiler rules
// read (through SettingsOf): ReadSettings stores them in dst, a pointer
// to one of the op's settings types, and reports whether the op has
// settings of that type.
type SettingsReader interface {
	ReadSettings(dst any) bool
}

// SettingsOf returns the settings of type T of n's op — for package
// ops: ops.QuantizeConfig, ops.MatMulConfig, ops.LayerNormConfig, …, as
// each says which nodes have it — and false when n is nil or its op has
// no settings of that type. Rewrite rules and passes read ops through
// it rather than asking an op's type.
func SettingsOf[T any](n *Node) (T, bool) {
	var v T
	if n == nil {
		return v, false
	}
	r, ok := n.op.(SettingsReader)
	if !ok {
		return v, false
	}
	if !r.ReadSettings(&v) {
		var zero T
		return zero, false
	}
	return v, true
}
