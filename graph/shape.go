package graph

import (
	"errors"
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

// ErrImplicitBroadcast is wrapped by ImplicitBroadcast's error for
// operands that numpy would broadcast but that elementwise ops refuse.
var ErrImplicitBroadcast = errors.New("operands of different ranks broadcast only where the smaller is a scalar or the larger's trailing axes")

// ImplicitBroadcast is the shape rule of elementwise ops (Add, Sub, Mul,
// Div): the shape two operands broadcast to without being asked.
//
//   - Shapes of the same rank broadcast as in numpy: each axis is equal,
//     or 1 on one side ([n 1] with [n 4], [n 1] with [1 n]).
//   - A single value (a scalar [] or any shape of one element whose rank
//     is not above the other's) stretches to any shape.
//   - Otherwise the smaller-rank operand must equal the larger's trailing
//     axes exactly: [C] with [B T C] (a bias), but not [n] with [n 1], nor
//     [1 C] with [B T C].
//
// The last rule refuses what numpy would quietly turn into a larger shape
// ([n 1] against [n] is [n n] there, a loss of n² terms); ask for it with
// ops.BroadcastTo or a Reshape to equal ranks.
func ImplicitBroadcast(a, b Shape) (Shape, error) {
	switch {
	case a.Equal(b):
		return a.Clone(), nil
	case len(a) == len(b):
		return Broadcast(a, b)
	case a.Numel() == 1 && len(a) <= len(b):
		return b.Clone(), nil
	case b.Numel() == 1 && len(b) <= len(a):
		return a.Clone(), nil
	}
	small, large := a, b
	if len(a) > len(b) {
		small, large = b, a
	}
	if !large[len(large)-len(small):].Equal(small) {
		return nil, fmt.Errorf("shapes %v and %v: %w (reshape to one rank, or ops.BroadcastTo, to broadcast them)", a, b, ErrImplicitBroadcast)
	}
	return large.Clone(), nil
}

// Broadcast returns the numpy-style broadcast of two shapes: axes are
// aligned from the right and an axis of extent 1 stretches to the other.
// It is the rule of explicit broadcasts (ops.BroadcastTo); elementwise ops
// use the stricter ImplicitBroadcast.
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
