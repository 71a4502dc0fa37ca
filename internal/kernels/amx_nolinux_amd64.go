//go:build !linux && !purego

package kernels

// requestAMX: the AMX kernel is used on Linux only, where the process
// asks for the tile state explicitly.
func requestAMX() bool { return false }
