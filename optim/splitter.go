package optim

import "github.com/octetml/octet/internal/parallel"

// splitMin is the smallest loop the splitter spreads over the workers;
// below it the hand-off costs more than it saves.
const splitMin = 1 << 14

// splitter runs an elementwise loop body over [0, n) in one contiguous
// part per worker. It allocates nothing per call: the bodies it runs are
// method values made once, and their operands live in the caller.
// Every result is the same whatever the split, because each element is
// computed on its own and partial maxima combine in any order.
type splitter struct {
	group parallel.Group
	parts int
	n     int
	body  func(k, lo, hi int)
	run   func(int)
	maxes []float32 // one partial max per part
}

func newSplitter() *splitter {
	s := &splitter{parts: max(1, parallel.Workers())}
	s.maxes = make([]float32, s.parts)
	s.run = s.part
	return s
}

func (s *splitter) part(k int) {
	s.body(k, k*s.n/s.parts, (k+1)*s.n/s.parts)
}

// do runs body(k, lo, hi) over parts of [0, n) and returns how many parts
// it used (their index k runs from 0).
func (s *splitter) do(n int, body func(k, lo, hi int)) int {
	if n < splitMin || s.parts == 1 {
		body(0, 0, n)
		return 1
	}
	s.n, s.body = n, body
	s.group.For(s.parts, s.run)
	return s.parts
}

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
