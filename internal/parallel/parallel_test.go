package parallel

import (
	"sync/atomic"
	"testing"
	"time"
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

// TestForFromManyGoroutines runs For on several Groups at once (data-
// parallel replicas do) and nested inside a task: every index runs once,
// whether a worker or the caller runs it.
func TestForFromManyGoroutines(t *testing.T) {
	const callers, rounds, n = 4, 200, 5
	done := make(chan [n]int32, callers)
	for range callers {
		go func() {
			var g, inner Group
			var hits [n]atomic.Int32
			for range rounds {
				g.For(n, func(i int) {
					hits[i].Add(1)
					if i == 1 {
						var sub [3]atomic.Int32
						inner.For(3, func(j int) { sub[j].Add(1) })
						for j := range sub {
							if sub[j].Load() != 1 {
								panic("nested For missed an index")
							}
						}
					}
				})
			}
			var out [n]int32
			for i := range hits {
				out[i] = hits[i].Load()
			}
			done <- out
		}()
	}
	for range callers {
		for i, h := range <-done {
			if h != rounds {
				t.Fatalf("index %d ran %d times in %d rounds", i, h, rounds)
			}
		}
	}
}

// TestWorkersParkAndWake lets the workers park (no work for longer than
// they spin) and checks that For still reaches them.
func TestWorkersParkAndWake(t *testing.T) {
	var g Group
	for range 3 {
		time.Sleep(3 * spinFor)
		var hits [4]atomic.Int32
		g.For(4, func(i int) { hits[i].Add(1) })
		for i := range hits {
			if hits[i].Load() != 1 {
				t.Fatalf("index %d ran %d times after the workers parked", i, hits[i].Load())
			}
		}
	}
}
