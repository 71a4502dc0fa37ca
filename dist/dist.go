// Package dist holds Octet's communicators: the collectives sharded
// training needs (AllGather, ReduceScatter, AllReduce with sum or max,
// Broadcast), with a byte counter per collective.
//
// The in-process backend (NewLocal) runs N ranks as goroutines over shared
// buffers. Reductions add the ranks' contributions in rank order, so a run
// is reproducible to the bit and equals a backend that does the same.
//
// # Across machines
//
// A multi-machine backend would sit on MPI (OpenMPI), the engine CPU
// clusters already run, through cgo behind a build tag so the default
// build stays cgo-free: AllGather maps to MPI_Allgatherv (shard counts
// and displacements from the same split this package uses), ReduceScatter
// to MPI_Reduce_scatter with per-rank counts, AllReduce to MPI_Allreduce
// with MPI_SUM or MPI_MAX, Broadcast to MPI_Bcast; FP8 payloads travel as
// MPI_BYTE. For reductions to match the in-process backend bit for bit,
// the MPI backend would gather the contributions and add them in rank
// order rather than rely on MPI's reduction order. MPI errors (a dead
// rank, a mismatched world size) would come back as Go errors naming the
// collective and the rank, with MPI_Comm_set_errhandler set to
// MPI_ERRORS_RETURN and a timeout around each collective.
package dist

import (
	"fmt"
	"sync"
)

// ReduceOp is the reduction of AllReduce and ReduceScatter.
type ReduceOp uint8

const (
	// Sum adds the contributions in rank order.
	Sum ReduceOp = iota
	// Max takes the largest (NaN wins, so a non-finite amax is seen).
	Max
)

// Stats counts collectives and their bytes: for AllGather the bytes of
// the gathered result, for ReduceScatter and AllReduce the bytes of the
// input reduced, for Broadcast the bytes of the buffer.
type Stats struct {
	AllGatherCalls, ReduceScatterCalls, AllReduceCalls, BroadcastCalls int
	AllGatherBytes, ReduceScatterBytes, AllReduceBytes, BroadcastBytes int64
}

// Communicator is one rank's view of a group of ranks. Every rank must
// call the same collectives in the same order with matching sizes.
type Communicator interface {
	Rank() int
	Size() int
	// AllGatherF32 writes every rank's src, in rank order, into dst;
	// counts[r] is rank r's length.
	AllGatherF32(dst, src []float32, counts []int) error
	// AllGatherU8 is AllGatherF32 for bytes (FP8 codes).
	AllGatherU8(dst, src []uint8, counts []int) error
	// ReduceScatterF32 reduces every rank's src (the full tensor) and
	// writes this rank's segment (counts[rank] long) to dst.
	ReduceScatterF32(dst, src []float32, counts []int, op ReduceOp) error
	// AllReduceF32 reduces buf across ranks in place.
	AllReduceF32(buf []float32, op ReduceOp) error
	// BroadcastF32 copies root's buf to every rank.
	BroadcastF32(buf []float32, root int) error
	// Stats returns this rank's counters.
	Stats() Stats
	// ResetStats zeroes the counters.
	ResetStats()
}

// Split returns how n elements shard over size ranks: the first n%size
// ranks get one more; with n < size the last ranks get none.
func Split(n, size int) []int {
	counts := make([]int, size)
	for r := range counts {
		counts[r] = n / size
		if r < n%size {
			counts[r]++
		}
	}
	return counts
}

// Offsets returns the starting offset of each rank's segment.
func Offsets(counts []int) []int {
	off := make([]int, len(counts))
	for r := 1; r < len(counts); r++ {
		off[r] = off[r-1] + counts[r-1]
	}
	return off
}

// group is the shared state of in-process ranks. For each collective a
// rank publishes its buffer (or the error it found in its arguments) in
// its slot, all ranks meet at a barrier, each reads what it needs, and
// all meet again before anyone may reuse its buffer. Slots are typed, so
// a collective allocates nothing.
type group struct {
	size    int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	phase   uint64
	f32     [][]float32
	u8      [][]uint8
	errs    []error
}

// barrier blocks until every rank has arrived.
func (g *group) barrier() {
	g.mu.Lock()
	ph := g.phase
	g.arrived++
	if g.arrived == g.size {
		g.arrived = 0
		g.phase++
		g.cond.Broadcast()
	} else {
		for ph == g.phase {
			g.cond.Wait()
		}
	}
	g.mu.Unlock()
}

// firstErr returns the first argument error any rank published.
func (g *group) firstErr() error {
	for _, e := range g.errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// local is one in-process rank.
type local struct {
	g       *group
	rank    int
	stats   Stats
	scratch []float32
}

// RunLocal runs fn once per rank of size in-process ranks, each in its
// own goroutine with its communicator, and waits for all of them. It
// returns the error of the lowest-numbered rank that failed, naming it.
func RunLocal(size int, fn func(c Communicator) error) error {
	comms, err := NewLocal(size)
	if err != nil {
		return err
	}
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(c)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

// NewLocal returns size communicators that talk through shared memory;
// give each to its own goroutine.
func NewLocal(size int) ([]Communicator, error) {
	if size <= 0 {
		return nil, fmt.Errorf("dist: %d ranks", size)
	}
	g := &group{size: size, f32: make([][]float32, size), u8: make([][]uint8, size), errs: make([]error, size)}
	g.cond = sync.NewCond(&g.mu)
	out := make([]Communicator, size)
	for r := range out {
		out[r] = &local{g: g, rank: r}
	}
	return out, nil
}

func (c *local) Rank() int    { return c.rank }
func (c *local) Size() int    { return c.g.size }
func (c *local) Stats() Stats { return c.stats }
func (c *local) ResetStats()  { c.stats = Stats{} }

func checkCounts(op string, counts []int, size int) (int, error) {
	if len(counts) != size {
		return 0, fmt.Errorf("dist: %s: %d counts for %d ranks", op, len(counts), size)
	}
	total := 0
	for r, n := range counts {
		if n < 0 {
			return 0, fmt.Errorf("dist: %s: rank %d count %d", op, r, n)
		}
		total += n
	}
	return total, nil
}

// gather is AllGather over the typed slots.
func gather[T any](c *local, slots [][]T, dst, src []T, counts []int, elem int) error {
	total, err := checkCounts("all-gather", counts, c.g.size)
	if err == nil && (len(src) != counts[c.rank] || len(dst) < total) {
		err = fmt.Errorf("dist: all-gather on rank %d: src %d (want %d), dst %d (want %d)", c.rank, len(src), counts[c.rank], len(dst), total)
	}
	slots[c.rank], c.g.errs[c.rank] = src, err
	c.g.barrier()
	if err = c.g.firstErr(); err == nil {
		off := 0
		for r, part := range slots {
			if len(part) != counts[r] {
				err = fmt.Errorf("dist: all-gather: rank %d sent %d values, rank %d expected %d", r, len(part), c.rank, counts[r])
				break
			}
			copy(dst[off:], part)
			off += counts[r]
		}
	}
	c.g.barrier()
	c.stats.AllGatherCalls++
	c.stats.AllGatherBytes += int64(total * elem)
	return err
}

func (c *local) AllGatherF32(dst, src []float32, counts []int) error {
	return gather(c, c.g.f32, dst, src, counts, 4)
}

func (c *local) AllGatherU8(dst, src []uint8, counts []int) error {
	return gather(c, c.g.u8, dst, src, counts, 1)
}

func reduce(op ReduceOp, acc, v float32) float32 {
	if op == Max {
		if v > acc || v != v {
			return v
		}
		return acc
	}
	return acc + v
}

// reduceInto writes into out[i] the reduction over ranks (in rank order)
// of slot[lo+i].
func (c *local) reduceInto(out []float32, lo, total int, op ReduceOp) error {
	for r, s := range c.g.f32 {
		if len(s) != total {
			return fmt.Errorf("dist: rank %d sent %d values, rank %d expected %d", r, len(s), c.rank, total)
		}
	}
	for i := range out {
		acc := c.g.f32[0][lo+i]
		for r := 1; r < c.g.size; r++ {
			acc = reduce(op, acc, c.g.f32[r][lo+i])
		}
		out[i] = acc
	}
	return nil
}

func (c *local) ReduceScatterF32(dst, src []float32, counts []int, op ReduceOp) error {
	total, err := checkCounts("reduce-scatter", counts, c.g.size)
	if err == nil && (len(src) != total || len(dst) < counts[c.rank]) {
		err = fmt.Errorf("dist: reduce-scatter on rank %d: src %d (want %d), dst %d (want %d)", c.rank, len(src), total, len(dst), counts[c.rank])
	}
	lo := 0
	if err == nil {
		for r := 0; r < c.rank; r++ {
			lo += counts[r]
		}
	}
	c.g.f32[c.rank], c.g.errs[c.rank] = src, err
	c.g.barrier()
	if err = c.g.firstErr(); err == nil {
		err = c.reduceInto(dst[:counts[c.rank]], lo, total, op)
	}
	c.g.barrier()
	c.stats.ReduceScatterCalls++
	c.stats.ReduceScatterBytes += int64(4 * total)
	return err
}

func (c *local) AllReduceF32(buf []float32, op ReduceOp) error {
	// Reduce into private scratch; write back only after every rank has
	// read the inputs.
	if cap(c.scratch) < len(buf) {
		c.scratch = make([]float32, len(buf))
	}
	out := c.scratch[:len(buf)]
	c.g.f32[c.rank], c.g.errs[c.rank] = buf, nil
	c.g.barrier()
	err := c.reduceInto(out, 0, len(buf), op)
	c.g.barrier()
	if err == nil {
		copy(buf, out)
	}
	c.stats.AllReduceCalls++
	c.stats.AllReduceBytes += int64(4 * len(buf))
	return err
}

func (c *local) BroadcastF32(buf []float32, root int) error {
	var err error
	if root < 0 || root >= c.g.size {
		err = fmt.Errorf("dist: broadcast from rank %d of %d", root, c.g.size)
	}
	c.g.f32[c.rank], c.g.errs[c.rank] = buf, err
	c.g.barrier()
	if err = c.g.firstErr(); err == nil {
		if src := c.g.f32[root]; len(src) != len(buf) {
			err = fmt.Errorf("dist: broadcast: root %d has %d values, rank %d has %d", root, len(src), c.rank, len(buf))
		} else if c.rank != root {
			copy(buf, src)
		}
	}
	c.g.barrier()
	c.stats.BroadcastCalls++
	c.stats.BroadcastBytes += int64(4 * len(buf))
	return err
}
