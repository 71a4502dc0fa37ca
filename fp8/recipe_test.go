package fp8

import (
	"strings"
	"testing"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestTERecipeDefaults(t *testing.T) {
	var r TERecipe
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if r.Margin != 0 || r.EffectiveInterval() != 1 || r.Format != Hybrid || r.HistoryLen() != 1024 ||
		r.AmaxComputeAlgo != MostRecent || r.OverrideLinearPrecision != (Override{}) || r.UseAutocastDuringEval || r.UseMXFP8BlockScaling {
		t.Fatalf("zero TERecipe is not Accelerate's default: %+v", r)
	}
	if r.Format.Forward() != E4M3 || r.Format.Backward() != E5M2 {
		t.Fatal("HYBRID formats")
	}
	if AllE4M3.Backward() != E4M3 || AllE5M2.Forward() != E5M2 {
		t.Fatal("E4M3/E5M2 formats")
	}
	m := r.NewMeta(true)
	if m.Format != E5M2 || len(m.History) != 1024 || m.Scale != 1 {
		t.Fatalf("meta %v", m)
	}
}

func TestTERecipeFromEnv(t *testing.T) {
	r, err := teRecipeFrom(TERecipe{}, envOf(map[string]string{
		"OCTET_FP8_MARGIN": "2", "OCTET_FP8_INTERVAL": "4", "OCTET_FP8_FORMAT": "e4m3",
		"OCTET_FP8_AMAX_HISTORY_LEN": "16", "OCTET_FP8_AMAX_COMPUTE_ALGO": "max",
		"OCTET_FP8_OVERRIDE_WGRAD": "true", "OCTET_FP8_USE_AUTOCAST_DURING_EVAL": "1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := TERecipe{Margin: 2, Interval: 4, Format: AllE4M3, AmaxHistoryLen: 16, AmaxComputeAlgo: MaxAlgo,
		OverrideLinearPrecision: Override{Wgrad: true}, UseAutocastDuringEval: true, amaxSet: true}
	if r != want {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	for _, c := range []struct{ name, val, allowed string }{
		{"OCTET_FP8_FORMAT", "E3M4", "HYBRID, E4M3 or E5M2"},
		{"OCTET_FP8_AMAX_COMPUTE_ALGO", "mean", "max or most_recent"},
		{"OCTET_FP8_MARGIN", "-1", "integer"},
		{"OCTET_FP8_INTERVAL", "0", "integer ≥ 1"},
		{"OCTET_FP8_AMAX_HISTORY_LEN", "many", "integer"},
		{"OCTET_FP8_OVERRIDE_DGRAD", "maybe", "true or false"},
		{"OCTET_FP8_MXFP8_RULE", "nearest", "round_up or ocp_floor"},
	} {
		_, err := teRecipeFrom(TERecipe{}, envOf(map[string]string{c.name: c.val}))
		if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.allowed) {
			t.Errorf("%s=%s: error %v should name the variable and %q", c.name, c.val, err, c.allowed)
		}
	}
}

func TestMXFP8RefusesAmaxSettings(t *testing.T) {
	if err := (TERecipe{UseMXFP8BlockScaling: true}).Validate(); err != nil {
		t.Fatalf("plain MXFP8 refused: %v", err)
	}
	for _, r := range []TERecipe{
		{UseMXFP8BlockScaling: true, AmaxHistoryLen: 16},
		{UseMXFP8BlockScaling: true, AmaxComputeAlgo: MaxAlgo},
	} {
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), "amax_history_len") || !strings.Contains(err.Error(), "use_mxfp8_block_scaling") {
			t.Errorf("%+v: error %v should say what to change", r, err)
		}
	}
	_, err := teRecipeFrom(TERecipe{}, envOf(map[string]string{"OCTET_FP8_USE_MXFP8_BLOCK_SCALING": "true", "OCTET_FP8_AMAX_COMPUTE_ALGO": "most_recent"}))
	if err == nil {
		t.Error("MXFP8 with an amax algo from the environment accepted")
	}
}

func TestAORecipes(t *testing.T) {
	tw, err := NewAORecipe("tensorwise")
	if err != nil || tw.Validate() != nil {
		t.Fatal(err, tw.Validate())
	}
	if tw.Input != (CastConfig{Format: E4M3}) || tw.GradOutput.Format != E5M2 || !tw.PadInnerDim || !tw.EnableFSDPFloat8AllGather ||
		tw.GradOutputForGradWeight != tw.GradOutput {
		t.Fatalf("tensorwise %+v", tw)
	}
	rw, _ := NewAORecipe("rowwise")
	if rw.Validate() != nil || rw.GradOutput.Format != E4M3 || rw.Weight.Granularity != Axiswise || !rw.RoundScalesToPowerOf2 || rw.EnableFSDPFloat8AllGather {
		t.Fatalf("rowwise %+v", rw)
	}
	hp, _ := NewAORecipe("rowwise_with_gw_hp")
	if hp.Validate() != nil || !hp.InputForGradWeight.Disabled || !hp.GradOutputForGradWeight.Disabled || hp.WeightForGradInput.Granularity != Tensorwise {
		t.Fatalf("rowwise_with_gw_hp %+v", hp)
	}
	if _, err := NewAORecipe("blockwise"); err == nil || !strings.Contains(err.Error(), "rowwise_with_gw_hp") {
		t.Fatalf("unknown recipe error %v", err)
	}
	// Invalid combinations say what to change.
	e5 := rw
	e5.Input.Format, e5.Weight.Format = E5M2, E5M2
	if err := e5.Validate(); err == nil || !strings.Contains(err.Error(), "E5M2") || !strings.Contains(err.Error(), "E4M3") {
		t.Errorf("pure-E5M2 rowwise: %v", err)
	}
	ag := rw
	ag.EnableFSDPFloat8AllGather = true
	if err := ag.Validate(); err == nil || !strings.Contains(err.Error(), "tensorwise") {
		t.Errorf("float8 all-gather with rowwise weights: %v", err)
	}
	half := tw
	half.InputForGradWeight.Disabled = true
	if err := half.Validate(); err == nil || !strings.Contains(err.Error(), "grad_weight") {
		t.Errorf("half-disabled wgrad: %v", err)
	}
	env, err := aoRecipeFrom(tw, envOf(map[string]string{"OCTET_FP8_RECIPE_NAME": "rowwise", "OCTET_FP8_PAD_INNER_DIM": "false"}))
	if err != nil || env.Name != "rowwise" || env.PadInnerDim {
		t.Fatalf("AO from env: %+v %v", env, err)
	}
	if _, err := aoRecipeFrom(tw, envOf(map[string]string{"OCTET_FP8_RECIPE_NAME": "fast"})); err == nil || !strings.Contains(err.Error(), "OCTET_FP8_RECIPE_NAME") {
		t.Fatalf("bad AO recipe name: %v", err)
	}
	if _, err := aoRecipeFrom(rw, envOf(map[string]string{"OCTET_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER": "1"})); err == nil {
		t.Fatal("rowwise with float8 all-gather from env accepted")
	}
}

func TestMSAMPRecipe(t *testing.T) {
	var r MSAMPRecipe
	if r.Level() != "O2" || r.Validate() != nil {
		t.Fatal("zero MSAMPRecipe is not O2")
	}
	if err := (MSAMPRecipe{OptLevel: "O1"}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := (MSAMPRecipe{OptLevel: "O3"}).Validate()
	if err == nil || !strings.Contains(err.Error(), "DeepSpeed") || !strings.Contains(err.Error(), "float8 all-gather") {
		t.Fatalf("O3: %v", err)
	}
	if _, err := msampRecipeFrom(r, envOf(map[string]string{"OCTET_FP8_OPT_LEVEL": "O4"})); err == nil || !strings.Contains(err.Error(), "OCTET_FP8_OPT_LEVEL") {
		t.Fatalf("O4 from env: %v", err)
	}
	got, err := msampRecipeFrom(r, envOf(map[string]string{"OCTET_FP8_OPT_LEVEL": "o1"}))
	if err != nil || got.Level() != "O1" {
		t.Fatalf("o1 from env: %v %v", got, err)
	}
}

// FuzzRecipeFromEnv feeds arbitrary values to every variable: the parsers
// return a valid recipe or an error naming a variable, never panic.
func FuzzRecipeFromEnv(f *testing.F) {
	f.Add("2", "HYBRID", "1024", "max", "true", "rowwise", "O2")
	f.Add("-3", "e5m2", "0", "", "maybe", "x", "O3")
	f.Fuzz(func(t *testing.T, margin, format, hist, algo, flag, name, level string) {
		env := envOf(map[string]string{
			"OCTET_FP8_MARGIN": margin, "OCTET_FP8_FORMAT": format, "OCTET_FP8_AMAX_HISTORY_LEN": hist,
			"OCTET_FP8_AMAX_COMPUTE_ALGO": algo, "OCTET_FP8_OVERRIDE_FPROP": flag, "OCTET_FP8_USE_MXFP8_BLOCK_SCALING": flag,
			"OCTET_FP8_RECIPE_NAME": name, "OCTET_FP8_PAD_INNER_DIM": flag, "OCTET_FP8_OPT_LEVEL": level,
		})
		if r, err := teRecipeFrom(TERecipe{}, env); err == nil {
			if r.Validate() != nil {
				t.Fatalf("invalid TE recipe accepted: %+v", r)
			}
		} else if !strings.Contains(err.Error(), "OCTET_FP8_") && !strings.Contains(err.Error(), "TE recipe") {
			t.Fatalf("error names nothing: %v", err)
		}
		if r, err := aoRecipeFrom(AORecipe{Name: "tensorwise", Input: CastConfig{Format: E4M3}, Weight: CastConfig{Format: E4M3}, GradOutput: CastConfig{Format: E5M2}}, env); err == nil && r.Validate() != nil {
			t.Fatalf("invalid AO recipe accepted: %+v", r)
		}
		if r, err := msampRecipeFrom(MSAMPRecipe{}, env); err == nil && r.Validate() != nil {
			t.Fatalf("invalid MS-AMP recipe accepted: %+v", r)
		}
	})
}

// TestAmaxHistoryLenBound refuses a window above MaxAmaxHistoryLen from
// the recipe and from the environment, naming the variable, and accepts
// the maximum.
func TestAmaxHistoryLenBound(t *testing.T) {
	if err := (TERecipe{AmaxHistoryLen: MaxAmaxHistoryLen + 1}).Validate(); err == nil {
		t.Fatal("a window above the maximum validated")
	}
	if err := (TERecipe{AmaxHistoryLen: MaxAmaxHistoryLen}).Validate(); err != nil {
		t.Fatalf("the maximum window: %v", err)
	}
	t.Setenv(EnvPrefix+"AMAX_HISTORY_LEN", "100000000000")
	if _, err := TERecipeFromEnv(TERecipe{}); err == nil || !strings.Contains(err.Error(), EnvPrefix+"AMAX_HISTORY_LEN") {
		t.Fatalf("huge OCTET_FP8_AMAX_HISTORY_LEN: %v", err)
	}
}

// TestMarginBound refuses a margin that would send every tensor's amax
// below the smallest subnormal, from the recipe and the environment.
func TestMarginBound(t *testing.T) {
	if E4M3.MaxMargin() != 17 || E5M2.MaxMargin() != 31 {
		t.Fatalf("max margins %d, %d; want 17, 31", E4M3.MaxMargin(), E5M2.MaxMargin())
	}
	for _, c := range []struct {
		r  TERecipe
		ok bool
	}{
		{TERecipe{Margin: 17}, true}, {TERecipe{Margin: 18}, false},
		{TERecipe{Margin: 31, Format: AllE5M2}, true}, {TERecipe{Margin: 32, Format: AllE5M2}, false},
		{TERecipe{Margin: 1000, UseMXFP8BlockScaling: true}, true}, // MXFP8 has no margin
	} {
		if err := c.r.Validate(); (err == nil) != c.ok {
			t.Fatalf("%+v: %v", c.r, err)
		}
	}
	t.Setenv(EnvPrefix+"MARGIN", "1000")
	if _, err := TERecipeFromEnv(TERecipe{}); err == nil || !strings.Contains(err.Error(), "margin 1000") {
		t.Fatalf("OCTET_FP8_MARGIN=1000: %v", err)
	}
}

// TestEnvFieldsAreWhatTheReadersRead: each backend's reader looks up
// exactly the variables EnvFields lists, in its order.
func TestEnvFieldsAreWhatTheReadersRead(t *testing.T) {
	for b, read := range map[Backend]func(func(string) (string, bool)) error{
		BackendTE: func(l func(string) (string, bool)) error { _, err := teRecipeFrom(TERecipe{}, l); return err },
		BackendAO: func(l func(string) (string, bool)) error {
			_, err := aoRecipeFrom(AORecipe{Name: AOTensorwise, Input: CastConfig{Format: E4M3}, Weight: CastConfig{Format: E4M3}, GradOutput: CastConfig{Format: E5M2}}, l)
			return err
		},
		BackendMSAMP: func(l func(string) (string, bool)) error { _, err := msampRecipeFrom(MSAMPRecipe{}, l); return err },
	} {
		var names []string
		if err := read(func(k string) (string, bool) { names = append(names, k); return "", false }); err != nil {
			t.Fatalf("%v: %v", b, err)
		}
		want := EnvFields(b)
		for i := range want {
			want[i] = EnvPrefix + want[i]
		}
		if strings.Join(names, ",") != strings.Join(want, ",") {
			t.Fatalf("%v reads %v, EnvFields says %v", b, names, want)
		}
	}
	if EnvFields(BackendBF16) != nil {
		t.Fatal("bf16 reads no variables")
	}
}
