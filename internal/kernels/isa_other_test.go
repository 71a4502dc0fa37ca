//go:build (!amd64 && !arm64) || purego

package kernels

import "testing"

// withISA runs f on the only instruction set there is here.
func withISA(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("go", f)
}
