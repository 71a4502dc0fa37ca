// Package parallel runs loop bodies on a fixed set of worker goroutines
// without allocating per call, so kernels can use every core inside a
// training step that must not allocate.
package parallel

import (
	"runtime"
	"sync"
)

type task struct {
	fn func(int)
	i  int
	wg *sync.WaitGroup
}

var (
	start sync.Once
	queue chan task
)

// Workers returns how many goroutines a Group spreads work over.
func Workers() int { return runtime.GOMAXPROCS(0) }

func startWorkers() {
	queue = make(chan task, 1024)
	for i := 0; i < Workers(); i++ {
		go func() {
			for t := range queue {
				t.fn(t.i)
				t.wg.Done()
			}
		}()
	}
}

// Group runs indexed tasks in parallel. Make one per kernel at bind time
// and reuse it; a Group's For calls must not overlap.
type Group struct{ wg sync.WaitGroup }

// For calls fn(0) … fn(n-1), fn(0) on the calling goroutine and the
// others on workers, and returns when all have finished. fn should be
// made once (for example a method value stored at bind time) so that the
// call allocates nothing.
func (g *Group) For(n int, fn func(i int)) {
	if n <= 0 {
		return
	}
	if n == 1 {
		fn(0)
		return
	}
	start.Do(startWorkers)
	g.wg.Add(n - 1)
	for i := 1; i < n; i++ {
		queue <- task{fn: fn, i: i, wg: &g.wg}
	}
	fn(0)
	g.wg.Wait()
}
