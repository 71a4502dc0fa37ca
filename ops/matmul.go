package ops

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// matMulOp multiplies matrices: op(A)·op(B), where op transposes when
// asked. With batched set, both operands carry the same leading batch
// axes and each pair of trailing matrices is multiplied.
type matMulOp struct {
	transA, transB bool
	batched        bool
}

func (o matMulOp) Type() string { return o.Kind().String() }
func (o matMulOp) Kind() graph.Kind {
	if o.batched {
		return KindBatchMatMul
	}
	return KindMatMul
}

func (o matMulOp) Attrs() string {
	return transAttrs(o.transA, o.transB)
}

// newGemm returns a GEMM for a kernel to bind, or the error of a bad
// OCTET_GEMM_KERNEL (so that compiling, not running, refuses it).
func newGemm() (*kernels.Gemm, error) {
	if err := kernels.CheckEnv(); err != nil {
		return nil, err
	}
	return kernels.NewGemm(), nil
}

// transAttrs renders the transpose flags of a GEMM for dumps.
func transAttrs(transA, transB bool) string {
	switch {
	case transA && transB:
		return "transA,transB"
	case transA:
		return "transA"
	case transB:
		return "transB"
	}
	return ""
}

// dims returns batch count and m, n, k for inputs of shapes as, bs.
func (o matMulOp) dims(as, bs graph.Shape) (batch graph.Shape, m, n, k int, err error) {
	ra, rb := len(as), len(bs)
	if !o.batched && (ra != 2 || rb != 2) {
		return nil, 0, 0, 0, fmt.Errorf("MatMul wants matrices, got %v and %v", as, bs)
	}
	if o.batched && (ra < 3 || ra != rb || !as[:ra-2].Equal(bs[:rb-2])) {
		return nil, 0, 0, 0, fmt.Errorf("BatchMatMul wants equal batch axes and rank ≥ 3, got %v and %v", as, bs)
	}
	m, k = as[ra-2], as[ra-1]
	if o.transA {
		m, k = k, m
	}
	kb, n := bs[rb-2], bs[rb-1]
	if o.transB {
		kb, n = n, kb
	}
	if k != kb {
		return nil, 0, 0, 0, fmt.Errorf("inner dimensions differ: %v%s · %v%s (%d vs %d)",
			as, tmark(o.transA), bs, tmark(o.transB), k, kb)
	}
	return as[:ra-2], m, n, k, nil
}

func tmark(t bool) string {
	if t {
		return "ᵀ"
	}
	return ""
}

func (o matMulOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := float32In(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	batch, m, n, _, err := o.dims(in[0].Shape(), in[1].Shape())
	if err != nil {
		return nil, graph.Invalid, fmt.Errorf("%q and %q: %w", in[0].Name(), in[1].Name(), err)
	}
	return append(batch.Clone(), m, n), graph.Float32, nil
}

func (o matMulOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	k, _, err := o.bind(b)
	return k, err
}

// bind returns the kernel and the GEMM it runs (fused epilogues attach
// to it).
func (o matMulOp) bind(b *graph.Binding) (graph.Kernel, *kernels.Gemm, error) {
	batch, m, n, k, err := o.dims(b.In[0].Shape, b.In[1].Shape)
	if err != nil {
		return nil, nil, err
	}
	a, bb, c := b.In[0].F32, b.In[1].F32, b.Out.F32
	g, err := newGemm()
	if err != nil {
		return nil, nil, err
	}
	tA, tB := o.transA, o.transB
	if !o.batched {
		lda, ldb := k, n
		if tA {
			lda = m
		}
		if tB {
			ldb = k
		}
		return func() error {
			g.Run(tA, tB, m, n, k, 1, a, lda, bb, ldb, 0, c, n)
			return nil
		}, g, nil
	}
	count := batch.Numel()
	return func() error {
		g.RunBatched(count, tA, tB, m, n, k, 1, a, m*k, bb, k*n, 0, c, m*n)
		return nil
	}, g, nil
}

func (o matMulOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	a, b := n.Input(0), n.Input(1)
	mm := MatMul
	if o.batched {
		mm = BatchMatMul
	}
	gs := make([]*graph.Node, 2)
	if need[0] {
		if !o.transA {
			gs[0] = mm(dy, b, false, !o.transB)
		} else {
			gs[0] = mm(b, dy, o.transB, true)
		}
	}
	if need[1] {
		if !o.transB {
			gs[1] = mm(a, dy, !o.transA, false)
		} else {
			gs[1] = mm(dy, a, true, o.transA)
		}
	}
	return gs
}

// MatMul returns op(a)·op(b) for matrices a and b, where op transposes
// its operand when the matching flag is set. No transposed copy is made.
func MatMul(a, b *graph.Node, transA, transB bool) *graph.Node {
	return apply(matMulOp{transA: transA, transB: transB}, "", a, b)
}

// BatchMatMul multiplies the trailing matrices of a and b pairwise over
// their (equal) leading batch axes: [..., m, k] · [..., k, n] → [..., m, n],
// with optional transposes of the trailing matrices.
func BatchMatMul(a, b *graph.Node, transA, transB bool) *graph.Node {
	return apply(matMulOp{transA: transA, transB: transB, batched: true}, "", a, b)
}
