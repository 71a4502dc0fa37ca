package ops

import "github.com/octetml/octet/graph"

// stridedPlan walks up to three operands of one logical shape, each with
// its own element strides (0 on a broadcast axis), as rows: the innermost
// run of axes that every operand traverses contiguously (or, for a
// broadcast operand, not at all) becomes one row of length n, and each
// calls a function with the operands' offsets at the start of every row.
// Plans are built at bind time; each allocates nothing.
type stridedPlan struct {
	n       int      // row length
	inner   [3]int   // stride of each operand within a row
	outer   []int    // extents of the outer axes
	strides [3][]int // per operand, stride of each outer axis
	ctr     []int    // scratch counters
	ops     int      // number of operands
}

// newStridedPlan builds a plan for shape with the given per-operand
// strides (each of len(shape)).
func newStridedPlan(shape graph.Shape, strides ...[]int) *stridedPlan {
	p := &stridedPlan{ops: len(strides)}
	// Drop axes of extent 1, then merge axes that are contiguous for
	// every operand.
	var dims []int
	st := make([][]int, len(strides))
	for ax, d := range shape {
		if d == 1 {
			continue
		}
		merge := len(dims) > 0
		for k := range strides {
			if merge {
				prev := st[k][len(st[k])-1]
				if prev != strides[k][ax]*d {
					merge = false
				}
			}
		}
		if merge {
			dims[len(dims)-1] *= d
			for k := range strides {
				st[k][len(st[k])-1] = strides[k][ax]
			}
			continue
		}
		dims = append(dims, d)
		for k := range strides {
			st[k] = append(st[k], strides[k][ax])
		}
	}
	if len(dims) == 0 {
		p.n = 1
		return p
	}
	last := len(dims) - 1
	p.n = dims[last]
	for k := range strides {
		p.inner[k] = st[k][last]
		p.strides[k] = st[k][:last]
	}
	p.outer = dims[:last]
	p.ctr = make([]int, len(p.outer))
	return p
}

// rows returns how many rows the plan walks.
func (p *stridedPlan) rows() int {
	r := 1
	for _, d := range p.outer {
		r *= d
	}
	return r
}

// each calls fn once per row with each operand's offset.
func (p *stridedPlan) each(fn func(o0, o1, o2 int)) {
	clear(p.ctr)
	var off [3]int
	rows := p.rows()
	for r := 0; r < rows; r++ {
		fn(off[0], off[1], off[2])
		for ax := len(p.outer) - 1; ax >= 0; ax-- {
			p.ctr[ax]++
			for k := 0; k < p.ops; k++ {
				off[k] += p.strides[k][ax]
			}
			if p.ctr[ax] < p.outer[ax] {
				break
			}
			for k := 0; k < p.ops; k++ {
				off[k] -= p.strides[k][ax] * p.outer[ax]
			}
			p.ctr[ax] = 0
		}
	}
}

// broadcastStrides returns the strides with which an operand of shape s
// is read when broadcast to shape out (0 on stretched or missing axes).
func broadcastStrides(s, out graph.Shape) []int {
	st := make([]int, len(out))
	own := s.Strides()
	off := len(out) - len(s)
	for i := range out {
		j := i - off
		if j >= 0 && s[j] != 1 {
			st[i] = own[j]
		}
	}
	return st
}
