package recipes

import (
	"testing"

	"github.com/octetml/octet/fp8"
	"github.com/stretchr/testify/require"
)

func TestMakeAndLabel(t *testing.T) {
	cases := []struct {
		backend, format, ao, level string
		label                      string
	}{
		{"te", "HYBRID", "", "", "te/HYBRID"},
		{"te", "e4m3", "", "", "te/E4M3"},
		{"ao", "", fp8.AORowwise, "", "ao/" + fp8.AORowwise},
		{"ao", "", "", "", "ao/" + fp8.AOTensorwise},
		{"msamp", "", "", "O1", "msamp/O1"},
		{"msamp", "", "", "", "msamp/O2"},
	}
	for _, c := range cases {
		r, err := Make(c.backend, c.format, c.ao, c.level)
		require.NoError(t, err, c.label)
		require.Equal(t, c.backend, r.Backend().String())
		require.Equal(t, c.label, Label(r))
	}
	require.Equal(t, "-", Label(nil))
	require.Equal(t, "te/E5M2/mxfp8", Label(fp8.TERecipe{Format: fp8.AllE5M2, UseMXFP8BlockScaling: true}))
}

func TestMakeErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct{ backend, format, ao, level, flag string }{
		{"te", "E3M4", "", "", "-format"},
		{"ao", "", "blockwise", "", "-ao"},
		{"msamp", "", "", "O3", "-opt-level"},
		{"deepspeed", "", "", "", "-recipe"},
	} {
		_, err := Make(c.backend, c.format, c.ao, c.level)
		require.ErrorContains(t, err, c.flag)
	}
}

func TestLabelFollowsEnvironment(t *testing.T) {
	t.Setenv(fp8.EnvPrefix+"FORMAT", "E4M3")
	r, err := Make("te", "HYBRID", "", "")
	require.NoError(t, err)
	require.Equal(t, "te/E4M3", Label(r))
	t.Setenv(fp8.EnvPrefix+"FORMAT", "E9M9")
	_, err = Make("te", "HYBRID", "", "")
	require.ErrorContains(t, err, fp8.EnvPrefix+"FORMAT")
}

func TestMeanTail(t *testing.T) {
	require.Zero(t, MeanTail(nil, 3))
	require.InDelta(t, 2.5, MeanTail([]float32{9, 2, 3}, 2), 1e-12)
	require.InDelta(t, 14.0/3, MeanTail([]float32{9, 2, 3}, 10), 1e-12)
}

func TestPrecisions(t *testing.T) {
	for s, want := range map[string][]string{"fp32": {"fp32"}, "bf16": {"bf16"}, "fp8": {"fp8"}, "both": {"fp32", "fp8"}, "all": {"fp32", "bf16", "fp8"}} {
		got, err := Precisions(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	_, err := Precisions("fp16")
	require.ErrorContains(t, err, "-precision")
	r, err := ForPrecision("bf16", "te", "HYBRID", "", "")
	require.NoError(t, err)
	require.Equal(t, fp8.BF16Recipe{}, r)
	require.Equal(t, "bf16", Label(r))
	r, err = ForPrecision("fp32", "te", "HYBRID", "", "")
	require.NoError(t, err)
	require.Nil(t, r)
	r, err = ForPrecision("fp8", "te", "HYBRID", "", "")
	require.NoError(t, err)
	require.Equal(t, "te/HYBRID", Label(r))
	_, err = ForPrecision("both", "te", "HYBRID", "", "")
	require.ErrorContains(t, err, "-precision")
	require.Equal(t, "FP8", PrecisionName("fp8"))
	require.Equal(t, "float32", PrecisionName("fp32"))
	require.Equal(t, "bf16", PrecisionName("bf16"))
}

func TestCheckRecipeFlags(t *testing.T) {
	require.NoError(t, CheckRecipeFlags("te", nil))
	require.NoError(t, CheckRecipeFlags("te", map[string]string{"format": "E4M3", "epochs": "3"}))
	require.ErrorContains(t, CheckRecipeFlags("te", map[string]string{"opt-level": "O1"}), "-opt-level applies to -recipe msamp only; -recipe te reads -format")
	require.ErrorContains(t, CheckRecipeFlags("te", map[string]string{"ao": "rowwise"}), "-ao applies to -recipe ao")
	require.ErrorContains(t, CheckRecipeFlags("ao", map[string]string{"format": "E4M3"}), "-recipe ao reads -ao")
	t.Setenv(fp8.EnvPrefix+"FORMAT", "E5M2")
	require.ErrorContains(t, CheckRecipeFlags("te", map[string]string{"format": "E4M3"}), "OCTET_FP8_FORMAT=E5M2 disagree")
	require.NoError(t, CheckRecipeFlags("te", map[string]string{"format": "e5m2"}), "the same value is no conflict")
	t.Setenv(fp8.EnvPrefix+"OPT_LEVEL", "O3")
	_, err := Make("msamp", "", "", "O2")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "-opt-level", "an environment error does not blame the flag")
}
