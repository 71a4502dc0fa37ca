package kernels

// fma32 is a·b + c rounded once to nearest even: on arm64 the Go
// compiler fuses a float32 multiply whose only use is an add into one
// FMADD (single rounding, IEEE subnormals: Go leaves FPCR's
// flush-to-zero off), which is fma32Emulated's result at a fraction of
// its cost. c is converted explicitly, which rounds it (the Go spec):
// where the caller's c is itself a product, as in fma32(x, y, u*v),
// the compiler could otherwise fuse u*v instead of a*b. TestFMA32, run
// for arm64 under qemu in CI, checks both against math/big.
func fma32(a, b, c float32) float32 { return a*b + float32(c) } // fused: on purpose
