package graph

import (
	"fmt"
	"sort"
)

// Options control compilation.
type Options struct {
	// Training selects training behaviour for ops that differ between
	// training and evaluation (dropout, FP8 amax recording).
	Training bool
	// Unfused makes fused kernels (the compiler's fused elementwise
	// chains and GEMM epilogues) run their steps one at a time over the
	// whole tensor, as the separate ops would: for comparing fused and
	// unfused programs, which must give the same results.
	Unfused bool
}

// Program is a compiled graph: a schedule of bound kernels over buffers
// planned once. Run executes one step and allocates nothing after its
// first call. A Program is not safe for concurrent use.
type Program struct {
	g        *Graph
	store    *Store
	opts     Options
	schedule []*Node
	kernels  []Kernel
	values   map[*Node]*Value
	inputs   []*Node
	fed      []bool
	inputIdx map[*Node]int
	outputs  []*Node
	isOutput map[*Node]bool // outputs and the handles that resolve to them
	stepEnd  []func() error
	stats    MemoryStats
	step     int64
	prof     profile
}

// Step returns the number of completed Runs (or the value set by SetStep).
func (p *Program) Step() int64 { return p.step }

// SetStep sets the step counter, as when resuming from a checkpoint.
func (p *Program) SetStep(n int64) { p.step = n }

// MemoryStats describes a program's buffer plan.
type MemoryStats struct {
	// ArenaBytes is the size of the planned activation buffers.
	ArenaBytes int
	// NaiveBytes is what one buffer per node would take.
	NaiveBytes int
	// InputBytes is the size of the fed input buffers.
	InputBytes int
}

// Compile turns the part of g that outputs depend on into a Program.
// Parameters are bound to their values in store (shared, not copied); every
// parameter the outputs depend on must be present with its node's shape.
func Compile(g *Graph, store *Store, opts Options, outputs ...*Node) (*Program, error) {
	if g == nil {
		return nil, fmt.Errorf("graph: compile: nil graph")
	}
	if err := g.Err(); err != nil {
		return nil, fmt.Errorf("graph: compile: graph has errors: %w", err)
	}
	if len(outputs) == 0 {
		return nil, fmt.Errorf("graph: compile: no outputs")
	}
	for i, o := range outputs {
		if o == nil || o.g != g || !o.valid() {
			return nil, fmt.Errorf("graph: compile: output %d is nil, invalid or from another graph", i)
		}
	}
	if err := Verify(g); err != nil {
		return nil, fmt.Errorf("graph: compile: %w", err)
	}
	handles := outputs
	outputs = g.resolveAll(outputs)
	p := &Program{
		g: g, store: store, opts: opts,
		values:   map[*Node]*Value{},
		inputIdx: map[*Node]int{},
		outputs:  outputs,
		isOutput: map[*Node]bool{},
	}
	p.schedule = live(outputs, &opts)
	if err := p.plan(); err != nil {
		return nil, err
	}
	for _, n := range p.schedule {
		if n.IsInput() || n.IsParam() || p.isAlias(n) {
			p.kernels = append(p.kernels, nil)
			continue
		}
		b := &Binding{Node: n, Out: p.values[n], Training: opts.Training, Options: opts, prog: p}
		for _, in := range n.inputs {
			b.In = append(b.In, p.values[in]) // nil for an untaken Switch branch
		}
		k, err := n.op.Bind(b)
		if err != nil {
			return nil, fmt.Errorf("graph: compile: node %q (%s): %w", n.name, n.op.Type(), err)
		}
		if k == nil {
			return nil, fmt.Errorf("graph: compile: node %q (%s): op bound no kernel", n.name, n.op.Type())
		}
		p.kernels = append(p.kernels, k)
	}
	for i, o := range outputs {
		p.isOutput[o], p.isOutput[handles[i]] = true, true
		p.values[handles[i]] = p.values[o]
	}
	return p, nil
}

// aliasOf returns the input n's output views in this program, or nil.
func (p *Program) aliasOf(n *Node) *Node {
	a, ok := n.op.(Aliaser)
	if !ok {
		return nil
	}
	i := a.AliasOf(p.opts)
	if i < 0 || i >= len(n.inputs) || n.inputs[i].dtype != n.dtype {
		return nil
	}
	return n.inputs[i]
}

func (p *Program) isAlias(n *Node) bool { return p.aliasOf(n) != nil }

// plan assigns every scheduled node a buffer: parameters use the store's
// values, inputs get buffers of their own, views share their input's, and
// every other node a slice of one arena per storage class, reused once
// the last consumer of the node (or of any view of it) has run.
func (p *Program) plan() error {
	freeAt := p.lastUses()
	var arenas [numStores]allocator
	offset := map[*Node]int{}
	var aliases []*Node
	for i, n := range p.schedule {
		v := &Value{Shape: n.shape, DType: n.dtype}
		p.values[n] = v
		size := n.shape.Numel()
		p.stats.NaiveBytes += size * n.dtype.Size()
		switch {
		case p.isAlias(n):
			p.stats.NaiveBytes -= size * n.dtype.Size()
			aliases = append(aliases, n)
		case n.IsParam():
			if err := p.bindParam(n, v); err != nil {
				return err
			}
		case n.IsInput():
			p.bindInput(n, v)
		default:
			offset[n] = arenas[n.dtype.storage()].alloc(size)
		}
		// Free after allocating, so a node never writes over its inputs.
		for _, d := range freeAt[i] {
			if o, ok := offset[d]; ok {
				arenas[d.dtype.storage()].free(o, d.shape.Numel())
			}
		}
	}
	p.bindArenas(&arenas, offset)
	// Views take their slices now that the arena exists (in schedule
	// order, so a view of a view finds its input's slices set).
	for _, n := range aliases {
		src, v, size := p.values[p.aliasOf(n)], p.values[n], n.shape.Numel()
		v.F32, v.I32, v.U8 = sub(src.F32, size), sub(src.I32, size), sub(src.U8, size)
		v.meta = src.meta
	}
	return nil
}

// lastUses lists, for each position of the schedule (and one past it, for
// the outputs), the buffer owners whose last reader runs there: a view's
// readers count for the node whose buffer it shares.
func (p *Program) lastUses() [][]*Node {
	pos := make(map[*Node]int, len(p.schedule))
	for i, n := range p.schedule {
		pos[n] = i
	}
	root := func(n *Node) *Node {
		for src := p.aliasOf(n); src != nil; src = p.aliasOf(n) {
			n = src
		}
		return n
	}
	last := make(map[*Node]int, len(p.schedule))
	for i, n := range p.schedule {
		for _, in := range n.inputs {
			if _, ok := pos[in]; ok {
				last[root(in)] = i
			}
		}
	}
	for _, o := range p.outputs {
		last[root(o)] = len(p.schedule)
	}
	freeAt := make([][]*Node, len(p.schedule)+1)
	for n, i := range last {
		freeAt[i] = append(freeAt[i], n)
	}
	return freeAt
}

// bindParam points a parameter's value at the store's, whose shape must
// be the node's.
func (p *Program) bindParam(n *Node, v *Value) error {
	if p.store == nil {
		return fmt.Errorf("graph: compile: parameter %q needs a store", n.name)
	}
	sh, ok := p.store.Shape(n.name)
	if !ok {
		return fmt.Errorf("graph: compile: parameter %q %v has no value in the store", n.name, n.shape)
	}
	if !sh.Equal(n.shape) {
		return fmt.Errorf("graph: compile: parameter %q: stored shape %v, node wants %v", n.name, sh, n.shape)
	}
	v.F32 = p.store.Float32(n.name)
	return nil
}

// bindInput gives an input a buffer of its own, for Feed to fill.
func (p *Program) bindInput(n *Node, v *Value) {
	p.inputIdx[n] = len(p.inputs)
	p.inputs = append(p.inputs, n)
	p.fed = append(p.fed, false)
	size := n.shape.Numel()
	switch n.dtype.storage() {
	case storeF32:
		v.F32 = make([]float32, size)
	case storeI32:
		v.I32 = make([]int32, size)
	case storeU8:
		v.U8 = make([]uint8, size)
	}
	p.stats.InputBytes += size * n.dtype.Size()
}

// bindArenas allocates the arenas at the sizes the plan reached and
// gives each planned node its slice (capacity clipped, so that no kernel
// can append into a neighbour).
func (p *Program) bindArenas(arenas *[numStores]allocator, offset map[*Node]int) {
	f32 := make([]float32, arenas[storeF32].size)
	i32 := make([]int32, arenas[storeI32].size)
	u8 := make([]uint8, arenas[storeU8].size)
	p.stats.ArenaBytes = 4*len(f32) + 4*len(i32) + len(u8)
	for n, o := range offset {
		v, size := p.values[n], n.shape.Numel()
		switch n.dtype.storage() {
		case storeF32:
			v.F32 = f32[o : o+size : o+size]
		case storeI32:
			v.I32 = i32[o : o+size : o+size]
		case storeU8:
			v.U8 = u8[o : o+size : o+size]
		}
	}
}

// sub returns s[:n:n], or nil for a nil s.
func sub[T any](s []T, n int) []T {
	if s == nil {
		return nil
	}
	return s[:n:n]
}

// allocator is a first-fit allocator over one arena, in elements.
type allocator struct {
	size  int
	holes []span // sorted by offset, coalesced
}

type span struct{ off, n int }

const align = 16 // elements: 64 bytes for float32

func (a *allocator) alloc(n int) int {
	n = (n + align - 1) / align * align
	best := -1
	for i, h := range a.holes {
		if h.n >= n && (best < 0 || h.n < a.holes[best].n) {
			best = i
		}
	}
	if best >= 0 {
		h := &a.holes[best]
		off := h.off
		h.off += n
		h.n -= n
		if h.n == 0 {
			a.holes = append(a.holes[:best], a.holes[best+1:]...)
		}
		return off
	}
	// Grow, absorbing a hole at the end of the arena.
	if k := len(a.holes); k > 0 && a.holes[k-1].off+a.holes[k-1].n == a.size {
		off := a.holes[k-1].off
		a.holes = a.holes[:k-1]
		a.size = off + n
		return off
	}
	off := a.size
	a.size += n
	return off
}

func (a *allocator) free(off, n int) {
	n = (n + align - 1) / align * align
	i := sort.Search(len(a.holes), func(i int) bool { return a.holes[i].off > off })
	a.holes = append(a.holes, span{})
	copy(a.holes[i+1:], a.holes[i:])
	a.holes[i] = span{off, n}
	// Coalesce with neighbours.
	if i+1 < len(a.holes) && a.holes[i].off+a.holes[i].n == a.holes[i+1].off {
		a.holes[i].n += a.holes[i+1].n
		a.holes = append(a.holes[:i+1], a.holes[i+2:]...)
	}
	if i > 0 && a.holes[i-1].off+a.holes[i-1].n == a.holes[i].off {
		a.holes[i-1].n += a.holes[i].n
		a.holes = append(a.holes[:i], a.holes[i+1:]...)
	}
}

// Run executes one step: every kernel in schedule order, then the
// step-end hooks (such as FP8 scaling updates). It fails if an input was
// never fed.
func (p *Program) Run() error {
	for i, ok := range p.fed {
		if !ok {
			n := p.inputs[i]
			return fmt.Errorf("graph: run: input %q %v %v was not fed", n.name, n.shape, n.dtype)
		}
	}
	if p.prof.on {
		err := p.runProfiled()
		if err == nil {
			p.step++
		}
		return err
	}
	for i, k := range p.kernels {
		if k == nil {
			continue
		}
		if err := k(); err != nil {
			n := p.schedule[i]
			return fmt.Errorf("graph: run: node %q (%s): %w", n.name, n.op.Type(), err)
		}
	}
	for _, fn := range p.stepEnd {
		if err := fn(); err != nil {
			return fmt.Errorf("graph: run: step end: %w", err)
		}
	}
	p.step++
	return nil
}

func (p *Program) input(n *Node) (*Value, error) {
	i, ok := p.inputIdx[n]
	if !ok {
		if n == nil {
			return nil, fmt.Errorf("graph: feed: nil node")
		}
		return nil, fmt.Errorf("graph: feed: %q is not an input of this program", n.name)
	}
	p.fed[i] = true
	return p.values[n], nil
}

// FeedFloat32 copies data into the buffer of float32 input node n.
func (p *Program) FeedFloat32(n *Node, data []float32) error {
	v, err := p.input(n)
	if err != nil {
		return err
	}
	if v.F32 == nil || len(data) != len(v.F32) {
		p.fed[p.inputIdx[n]] = false
		return fmt.Errorf("graph: feed %q: %d float32 values, want %d %v", n.name, len(data), v.Shape.Numel(), v.DType)
	}
	copy(v.F32, data)
	return nil
}

// FeedUint8 copies data (FP8 codes) into the buffer of an FP8 input
// node n.
func (p *Program) FeedUint8(n *Node, data []uint8) error {
	v, err := p.input(n)
	if err != nil {
		return err
	}
	if v.U8 == nil || len(data) != len(v.U8) {
		p.fed[p.inputIdx[n]] = false
		return fmt.Errorf("graph: feed %q: %d uint8 values, want %d %v", n.name, len(data), v.Shape.Numel(), v.DType)
	}
	copy(v.U8, data)
	return nil
}

// FeedInt32 copies data into the buffer of int32 input node n.
func (p *Program) FeedInt32(n *Node, data []int32) error {
	v, err := p.input(n)
	if err != nil {
		return err
	}
	if v.I32 == nil || len(data) != len(v.I32) {
		p.fed[p.inputIdx[n]] = false
		return fmt.Errorf("graph: feed %q: %d int32 values, want %d %v", n.name, len(data), v.Shape.Numel(), v.DType)
	}
	copy(v.I32, data)
	return nil
}

// Value returns the buffer of an output (or input) node: a view that
// changes with every Run (or Feed). The package dense wraps it as a
// gorgonia tensor.
func (p *Program) Value(n *Node) (*Value, error) {
	if !p.isOutput[n] {
		if _, ok := p.inputIdx[n]; !ok {
			return nil, fmt.Errorf("graph: value: %v is neither an output nor an input of this program", n)
		}
	}
	return p.values[n], nil
}

// Float32 returns the buffer of a float32 output (or input) node, a view
// that changes with every Run; nil if n is neither.
func (p *Program) Float32(n *Node) []float32 {
	v, err := p.Value(n)
	if err != nil {
		return nil
	}
	return v.F32
}

// Scalar returns the value of a one-element float32 output.
func (p *Program) Scalar(n *Node) (float32, error) {
	v, err := p.Value(n)
	if err != nil {
		return 0, fmt.Errorf("graph: scalar: %v is not an output of this program (compile it with the node among its outputs)", n)
	}
	if v.F32 == nil || len(v.F32) != 1 {
		return 0, fmt.Errorf("graph: scalar: %v is %v %v, not one float32 value", n, v.DType, v.Shape)
	}
	return v.F32[0], nil
}

// Schedule returns the nodes the program runs, in order.
func (p *Program) Schedule() []*Node { return append([]*Node(nil), p.schedule...) }

// Graph returns the graph the program was compiled from.
func (p *Program) Graph() *Graph { return p.g }

// Stats returns the program's buffer plan figures.
func (p *Program) Stats() MemoryStats { return p.stats }
