package graph_test

import (
	"bytes"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/stretchr/testify/require"
)

func TestProfile(t *testing.T) {
	g := graph.New()
	x := g.Input("x", graph.Float32, 64, 64)
	w := g.Param("fc.weight", 64, 64)
	y := ops.ReLU(ops.Linear("fc", x, w, nil))
	out := ops.Sum(y)
	store := graph.NewStore()
	require.NoError(t, store.Init(g, func(_ *graph.Node, v []float32) {
		for i := range v {
			v[i] = 0.01
		}
	}))
	p, err := graph.Compile(g, store, graph.Options{}, out)
	require.NoError(t, err)
	require.NoError(t, p.FeedFloat32(x, make([]float32, 64*64)))
	require.Zero(t, p.Profile().Steps, "off by default")
	p.SetProfiling(true)
	for i := 0; i < 5; i++ {
		require.NoError(t, p.Run())
	}
	allocs := testing.AllocsPerRun(3, func() { _ = p.Run() })
	require.Zero(t, allocs, "profiling allocates nothing")
	pr := p.Profile()
	require.Equal(t, int64(5+4), pr.Steps)
	calls := map[string]int64{}
	var sum int64
	for _, r := range pr.Ops {
		calls[r.Name] = r.Calls
		sum += int64(r.Total)
	}
	require.Equal(t, map[string]int64{"Linear": 9, "ReLU": 9, "Sum": 9}, calls)
	require.Equal(t, int64(pr.Total-pr.StepEnd), sum, "the op totals add up")
	require.Equal(t, "fc", pr.Layers[0].Name)
	require.Greater(t, pr.Share("Linear"), 0.0)
	require.InDelta(t, 1.0, pr.Share("Linear", "ReLU", "Sum")+float64(pr.StepEnd)/float64(pr.Total), 1e-9)
	var buf bytes.Buffer
	pr.WriteTable(&buf, 10)
	require.Contains(t, buf.String(), "profile: 9 steps")
	require.Contains(t, buf.String(), "Linear")
	p.SetProfiling(false)
	require.NoError(t, p.Run())
	require.Zero(t, p.Profile().Steps)
	var empty bytes.Buffer
	p.Profile().WriteTable(&empty, 3)
	require.Equal(t, "no profiled steps\n", empty.String())
}

func TestLayerOf(t *testing.T) {
	for in, want := range map[string]string{
		"mlp.fc1": "mlp.fc1", "mlp.fc1/relu": "mlp.fc1", "mlp.fc1.dgrad.fp8": "mlp.fc1", "mlp.fc2.wgrad": "mlp.fc2",
		"gpt.h.0.attn.qkv.autocast": "gpt.h.0.attn.qkv", "mlp.fc1/quantize.input": "mlp.fc1", "x": "x", "mlp.fc1.fakequant": "mlp.fc1",
	} {
		require.Equal(t, want, graph.LayerOf(in), in)
	}
}

// TestProfileShareCountsFusedOps checks that Share("Linear") counts a
// Linear with a fused epilogue ("Linear+Add") and not other types that
// merely start with the name.
func TestProfileShareCountsFusedOps(t *testing.T) {
	pr := graph.Profile{Total: 100, Ops: []graph.ProfileRow{{Name: "Linear", Total: 10}, {Name: "Linear+Add", Total: 20}, {Name: "LinearX", Total: 40}, {Name: "MatMul+GELUGrad", Total: 5}}}
	require.InDelta(t, 0.30, pr.Share("Linear"), 1e-12)
	require.InDelta(t, 0.35, pr.Share("Linear", "MatMul"), 1e-12)
	require.InDelta(t, 0.35, pr.Share("Linear", "Linear", "MatMul"), 1e-12, "a type listed twice counts once")
}
