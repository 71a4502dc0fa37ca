package graph

import (
	"fmt"
	"slices"
	"sort"
	"unsafe"
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
	// Sums, when set, does the additions of AddN nodes (the sums autodiff
	// makes of a value's several gradients): ops.VectorSums gives the
	// vector kernels, which passes.Prepare compiles with. When nil, AddN
	// adds in plain Go. Both give the same bits.
	Sums Sums
}

// Sums adds float32 slices element by element, as AddN nodes do.
type Sums interface {
	// Add writes x + y to dst (x and y at least as long as dst; dst
	// may be either).
	Add(dst, x, y []float32)
	// AddTo adds src to dst (src at least as long as dst).
	AddTo(dst, src []float32)
}

// goSums are the plain-Go additions AddN runs without Options.Sums.
type goSums struct{}

func (goSums) Add(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i := range dst {
		dst[i] = x[i] + y[i]
	}
}

func (goSums) AddTo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
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
	preEnd   []func() error // BeforeStepEnd's, run before stepEnd
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
	p.schedule = p.reorder(live(outputs, &opts))
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

// reorder turns the depth-first order of the live nodes into a schedule
// that keeps fewer bytes alive: it runs the nodes as they become ready,
// in depth-first order, except that the ready node that frees the most
// arena bytes net of what it takes runs first, if any frees more than it
// takes. A node is credited with a share of each buffer it reads, the
// buffer's size over its readers left, so that the readers of a buffer
// (the weight-gradient GEMM and the bias gradient of a layer's output
// gradient) run close together and the last of them frees it.
// The depth-first order alone computes the gradient of every parameter
// in the order the parameters were made, so a model's first layer's
// weight gradient, and with it every saved activation, waits until the
// end of the backward pass. Any topological order computes the same
// values; only the memory plan changes.
func (p *Program) reorder(order []*Node) []*Node {
	pos := make(map[*Node]int, len(order))
	for i, n := range order {
		pos[n] = i
	}
	root := func(n *Node) *Node {
		for src := p.aliasOf(n); src != nil; src = p.aliasOf(n) {
			n = src
		}
		return n
	}
	planned := func(n *Node) bool { return !n.IsParam() && !n.IsInput() && !p.isAlias(n) }
	bytes := func(n *Node) int { return n.dtype.Bytes(n.shape) }
	// The distinct taken inputs of each node, their roots, the readers
	// left of each root and the users of each node.
	ins := make([][]*Node, len(order))
	roots := make([][]*Node, len(order))
	readers := map[*Node]int{}
	users := map[*Node][]int{}
	waiting := make([]int, len(order))
	for i, n := range order {
		for j, in := range n.inputs {
			if _, ok := pos[in]; !ok || !takes(n, j, &p.opts) || slices.Contains(ins[i], in) {
				continue
			}
			ins[i] = append(ins[i], in)
			users[in] = append(users[in], i)
			waiting[i]++
			if r := root(in); !slices.Contains(roots[i], r) {
				roots[i] = append(roots[i], r)
				readers[r]++
			}
		}
	}
	kept := map[*Node]bool{}
	for _, o := range p.outputs {
		kept[root(o)] = true
	}
	gain := func(i int) int {
		g := 0
		if planned(order[i]) {
			g -= bytes(order[i])
		}
		for _, r := range roots[i] {
			if planned(r) && !kept[r] {
				g += bytes(r) / readers[r] // a share of what the last reader frees
			}
		}
		return g
	}
	var ready []int // positions in order, kept sorted
	for i := range order {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	out := make([]*Node, 0, len(order))
	for len(ready) > 0 {
		pick, best := 0, 0
		for k, i := range ready {
			if g := gain(i); g > best {
				pick, best = k, g
			}
		}
		i := ready[pick]
		ready = slices.Delete(ready, pick, pick+1)
		out = append(out, order[i])
		for _, r := range roots[i] {
			readers[r]--
		}
		for _, u := range users[order[i]] {
			if waiting[u]--; waiting[u] == 0 {
				k, _ := slices.BinarySearch(ready, u)
				ready = slices.Insert(ready, k, u)
			}
		}
	}
	return out
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
// values, inputs get buffers of their own, views share their input's, an
// in-place node (see InPlacer) its dying input's, and every other node a
// slice of one arena. Buffers are placed once their lifetimes are known:
// from the node that writes one to the last reader of it (or of a view of
// it), largest first, each at the lowest offset where it overlaps no
// buffer alive at the same time ("greedy by size"), so that the arena is
// close to the peak of the live bytes. One arena serves every dtype: the
// bytes of a dead float32 buffer can hold FP8 codes later.
func (p *Program) plan() error {
	freeAt := p.lastUses()
	var bufs []*buffer
	owner := map[*Node]*buffer{} // a buffer by the node that frees it
	of := map[*Node]*buffer{}    // every planned node's buffer
	var aliases []*Node
	for i, n := range p.schedule {
		v := &Value{Shape: n.shape, DType: n.dtype}
		p.values[n] = v
		size := n.dtype.Bytes(n.shape)
		p.stats.NaiveBytes += size
		switch {
		case p.isAlias(n):
			p.stats.NaiveBytes -= size
			aliases = append(aliases, n)
		case n.IsParam():
			if err := p.bindParam(n, v); err != nil {
				return err
			}
		case n.IsInput():
			p.bindInput(n, v)
		default:
			if d := p.inPlaceInput(n, freeAt[i], owner); d != nil {
				b := owner[d]
				delete(owner, d)
				owner[n], of[n] = b, b
				break
			}
			b := &buffer{size: roundUp(size, align), start: i, end: len(p.schedule)}
			bufs = append(bufs, b)
			owner[n], of[n] = b, b
		}
		// A buffer's last reader ends it; the node written at the same
		// position counts as overlapping, so it never writes over its
		// inputs (an in-place node took its input's buffer above).
		for _, d := range freeAt[i] {
			if b, ok := owner[d]; ok {
				b.end = i
				delete(owner, d)
			}
		}
	}
	size := placeBuffers(bufs)
	arena := make([]float32, size/4)
	p.stats.ArenaBytes = 4 * len(arena)
	for n, b := range of {
		v, count := p.values[n], storageLen(n)
		if count == 0 { // empty, but of its dtype
			switch n.dtype.storage() {
			case storeF32:
				v.F32 = []float32{}
			case storeI32:
				v.I32 = []int32{}
			case storeU8:
				v.U8 = []uint8{}
			}
			continue
		}
		at := unsafe.Pointer(unsafe.SliceData(arena[b.off/4:]))
		switch n.dtype.storage() {
		case storeF32:
			v.F32 = unsafe.Slice((*float32)(at), count)
		case storeI32:
			v.I32 = unsafe.Slice((*int32)(at), count)
		case storeU8:
			v.U8 = unsafe.Slice((*uint8)(at), count)
		}
	}
	// Views take their slices now that the arena exists (in schedule
	// order, so a view of a view finds its input's slices set).
	for _, n := range aliases {
		src, v, size := p.values[p.aliasOf(n)], p.values[n], storageLen(n)
		v.F32, v.I32, v.U8 = sub(src.F32, size), sub(src.I32, size), sub(src.U8, size)
		v.meta = src.meta
	}
	return nil
}

// inPlaceInput returns the input whose buffer an in-place op's node n
// takes (see InPlacer), or nil: a planned buffer (the root of any view)
// at least as large as n's, whose last reader is n (among dying, the
// buffers freed at n), owned by that input.
func (p *Program) inPlaceInput(n *Node, dying []*Node, owner map[*Node]*buffer) *Node {
	ip, ok := n.op.(InPlacer)
	if !ok {
		return nil
	}
	i := ip.InPlace()
	if i < 0 || i >= len(n.inputs) {
		return nil
	}
	d := n.inputs[i]
	for src := p.aliasOf(d); src != nil; src = p.aliasOf(d) {
		d = src // a view's bytes are its root's
	}
	if _, planned := owner[d]; !planned || d.dtype.Bytes(d.shape) < n.dtype.Bytes(n.shape) {
		return nil
	}
	for _, x := range dying {
		if x == d {
			return d
		}
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
	size := storageLen(n)
	switch n.dtype.storage() {
	case storeF32:
		v.F32 = make([]float32, size)
	case storeI32:
		v.I32 = make([]int32, size)
	case storeU8:
		v.U8 = make([]uint8, size)
	}
	p.stats.InputBytes += n.dtype.Bytes(n.shape)
}

// sub returns s[:n:n], or nil for a nil s.
func sub[T any](s []T, n int) []T {
	if s == nil {
		return nil
	}
	return s[:n:n]
}

// buffer is one planned arena buffer: size bytes (a multiple of align),
// alive from schedule position start to end inclusive, placed at off.
type buffer struct {
	size, start, end, off int
}

// align is the alignment of every buffer: a cache line, whole vectors.
const align = 64

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// placeBuffers gives each buffer an offset where it overlaps no buffer
// whose lifetime meets its own, and returns the arena size: largest
// first (ties by start), each at the lowest offset with room among the
// buffers already placed that are alive with it.
func placeBuffers(bufs []*buffer) int {
	order := append([]*buffer(nil), bufs...)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].size != order[j].size {
			return order[i].size > order[j].size
		}
		return order[i].start < order[j].start
	})
	var placed, meet []*buffer
	size := 0
	for _, b := range order {
		meet = meet[:0]
		for _, q := range placed {
			if q.start <= b.end && b.start <= q.end {
				meet = append(meet, q)
			}
		}
		sort.Slice(meet, func(i, j int) bool { return meet[i].off < meet[j].off })
		off := 0
		for _, q := range meet {
			if q.off-off >= b.size {
				break
			}
			off = max(off, q.off+q.size)
		}
		b.off = off
		size = max(size, off+b.size)
		placed = append(placed, b)
	}
	return size
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
	if err := p.runStepEnd(); err != nil {
		return err
	}
	p.step++
	return nil
}

// runStepEnd runs the hooks of BeforeStepEnd, then the ops' step-end
// hooks.
func (p *Program) runStepEnd() error {
	for _, fn := range p.preEnd {
		if err := fn(); err != nil {
			return fmt.Errorf("graph: run: before step end: %w", err)
		}
	}
	for _, fn := range p.stepEnd {
		if err := fn(); err != nil {
			return fmt.Errorf("graph: run: step end: %w", err)
		}
	}
	return nil
}

// BeforeStepEnd registers fn to run at the end of every Run, after the
// kernels and before the step-end hooks the ops registered (the FP8
// scale updates): where a data-parallel driver all-reduces the step's
// amaxes, so that every rank's scale update sees the global amax. Hooks
// run in the order registered; an error stops the Run.
func (p *Program) BeforeStepEnd(fn func() error) { p.preEnd = append(p.preEnd, fn) }

// HasInput reports whether n is an input the program reads (an input
// the outputs do not depend on is dropped when compiling).
func (p *Program) HasInput(n *Node) bool {
	_, ok := p.inputIdx[n]
	return ok
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

// storageLen is the length of a node's value slice: its elements, or
// the bytes of a packed Float4E2M1 value.
func storageLen(n *Node) int {
	if n.dtype == Float4E2M1 {
		return n.dtype.Bytes(n.shape)
	}
	return n.shape.Numel()
}
