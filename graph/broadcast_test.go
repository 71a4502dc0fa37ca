package graph_test

import (
	"errors"
	"testing"

	"github.com/octetml/octet/graph"
)

// TestImplicitBroadcast: equal ranks broadcast as numpy does; a single
// value stretches to a shape of its rank or more; different ranks need
// the smaller to be the larger's trailing axes; everything else is
// refused with ErrImplicitBroadcast (or numpy's own mismatch).
func TestImplicitBroadcast(t *testing.T) {
	s := func(d ...int) graph.Shape { return graph.Shape(d) }
	for _, c := range []struct {
		a, b, want graph.Shape
		err        bool
	}{
		{s(3, 4), s(3, 4), s(3, 4), false},
		{s(3, 1), s(1, 4), s(3, 4), false},
		{s(2, 3, 4), s(4), s(2, 3, 4), false},
		{s(3, 4), s(2, 3, 4), s(2, 3, 4), false},
		{s(), s(2, 3), s(2, 3), false},
		{s(1), s(2, 3), s(2, 3), false},
		{s(2, 3), s(1, 1), s(2, 3), false},
		{s(5, 1), s(5), nil, true},
		{s(5), s(5, 1), nil, true},
		{s(2, 3, 4), s(1, 4), nil, true},
		{s(1, 1, 1), s(4), nil, true}, // a single value of higher rank: reshape it
		{s(3, 4), s(3, 5), nil, true},
	} {
		got, err := graph.ImplicitBroadcast(c.a, c.b)
		if c.err {
			if err == nil {
				t.Errorf("%v %v: got %v, want an error", c.a, c.b, got)
			}
			if len(c.a) != len(c.b) && !errors.Is(err, graph.ErrImplicitBroadcast) {
				t.Errorf("%v %v: %v does not wrap ErrImplicitBroadcast", c.a, c.b, err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%v %v: got %v, %v; want %v", c.a, c.b, got, err, c.want)
		}
	}
}
