//go:build purego

package main

// pureGo is set in the purego build, where every kernel is its Go twin:
// the many-step training tests then take too long and skip (the twins
// have their own tests against the vector kernels).
const pureGo = true
