package ops

import "github.com/octetml/octet/internal/parallel"

// parallelMin is the element count from which elementwise kernels split
// their work across the worker pool.
const parallelMin = 1 << 15

// chunker runs body over [0, n) in one piece, or in one piece per worker
// when n is large. It is built at bind time, so running it allocates
// nothing.
type chunker struct {
	group parallel.Group
	parts int
	run   func(int)
}

func newChunker(n int, body func(lo, hi int)) *chunker { return newChunkerCost(n, n, body) }

// newChunkerCost is newChunker for n items that cost elems element
// operations in all (rows of a matrix, say).
func newChunkerCost(n, elems int, body func(lo, hi int)) *chunker {
	return newPartChunker(n, elems, func(_, lo, hi int) { body(lo, hi) })
}

// newPartChunker is newChunkerCost whose body also gets the index of its
// piece (below Workers()), for kernels that reduce per piece.
func newPartChunker(n, elems int, body func(part, lo, hi int)) *chunker {
	c := &chunker{parts: 1}
	if elems >= parallelMin && n >= parallel.Workers() {
		c.parts = parallel.Workers()
	}
	parts := c.parts
	c.run = func(i int) { body(i, i*n/parts, (i+1)*n/parts) }
	return c
}

// kernel returns the graph kernel that runs the chunks.
func (c *chunker) kernel() func() error {
	return func() error { c.group.For(c.parts, c.run); return nil }
}
