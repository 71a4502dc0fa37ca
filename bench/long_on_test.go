//go:build long

package main

// longTests runs the tests that train the baby GPT for many steps (see
// long_off_test.go).
const longTests = true
