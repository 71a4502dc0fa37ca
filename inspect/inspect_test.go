package inspect

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = `
fc_stats:
  enabled: True
  layers:
    layer_name_regex_pattern: .*fc[12]$
  transformer_engine:
    LogTensorStats:
      enabled: True
      tensors: [activation, gradient]
      stats: [max, std]
      freq: 2
      start_step: 4
      end_step: 10
    LogFp8TensorStats:
      enabled: True
      tensors_struct:
        - tensor: weight
          stats: [mse]
          start_end_list: [[0, 1], [5, 6]]
    DisableFP8GEMM:
      enabled: True
      gemms: [wgrad, dgrad]
off:
  enabled: False
  layers:
    layer_types: [fc3]
  transformer_engine:
    DisableFP8Layer:
      enabled: True
head:
  enabled: True
  layers:
    layer_types: [head, fc3]
  transformer_engine:
    DisableFP8Layer:
      enabled: True
`

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(sample), "c.yaml")
	require.NoError(t, err)
	require.Len(t, cfg.Sections, 2, "the disabled section is dropped")
	s, ok := cfg.SectionFor("mlp.fc2")
	require.True(t, ok)
	require.Equal(t, "fc_stats", s.Name)
	require.Equal(t, []StatRequest{
		{Tensor: Activation, Stats: []string{"max", "std"}, Schedule: Schedule{Freq: 2, StartStep: 4, EndStep: 10}},
		{Tensor: Gradient, Stats: []string{"max", "std"}, Schedule: Schedule{Freq: 2, StartStep: 4, EndStep: 10}},
	}, s.TensorStats)
	require.Equal(t, []StatRequest{{Tensor: Weight, Stats: []string{"mse"}, Schedule: Schedule{Freq: 1, EndStep: -1, Ranges: [][2]int{{0, 1}, {5, 6}}}}}, s.FP8Stats)
	require.Equal(t, []GEMM{WgradGEMM, DgradGEMM}, s.DisableGEMMs)
	h, ok := cfg.SectionFor("mlp.fc3")
	require.True(t, ok)
	require.Equal(t, "head", h.Name)
	require.True(t, h.DisableLayer)
	_, ok = cfg.SectionFor("mlp.fc10")
	require.False(t, ok, "the regexp is anchored at the end")
	var none *Config
	_, ok = none.SectionFor("x")
	require.False(t, ok)
}

func TestScheduleActive(t *testing.T) {
	s := Schedule{Freq: 2, StartStep: 4, EndStep: 10}
	var on []int64
	for st := int64(0); st < 14; st++ {
		if s.Active(st) {
			on = append(on, st)
		}
	}
	require.Equal(t, []int64{4, 6, 8, 10}, on)
	r := Schedule{Freq: 1, EndStep: -1, Ranges: [][2]int{{0, 1}, {5, 6}}}
	on = nil
	for st := int64(0); st < 9; st++ {
		if r.Active(st) {
			on = append(on, st)
		}
	}
	require.Equal(t, []int64{0, 1, 5, 6}, on)
	require.True(t, Schedule{Freq: 1, EndStep: -1}.Active(1<<40))
	require.False(t, Schedule{}.Active(0), "freq 0 is never")
}

// Every mistake is refused with the line it is on.
func TestParseConfigErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ yaml, says string }{
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStat:\n      enabled: True\n", `c.yaml:5: section a: transformer_engine: unknown key "LogTensorStat"`},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStats:\n      enabled: True\n      tensors: [activation]\n      stats: [max, median]\n", `c.yaml:8: section a: LogTensorStats: stats: unknown name "median"`},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogFp8TensorStats:\n      enabled: True\n      tensors: [output]\n      stats: [mse]\n", `c.yaml:7: section a: LogFp8TensorStats: tensors: unknown name "output"`},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    DisableFP8GEMM:\n      enabled: True\n      gemms: [fprop, xgrad]\n", `c.yaml:7: section a: DisableFP8GEMM: gemms: unknown name "xgrad"`},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStats:\n      enabled: True\n      tensors: [weight]\n      stats: [max]\n      frequency: 3\n", `c.yaml:9: section a: LogTensorStats: unknown key "frequency"`},
		{"a:\n  enabled: yes please\n  layers: {layer_types: [x]}\n", "c.yaml:2: section a: enabled: want True or False"},
		{"a:\n  layers: {layer_types: [x]}\n", "c.yaml:2: section a: no enabled field"},
		{"a:\n  enabled: True\n", "section a: no layers field"},
		{"a:\n  enabled: True\n  layers: {layer_name_regex_pattern: '('}\n", "c.yaml:3: section a: layers: layer_name_regex_pattern"},
		{"a:\n  enabled: True\n  layers: {}\n", "want layer_name_regex_pattern or layer_types"},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStats:\n      enabled: True\n      tensors: [weight]\n      stats: [max]\n      freq: 0\n", "c.yaml:9: section a: LogTensorStats: freq: want an integer ≥ 1"},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStats:\n      enabled: True\n      tensors: [weight]\n      stats: [max]\n      start_step: 5\n      end_step: 2\n", "end_step 2 is before start_step 5"},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStats:\n      enabled: True\n      tensors: [weight]\n", "no stats for the tensors"},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    LogTensorStats:\n      enabled: True\n      stats: [max]\n", "no tensors (tensors or tensors_struct)"},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    FakeQuant:\n      enabled: True\n      gemms: [fprop]\n      tensors: [activation]\n", "c.yaml:6: section a: FakeQuant: no quant_format (FP8E4M3 or FP8E5M2)"},
		{"a:\n  enabled: True\n  layers: {layer_types: [x]}\n  extra: 1\n", `c.yaml:4: section a: unknown key "extra"`},
		{"- a\n- b\n", "c.yaml:1: the config is a mapping of sections"},
		{"", "the config is empty"},
		{"a: [unclosed\n", "c.yaml"},
	} {
		_, err := ParseConfig(strings.NewReader(c.yaml), "c.yaml")
		require.Error(t, err, c.yaml)
		require.Contains(t, err.Error(), c.says, c.yaml)
	}
	// A disabled feature needs none of its parameters.
	_, err := ParseConfig(strings.NewReader("a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    PerTensorScaling:\n      enabled: False\n"), "c.yaml")
	require.NoError(t, err)
	cfg, err := ParseConfig(strings.NewReader("a:\n  enabled: True\n  layers: {layer_types: [x]}\n  transformer_engine:\n    FakeQuant: {enabled: True, gemms: [wgrad], quant_format: FP8E5M2}\n    PerTensorScaling: {enabled: True, gemms_struct: [{gemm: dgrad, tensors: [weight]}]}\n"), "c.yaml")
	require.NoError(t, err)
	s := cfg.Sections[0]
	require.Equal(t, []GEMMTensor{{WgradGEMM, Gradient}, {WgradGEMM, Activation}}, s.FakeQuant, "every operand of the GEMM")
	require.Equal(t, "FP8E5M2", s.FakeQuantFormat)
	require.True(t, s.Fake(WgradGEMM, Activation))
	require.False(t, s.Fake(Fprop, Activation))
	require.Equal(t, []GEMMTensor{{DgradGEMM, Weight}}, s.PerTensorScaling)
	require.True(t, s.PerTensor(DgradGEMM, Weight))
	require.False(t, s.PerTensor(DgradGEMM, Gradient))
}

// The statistics against their definitions in float64.
func TestTensorStatsOf(t *testing.T) {
	x := []float32{-3, 0.5, 0, 2, -0.25}
	names := append([]string(nil), TensorStats...)
	out := make([]float64, len(names))
	TensorStatsOf(x, names, out)
	mean := (-3 + 0.5 + 0 + 2 - 0.25) / 5.0
	var v float64
	for _, a := range x {
		v += (float64(a) - mean) * (float64(a) - mean)
	}
	want := []float64{-3, 2, mean, math.Sqrt(v / 4), 5.75, math.Sqrt(9 + 0.25 + 4 + 0.0625), 3, math.Log2(3 / 0.25)}
	for i := range names {
		require.InDelta(t, want[i], out[i], 1e-12, names[i])
	}
	TensorStatsOf([]float32{0, 0}, []string{"dynamic_range", "std"}, out)
	require.Equal(t, []float64{0, 0}, out[:2])
	TensorStatsOf([]float32{1, float32(math.NaN())}, []string{"max"}, out)
	require.True(t, math.IsNaN(out[0]))
	TensorStatsOf(nil, []string{"min"}, out)
	require.True(t, math.IsNaN(out[0]))
	TensorStatsOf([]float32{4}, []string{"std", "mean"}, out)
	require.True(t, math.IsNaN(out[0]))
	require.Equal(t, 4.0, out[1])
}

func TestFP8Partial(t *testing.T) {
	var c Partial
	c.Reset()
	c.Scale(0.5)
	c.Scale(2)
	negZero := float32(math.Copysign(0, -1))
	c.AddCast(1e-9, 0, false)        // code 0x00: an underflow, and flushed
	c.AddCast(0, 0, false)           // an exact zero: code 0x00, an underflow (TE), not flushed
	c.AddCast(-1e-9, negZero, false) // code 0x80: flushed, not an underflow (TE)
	c.AddCast(500, 448, true)        // saturated
	c.AddCast(1, 1.125, false)
	require.Equal(t, []string{"underflows%", "flushed%", "overflows%", "scale_inv_min", "scale_inv_max", "mse"}, FP8Stats)
	out := make([]float64, len(FP8Stats))
	c.FP8Stats(FP8Stats, out)
	require.Equal(t, 40.0, out[0], "underflows%: two codes 0x00 of five")
	require.Equal(t, 40.0, out[1], "flushed%: two non-zero values of five")
	require.Equal(t, 20.0, out[2])
	require.Equal(t, 0.5, out[3])
	require.Equal(t, 2.0, out[4])
	require.InDelta(t, (2e-18+52*52+0.125*0.125)/5, out[5], 1e-9)
	c.Reset()
	c.FP8Stats([]string{"mse"}, out)
	require.True(t, math.IsNaN(out[0]))
}

// Partials of parts of a tensor, encoded, decoded and merged (as ranks
// do), give the statistics of the whole.
func TestPartialsMerge(t *testing.T) {
	x := []float32{-3, 0.5, 0, 2, -0.25, 7, 1e-3, -0.5, 4}
	names := append([]string(nil), TensorStats...)
	want := make([]float64, len(names))
	TensorStatsOf(x, names, want)
	var merged, part, back Partial
	merged.Reset()
	buf := make([]float32, PartialLen)
	for _, piece := range [][]float32{x[:2], x[2:7], x[7:]} {
		part.Reset()
		part.AddTensor(piece)
		part.Scale(0.25)
		part.Encode(buf)
		back.Decode(buf)
		merged.Merge(&back)
	}
	got := make([]float64, len(names))
	merged.TensorStats(names, got)
	for i, n := range names {
		require.InDelta(t, want[i], got[i], 1e-6*math.Max(1, math.Abs(want[i])), n)
	}
	require.Equal(t, 0.25, merged.InvMin)
	part.Reset()
	part.AddTensor([]float32{float32(math.NaN())})
	merged.Merge(&part)
	merged.TensorStats([]string{"max"}, got)
	require.True(t, math.IsNaN(got[0]), "a NaN on any rank")
}

func TestLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, err := OpenLog(dir, 0)
	require.NoError(t, err)
	l.Write(3, "mlp.fc1", Activation, "max", 1.5)
	l.Write(3, "mlp.fc1", Weight, "mse", math.NaN())
	l.Write(4, `odd "name"`, Gradient, "min", math.Inf(-1))
	allocs := testing.AllocsPerRun(10, func() { l.Write(5, "mlp.fc1", Output, "l2_norm", 0.1) })
	require.Zero(t, allocs)
	require.NoError(t, l.Close())
	r1, err := OpenLog(dir, 1)
	require.NoError(t, err)
	r1.Write(3, "mlp.fc1", Activation, "max", 2)
	require.NoError(t, r1.Close())
	got, err := ReadStats(dir)
	require.NoError(t, err)
	require.Len(t, got, 3+11+1)
	require.Equal(t, Stat{Step: 3, Layer: "mlp.fc1", Tensor: Activation, Stat: "max", Value: 1.5}, got[0])
	require.True(t, math.IsNaN(got[1].Value))
	require.Equal(t, `odd "name"`, got[2].Layer)
	require.True(t, math.IsInf(got[2].Value, -1))
	require.Equal(t, 2.0, got[len(got)-1].Value, "rank 1's file after rank 0's")
	_, err = ReadStats(t.TempDir())
	require.ErrorContains(t, err, "no "+LogFile)
}
