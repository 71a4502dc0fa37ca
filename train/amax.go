package train

import (
	"fmt"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
)

// amaxReducer all-reduces (MAX) the step's amax of every delayed-scaling
// cast over the data-parallel ranks before the scale updates, as
// Transformer Engine's reduce_amax does by default: each rank then
// updates its scales from the global batch's amaxes, the ones a single
// process would record, and the ranks' scaling states stay equal.
type amaxReducer struct {
	comm  dist.Communicator
	metas []*fp8.Meta
	buf   []float32
}

// newAmaxReducer returns the reducer of metas over comm, or nil when
// there are none.
func newAmaxReducer(comm dist.Communicator, metas []namedMeta) *amaxReducer {
	if len(metas) == 0 {
		return nil
	}
	a := &amaxReducer{comm: comm, buf: make([]float32, len(metas))}
	for _, nm := range metas {
		a.metas = append(a.metas, nm.m)
	}
	return a
}

// reduce replaces each meta's current amax by the ranks' maximum (a NaN
// anywhere wins, so that every rank sees it); a meta no rank recorded
// into stays unrecorded.
func (a *amaxReducer) reduce() error {
	for i, m := range a.metas {
		a.buf[i] = m.History[0]
	}
	if err := a.comm.AllReduceF32(a.buf, dist.Max); err != nil {
		return fmt.Errorf("train: amax all-reduce over %d ranks: %w", a.comm.Size(), err)
	}
	for i, m := range a.metas {
		if v := a.buf[i]; v != 0 {
			m.Record(v)
		}
	}
	return nil
}
