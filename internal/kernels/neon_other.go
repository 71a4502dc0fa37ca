//go:build !arm64 || purego

package kernels

// hasNEON: no NEON kernels in this build.
const hasNEON = false
