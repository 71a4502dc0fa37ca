package ops_test

import (
	"fmt"
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

// TestEveryConstructorRefusesBadInput builds every op from operands of
// the wrong rank, shape or dtype, from nil, and from another graph: each
// call must record an error on the graph that names the node or operand,
// and none may panic.
func TestEveryConstructorRefusesBadInput(t *testing.T) {
	type operands struct {
		g                   *graph.Graph
		scalar, vec, m23    *graph.Node
		m45, ids, fp8, othr *graph.Node
	}
	mk := func() operands {
		g := graph.New()
		return operands{
			g:      g,
			scalar: g.Input("s", graph.Float32),
			vec:    g.Input("v", graph.Float32, 7),
			m23:    g.Input("a", graph.Float32, 2, 3),
			m45:    g.Param("w", 4, 5),
			ids:    g.Input("ids", graph.Int32, 2),
			fp8:    g.Input("q", graph.Float8E4M3, 2, 3),
			othr:   graph.New().Input("elsewhere", graph.Float32, 2, 3),
		}
	}
	q := ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}}
	cases := map[string]func(o operands) *graph.Node{
		"Add shapes":        func(o operands) *graph.Node { return ops.Add(o.m23, o.m45) },
		"Add nil":           func(o operands) *graph.Node { return ops.Add(o.m23, nil) },
		"Add other graph":   func(o operands) *graph.Node { return ops.Add(o.m23, o.othr) },
		"Mul int32":         func(o operands) *graph.Node { return ops.Mul(o.ids, o.ids) },
		"Sub fp8":           func(o operands) *graph.Node { return ops.Sub(o.fp8, o.fp8) },
		"Div shapes":        func(o operands) *graph.Node { return ops.Div(o.vec, o.m23) },
		"GELU int32":        func(o operands) *graph.Node { return ops.GELU(o.ids) },
		"Exp fp8":           func(o operands) *graph.Node { return ops.Exp(o.fp8) },
		"MatMul shapes":     func(o operands) *graph.Node { return ops.MatMul(o.m23, o.m45, false, false) },
		"MatMul rank 1":     func(o operands) *graph.Node { return ops.MatMul(o.vec, o.m45, false, false) },
		"MatMul nil":        func(o operands) *graph.Node { return ops.MatMul(nil, o.m45, false, false) },
		"BF16MatMul shapes": func(o operands) *graph.Node { return ops.BF16MatMul("b", o.m23, o.m45, false, true, nil) },
		"BF16MatMul rank 1": func(o operands) *graph.Node { return ops.BF16MatMul("b", o.vec, o.m45, false, false, nil) },
		"BF16MatMul fp8":    func(o operands) *graph.Node { return ops.BF16MatMul("b", o.fp8, o.fp8, false, true, nil) },
		"BF16MatMul bias": func(o operands) *graph.Node {
			return ops.BF16MatMul("b", o.m23, o.g.Param("b.w", 4, 3), false, true, o.vec)
		},
		"BF16MatMul nil":         func(o operands) *graph.Node { return ops.BF16MatMul("b", o.m23, nil, false, true, nil) },
		"BatchMatMul rank 2":     func(o operands) *graph.Node { return ops.BatchMatMul(o.m23, o.m45, false, true) },
		"Linear shapes":          func(o operands) *graph.Node { return ops.Linear("fc", o.m23, o.m45, nil) },
		"Linear bias":            func(o operands) *graph.Node { return ops.Linear("fc", o.m23, o.g.Param("fc.w", 4, 3), o.vec) },
		"Linear scalar":          func(o operands) *graph.Node { return ops.Linear("fc", o.scalar, o.m45, nil) },
		"Sum axis":               func(o operands) *graph.Node { return ops.Sum(o.m23, 5) },
		"Mean negative axis":     func(o operands) *graph.Node { return ops.Mean(o.m23, -9) },
		"SumKeepDims repeat":     func(o operands) *graph.Node { return ops.SumKeepDims(o.m23, 1, 1) },
		"BroadcastTo":            func(o operands) *graph.Node { return ops.BroadcastTo(o.m23, graph.Shape{4, 5}) },
		"SumTo":                  func(o operands) *graph.Node { return ops.SumTo(o.m23, graph.Shape{5}) },
		"Reshape count":          func(o operands) *graph.Node { return ops.Reshape(o.m23, 4, 2) },
		"Reshape two -1":         func(o operands) *graph.Node { return ops.Reshape(o.m23, -1, -1) },
		"Reshape zero":           func(o operands) *graph.Node { return ops.Reshape(o.m23, 0, 6) },
		"Permute length":         func(o operands) *graph.Node { return ops.Permute(o.m23, 0) },
		"Permute repeat":         func(o operands) *graph.Node { return ops.Permute(o.m23, 1, 1) },
		"Transpose vector":       func(o operands) *graph.Node { return ops.Transpose(o.vec) },
		"Slice range":            func(o operands) *graph.Node { return ops.Slice(o.m23, 1, 2, 9) },
		"Slice axis":             func(o operands) *graph.Node { return ops.Slice(o.m23, 4, 0, 1) },
		"Slice empty":            func(o operands) *graph.Node { return ops.Slice(o.m23, 1, 2, 2) },
		"Softmax scalar":         func(o operands) *graph.Node { return ops.Softmax(o.scalar) },
		"LogSoftmax int32":       func(o operands) *graph.Node { return ops.LogSoftmax(o.ids) },
		"CrossEntropy labels":    func(o operands) *graph.Node { return ops.CrossEntropy(o.m23, o.m23) },
		"CrossEntropy rows":      func(o operands) *graph.Node { return ops.CrossEntropy(o.m45, o.ids) },
		"Embedding float ids":    func(o operands) *graph.Node { return ops.Embedding("emb", o.m45, o.vec) },
		"Embedding vector table": func(o operands) *graph.Node { return ops.Embedding("emb", o.vec, o.ids) },
		"TopK vector scores":     func(o operands) *graph.Node { return ops.TopK(o.vec, nil, ops.RouterConfig{K: 1}) },
		"TopK k above experts":   func(o operands) *graph.Node { return ops.TopK(o.m23, nil, ops.RouterConfig{K: 4}) },
		"TopK int scores":        func(o operands) *graph.Node { return ops.TopK(o.ids, nil, ops.RouterConfig{K: 1}) },
		"GatherLast float index": func(o operands) *graph.Node { return ops.GatherLast(o.m23, o.m23) },
		"GatherLast rows":        func(o operands) *graph.Node { return ops.GatherLast(o.m45, o.g.Input("k", graph.Int32, 2, 2)) },
		"Dispatch float indices": func(o operands) *graph.Node { return ops.Dispatch(o.m23, o.m23, 4) },
		"Dispatch no experts":    func(o operands) *graph.Node { return ops.Dispatch(o.m23, o.g.Input("k", graph.Int32, 2, 2), 0) },
		"Combine weights shape":  func(o operands) *graph.Node { return ops.Combine(o.m45, o.g.Input("k", graph.Int32, 2, 2), o.m23, 4) },
		"ExpertCounts vector":    func(o operands) *graph.Node { return ops.ExpertCounts(o.ids, 4) },
		"GroupedLinear 2-D w": func(o operands) *graph.Node {
			return ops.GroupedLinear("e", o.m45, o.g.Input("c", graph.Int32, 4), o.m45)
		},
		"GroupedLinear width": func(o operands) *graph.Node {
			return ops.GroupedLinear("e", o.m23, o.g.Input("c", graph.Int32, 2), o.g.Param("we", 2, 4, 5))
		},
		"LogSumExp scalar":      func(o operands) *graph.Node { return ops.LogSumExp(o.scalar) },
		"ExpertShare float":     func(o operands) *graph.Node { return ops.ExpertShare(o.m23, 3) },
		"CausalMask vector":     func(o operands) *graph.Node { return ops.CausalMask(o.vec) },
		"CausalMask non-square": func(o operands) *graph.Node { return ops.CausalMask(o.m23) },
		"Dropout p":             func(o operands) *graph.Node { return ops.Dropout(o.m23, 1.5, 1) },
		"Dropout negative p":    func(o operands) *graph.Node { return ops.Dropout(o.m23, -0.1, 1) },
		"LayerNorm gamma":       func(o operands) *graph.Node { return ops.LayerNorm("ln", o.m23, o.vec, o.vec, ops.LayerNormConfig{}) },
		"LayerNorm eps": func(o operands) *graph.Node {
			return ops.LayerNorm("ln", o.m23, nil, nil, ops.LayerNormConfig{Eps: -1})
		},
		"LayerNormQuantize": func(o operands) *graph.Node {
			return ops.LayerNormQuantize("ln", o.m23, o.vec, o.vec, ops.LayerNormConfig{}, q)
		},
		"Quantize int32": func(o operands) *graph.Node { return ops.Quantize(o.ids, q) },
		"Quantize delayed nil": func(o operands) *graph.Node {
			return ops.Quantize(o.m23, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.DelayedScaling, Format: fp8.E4M3}})
		},
		"Quantize format": func(o operands) *graph.Node {
			return ops.Quantize(o.m23, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.Format(9)}})
		},
		"Quantize axis": func(o operands) *graph.Node {
			return ops.Quantize(o.m23, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: fp8.CurrentScaling, Axiswise: true, Format: fp8.E4M3}, Axis: 3})
		},
		"ScaledMatMul float": func(o operands) *graph.Node { return ops.ScaledMatMul("s", o.m23, o.m45, false, true, nil) },
		"ScaledMatMul shapes": func(o operands) *graph.Node {
			return ops.ScaledMatMul("s", ops.Quantize(o.m23, q), ops.Quantize(o.m45, q), false, true, nil)
		},
		"AllGather nil shard": func(o operands) *graph.Node { return ops.AllGather(o.m45, nil) },
	}
	// An op whose every operand is nil has no graph to record an error
	// on: it returns nil, and nil flows on without a panic until Compile
	// or Grad refuses it.
	require.NotPanics(t, func() {
		require.Nil(t, ops.ReLU(nil))
		require.Nil(t, ops.MatMul(nil, nil, false, false))
		require.Nil(t, ops.Linear("fc", nil, nil, nil))
		require.Nil(t, ops.AllGather(nil, nil))
		require.Nil(t, ops.Transpose(nil))
	})
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			o := mk()
			var n *graph.Node
			require.NotPanics(t, func() { n = build(o) }, name)
			err := o.g.Err()
			require.Error(t, err, "%s: no error recorded (got %v)", name, n)
			require.NotEmpty(t, fmt.Sprint(err))
			if n != nil {
				require.Equal(t, graph.Invalid, n.DType(), "%s: the result of a refused op must be invalid", name)
			}
			// Nothing built on a refused node may panic either.
			require.NotPanics(t, func() { ops.ReLU(ops.Sum(n)) })
		})
	}
}

// A Quantize node takes the quantizer kinds a graph casts with, not high
// precision or bf16 rounding.
func TestQuantizeRefusesNonCastingKinds(t *testing.T) {
	for _, k := range []fp8.QuantizerKind{fp8.HighPrecision, fp8.BF16Rounding} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 4, 16)
		ops.Quantize(x, ops.QuantizeConfig{Quantizer: fp8.Quantizer{Kind: k}})
		require.ErrorContains(t, g.Err(), "does not cast in a graph", k.String())
	}
}
