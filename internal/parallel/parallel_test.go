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

// Shares runs a small loop as one part on the caller and a large one in
// the parts set, whose shares of an array cover it once, in order.
func TestSharesCoverOnce(t *testing.T) {
	s := NewShares(100)
	s.SetParts(3)
	for _, total := range []int{99, 100, 1001} {
		seen := make([]int32, total)
		var calls atomic.Int32
		s.Run(total, func(k, parts int) {
			calls.Add(1)
			lo, hi := Share(total, k, parts)
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
		})
		want := int32(3)
		if total < 100 {
			want = 1
		}
		if calls.Load() != want || int32(s.Parts(total)) != want {
			t.Fatalf("total %d: %d parts (Parts %d), want %d", total, calls.Load(), s.Parts(total), want)
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("total %d: element %d seen %d times", total, i, c)
			}
		}
	}
}
