// Package dist holds Octet's communicators: the collectives sharded
// training needs (AllGather, ReduceScatter, AllReduce with sum or max,
// Broadcast, AllToAll with uneven counts for expert parallelism), with a
// byte counter per collective.
//
// The in-process backend (NewLocal) runs N ranks as goroutines over shared
// buffers. Reductions add the ranks' contributions in rank order, so a run
// is reproducible to the bit and equals a backend that does the same.
//
// # Across machines
//
// NewMPI (build tag mpi; cgo against OpenMPI, so the default build stays
// cgo-free) is a Communicator over MPI_COMM_WORLD: AllGather maps to
// MPI_Iallgatherv, ReduceScatter and AllToAll to MPI_Ialltoallv (the
// reduction then added in rank order, so that it equals the in-process
// backend to the bit), AllReduce gathers and adds in rank order,
// Broadcast is MPI_Ibcast; FP8 payloads travel as MPI_BYTE. Errors come
// back as Go errors naming the collective and the rank (MPI_ERRORS_RETURN),
// and a collective the other ranks do not answer within OCTET_MPI_TIMEOUT
// fails instead of hanging.
package dist

import (
	"fmt"
	"sort"
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
// For AllToAll, the bytes this rank sends to the other ranks (what it
// keeps for itself is not counted).
type Stats struct {
	AllGatherCalls, ReduceScatterCalls, AllReduceCalls, BroadcastCalls, AllToAllCalls int
	AllGatherBytes, ReduceScatterBytes, AllReduceBytes, BroadcastBytes, AllToAllBytes int64
}

// Bytes returns the bytes of every collective Stats counts.
func (s Stats) Bytes() int64 {
	return s.AllGatherBytes + s.ReduceScatterBytes + s.AllReduceBytes + s.BroadcastBytes + s.AllToAllBytes
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
	// AllToAllF32 sends every rank its own part of src and receives
	// every rank's part for this one into dst: src holds, in rank order,
	// send[r] values for rank r; dst receives, in rank order, recv[r]
	// values from rank r. recv[r] on this rank must equal send[this
	// rank] on rank r (uneven and zero counts are fine).
	AllToAllF32(dst, src []float32, send, recv []int) error
	// AllToAllU8 is AllToAllF32 for bytes (FP8 codes, scales).
	AllToAllU8(dst, src []uint8, send, recv []int) error
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
	send    [][]int // each rank's send counts (all-to-all)
	recv    [][]int // and its receive counts
	errs    []error
	// Subgroup's state: each rank's color and key, and the groups being
	// made (by color).
	colors, keys []int
	subs         map[int]*group
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
	g := &group{size: size, f32: make([][]float32, size), u8: make([][]uint8, size), send: make([][]int, size), recv: make([][]int, size), errs: make([]error, size)}
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

// checkAllToAll checks one rank's all-to-all arguments: counts for every
// rank, none negative, and buffers that hold them. It returns the bytes
// sent to the other ranks.
func checkAllToAll(rank, size, nsrc, ndst int, send, recv []int, elem int) (int64, error) {
	if len(send) != size || len(recv) != size {
		return 0, fmt.Errorf("dist: all-to-all on rank %d: %d send and %d receive counts for %d ranks", rank, len(send), len(recv), size)
	}
	var ns, nr int
	for r := range send {
		if send[r] < 0 || recv[r] < 0 {
			return 0, fmt.Errorf("dist: all-to-all on rank %d: rank %d's counts are %d (send) and %d (receive)", rank, r, send[r], recv[r])
		}
		ns += send[r]
		nr += recv[r]
	}
	if nsrc < ns || ndst < nr {
		return 0, fmt.Errorf("dist: all-to-all on rank %d: src %d (want %d), dst %d (want %d)", rank, nsrc, ns, ndst, nr)
	}
	return int64((ns - send[rank]) * elem), nil
}

// allToAll is AllToAll over the typed slots: each rank publishes src and
// its send counts, then copies its part of every rank's src.
func allToAll[T any](c *local, slots [][]T, dst, src []T, send, recv []int, elem int) error {
	sent, err := checkAllToAll(c.rank, c.g.size, len(src), len(dst), send, recv, elem)
	slots[c.rank], c.g.send[c.rank], c.g.recv[c.rank], c.g.errs[c.rank] = src, send, recv, err
	c.g.barrier()
	if err = c.g.firstErr(); err == nil {
		// Every rank checks every pair, so that all fail alike.
		for r := 0; r < c.g.size && err == nil; r++ {
			for q := 0; q < c.g.size; q++ {
				if s, v := c.g.send[r][q], c.g.recv[q][r]; s != v {
					err = fmt.Errorf("dist: all-to-all: rank %d sends %d values to rank %d, which expects %d", r, s, q, v)
					break
				}
			}
		}
	}
	if err == nil {
		off := 0
		for r, part := range slots {
			// Rank r's values for this rank start after those it sends
			// to the ranks before this one.
			from, n := 0, recv[r]
			for q := 0; q < c.rank; q++ {
				from += c.g.send[r][q]
			}
			copy(dst[off:off+n], part[from:from+n])
			off += n
		}
	}
	c.g.barrier()
	c.stats.AllToAllCalls++
	c.stats.AllToAllBytes += sent
	return err
}

func (c *local) AllToAllF32(dst, src []float32, send, recv []int) error {
	return allToAll(c, c.g.f32, dst, src, send, recv, 4)
}

func (c *local) AllToAllU8(dst, src []uint8, send, recv []int) error {
	return allToAll(c, c.g.u8, dst, src, send, recv, 1)
}

// Subgroup returns this rank's communicator among the ranks of c that
// give the same color, ordered by key (then by rank in c), as
// MPI_Comm_split does: a data-parallel group and an expert-parallel
// group inside it, say. Every rank of c must call it, in the same order
// as its other collectives.
func Subgroup(c Communicator, color, key int) (Communicator, error) {
	switch c := c.(type) {
	case *local:
		return c.split(color, key)
	case interface {
		split(color, key int) (Communicator, error)
	}:
		return c.split(color, key)
	}
	return nil, fmt.Errorf("dist: %T cannot form subgroups", c)
}

// split is Subgroup for an in-process rank: the ranks publish their
// color and key, the first of each color to arrive makes the group, and
// each finds its place in it.
func (c *local) split(color, key int) (Communicator, error) {
	g := c.g
	g.mu.Lock()
	if g.colors == nil {
		g.colors, g.keys = make([]int, g.size), make([]int, g.size)
	}
	g.colors[c.rank], g.keys[c.rank] = color, key
	g.mu.Unlock()
	c.g.barrier()
	var members []int
	for r := 0; r < g.size; r++ {
		if g.colors[r] == color {
			members = append(members, r)
		}
	}
	sort.SliceStable(members, func(i, j int) bool { return g.keys[members[i]] < g.keys[members[j]] })
	me := 0
	for i, r := range members {
		if r == c.rank {
			me = i
		}
	}
	// The group's first member makes it; the others take it after a
	// second barrier.
	g.mu.Lock()
	if g.subs == nil {
		g.subs = map[int]*group{}
	}
	k := color
	if me == 0 {
		sub := &group{size: len(members), f32: make([][]float32, len(members)), u8: make([][]uint8, len(members)),
			send: make([][]int, len(members)), recv: make([][]int, len(members)), errs: make([]error, len(members))}
		sub.cond = sync.NewCond(&sub.mu)
		g.subs[k] = sub
	}
	g.mu.Unlock()
	c.g.barrier()
	g.mu.Lock()
	sub := g.subs[k]
	g.mu.Unlock()
	c.g.barrier()
	if c.rank == 0 { // the next split makes its own groups
		g.mu.Lock()
		clear(g.subs)
		g.mu.Unlock()
	}
	c.g.barrier()
	return &local{g: sub, rank: me}, nil
}
