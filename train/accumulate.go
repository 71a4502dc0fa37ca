package train

import "github.com/octetml/octet/internal/parallel"

// accumulator adds a micro-batch's gradients into the accumulation
// buffers over every core: each worker takes the same share of every
// buffer (the share the optimizer then updates on it). Each element is
// computed on its own, so the split changes no bit. It allocates
// nothing per call.
type accumulator struct {
	sh       *parallel.Shares
	acc, src [][]float32
	w        float32
	first    bool
	addFn    func(k, parts int)
}

// accumulateMin is the element count below which accumulation runs on
// the caller: the hand-off would cost more than it saves.
const accumulateMin = 1 << 14

func newAccumulator(acc, src [][]float32) *accumulator {
	a := &accumulator{sh: parallel.NewShares(accumulateMin), acc: acc, src: src}
	a.addFn = a.addShare
	return a
}

// add sets acc = w·src (first) or acc += w·src, element by element.
func (a *accumulator) add(w float32, first bool) {
	a.w, a.first = w, first
	total := 0
	for _, x := range a.acc {
		total += len(x)
	}
	a.sh.Run(total, a.addFn)
}

// addShare does share k of parts of every buffer.
func (a *accumulator) addShare(k, parts int) {
	w := a.w
	for i, acc := range a.acc {
		lo, hi := parallel.Share(len(acc), k, parts)
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
			d[j] += float32(w * g[j])
		}
	}
}
