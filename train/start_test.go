package train_test

import (
	"math"

	"testing"

	"github.com/octetml/octet/graph"

	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// TestFirstFP8Step: delayed scaling's first step casts with scale 1 and
// flushes small gradients; the run reports its worst tensor and warns.
// Calibration steps train in float32 recording the amaxes (their losses
// are the float32 run's), and the first FP8 step then flushes next to
// nothing. Recipes without delayed scaling, and FSDP, refuse it.
func TestFirstFP8Step(t *testing.T) {
	ds := blobs(t, 9600, 2)
	big := func(cal int) func(*train.Config) {
		return func(c *train.Config) { c.Model, c.BatchSize, c.Precision.CalibrationSteps = mlpNoDropout, 4800, cal }
	}
	res, err := trainer(t, "fp8", "te", big(0)).Fit(ds, train.Run{Steps: 3})
	require.NoError(t, err)
	s := res.FP8Start
	require.NotNil(t, s)
	require.Equal(t, 0, s.Step)
	require.False(t, s.Calibrated)
	require.Greater(t, s.Flushed, train.StartWarnShare, "%v", s)
	require.Equal(t, "grad_output", s.Tensor)
	require.Contains(t, res.Warnings, "first FP8 step "+s.String()+": delayed scaling starts at scale 1; calibrate first (-calibrate N, OCTET_FP8_CALIBRATION_STEPS, Precision.CalibrationSteps)")

	res, err = trainer(t, "fp8", "te", big(2)).Fit(ds, train.Run{Steps: 3})
	require.NoError(t, err)
	s = res.FP8Start
	require.NotNil(t, s)
	require.Equal(t, 2, s.Step)
	require.True(t, s.Calibrated)
	require.Less(t, s.Flushed, 0.01, "%v", s)
	require.Empty(t, res.Warnings)
	f32, err := trainer(t, "no", "", big(0)).Fit(ds, train.Run{Steps: 2})
	require.NoError(t, err)
	for i := range 2 {
		require.InEpsilon(t, f32.Losses[i], res.Losses[i], 1e-6, "calibration step %d", i)
	}

	// No delayed scaling: nothing to calibrate.
	_, err = trainer(t, "fp8", "ao", big(2)).Fit(ds, train.Run{Steps: 1})
	require.ErrorIs(t, err, train.ErrConfig)
	require.ErrorContains(t, err, "calibration_steps 2: the ao recipe converted no layer with delayed scaling")
	_, err = trainer(t, "fp8", "te", func(c *train.Config) { big(2)(c); c.FSDP = 2 }).Fit(ds, train.Run{Steps: 1})
	require.ErrorContains(t, err, "calibration does not combine with FSDP")
	// Float32 has no FP8 start.
	res, err = trainer(t, "no", "", nil).Fit(blobs(t, 48, 1), train.Run{Steps: 1})
	require.NoError(t, err)
	require.Nil(t, res.FP8Start)
}

// TestEvaluateBeforeFit: Evaluate before Fit scores the parameters
// training starts from (its loss is the first step's on the same batch),
// with Config.Init's values where it gives them; after Fit it scores the
// trained ones.
func TestEvaluateBeforeFit(t *testing.T) {
	ds := blobs(t, 48, 4)
	var first float32
	for _, mp := range []string{"no", "fp8"} {
		tr := trainer(t, mp, "", func(c *train.Config) { c.Model, c.BatchSize, c.NoShuffle = mlpNoDropout, 48, true })
		before, err := tr.Evaluate(ds)
		require.NoError(t, err, mp)
		res, err := tr.Fit(ds, train.Run{Steps: 3})
		require.NoError(t, err)
		if mp == "no" {
			first = res.Losses[0]
		}
		// TE's evaluation runs in float32 (no use_autocast_during_eval).
		require.InEpsilon(t, first, before.Loss, 1e-6, mp)
		after, err := tr.Evaluate(ds)
		require.NoError(t, err)
		require.Less(t, after.Loss, before.Loss, mp)
	}
	// Init's weights (a loaded model) are the ones scored.
	zero := trainer(t, "no", "", func(c *train.Config) {
		c.Model = mlpNoDropout
		c.Init = func(s *graph.Store) error {
			if err := s.SetFloat32("mlp.fc3.bias", make([]float32, 4), 4); err != nil {
				return err
			}
			return s.SetFloat32("mlp.fc3.weight", make([]float32, 4*64), 4, 64)
		}
	})
	e, err := zero.Evaluate(ds)
	require.NoError(t, err)
	require.InDelta(t, math.Log(4), e.Loss, 1e-6, "a zero last layer: uniform logits")
}
