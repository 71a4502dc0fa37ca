package train

import "github.com/octetml/octet/internal/parallel"

// accumulator adds a micro-batch's gradients into the accumulation
// buffers over every core: each worker takes the same share of every
// buffer (the share the optimizer then updates on it). Each element is
// computed on its own, so the split changes no bit. It allocates
// nothing per call.
type accumulator struct {
	group    parallel.Group
	parts    int
	acc, src [][]float32
	w        float32
	first    bool
	addFn    func(int)
}

// accumulateMin is the element count below which accumulation runs on
// the caller: the hand-off would cost more than it saves.
const accumulateMin = 1 << 14

func newAccumulator(acc, src [][]float32) *accumulator {
	a := &accumulator{parts: max(1, parallel.Workers()), acc: acc, src: src}
	a.addFn = a.addPart
	return a
}

// add sets acc = w·src (first) or acc += w·src, element by element.
func (a *accumulator) add(w float32, first bool) {
	a.w, a.first = w, first
	total := 0
	for _, x := range a.acc {
		total += len(x)
	}
	if total < accumulateMin || a.parts == 1 {
		a.addShare(0, 1)
		return
	}
	a.group.For(a.parts, a.addFn)
}

func (a *accumulator) addPart(k int) { a.addShare(k, a.parts) }

// addShare does share k of parts of every buffer.
func (a *accumulator) addShare(k, parts int) {
	w := a.w
	for i, acc := range a.acc {
		lo, hi := k*len(acc)/parts, (k+1)*len(acc)/parts
		d := acc[lo:hi]
		g := a.src[i][lo:hi]
		g = g[:len(d)]
		if a.first {
			for j := range d {
				d[j] = w * g[j]
			}
			continue
		}
		for j := range d {
			d[j] += w * g[j]
		}
	}
}
