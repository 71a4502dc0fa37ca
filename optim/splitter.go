package optim

import "github.com/octetml/octet/internal/parallel"

// splitMin is the smallest loop the splitter spreads over the workers;
// below it the hand-off costs more than it saves.
const splitMin = 1 << 14

// splitter runs an elementwise loop body over [0, n) in one contiguous
// part per worker (do), or over each worker's share of several arrays
// (shares). It allocates nothing per call: the bodies it runs are
// method values made once, and their operands live in the caller.
// Every result is the same whatever the split, because each element is
// computed on its own and partial maxima combine in any order.
type splitter struct {
	sh     *parallel.Shares
	parts  int // the parts of a split loop (maxes has one per part)
	n      int
	body   func(k, lo, hi int)
	partFn func(k, parts int)
	maxes  []float32 // one partial max per part
}

func newSplitter() *splitter {
	s := &splitter{sh: parallel.NewShares(splitMin), parts: max(1, parallel.Workers())}
	s.maxes = make([]float32, s.parts)
	s.partFn = s.part
	return s
}

// setParts makes split loops run in parts parts (tests).
func (s *splitter) setParts(parts int) {
	s.parts = parts
	s.sh.SetParts(parts)
	if len(s.maxes) < parts {
		s.maxes = make([]float32, parts)
	}
}

func (s *splitter) part(k, parts int) {
	lo, hi := share(s.n, k, parts)
	s.body(k, lo, hi)
}

// do runs body(k, lo, hi) over parts of [0, n) and returns how many parts
// it used (their index k runs from 0).
func (s *splitter) do(n int, body func(k, lo, hi int)) int {
	s.n, s.body = n, body
	s.sh.Run(n, s.partFn)
	return s.sh.Parts(n)
}

// shares runs body(k, parts) for each part k of parts, over the workers
// when the loop is large enough (total elements, summed over the arrays
// the body updates), else body(0, 1) on the caller. The body updates
// share k of every array (share): each worker then writes the same
// fraction of each tensor that the program's casts and GEMMs, which
// split a tensor's rows evenly over the same workers, read on it at the
// next step, so the values stay in that core's cache. One contiguous
// range over the arrays' concatenation instead would hand a worker most
// of one tensor and none of the next (measured: the MLP step 4–7%
// slower in every precision, bench/RESULTS.md).
func (s *splitter) shares(total int, body func(k, parts int)) { s.sh.Run(total, body) }

// share is parallel.Share: part k of parts of [0, n).
func share(n, k, parts int) (lo, hi int) { return parallel.Share(n, k, parts) }

// maxOf combines the partial maxima of the first parts parts, NaN if any
// is NaN (as fp8.Amax).
func (s *splitter) maxOf(parts int) float32 {
	var m float32
	for _, v := range s.maxes[:parts] {
		if v != v {
			return v
		}
		m = max(m, v)
	}
	return m
}
