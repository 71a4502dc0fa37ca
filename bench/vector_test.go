//go:build !purego

package main

// pureGo is set in the purego build (see purego_test.go).
const pureGo = false
