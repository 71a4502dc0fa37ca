package optim

import (
	"math"
	"sync"
)

// normChunk is how many values one partial sum of GradSumSquares adds
// up: the partial sums, and the order in which they are added, depend
// only on it and the parameters' sizes, never on the number of workers.
const normChunk = 1 << 14

// NormChunk is how many values of a parameter's gradient one of
// GradChunkSums's sums covers (the last of a parameter may cover fewer).
const NormChunk = normChunk

// clipScratch is the shared state of GradSumSquares and ScaleGrads: one
// call at a time uses it, so that a training step's clipping allocates
// nothing once the first call has sized it.
type clipScratch struct {
	mu      sync.Mutex
	split   *splitter
	params  []Param
	partial []float64 // one sum per chunk, parameter by parameter
	starts  []int     // the first chunk of each parameter in partial
	f       float32
	sumFn   func(k, parts int)
	scaleFn func(k, parts int)
}

var clipping clipScratch

// chunksOf is the number of chunks of n values (the last one short).
func chunksOf(n int) int { return (n + normChunk - 1) / normChunk }

// lock takes the scratch, making its splitter on first use.
func (s *clipScratch) lock() {
	s.mu.Lock()
	if s.split == nil {
		s.split = newSplitter()
		s.sumFn, s.scaleFn = s.sumPart, s.scalePart
	}
}

// GradSumSquares returns the sum of the squares of every gradient value
// of params in float64 (each square is exact): the squared global L2
// norm that ClipGradNorm clips. The values are summed in chunks of
// 16,384 of a parameter, eight running sums a chunk, and the chunks'
// sums added in order; the workers share the chunks, so the result is
// the same whatever their number.
func GradSumSquares(params []Param) float64 {
	s := &clipping
	s.lock()
	defer s.mu.Unlock()
	s.chunkSums(params)
	var sum float64
	for _, v := range s.partial {
		sum += v
	}
	return sum
}

// GradChunkSums returns the sums GradSumSquares adds up, in the order it
// adds them: one per chunk of NormChunk values of each parameter's
// gradient, parameter after parameter, in sums (dst, grown as needed);
// starts[i] is parameter i's first chunk (starts is also dst's). A run
// whose ranks hold parts of a parameter puts the parts' chunk sums
// together in order and adds them up to the norm one process computes.
func GradChunkSums(params []Param, dst []float64, starts []int) ([]float64, []int) {
	s := &clipping
	s.lock()
	defer s.mu.Unlock()
	s.chunkSums(params)
	dst = append(dst[:0], s.partial...)
	starts = append(starts[:0], s.starts...)
	return dst, starts
}

// chunkSums fills partial and starts for params.
func (s *clipScratch) chunkSums(params []Param) {
	s.starts = s.starts[:0]
	chunks, total := 0, 0
	for _, p := range params {
		s.starts = append(s.starts, chunks)
		chunks += chunksOf(len(p.G))
		total += len(p.G)
	}
	if cap(s.partial) < chunks {
		s.partial = make([]float64, chunks)
	}
	s.partial = s.partial[:chunks]
	s.params = params
	s.split.shares(total, s.sumFn)
	s.params = nil
}

// ScaleGrads multiplies every gradient value of params by f (a float32
// product each), spread over the workers.
func ScaleGrads(params []Param, f float32) {
	s := &clipping
	s.lock()
	defer s.mu.Unlock()
	total := 0
	for _, p := range params {
		total += len(p.G)
	}
	s.params, s.f = params, f
	s.split.shares(total, s.scaleFn)
	s.params = nil
}

// sumPart fills share k of each parameter's chunk sums.
func (s *clipScratch) sumPart(k, parts int) {
	for i, p := range s.params {
		lo, hi := share(chunksOf(len(p.G)), k, parts)
		for c := lo; c < hi; c++ {
			s.partial[s.starts[i]+c] = sumSquares(p.G[c*normChunk : min(len(p.G), (c+1)*normChunk)])
		}
	}
}

// scalePart scales share k of each parameter's gradient.
func (s *clipScratch) scalePart(k, parts int) {
	f := s.f
	for _, p := range s.params {
		lo, hi := share(len(p.G), k, parts)
		g := p.G[lo:hi]
		for i := range g {
			g[i] *= f
		}
	}
}

// sumSquares returns Σ x² in float64: eight running sums, sum j over
// the values at j, j+8, j+16, …, added pairwise ((0+1)+(2+3))+((4+5)+
// (6+7)), then the values past the last whole eight in order.
func sumSquares(x []float32) float64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		a0 += float64(float64(v[0]) * float64(v[0]))
		a1 += float64(float64(v[1]) * float64(v[1]))
		a2 += float64(float64(v[2]) * float64(v[2]))
		a3 += float64(float64(v[3]) * float64(v[3]))
		a4 += float64(float64(v[4]) * float64(v[4]))
		a5 += float64(float64(v[5]) * float64(v[5]))
		a6 += float64(float64(v[6]) * float64(v[6]))
		a7 += float64(float64(v[7]) * float64(v[7]))
	}
	t := ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
	for _, v := range x[i:] {
		t += float64(float64(v) * float64(v))
	}
	return t
}

// ClipGradNorm scales all gradients so that their global L2 norm is at
// most maxNorm (PyTorch's clip_grad_norm_: factor maxNorm/(norm+1e-6)
// when norm > maxNorm) and returns the norm before clipping, the float32
// square root of GradSumSquares. A non-finite norm is returned as is and
// nothing is scaled. Both passes are spread over the workers.
func ClipGradNorm(params []Param, maxNorm float32) float32 {
	norm := float32(math.Sqrt(GradSumSquares(params)))
	if norm <= maxNorm || math.IsNaN(float64(norm)) || math.IsInf(float64(norm), 0) {
		return norm
	}
	ScaleGrads(params, maxNorm/(norm+1e-6))
	return norm
}
