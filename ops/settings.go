package ops

import "github.com/octetml/octet/graph"

// The settings compiler rules read through graph.SettingsOf. Each op
// below stores what it has into the pointer it is given.

// ScaleConfig is a Scale node's factor.
type ScaleConfig struct{ Factor float32 }

// PermuteConfig is a Permute node's permutation.
type PermuteConfig struct{ Axes []int }

// MatMulConfig holds the transpose flags of a MatMul, BatchMatMul,
// ScaledMatMul or BF16MatMul node; Batched is set for BatchMatMul.
type MatMulConfig struct {
	TransA, TransB bool
	Batched        bool
}

// ReduceConfig is a Sum or Mean node's axes (empty: all) and whether it
// keeps them, or a SumTo's target shape (To).
type ReduceConfig struct {
	Axes     []int
	KeepDims bool
	To       graph.Shape
}

// SliceConfig is a Slice node's axis and range [Start, End).
type SliceConfig struct{ Axis, Start, End int }

// DropoutConfig is a dropout mask's probability and seed.
type DropoutConfig struct {
	P    float32
	Seed uint64
}

func (o unaryOp) ReadSettings(dst any) bool {
	if d, ok := dst.(*ScaleConfig); ok && o.kind == kindScale {
		*d = ScaleConfig{o.c}
		return true
	}
	return false
}

func (o permuteOp) ReadSettings(dst any) bool {
	d, ok := dst.(*PermuteConfig)
	if ok {
		*d = PermuteConfig{append([]int(nil), o.perm...)}
	}
	return ok
}

func readMatMul(dst any, c MatMulConfig) bool {
	d, ok := dst.(*MatMulConfig)
	if ok {
		*d = c
	}
	return ok
}

func (o matMulOp) ReadSettings(dst any) bool {
	return readMatMul(dst, MatMulConfig{o.transA, o.transB, o.batched})
}
func (o scaledMatMulOp) ReadSettings(dst any) bool {
	return readMatMul(dst, MatMulConfig{TransA: o.transA, TransB: o.transB})
}
func (o bf16MatMulOp) ReadSettings(dst any) bool {
	return readMatMul(dst, MatMulConfig{TransA: o.transA, TransB: o.transB})
}

func (o reduceOp) ReadSettings(dst any) bool {
	d, ok := dst.(*ReduceConfig)
	if ok {
		*d = ReduceConfig{append([]int(nil), o.axes...), o.keepDims, o.to.Clone()}
	}
	return ok
}

func (o sliceOp) ReadSettings(dst any) bool {
	d, ok := dst.(*SliceConfig)
	if ok {
		*d = SliceConfig{o.axis, o.start, o.end}
	}
	return ok
}

func (o layerNormOp) ReadSettings(dst any) bool {
	d, ok := dst.(*LayerNormConfig)
	if ok {
		*d = o.cfg
	}
	return ok
}

func (o rmsNormOp) ReadSettings(dst any) bool {
	d, ok := dst.(*RMSNormConfig)
	if ok {
		*d = o.cfg
	}
	return ok
}

func (o causalAttentionOp) ReadSettings(dst any) bool {
	d, ok := dst.(*AttentionConfig)
	if ok {
		*d = AttentionConfig{Heads: o.heads, KVHeads: o.kvHeads, RoPETheta: o.theta, Dropout: o.p, Seed: o.seed}
	}
	return ok
}

func (o dropoutMaskOp) ReadSettings(dst any) bool {
	d, ok := dst.(*DropoutConfig)
	if ok {
		*d = DropoutConfig{o.p, o.seed}
	}
	return ok
}

// readQuantize stores the cast of a node that casts to FP8.
func readQuantize(dst any, q QuantizeConfig) bool {
	d, ok := dst.(*QuantizeConfig)
	if ok {
		*d = q
	}
	return ok
}

func (o quantizeOp) ReadSettings(dst any) bool                 { return readQuantize(dst, o.cfg) }
func (o crossEntropyGradQuantizeOp) ReadSettings(dst any) bool { return readQuantize(dst, o.q) }
func (o classifierCrossEntropyOp) ReadSettings(dst any) bool   { return readQuantize(dst, o.q) }
func (o geluQuantizeOp) ReadSettings(dst any) bool             { return readQuantize(dst, o.q) }
func (o fp8AllGatherOp) ReadSettings(dst any) bool             { return readQuantize(dst, o.cfg) }

// A LayerNormQuantize node has its norm's settings (LayerNormConfig, or
// RMSNormConfig for RMSNormQuantize) and its cast's.
func (o layerNormQuantizeOp) ReadSettings(dst any) bool {
	switch d := dst.(type) {
	case *LayerNormConfig:
		if o.rms {
			return false
		}
		*d = o.ln.cfg
	case *RMSNormConfig:
		if !o.rms {
			return false
		}
		*d = o.rmsCfg
	case *QuantizeConfig:
		*d = o.q
	default:
		return false
	}
	return true
}

func (o topKOp) ReadSettings(dst any) bool {
	d, ok := dst.(*RouterConfig)
	if ok {
		*d = o.cfg
	}
	return ok
}
