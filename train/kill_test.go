package train_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/octetml/octet/train"
	"github.com/stretchr/testify/require"
)

// TestKilledDuringSave: a process killed (SIGKILL) in the middle of a save
// leaves the previous checkpoint whole; the run resumes from it and ends
// where a run never interrupted ends, to the bit.
func TestKilledDuringSave(t *testing.T) {
	if dir := os.Getenv("OCTET_TRAIN_KILL_DIR"); dir != "" {
		saves := 0
		train.SetSaveHook(func(string) {
			if saves++; saves == 2 { // the checkpoint of step 6, written but not yet in place
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		})
		_, err := trainer(t, "fp8", "te", nil).Fit(blobs(t, 100, 1), train.Run{Steps: 12, SaveDir: dir, SaveEvery: 3})
		require.NoError(t, err)
		t.Fatal("not killed")
	}
	dir := t.TempDir()
	// A child that is not killed as planned must not outlive the test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestKilledDuringSave$", "-test.timeout", "2m")
	cmd.Env = append(os.Environ(), "OCTET_TRAIN_KILL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v: %s", err, out)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "%s", out)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{".tmp-checkpoint-6", "checkpoint-3"}, names)

	ref := trainer(t, "fp8", "te", nil)
	straight, err := ref.Fit(blobs(t, 100, 1), train.Run{Steps: 12})
	require.NoError(t, err)
	resumed := trainer(t, "fp8", "te", nil)
	res, err := resumed.Fit(blobs(t, 100, 1), train.Run{Steps: 12, Resume: dir, SaveDir: dir, SaveEvery: 3})
	require.NoError(t, err)
	require.Equal(t, 3, res.First)
	require.Equal(t, bits(straight.Losses[3:]), bits(res.Losses))
	require.Equal(t, snapshot(t, ref.Store()), snapshot(t, resumed.Store()))
	_, err = os.Stat(filepath.Join(dir, ".tmp-checkpoint-6"))
	require.True(t, os.IsNotExist(err), "the stale temporary is cleared")
}
