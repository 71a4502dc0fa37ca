package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/octetml/octet/recipe"
	"github.com/stretchr/testify/require"
)

// TestLoadRestoresEveryGenerator: a State with no RNG map gets every
// generator state the file holds; a name the file lacks is an error.
func TestLoadRestoresEveryGenerator(t *testing.T) {
	r := newRun(t, nil)
	r.steps(t, 3)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	saved := r.state(t)
	saved.RNG["other"] = []byte{1, 2, 3}
	require.NoError(t, Save(path, saved))

	st := r.state(t)
	st.RNG = nil
	require.NoError(t, Load(path, st))
	require.Equal(t, saved.RNG, st.RNG)

	st = r.state(t)
	st.RNG = map[string][]byte{"missing": nil}
	require.ErrorContains(t, Load(path, st), `generator state "missing" is missing`)
}

// TestLoadRefusesDroppedOptimizerState: a file with optimizer state does
// not load into a State without an optimizer unless SkipOptimizer says so.
func TestLoadRefusesDroppedOptimizerState(t *testing.T) {
	r := newRun(t, nil)
	r.steps(t, 2)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, Save(path, r.state(t)))
	st := r.state(t)
	st.Optimizer = nil
	err := Load(path, st)
	require.ErrorIs(t, err, ErrOptimizerState)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "SkipOptimizer")
	st.SkipOptimizer = true
	require.NoError(t, Load(path, st))
	// A file saved without an optimizer loads either way.
	st = r.state(t)
	st.Optimizer = nil
	bare := filepath.Join(t.TempDir(), "bare.safetensors")
	require.NoError(t, Save(bare, st))
	require.NoError(t, Load(bare, &State{Store: r.store}))
}

// TestLoadErrorKinds: callers tell a corrupt file, a file of another run
// and a load before Prepare apart with errors.Is.
func TestLoadErrorKinds(t *testing.T) {
	dir := t.TempDir()
	r := newRun(t, recipe.TE{})
	r.steps(t, 1)
	path := filepath.Join(dir, "c.safetensors")
	require.NoError(t, Save(path, r.state(t)))

	good, err := os.ReadFile(path)
	require.NoError(t, err)
	bad := filepath.Join(dir, "bad.safetensors")
	require.NoError(t, os.WriteFile(bad, good[:len(good)-3], 0o644))
	err = Load(bad, r.state(t))
	require.ErrorIs(t, err, ErrCorrupt)
	require.False(t, errors.Is(err, ErrMismatch))

	st := r.state(t)
	st.Meta["model"] = "another"
	err = Load(path, st)
	require.ErrorIs(t, err, ErrMismatch)
	require.False(t, errors.Is(err, ErrCorrupt))

	// A model that was never prepared: its store has no FP8 state.
	fresh := newRun(t, nil)
	err = Load(path, fresh.state(t))
	require.ErrorIs(t, err, ErrNotPrepared)
	require.ErrorContains(t, err, "after passes.Prepare")
}

// TestSavedFilesAreReadable: checkpoints are written 0644 (less the
// umask), not os.CreateTemp's 0600.
func TestSavedFilesAreReadable(t *testing.T) {
	r := newRun(t, nil)
	path := filepath.Join(t.TempDir(), "c.safetensors")
	require.NoError(t, Save(path, r.state(t)))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode().Perm()&0o044, "mode %v", fi.Mode().Perm())
}
