package graph

import (
	"fmt"
	"strings"
)

// DType is the element type of a node's value.
type DType uint8

// The element types a graph can carry. FP8 values are stored one byte per
// element, NVFP4's 4-bit E2M1 values two per byte; their arithmetic is
// emulated by the fp8 package.
const (
	Invalid DType = iota
	Float32
	Int32
	Float8E4M3
	Float8E5M2
	// Float4E2M1 is NVFP4's element: a value's 2-D view [rows, cols] is
	// stored two codes per byte along one axis, an odd row or column
	// padded with a zero nibble (see Bytes).
	Float4E2M1
)

var dtypeNames = [...]string{
	Invalid:    "invalid",
	Float32:    "float32",
	Int32:      "int32",
	Float8E4M3: "float8_e4m3",
	Float8E5M2: "float8_e5m2",
	Float4E2M1: "float4_e2m1",
}

// String returns the dtype's name, e.g. "float32".
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// Valid reports whether d is one of the dtypes Octet knows.
func (d DType) Valid() bool { return d > Invalid && int(d) < len(dtypeNames) }

// Size returns the number of bytes one element occupies (1 for
// Float4E2M1, whose values take about half that: see Bytes).
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case Float8E4M3, Float8E5M2, Float4E2M1:
		return 1
	}
	return 0
}

// Bytes returns the bytes a value of shape s occupies: its elements
// times Size, or for Float4E2M1 ⌈numel/2⌉ plus one byte per row or
// column of its 2-D view [numel/last, last], whichever is more (room for
// the zero nibble that pads odd rows, packed along either axis).
func (d DType) Bytes(s Shape) int {
	n := s.Numel()
	if d != Float4E2M1 {
		return n * d.Size()
	}
	if n == 0 {
		return 0
	}
	cols := 1
	if len(s) > 0 {
		cols = s[len(s)-1]
	}
	return (n+1)/2 + max(n/cols, cols)
}

// IsFloat8 reports whether d is one of the FP8 formats.
func (d DType) IsFloat8() bool { return d == Float8E4M3 || d == Float8E5M2 }

// IsQuantized reports whether d is a low-precision format whose values
// travel with scales: FP8 or NVFP4's E2M1.
func (d DType) IsQuantized() bool { return d.IsFloat8() || d == Float4E2M1 }

// ParseDType maps a name such as "float32" or "float8_e4m3" to its DType.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i > 0 && strings.EqualFold(n, s) {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("graph: unknown dtype %q (want one of float32, int32, float8_e4m3, float8_e5m2, float4_e2m1)", s)
}

// storage is the arena class a dtype's values live in.
type storage uint8

const (
	storeF32 storage = iota
	storeI32
	storeU8
	numStores
)

func (d DType) storage() storage {
	switch d {
	case Int32:
		return storeI32
	case Float8E4M3, Float8E5M2, Float4E2M1:
		return storeU8
	}
	return storeF32
}
