package train

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/data"
	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/fsdp"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/optim"
)

// expertSpan returns where this rank's slice of expert weight i starts
// and ends in the flattened weight, and every rank's element count.
func (r *replica) expertSpan(i int) (lo, hi int, counts []int) {
	s := r.experts[i]
	shape := s.Param.Shape()
	per := shape.Numel() / shape[0]
	counts = dist.Split(shape[0], r.t.epSize)
	for q := range counts {
		counts[q] *= per
	}
	return s.First * per, (s.First + s.N) * per, counts
}

// shardExperts makes the optimizer update this rank's slice of each
// expert weight only (its parameter and gradient views into the store's
// and the program's full buffers), prepares the full-gradient buffers
// the clipping norm reads, and the checkpoint store: the other
// parameters whole, the expert weights' slices (with their global shape
// and offset, so that any layout resumes them).
func (r *replica) shardExperts() error {
	index := map[string]int{}
	for i, p := range r.params {
		index[p.Name] = i
	}
	r.normParams = make([]optim.Param, len(r.params))
	sliced := map[string][2]int{}
	for i, s := range r.experts {
		pi, ok := index[s.Param.Name()]
		if !ok {
			return fmt.Errorf("train: expert weight %q is not a trained parameter", s.Param.Name())
		}
		lo, hi, _ := r.expertSpan(i)
		r.expertLo, r.expertHi = append(r.expertLo, lo), append(r.expertHi, hi)
		p := &r.params[pi]
		p.W, p.G = p.W[lo:hi], p.G[lo:hi]
		r.expertParam = append(r.expertParam, pi)
		full := make([]float32, s.Param.Shape().Numel())
		r.expertFull = append(r.expertFull, full)
		sliced[s.Param.Name()] = [2]int{lo, hi}
	}
	if r.sh != nil {
		// With FSDP: its shards of the layers around the experts, and the
		// expert slices.
		ck, err := r.sh.ShardStore(r.store)
		if err != nil {
			return err
		}
		for _, s := range r.experts {
			lohi, full := sliced[s.Param.Name()], r.store.Float32(s.Param.Name())
			if err := ck.Bind(s.Param.Name(), full[lohi[0]:lohi[1]], lohi[1]-lohi[0]); err != nil {
				return err
			}
		}
		r.ckptStore = ck
		return nil
	}
	ck := graph.NewStore()
	for _, name := range r.store.Names() {
		full := r.store.Float32(name)
		if s, ok := sliced[name]; ok {
			if err := ck.Bind(name, full[s[0]:s[1]], s[1]-s[0]); err != nil {
				return err
			}
			continue
		}
		shape, _ := r.store.Shape(name)
		if err := ck.Bind(name, full, shape...); err != nil {
			return err
		}
	}
	for _, k := range r.store.StateKeys() {
		ck.SetState(k, r.store.State(k))
	}
	r.ckptStore = ck
	return nil
}

// expertSlices is what a checkpoint records of the expert weights'
// slices.
func (r *replica) expertSlices(out map[string]checkpoint.Slice) {
	for i, s := range r.experts {
		lo, _, _ := r.expertSpan(i)
		out[s.Param.Name()] = checkpoint.Slice{Shape: append([]int(nil), s.Param.Shape()...), Offset: lo}
	}
}

// clipExperts is clip under expert parallelism: the norm is the one a
// single process computes — the other parameters' gradients are the same
// on every rank, and each expert weight's whole gradient is put together
// from the ranks' slices (an all-reduce of slices padded with zeros,
// exact) — and every rank scales its own gradients by it.
func (r *replica) clipExperts(maxNorm float32) error {
	sum, err := r.expertNormSquared()
	if err != nil {
		return err
	}
	norm := float32(math.Sqrt(sum))
	if norm <= maxNorm || math.IsNaN(float64(norm)) || math.IsInf(float64(norm), 0) {
		return nil
	}
	optim.ScaleGrads(r.params, maxNorm/(norm+1e-6))
	return nil
}

// expertNormSquared returns the squared gradient norm one process
// computes. When every expert's weight is a whole number of the norm's
// chunks (optim.NormChunk values), the ranks exchange the chunk sums of
// their slices (8 bytes a chunk) and add every chunk's in one process's
// order; otherwise they put each expert weight's whole gradient
// together.
func (r *replica) expertNormSquared() (float64, error) {
	aligned := true
	for _, s := range r.experts {
		shape := s.Param.Shape()
		aligned = aligned && (shape.Numel()/shape[0])%optim.NormChunk == 0
	}
	if r.drv != nil {
		return r.shardedNormSquared(aligned)
	}
	if !aligned {
		return r.expertNormSquaredWhole()
	}
	r.chunkSums, r.chunkStarts = optim.GradChunkSums(r.params, r.chunkSums, r.chunkStarts)
	r.chunkLookups()
	var sum float64
	for pi := range r.params {
		end := len(r.chunkSums)
		if pi+1 < len(r.chunkStarts) {
			end = r.chunkStarts[pi+1]
		}
		own := r.chunkSums[r.chunkStarts[pi]:end]
		i, ok := r.expertOf[pi]
		if !ok {
			for _, v := range own {
				sum += v
			}
			continue
		}
		var err error
		if sum, err = r.exchangeChunkSums(i, own, sum); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// chunkLookups builds, once (the step allocates nothing after its first
// run), which parameter is which expert weight and how many bytes of
// chunk sums each rank holds of each.
func (r *replica) chunkLookups() {
	if r.expertOf != nil {
		return
	}
	r.expertOf = map[int]int{}
	for i, pi := range r.expertParam {
		r.expertOf[pi] = i
		_, _, counts := r.expertSpan(i)
		for q := range counts {
			counts[q] = counts[q] / optim.NormChunk * 8
		}
		r.chunkCounts = append(r.chunkCounts, counts)
	}
}

// exchangeChunkSums gathers every rank's chunk sums of expert weight i
// (own: this rank's) and adds them to sum, in the weight's order (one
// process adds its chunk sums to the running total one by one).
func (r *replica) exchangeChunkSums(i int, own []float64, sum float64) (float64, error) {
	r.chunkLookups()
	counts := r.chunkCounts[i]
	total := 0
	for _, c := range counts {
		total += c
	}
	if cap(r.chunkSend) < 8*len(own) {
		r.chunkSend = make([]byte, 8*len(own))
	}
	if cap(r.chunkRecv) < total {
		r.chunkRecv = make([]byte, total)
	}
	send, recv := r.chunkSend[:8*len(own)], r.chunkRecv[:total]
	for j, v := range own {
		binary.LittleEndian.PutUint64(send[8*j:], math.Float64bits(v))
	}
	if err := r.epComm.AllGatherU8(recv, send, counts); err != nil {
		return 0, err
	}
	for j := 0; j < total; j += 8 {
		sum += math.Float64frombits(binary.LittleEndian.Uint64(recv[j:]))
	}
	return sum, nil
}

// expertNormSquaredWhole is expertNormSquared by whole gradients: each
// expert weight's gradient put together from the ranks' slices padded
// with zeros (an exact all-reduce).
func (r *replica) expertNormSquaredWhole() (float64, error) {
	for i := range r.expertParam {
		if err := r.wholeExpertGrad(i); err != nil {
			return 0, err
		}
	}
	// The other parameters' gradients as the optimizer sees them (with
	// accumulation, the accumulators), the experts' whole.
	copy(r.normParams, r.params)
	for i, pi := range r.expertParam {
		r.normParams[pi].G = r.expertFull[i]
	}
	return optim.GradSumSquares(r.normParams), nil
}

// gatherExperts writes every rank's slices of the expert weights, and
// their experts' scaling states, into this rank's store (for evaluation,
// and the trained model Fit leaves); every rank must call it.
func (r *replica) gatherExperts() error {
	for i, s := range r.experts {
		lo, hi, counts := r.expertSpan(i)
		full := r.store.Float32(s.Param.Name())
		scratch := r.expertFull[i][:hi-lo]
		copy(scratch, full[lo:hi])
		if err := r.epComm.AllGatherF32(full, scratch, counts); err != nil {
			return fmt.Errorf("train: gathering expert weight %q: %w", s.Param.Name(), err)
		}
	}
	return r.gatherExpertStates()
}

// expertMetas returns the delayed-scaling metas of expert e of grouped
// layer layer in store (nil when the store has none for it).
func expertMetas(store *graph.Store, layer string, e int) []*fp8.Meta {
	st, _ := store.State(fp8.LayerStateKey(fmt.Sprintf("%s.%d", layer, e))).(*fp8.LayerState)
	if st == nil {
		return nil
	}
	var out []*fp8.Meta
	for _, r := range fp8.Roles {
		if m := st.Meta(r); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// gatherExpertStates copies every expert's delayed-scaling state from
// the rank that holds the expert into the other ranks' stores where they
// have a state of that name (rank 0's evaluation program converts every
// expert), so that evaluation and the trained model Fit leaves scale as
// one process does. Every rank must call it.
func (r *replica) gatherExpertStates() error {
	for _, s := range r.experts {
		experts := s.Param.Shape()[0]
		// Every rank holds experts of the layer with the same states:
		// its first one says how long a packed expert state is.
		local := expertMetas(r.store, s.Layer, s.First)
		size := 0
		for _, m := range local {
			size += 5 + len(m.History)
		}
		if size == 0 {
			continue
		}
		if cap(r.stateBuf) < size {
			r.stateBuf = make([]float32, size)
		}
		buf := r.stateBuf[:size]
		owners := dist.Split(experts, r.t.epSize)
		me := r.epComm.Rank()
		owner := 0
		for e := range experts {
			for e >= dist.Offsets(owners)[owner]+owners[owner] {
				owner++
			}
			metas := expertMetas(r.store, s.Layer, e)
			if len(metas) != len(local) {
				metas = nil // a rank without this expert's state takes part only
			}
			if owner == me {
				packMetas(buf, metas)
			}
			if err := r.epComm.BroadcastF32(buf, owner); err != nil {
				return fmt.Errorf("train: expert %d of %q: %w", e, s.Layer, err)
			}
			if owner != me && metas != nil {
				unpackMetas(metas, buf)
			}
		}
	}
	return nil
}

// packMetas writes metas' scales, histories and counters into buf (the
// counters exact as float32 below 2^24).
func packMetas(buf []float32, metas []*fp8.Meta) {
	i := 0
	for _, m := range metas {
		buf[i], buf[i+1] = m.Scale, m.ScaleInv
		i += 2
		i += copy(buf[i:], m.History)
		buf[i], buf[i+1], buf[i+2] = float32(m.Steps), float32(m.NonFinite), float32(m.Overflows)
		i += 3
	}
}

// unpackMetas is packMetas's reverse.
func unpackMetas(metas []*fp8.Meta, buf []float32) {
	i := 0
	for _, m := range metas {
		if len(buf) < i+5+len(m.History) {
			return
		}
		m.Scale, m.ScaleInv = buf[i], buf[i+1]
		i += 2
		i += copy(m.History, buf[i:])
		m.Steps, m.NonFinite, m.Overflows = int(buf[i]), int(buf[i+1]), int(buf[i+2])
		i += 3
	}
}

// splitGroups makes this rank's expert-parallel group (the epSize
// consecutive ranks it is one of) and, with several groups, its
// data-parallel group (the ranks at its place in every group).
func (r *replica) splitGroups() error {
	t := r.t
	if t.dataRanks() == 1 {
		r.epComm = r.comm
		return nil
	}
	var err error
	if r.epComm, err = dist.Subgroup(r.comm, r.rank/t.epSize, r.rank); err != nil {
		return err
	}
	r.dpComm, err = dist.Subgroup(r.comm, r.rank%t.epSize, r.rank)
	return err
}

// dataComm is the communicator of the ranks that average gradients: the
// world's, or under expert parallelism the data-parallel group's (nil:
// none).
func (r *replica) dataComm() dist.Communicator {
	if r.t.ep {
		return r.dpComm
	}
	return r.comm
}

// resetStats zeroes the byte counters of every communicator of the rank.
func (r *replica) resetStats() {
	for _, c := range []dist.Communicator{r.comm, r.epComm, r.dpComm} {
		if c != nil {
			c.ResetStats()
		}
	}
}

// commBytes is what the rank's collectives moved since resetStats, over
// every communicator it has.
func (r *replica) commBytes() int64 {
	var n int64
	if r.comm != nil {
		n += r.comm.Stats().Bytes()
	}
	if r.epComm != nil && r.epComm != r.comm {
		n += r.epComm.Stats().Bytes()
	}
	if r.dpComm != nil {
		n += r.dpComm.Stats().Bytes()
	}
	return n
}

// denseParams returns params without the expert weights (the ones FSDP
// shards when it combines with expert parallelism).
func (r *replica) denseParams(params []*graph.Node) []*graph.Node {
	expert := map[*graph.Node]bool{}
	for _, s := range r.experts {
		expert[s.Param] = true
	}
	var out []*graph.Node
	for _, p := range params {
		if !expert[p] {
			out = append(out, p)
		}
	}
	return out
}

// bindShardedExperts binds the optimizer under EP with FSDP: the FSDP
// driver's shards of the layers around the experts, then this rank's
// slices of the expert weights (and the checkpoint store of both).
func (r *replica) bindShardedExperts(params []*graph.Node) error {
	dense := r.denseParams(params)
	index := map[*graph.Node]int{}
	for i, p := range params {
		index[p] = i
	}
	var denseGrads, expertNodes, expertGrads []*graph.Node
	for _, p := range dense {
		denseGrads = append(denseGrads, r.grads[index[p]])
	}
	for _, s := range r.experts {
		expertNodes = append(expertNodes, s.Param)
		expertGrads = append(expertGrads, r.grads[index[s.Param]])
	}
	var err error
	if r.drv, err = fsdp.NewRank(r.sh, r.prog, denseGrads); err != nil {
		return err
	}
	ep, err := optim.Bind(r.store, r.prog, expertNodes, expertGrads)
	if err != nil {
		return err
	}
	r.params = append(append([]optim.Param(nil), r.drv.Params()...), ep...)
	return r.shardExperts()
}

// reduceExpertGrads sums this rank's expert-weight gradients over the
// data-parallel group as FSDP's reduce-scatter sums the shards it holds
// (weighted by rows on an uneven split, else summed and averaged).
func (r *replica) reduceExpertGrads(b *data.Batch) error {
	n := r.t.dataRanks()
	if n == 1 {
		return nil
	}
	even := b.Rows*n == b.GlobalRows
	w := float32(b.Rows) / float32(b.GlobalRows)
	inv := 1 / float32(n)
	for _, pi := range r.expertParam {
		g := r.params[pi].G
		if r.acc != nil {
			g = r.src[pi]
		}
		if !even {
			kernels.Scale(g, w)
		}
		if err := r.dpComm.AllReduceF32(g, dist.Sum); err != nil {
			return err
		}
		if even {
			kernels.Scale(g, inv)
		}
	}
	return nil
}

// shardedNormSquared is expertNormSquared with FSDP: the shards of the
// layers around the experts add their sums of squares over the
// data-parallel group (in float32, as FSDP's clipping does), the expert
// slices theirs over the expert-parallel group; every rank gets the same
// norm.
func (r *replica) shardedNormSquared(aligned bool) (float64, error) {
	nd := len(r.drv.Params())
	r.lbuf[1] = float32(optim.GradSumSquares(r.params[:nd]))
	if err := r.dpComm.AllReduceF32(r.lbuf[1:2], dist.Sum); err != nil {
		return 0, err
	}
	sum := float64(r.lbuf[1])
	if !aligned {
		// Each expert weight's whole gradient, put together over the
		// expert-parallel group.
		for i := range r.expertParam {
			if err := r.wholeExpertGrad(i); err != nil {
				return 0, err
			}
			r.onePar[0].G = r.expertFull[i]
			sum += optim.GradSumSquares(r.onePar[:])
		}
		return sum, nil
	}
	r.chunkSums, r.chunkStarts = optim.GradChunkSums(r.params[nd:], r.chunkSums, r.chunkStarts)
	for i := range r.expertParam {
		end := len(r.chunkSums)
		if i+1 < len(r.chunkStarts) {
			end = r.chunkStarts[i+1]
		}
		own := r.chunkSums[r.chunkStarts[i]:end]
		var err error
		if sum, err = r.exchangeChunkSums(i, own, sum); err != nil {
			return 0, err
		}
	}
	return sum, nil
}

// wholeExpertGrad puts expert weight i's whole gradient together in
// expertFull[i] over the expert-parallel group: this rank's slice padded
// with zeros, all-reduced (exact: every element is one rank's).
func (r *replica) wholeExpertGrad(i int) error {
	lo, hi := r.expertLo[i], r.expertHi[i]
	full := r.expertFull[i]
	clear(full)
	copy(full[lo:hi], r.params[r.expertParam[i]].G)
	return r.epComm.AllReduceF32(full, dist.Sum)
}
