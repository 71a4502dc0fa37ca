//go:build amd64 && !purego

package kernels

import "testing"

// withISA runs f once per vector instruction set this CPU can run the
// element and row kernels on — "avx512" (if present), "avx2" (AVX-512
// switched off, as on an AVX2-only CPU) and "go" (every vector body off)
// — so that every body is compared with its twin on one machine.
func withISA(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	s512, s2, s16 := hasAVX512, hasAVX2, hasBF16
	defer func() { hasAVX512, hasAVX2, hasBF16 = s512, s2, s16 }()
	if s512 {
		t.Run("avx512", f)
	}
	hasAVX512, hasBF16 = false, false
	if s2 {
		t.Run("avx2", f)
	}
	hasAVX2 = false
	t.Run("go", f)
}
