package graph

import (
	"fmt"
	"strconv"
	"strings"
)

// Shape is the extent of each axis of a value, outermost first. The empty
// shape is a scalar.
type Shape []int

// Numel returns the number of elements, 1 for a scalar.
func (s Shape) Numel() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Rank returns the number of axes.
func (s Shape) Rank() int { return len(s) }

// Equal reports whether two shapes have the same axes.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// Clone returns a copy of s that shares no memory with it.
func (s Shape) Clone() Shape { return append(Shape(nil), s...) }

// String formats the shape as "[128 784]".
func (s Shape) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// Strides returns the row-major element strides of s.
func (s Shape) Strides() []int {
	st := make([]int, len(s))
	acc := 1
	for i := len(s) - 1; i >= 0; i-- {
		st[i] = acc
		acc *= s[i]
	}
	return st
}

// Validate returns an error if any axis is not positive.
func (s Shape) Validate() error {
	for i, d := range s {
		if d <= 0 {
			return fmt.Errorf("axis %d of shape %v is %d, want > 0", i, s, d)
		}
	}
	return nil
}

// Broadcast returns the numpy-style broadcast of two shapes: axes are
// aligned from the right and an axis of extent 1 stretches to the other.
func Broadcast(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast (axis %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}
