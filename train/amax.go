package train

import (
	"fmt"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
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

// delayedMetas lists the delayed-scaling metas of store's FP8 layers, in
// the store's order (the same on every rank).
func delayedMetas(store *graph.Store) []*fp8.Meta {
	var out []*fp8.Meta
	for _, k := range store.StateKeys() {
		ls, ok := store.State(k).(*fp8.LayerState)
		if !ok {
			continue
		}
		for _, r := range fp8.Roles {
			if m := ls.Meta(r); m != nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// newAmaxReducer returns the reducer of store's metas over comm, or nil
// when there are none.
func newAmaxReducer(comm dist.Communicator, store *graph.Store) *amaxReducer {
	metas := delayedMetas(store)
	if len(metas) == 0 {
		return nil
	}
	return &amaxReducer{comm: comm, metas: metas, buf: make([]float32, len(metas))}
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
