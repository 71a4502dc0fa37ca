package recipe

import (
	"strings"
	"testing"

	"github.com/octetml/octet/fp8"
)

func TestTERecipeDefaults(t *testing.T) {
	var r TE
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if r.Margin != 0 || r.EffectiveInterval() != 1 || r.Format != Hybrid || r.HistoryLen() != 1024 ||
		r.AmaxComputeAlgo != fp8.MostRecent || r.OverrideLinearPrecision != (Override{}) || r.UseAutocastDuringEval || r.UseMXFP8BlockScaling {
		t.Fatalf("zero TE is not Accelerate's default: %+v", r)
	}
	if r.Format.Forward() != fp8.E4M3 || r.Format.Backward() != fp8.E5M2 {
		t.Fatal("HYBRID formats")
	}
	if AllE4M3.Backward() != fp8.E4M3 || AllE5M2.Forward() != fp8.E5M2 {
		t.Fatal("E4M3/E5M2 formats")
	}
	m := r.NewMeta(true)
	if m.Format != fp8.E5M2 || len(m.History) != 1024 || m.Scale != 1 {
		t.Fatalf("meta %v", m)
	}
}

func TestMXFP8RefusesAmaxSettings(t *testing.T) {
	if err := (TE{UseMXFP8BlockScaling: true}).Validate(); err != nil {
		t.Fatalf("plain MXFP8 refused: %v", err)
	}
	for _, r := range []TE{
		{UseMXFP8BlockScaling: true, AmaxHistoryLen: 16},
		{UseMXFP8BlockScaling: true, AmaxComputeAlgo: fp8.MaxAlgo},
	} {
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), "amax_history_len") || !strings.Contains(err.Error(), "use_mxfp8_block_scaling") {
			t.Errorf("%+v: error %v should say what to change", r, err)
		}
	}
}

func TestAORecipes(t *testing.T) {
	tw, err := NewAO("tensorwise")
	if err != nil || tw.Validate() != nil {
		t.Fatal(err, tw.Validate())
	}
	if tw.Input != (fp8.Quantizer{Kind: fp8.CurrentScaling, Format: fp8.E4M3}) || tw.GradOutput.Format != fp8.E5M2 || !tw.PadInnerDim || !tw.EnableFSDPFloat8AllGather ||
		tw.GradOutputForGradWeight != tw.GradOutput {
		t.Fatalf("tensorwise %+v", tw)
	}
	rw, _ := NewAO("rowwise")
	if rw.Validate() != nil || rw.GradOutput.Format != fp8.E4M3 || !rw.Weight.Axiswise || !rw.RoundScalesToPowerOf2 || rw.EnableFSDPFloat8AllGather {
		t.Fatalf("rowwise %+v", rw)
	}
	hp, _ := NewAO("rowwise_with_gw_hp")
	if hp.Validate() != nil || hp.InputForGradWeight.Kind != fp8.HighPrecision || hp.GradOutputForGradWeight.Kind != fp8.HighPrecision || hp.WeightForGradInput.Axiswise {
		t.Fatalf("rowwise_with_gw_hp %+v", hp)
	}
	if _, err := NewAO("blockwise"); err == nil || !strings.Contains(err.Error(), "rowwise_with_gw_hp") {
		t.Fatalf("unknown recipe error %v", err)
	}
	// Invalid combinations say what to change.
	e5 := rw
	e5.Input.Format, e5.Weight.Format = fp8.E5M2, fp8.E5M2
	if err := e5.Validate(); err == nil || !strings.Contains(err.Error(), "E5M2") || !strings.Contains(err.Error(), "E4M3") {
		t.Errorf("pure-E5M2 rowwise: %v", err)
	}
	ag := rw
	ag.EnableFSDPFloat8AllGather = true
	if err := ag.Validate(); err == nil || !strings.Contains(err.Error(), "tensorwise") {
		t.Errorf("float8 all-gather with rowwise weights: %v", err)
	}
	half := tw
	half.InputForGradWeight = fp8.Quantizer{}
	if err := half.Validate(); err == nil || !strings.Contains(err.Error(), "grad_weight") {
		t.Errorf("half-disabled wgrad: %v", err)
	}
}

func TestMSAMPRecipe(t *testing.T) {
	var r MSAMP
	if r.Level() != "O2" || r.Validate() != nil {
		t.Fatal("zero MSAMP is not O2")
	}
	if err := (MSAMP{OptLevel: "O1"}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := (MSAMP{OptLevel: "O3"}).Validate()
	if err == nil || !strings.Contains(err.Error(), "DeepSpeed") || !strings.Contains(err.Error(), "float8 all-gather") {
		t.Fatalf("O3: %v", err)
	}
}

// TestAmaxHistoryLenBound refuses a window above MaxAmaxHistoryLen and
// accepts the maximum.
func TestAmaxHistoryLenBound(t *testing.T) {
	if err := (TE{AmaxHistoryLen: MaxAmaxHistoryLen + 1}).Validate(); err == nil {
		t.Fatal("a window above the maximum validated")
	}
	if err := (TE{AmaxHistoryLen: MaxAmaxHistoryLen}).Validate(); err != nil {
		t.Fatalf("the maximum window: %v", err)
	}
}

// TestMarginBound refuses a margin that would send every tensor's amax
// below the smallest subnormal, (precision reads the environment).
func TestMarginBound(t *testing.T) {
	if fp8.E4M3.MaxMargin() != 17 || fp8.E5M2.MaxMargin() != 31 {
		t.Fatalf("max margins %d, %d; want 17, 31", fp8.E4M3.MaxMargin(), fp8.E5M2.MaxMargin())
	}
	for _, c := range []struct {
		r  TE
		ok bool
	}{
		{TE{Margin: 17}, true}, {TE{Margin: 18}, false},
		{TE{Margin: 31, Format: AllE5M2}, true}, {TE{Margin: 32, Format: AllE5M2}, false},
		{TE{Margin: 1000, UseMXFP8BlockScaling: true}, true}, // MXFP8 has no margin
	} {
		if err := c.r.Validate(); (err == nil) != c.ok {
			t.Fatalf("%+v: %v", c.r, err)
		}
	}
}
