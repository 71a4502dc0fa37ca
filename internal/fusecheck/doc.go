// Package fusecheck holds one test: that the Go compiler fuses no
// floating-point multiply and add into one instruction anywhere in the
// module, except on lines that say why it may.
//
// The Go specification lets an implementation fuse x*y + z into one
// rounding ("possibly across statements"); the arm64 compiler does
// (FMADD, FMSUB, FNMADD, FNMSUB), the amd64 compiler does not by
// default (it does with GOAMD64=v3). A fused line gives other bits on
// arm64 than on amd64, and Octet promises a run's numbers do not depend
// on the machine. An explicit conversion rounds (float32(x*y) + z), so
// it prevents the fusion; a line where fusing cannot change a bit (an
// exact product) or is meant says so with a comment containing
// "fused:".
package fusecheck
