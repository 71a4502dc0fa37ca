// Package parallel runs loop bodies on a fixed set of worker goroutines
// without allocating per call, so kernels can use every core inside a
// training step that must not allocate.
//
// A training step is a sequence of short parallel regions (a GEMM, an
// attention, a LayerNorm) with short serial gaps between them. Waking a
// parked goroutine costs tens of microseconds on a loaded machine — as
// much as a small region — and a woken worker may not even get a core
// until the caller has finished its own share, which runs the region
// serially. So, as OpenMP runtimes do, each worker spins for a while
// after its task (about spinFor) watching its slot, and only then parks;
// the caller spins (yielding) while it waits for the others.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// spinFor is how long an idle worker watches its slot before parking.
const spinFor = 200 * time.Microsecond

// Workers returns how many goroutines a Group spreads work over: the
// caller and Workers()−1 pool workers.
func Workers() int { return runtime.GOMAXPROCS(0) }

// task is one index of a For, handed to a worker.
type task struct {
	fn func(int)
	i  int
	g  *Group
}

// worker is a pool goroutine with a one-task slot.
type worker struct {
	busy    atomic.Bool          // claimed by a For until its task is done
	pending atomic.Pointer[task] // the task to run
	parked  atomic.Bool          // waiting on wake
	wake    chan struct{}        // one token wakes a parked worker
	t       task                 // the slot's storage (no allocation per task)
	_       [64]byte             // keep workers on separate cache lines
}

var (
	start sync.Once
	pool  []*worker
)

func startWorkers() {
	pool = make([]*worker, max(0, Workers()-1))
	for i := range pool {
		w := &worker{wake: make(chan struct{}, 1)}
		pool[i] = w
		go w.loop()
	}
}

// loop runs tasks as they arrive: spinning while tasks come often,
// parked otherwise.
func (w *worker) loop() {
	for {
		t := w.await()
		g := t.g // the slot may be reused once busy is cleared
		t.fn(t.i)
		w.busy.Store(false)
		g.left.Add(-1)
	}
}

// await returns the next task, spinning for up to spinFor before
// parking.
func (w *worker) await() *task {
	deadline := time.Now().Add(spinFor)
	for spins := 0; ; spins++ {
		if t := w.pending.Swap(nil); t != nil {
			return t
		}
		if spins&255 != 255 {
			continue
		}
		if time.Now().Before(deadline) {
			runtime.Gosched() // let a goroutine that needs this core run
			continue
		}
		// Park. A For that stored its task before seeing parked is
		// caught by the second look; one that saw it sends a token.
		w.parked.Store(true)
		if t := w.pending.Swap(nil); t != nil {
			w.parked.Store(false)
			return t
		}
		<-w.wake
		w.parked.Store(false)
		deadline = time.Now().Add(spinFor)
	}
}

// post hands t's index i of g to w.
func (w *worker) post(fn func(int), i int, g *Group) {
	w.t = task{fn: fn, i: i, g: g}
	w.pending.Store(&w.t)
	if w.parked.Load() {
		select {
		case w.wake <- struct{}{}:
		default: // a token is already there
		}
	}
}

// Group runs indexed tasks in parallel. Make one per kernel at bind time
// and reuse it; a Group's For calls must not overlap (different Groups'
// may: each claims free workers, and runs the tasks it finds none for
// itself).
type Group struct {
	left atomic.Int32 // tasks handed out and not yet finished
}

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
	next := 1 // the first index not handed out
	for _, w := range pool {
		if next == n {
			break
		}
		if w.busy.CompareAndSwap(false, true) {
			g.left.Add(1)
			w.post(fn, next, g)
			next++
		}
	}
	fn(0)
	for i := next; i < n; i++ { // no free worker for these
		fn(i)
	}
	for spins := 0; g.left.Load() != 0; spins++ {
		if spins&63 == 63 {
			runtime.Gosched()
		}
	}
}

// Share returns part k of parts of [0, n): contiguous, in order, sizes
// differing by at most one. Loops that update several arrays take the
// same share of each on every worker, so that a worker reads next what
// it wrote last.
func Share(n, k, parts int) (lo, hi int) { return k * n / parts, (k + 1) * n / parts }

// Shares runs body(k, parts) for each part k of one part per worker,
// or body(0, 1) on the caller when the loop is smaller than its
// threshold. Make one (NewShares) per loop and reuse it: Run allocates
// nothing, and one Shares' Run calls must not overlap.
type Shares struct {
	group Group
	parts int
	min   int
	body  func(k, parts int)
	run   func(int)
}

// NewShares returns a Shares that splits loops of at least min elements.
func NewShares(min int) *Shares {
	s := &Shares{parts: max(1, Workers()), min: min}
	s.run = func(k int) { s.body(k, s.parts) }
	return s
}

// SetParts makes loops at or above the threshold run in parts parts
// (at least 1; tests force a split with it).
func (s *Shares) SetParts(parts int) { s.parts = max(1, parts) }

// Parts returns how many parts a loop of total elements runs in.
func (s *Shares) Parts(total int) int {
	if total < s.min {
		return 1
	}
	return s.parts
}

// Run runs body over the parts of a loop of total elements.
func (s *Shares) Run(total int, body func(k, parts int)) {
	if s.Parts(total) == 1 {
		body(0, 1)
		return
	}
	s.body = body
	s.group.For(s.parts, s.run)
}
