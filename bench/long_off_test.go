//go:build !long

package main

// longTests is false in the default build: the tests that train the baby
// GPT for 50 steps twice per precision take minutes on CPUs without
// AVX-512 and run with -tags long (as .ci/run does), so that `go test
// ./...` stays well inside go test's 10 minutes per package.
const longTests = false
