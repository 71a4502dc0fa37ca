package parallel

import (
	"sync/atomic"
	"testing"
)

type counter struct {
	hits []atomic.Int32
	fn   func(int)
}

func TestForCallsEachIndexOnce(t *testing.T) {
	var g Group
	for _, n := range []int{0, 1, 2, 3, 17, 100} {
		c := &counter{hits: make([]atomic.Int32, n)}
		g.For(n, func(i int) { c.hits[i].Add(1) })
		for i := range c.hits {
			if got := c.hits[i].Load(); got != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, got)
			}
		}
	}
}

func TestForAllocatesNothing(t *testing.T) {
	var g Group
	c := &counter{hits: make([]atomic.Int32, 8)}
	c.fn = func(i int) { c.hits[i].Add(1) }
	g.For(8, c.fn)
	if a := testing.AllocsPerRun(20, func() { g.For(8, c.fn) }); a != 0 {
		t.Fatalf("%v allocations per For", a)
	}
}
