package ops

import "github.com/octetml/octet/graph"

// Readers of ops' settings, for compiler rules: each reports false for a
// node of another kind.

// ScaleFactor returns a Scale node's factor.
func ScaleFactor(n *graph.Node) (float32, bool) {
	if o, ok := opOf[unaryOp](n); ok && o.kind == kindScale {
		return o.c, true
	}
	return 0, false
}

// QuantizeSettings returns a Quantize node's configuration: format,
// scaling, the delayed-scaling state (Meta), axis, tensor role.
func QuantizeSettings(n *graph.Node) (QuantizeConfig, bool) {
	if o, ok := opOf[quantizeOp](n); ok {
		return o.cfg, true
	}
	return QuantizeConfig{}, false
}

// ReshapeShape returns the shape a Reshape node makes.
func ReshapeShape(n *graph.Node) (graph.Shape, bool) {
	if _, ok := opOf[reshapeOp](n); ok {
		return n.Shape().Clone(), true
	}
	return nil, false
}

// LinearFQN returns a Linear node's layer name (fully qualified:
// "gpt.h.0.attn.qkv").
func LinearFQN(n *graph.Node) (string, bool) {
	if _, ok := opOf[linearOp](n); ok {
		return n.Name(), true
	}
	return "", false
}

// PermuteAxes returns a Permute node's permutation.
func PermuteAxes(n *graph.Node) ([]int, bool) {
	if o, ok := opOf[permuteOp](n); ok {
		return append([]int(nil), o.perm...), true
	}
	return nil, false
}

// MatMulTransposes says whether a MatMul, BatchMatMul, ScaledMatMul or
// BF16MatMul node transposes its operands.
func MatMulTransposes(n *graph.Node) (transA, transB, ok bool) {
	if n == nil {
		return false, false, false
	}
	switch o := n.Op().(type) {
	case matMulOp:
		return o.transA, o.transB, true
	case scaledMatMulOp:
		return o.transA, o.transB, true
	case bf16MatMulOp:
		return o.transA, o.transB, true
	}
	return false, false, false
}

// ReduceAxes returns a Sum or Mean node's axes (empty: all) and whether
// it keeps them, or a SumTo's target shape.
func ReduceAxes(n *graph.Node) (axes []int, keepDims bool, to graph.Shape, ok bool) {
	o, ok := opOf[reduceOp](n)
	return append([]int(nil), o.axes...), o.keepDims, o.to.Clone(), ok
}

// SliceRange returns a Slice node's axis and range [start, end).
func SliceRange(n *graph.Node) (axis, start, end int, ok bool) {
	o, ok := opOf[sliceOp](n)
	return o.axis, o.start, o.end, ok
}

// LayerNormSettings returns a LayerNorm node's configuration.
func LayerNormSettings(n *graph.Node) (LayerNormConfig, bool) {
	o, ok := opOf[layerNormOp](n)
	return o.cfg, ok
}

// AttentionSettings returns a CausalAttention node's heads and its
// attention dropout.
func AttentionSettings(n *graph.Node) (heads int, dropout float32, ok bool) {
	o, ok := opOf[causalAttentionOp](n)
	return o.heads, o.p, ok
}

// AttentionConfigOf returns a CausalAttention node's whole
// configuration (FusedAttention's).
func AttentionConfigOf(n *graph.Node) (AttentionConfig, bool) {
	o, ok := opOf[causalAttentionOp](n)
	return AttentionConfig{Heads: o.heads, KVHeads: o.kvHeads, RoPETheta: o.theta, Dropout: o.p, Seed: o.seed}, ok
}

// DropoutProb returns the probability of a dropout mask.
func DropoutProb(n *graph.Node) (float32, bool) {
	o, ok := opOf[dropoutMaskOp](n)
	return o.p, ok
}

func opOf[T graph.Op](n *graph.Node) (T, bool) {
	var zero T
	if n == nil {
		return zero, false
	}
	o, ok := n.Op().(T)
	return o, ok
}
