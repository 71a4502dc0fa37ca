//go:build !purego

package kernels

import "testing"

// withISA runs f with the NEON kernels and again with the Go twins.
func withISA(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("neon", f)
	defer func(v bool) { hasNEON = v }(hasNEON)
	hasNEON = false
	t.Run("go", f)
}
