package passes_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/recipe"
)

// rmsLinear is lnLinear with a Llama-style RMSNorm (no β) in front of a
// bias-free SwiGLU MLP.
func rmsLinear(t testing.TB, batch int) *model {
	m := &model{g: graph.New()}
	g := m.g
	m.x = g.Input("x", graph.Float32, batch, 64)
	m.y = g.Input("labels", graph.Int32, batch)
	gamma := g.Param("block.norm.weight", 64)
	w1, w2 := g.Param("block.gate_up.weight", 64, 64), g.Param("block.down.weight", 16, 32)
	m.params = []*graph.Node{gamma, w1, w2}
	n := ops.RMSNorm("block.norm", m.x, gamma, ops.RMSNormConfig{})
	h := ops.SwiGLUHalves(ops.Linear("block.gate_up", n, w1, nil))
	m.logits = ops.Linear("block.down", h, w2, nil)
	m.finish(t, batch, 64, 16)
	return m
}

// TestConvertLNFusesRMSNorm: an RMSNorm feeding an FP8 linear writes FP8
// straight into its GEMM (RMSNormQuantize), its backward unchanged, the
// program runs, and the report names the layer.
func TestConvertLNFusesRMSNorm(t *testing.T) {
	m := rmsLinear(t, 16)
	_, err := passes.ConvertLinear(m.g, m.store, passes.LinearConfig{Recipe: recipe.TE{}})
	require.NoError(t, err)
	rep, err := passes.ConvertLN(m.g, m.trainOf...)
	require.NoError(t, err)
	require.Len(t, rep.Notes, 3, "the RMSNorm, the classifier's gradient and the classifier")
	require.Contains(t, rep.Notes[0], "block.norm: RMSNorm fused into its input cast")
	kinds, _ := live(m)
	require.Equal(t, 1, kinds["RMSNormQuantize"])
	require.Equal(t, 0, kinds["RMSNorm"], "the float32 RMSNorm output is gone from training")
	require.Equal(t, 1, kinds["RMSNormGradGamma"], "the backward of the RMSNorm is unchanged")
	fused := m.g.Lookup("block.norm/fp8")
	require.NotNil(t, fused)
	require.Equal(t, graph.Float8E4M3, fused.DType())
	require.Equal(t, fused, m.g.Lookup("block.gate_up.fp8").Input(0))
	p, err := graph.Compile(m.g, m.store, graph.Options{Training: true}, m.trainOf...)
	require.NoError(t, err)
	m.run(t, p)
	require.False(t, math.IsNaN(float64(p.Float32(m.loss)[0])))
}

// TestRMSNormQuantizeMatchesUnfused: the fused node gives the codes of
// RMSNorm then Quantize with the same state, for every scaling.
func TestRMSNormQuantizeMatchesUnfused(t *testing.T) {
	for _, scaling := range []fp8.Quantizer{{Kind: fp8.DelayedScaling}, {Kind: fp8.CurrentScaling}, {Kind: fp8.CurrentScaling, Axiswise: true}, {Kind: fp8.MXFP8Blocks}} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 8, 64)
		gm := g.Param("norm.weight", 64)
		mk := func() ops.QuantizeConfig {
			meta := fp8.NewMeta(fp8.E4M3, 4, 0, fp8.MostRecent, 1)
			meta.Scale, meta.ScaleInv = 32, 1.0/32
			return ops.QuantizeConfig{Quantizer: withFormat(scaling, fp8.E4M3), Meta: meta, Axis: 1, Tensor: fp8.RoleInput}
		}
		cfg := ops.RMSNormConfig{Eps: 1e-5, ZeroCenteredGamma: scaling.Kind == fp8.CurrentScaling && !scaling.Axiswise}
		a := ops.Quantize(ops.RMSNorm("norm", x, gm, cfg), mk())
		b := ops.RMSNormQuantize("norm.fused", x, gm, cfg, mk())
		store := initStore(t, g, 2)
		p, err := graph.Compile(g, store, graph.Options{Training: true}, a, b)
		require.NoError(t, err)
		xs := make([]float32, 8*64)
		for i := range xs {
			xs[i] = float32(math.Sin(float64(i))) * 3
		}
		require.NoError(t, p.FeedFloat32(x, xs))
		require.NoError(t, p.Run())
		require.Equal(t, p.Float32(a), p.Float32(b), scaling.String())
		require.NotEqual(t, make([]float32, len(p.Float32(a))), p.Float32(a))
	}
}

// TestGELUQuantizeMatchesUnfused: the fused GELU cast gives the codes,
// scales and recorded amax of GELU then Quantize with the same state,
// for every scaling, over three steps, at a size that splits over the
// workers and their blocks.
func TestGELUQuantizeMatchesUnfused(t *testing.T) {
	for _, scaling := range []fp8.Quantizer{{Kind: fp8.DelayedScaling}, {Kind: fp8.CurrentScaling}, {Kind: fp8.CurrentScaling, Axiswise: true}, {Kind: fp8.MXFP8Blocks}} {
		g := graph.New()
		x := g.Input("x", graph.Float32, 96, 1024)
		metas := [2]*fp8.Meta{}
		mk := func(i int) ops.QuantizeConfig {
			metas[i] = fp8.NewMeta(fp8.E4M3, 4, 0, fp8.MostRecent, 1)
			metas[i].Scale, metas[i].ScaleInv = 32, 1.0/32
			return ops.QuantizeConfig{Quantizer: withFormat(scaling, fp8.E4M3), Meta: metas[i], Axis: 1, Tensor: fp8.RoleInput}
		}
		a := ops.Quantize(ops.GELU(x), mk(0))
		b := ops.GELUQuantize("gelu.fused", x, mk(1))
		p, err := graph.Compile(g, graph.NewStore(), graph.Options{Training: true}, a, b)
		require.NoError(t, err)
		xs := make([]float32, 96*1024)
		for step := 0; step < 3; step++ {
			for i := range xs {
				xs[i] = float32(math.Sin(float64(i*(step+1)))) * float32(3+step)
			}
			xs[17] = float32(math.NaN()) // a NaN is cast and recorded alike
			require.NoError(t, p.FeedFloat32(x, xs))
			require.NoError(t, p.Run())
			va, err := p.Value(a)
			require.NoError(t, err)
			vb, err := p.Value(b)
			require.NoError(t, err)
			require.Equal(t, va.U8, vb.U8, "%v step %d: codes", scaling, step)
			require.Equal(t, p.Float32(a), p.Float32(b), "%v step %d: decoded", scaling, step)
		}
		if scaling.Kind == fp8.DelayedScaling {
			require.Equal(t, metas[0].Scale, metas[1].Scale, "the scales after three steps")
			bits := func(v []float32) []uint32 {
				o := make([]uint32, len(v))
				for i, f := range v {
					o[i] = math.Float32bits(f)
				}
				return o
			}
			require.Equal(t, bits(metas[0].History), bits(metas[1].History), "the amax histories (NaN recorded alike)")
		}
	}
}
