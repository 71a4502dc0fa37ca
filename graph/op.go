package graph

// Op is an operation: it infers its output's shape and dtype from its
// inputs, and binds a kernel to concrete buffers at compile time. Concrete
// ops live in package ops; the graph package knows only the structural
// ones (inputs, parameters, constants, gradient accumulation).
type Op interface {
	// Type names the op kind, e.g. "MatMul".
	Type() string
	// Infer checks the inputs and returns the output shape and dtype.
	Infer(in []*Node) (Shape, DType, error)
	// Bind returns the kernel that computes the node from its inputs.
	// Buffers are fixed for the life of the program, so a kernel may
	// precompute anything that depends only on them.
	Bind(b *Binding) (Kernel, error)
}

// Kernel computes one node. It must overwrite its whole output and must
// not allocate.
type Kernel func() error

// Differentiable is implemented by ops that have a gradient rule.
type Differentiable interface {
	// Grad builds, in n's graph, the gradient of the loss with respect
	// to each input of n, given dy, the gradient with respect to n.
	// need[i] tells whether input i needs one; entries for inputs that
	// do not may be nil. Errors are recorded in the graph.
	Grad(n, dy *Node, need []bool) []*Node
}

// Aliaser is implemented by ops whose output can be a view of one of
// their inputs' buffers (a reshape, a resolved Switch): the compiler gives
// the node no buffer and no kernel of its own, and keeps the input's
// buffer alive as long as the view is used. Bind is not called for them.
type Aliaser interface {
	// AliasOf returns the index of the input the output views in a
	// program compiled with opts, or -1.
	AliasOf(opts Options) int
}

// InPlacer is implemented by ops whose kernel may write the output over
// one input's buffer: every byte of the output is written only after
// every input value stored in those bytes that it or a later output
// value depends on has been read (a row-wise softmax gradient, an
// elementwise map; an FP8 output, smaller than its float32 input, at the
// start of the input's bytes, row by row in order). The compiler then
// gives the output the start of that input's buffer when the input is a
// planned buffer at least as large that no later node (and no output)
// reads; otherwise the output gets a buffer of its own, so the kernel
// must work either way (it can tell by comparing the two slices).
type InPlacer interface {
	// InPlace returns the index of the input the output may overwrite.
	InPlace() int
}

// Attributer is implemented by ops that have attributes worth showing in
// graph dumps, e.g. "transB" or "axes=[1]".
type Attributer interface {
	Attrs() string
}

// Binding is what a kernel is bound to: the node, its output buffer and
// its input buffers.
type Binding struct {
	Node     *Node
	Out      *Value
	In       []*Value
	Training bool
	Options  Options
	prog     *Program
}

// Step returns the program's step counter: the number of completed
// Runs, or the value SetStep gave it. Kernels whose randomness must
// resume exactly from a checkpoint (dropout) derive it from the step.
func (b *Binding) Step() *int64 { return &b.prog.step }

// AtStepEnd registers fn to run at the end of every Program.Run, after all
// kernels; FP8 scaling-state updates use it.
func (b *Binding) AtStepEnd(fn func() error) { b.prog.stepEnd = append(b.prog.stepEnd, fn) }

// Value is a node's buffer in a compiled program. Exactly one of the
// slices is set, according to DType.
type Value struct {
	Shape Shape
	DType DType
	F32   []float32
	I32   []int32
	U8    []uint8
	// meta is what the producing kernel attaches at bind time for its
	// consumers (SetMeta), such as the scales that travel with an FP8
	// value.
	meta []valueMeta
}
