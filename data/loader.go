package data

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// Config configures a Loader. The zero value of each field but BatchSize
// works: one rank, no shuffle, a padded last batch, no prefetch.
type Config struct {
	// BatchSize is the global batch: the examples of one step across all
	// ranks.
	BatchSize int
	// Shuffle draws a new order every epoch: one generator seeded with
	// Seed and Stream shuffles the previous epoch's order (the first
	// epoch's, the dataset's), the same on every rank, so that a resumed
	// run recomputes any epoch's order from its number.
	Shuffle bool
	Seed    uint64
	// Stream chooses the generator's stream (0: DefaultStream).
	Stream uint64
	// Replacement draws every row of every batch uniformly at random from
	// the whole dataset, with replacement (nanoGPT's random windows,
	// PyTorch's RandomSampler(replacement=True)); an "epoch" is then
	// Len/BatchSize batches and no batch is padded.
	Replacement bool
	// DropLast leaves out the last batch of an epoch when it is not full;
	// otherwise it is padded to BatchSize, its padded rows masked (Mask
	// 0, label fields IgnoreLabel).
	DropLast bool
	// World ranks share each global batch: rank Rank takes its rows
	// [lo, hi), the first BatchSize mod World ranks one row more than the
	// rest (0 or 1: one process). Every example is seen exactly once per
	// epoch across the ranks, as with PyTorch's DistributedSampler, but
	// nothing is repeated to even out the last batch: it is padded and
	// masked.
	Rank, World int
	// Prefetch, when above 0, prepares up to that many batches ahead on a
	// goroutine.
	Prefetch int
}

// Loader draws batches from a Dataset. Next returns a batch that stays
// valid until the next call of Next; after the first epoch (and once the
// prefetching goroutine runs) it allocates nothing.
type Loader struct {
	ds         Dataset
	cfg        Config
	n, batches int
	lo, hi     int // this rank's rows of a global batch

	perm      []int
	permEpoch int // the epoch perm is the order of (-1: none yet)
	drawn     int // with Replacement: batches the generator has drawn
	pcg       *rand.PCG
	rng       *rand.Rand
	swap      func(i, j int)
	idx       []int // with Replacement: the batch's draws

	// epoch and index are the next batch to return.
	epoch, index int
	closed       bool

	buf *Batch // the batch of the synchronous path

	free, ready chan *Batch
	quit, done  chan struct{}
	cur         *Batch
	running     bool
}

// NewLoader checks cfg against ds and returns a loader positioned at the
// first batch of epoch 0.
func NewLoader(ds Dataset, cfg Config) (*Loader, error) {
	if ds == nil {
		return nil, fmt.Errorf("data: loader: no dataset")
	}
	if err := checkFields(ds.Fields()); err != nil {
		return nil, err
	}
	if cfg.World == 0 {
		cfg.World = 1
	}
	n := ds.Len()
	switch {
	case cfg.BatchSize < 1:
		return nil, fmt.Errorf("data: loader: batch size %d, want at least 1", cfg.BatchSize)
	case cfg.World < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.World:
		return nil, fmt.Errorf("data: loader: rank %d of %d ranks", cfg.Rank, cfg.World)
	case cfg.BatchSize < cfg.World:
		return nil, fmt.Errorf("data: loader: a batch of %d leaves ranks of the %d without rows", cfg.BatchSize, cfg.World)
	case cfg.Prefetch < 0:
		return nil, fmt.Errorf("data: loader: prefetch %d, want at least 0", cfg.Prefetch)
	case n < 1:
		return nil, fmt.Errorf("data: loader: the dataset is empty")
	case cfg.DropLast && n < cfg.BatchSize:
		return nil, fmt.Errorf("data: loader: the dataset's %d examples make no full batch of %d (DropLast)", n, cfg.BatchSize)
	}
	if cfg.Stream == 0 {
		cfg.Stream = DefaultStream
	}
	l := &Loader{ds: ds, cfg: cfg, n: n, permEpoch: -1, perm: make([]int, n)}
	l.lo, l.hi = Shard(cfg.BatchSize, cfg.World, cfg.Rank)
	l.batches = n / cfg.BatchSize
	if !cfg.DropLast && !cfg.Replacement && n%cfg.BatchSize != 0 {
		l.batches++
	}
	if cfg.Replacement {
		l.batches = max(1, l.batches)
		l.idx = make([]int, cfg.BatchSize)
	}
	l.pcg = rand.NewPCG(cfg.Seed, cfg.Stream)
	l.rng = rand.New(l.pcg)
	l.swap = func(i, j int) { l.perm[i], l.perm[j] = l.perm[j], l.perm[i] }
	return l, nil
}

// DefaultStream is the generator stream of a Config without one (the one
// Octet's MNIST loader has always shuffled with, so its runs keep their
// order).
const DefaultStream = 0x6d6e697374

// Shard returns the rows [lo, hi) of a global batch of size rows that rank
// takes of world ranks: the first size mod world ranks take one row more.
func Shard(size, world, rank int) (lo, hi int) {
	q, r := size/world, size%world
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

// BatchesPerEpoch returns the number of batches (steps) of an epoch.
func (l *Loader) BatchesPerEpoch() int { return l.batches }

// Rows returns the rows of this rank's batches (padding included).
func (l *Loader) Rows() int { return l.hi - l.lo }

// Fields returns the dataset's fields.
func (l *Loader) Fields() []Field { return l.ds.Fields() }

// Epoch returns the epoch of the next batch.
func (l *Loader) Epoch() int { return l.epoch }

// Position returns the next batch's epoch and index within the epoch.
func (l *Loader) Position() (epoch, index int) { return l.epoch, l.index }

// Next returns the next batch, moving on to the next epoch (and its
// order) after the last batch of one.
func (l *Loader) Next() (*Batch, error) {
	if l.closed {
		return nil, fmt.Errorf("data: loader: Next after Close")
	}
	if l.cfg.Prefetch == 0 {
		if l.buf == nil {
			l.buf = NewBatch(l.ds.Fields(), l.Rows())
		}
		if err := l.produce(l.epoch, l.index, l.buf); err != nil {
			return nil, err
		}
		l.advance(&l.epoch, &l.index)
		return l.buf, nil
	}
	if !l.running {
		l.start()
	}
	if l.cur != nil {
		l.free <- l.cur
	}
	l.cur = <-l.ready
	if l.cur.err != nil {
		err := l.cur.err
		l.stop()
		return nil, err
	}
	l.advance(&l.epoch, &l.index)
	return l.cur, nil
}

func (l *Loader) advance(epoch, index *int) {
	*index++
	if *index == l.batches {
		*index = 0
		*epoch++
	}
}

// order makes perm the order of epoch: the next shuffle of the order
// before it, or, after a jump, the order replayed from the first epoch.
func (l *Loader) order(epoch int) {
	if l.permEpoch == epoch {
		return
	}
	if !l.cfg.Shuffle {
		for i := range l.perm {
			l.perm[i] = i
		}
		l.permEpoch = epoch
		return
	}
	if l.permEpoch < 0 || epoch != l.permEpoch+1 {
		for i := range l.perm {
			l.perm[i] = i
		}
		l.pcg.Seed(l.cfg.Seed, l.cfg.Stream)
		l.permEpoch = -1
	}
	for l.permEpoch < epoch {
		l.rng.Shuffle(len(l.perm), l.swap)
		l.permEpoch++
	}
}

// draws fills idx with the draws of global batch number k (with
// Replacement), replaying the generator after a jump.
func (l *Loader) draws(k int) {
	if k != l.drawn {
		l.pcg.Seed(l.cfg.Seed, l.cfg.Stream)
		for l.drawn = 0; l.drawn < k; l.drawn++ {
			for range l.idx {
				l.rng.IntN(l.n)
			}
		}
	}
	for i := range l.idx {
		l.idx[i] = l.rng.IntN(l.n)
	}
	l.drawn++
}

// produce fills b with this rank's rows of batch index of epoch.
func (l *Loader) produce(epoch, index int, b *Batch) error {
	var idx []int
	var real int // real rows of the global batch
	if l.cfg.Replacement {
		l.draws(epoch*l.batches + index)
		real = l.cfg.BatchSize
		idx = l.idx[l.lo:l.hi]
	} else {
		l.order(epoch)
		start := index * l.cfg.BatchSize
		real = min(l.cfg.BatchSize, l.n-start)
		mine := min(max(real-l.lo, 0), l.hi-l.lo)
		from := min(start+l.lo, l.n)
		idx = l.perm[from : from+mine]
	}
	mine := len(idx)
	if err := l.ds.Fill(b, idx); err != nil {
		return fmt.Errorf("data: batch %d of epoch %d: %w", index, epoch, err)
	}
	b.pad(mine)
	b.GlobalRows, b.Epoch, b.Index = real, epoch, index
	return nil
}

// start runs the prefetching goroutine from the current position.
func (l *Loader) start() {
	if l.free == nil {
		depth := l.cfg.Prefetch
		l.free = make(chan *Batch, depth+2)
		l.ready = make(chan *Batch, depth)
		for range depth + 2 {
			l.free <- NewBatch(l.ds.Fields(), l.Rows())
		}
	}
	l.quit, l.done = make(chan struct{}), make(chan struct{})
	l.running = true
	go l.prefetch(l.epoch, l.index, l.quit, l.done)
}

func (l *Loader) prefetch(epoch, index int, quit, done chan struct{}) {
	defer close(done)
	for {
		var b *Batch
		select {
		case <-quit:
			return
		case b = <-l.free:
		}
		b.err = l.produce(epoch, index, b)
		select {
		case l.ready <- b:
		case <-quit:
			l.free <- b
			return
		}
		if b.err != nil {
			return
		}
		l.advance(&epoch, &index)
	}
}

// stop ends the prefetching goroutine and takes every buffer back.
func (l *Loader) stop() {
	if !l.running {
		return
	}
	close(l.quit)
	<-l.done
	for len(l.ready) > 0 {
		l.free <- <-l.ready
	}
	if l.cur != nil {
		l.free <- l.cur
		l.cur = nil
	}
	l.running = false
}

// Close stops prefetching. The loader's batches are no longer valid.
func (l *Loader) Close() error {
	l.stop()
	l.closed = true
	return nil
}

// State is a loader's position: the next batch's epoch and index within
// it. With the loader's Config it determines every batch that follows.
type State struct {
	Epoch, Index int
}

// State returns the position of the next batch.
func (l *Loader) State() State { return State{l.epoch, l.index} }

// Restore moves the loader to st (Accelerate's skip_first_batches, without
// reading the batches skipped). The batch last returned is no longer
// valid.
func (l *Loader) Restore(st State) error {
	if st.Epoch < 0 || st.Index < 0 || st.Index >= l.batches {
		return fmt.Errorf("data: loader: position batch %d of epoch %d, and an epoch has %d batches: %w", st.Index, st.Epoch, l.batches, ErrState)
	}
	l.stop()
	l.epoch, l.index = st.Epoch, st.Index
	return nil
}

// stateMagic starts a marshalled State.
const stateMagic = "octet.data.Loader/1"

// MarshalBinary encodes the position with what it depends on (the number
// of examples, batch size, ranks, seed, shuffle, drop-last, stream and
// replacement), for a checkpoint.
func (l *Loader) MarshalBinary() ([]byte, error) {
	b := []byte(stateMagic)
	for _, v := range l.fingerprint() {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(l.epoch))
	b = binary.LittleEndian.AppendUint64(b, uint64(l.index))
	return b, nil
}

var fingerprintNames = [...]string{"examples", "batch size", "ranks", "seed", "shuffle", "drop-last", "stream", "replacement"}

func (l *Loader) fingerprint() [len(fingerprintNames)]uint64 {
	b2u := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	return [...]uint64{uint64(l.n), uint64(l.cfg.BatchSize), uint64(l.cfg.World), l.cfg.Seed, b2u(l.cfg.Shuffle), b2u(l.cfg.DropLast),
		l.cfg.Stream, b2u(l.cfg.Replacement)}
}

// UnmarshalBinary restores a position written by MarshalBinary, refusing
// one of a loader with other examples, batch size, seed, shuffle,
// drop-last, stream or replacement (an error wrapping ErrState that names
// the setting). A position saved by a loader of another rank count
// restores: it is a place in the sequence of global batches, which does
// not depend on how the ranks share them.
func (l *Loader) UnmarshalBinary(b []byte) error {
	want := len(stateMagic) + 8*(len(fingerprintNames)+2)
	if len(b) != want || string(b[:len(stateMagic)]) != stateMagic {
		return fmt.Errorf("data: loader state of %d bytes is not a %s state: %w", len(b), stateMagic, ErrState)
	}
	b = b[len(stateMagic):]
	fp := l.fingerprint()
	for i, name := range fingerprintNames {
		if got := binary.LittleEndian.Uint64(b[8*i:]); got != fp[i] && name != "ranks" {
			return fmt.Errorf("data: loader state saved with %s %d, this loader has %d: %w", name, got, fp[i], ErrState)
		}
	}
	b = b[8*len(fingerprintNames):]
	epoch, index := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	if epoch > 1<<40 || index > 1<<40 {
		return fmt.Errorf("data: loader state: position %d/%d is out of range: %w", epoch, index, ErrState)
	}
	return l.Restore(State{int(epoch), int(index)})
}
