package ops

import (
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// VectorSums returns the additions of the vector kernels (AVX-512, AVX2
// or NEON where the CPU has them, else their Go twins), for
// graph.Options.Sums: AddN nodes then add on them. passes.Prepare
// compiles with them; the bits are those of graph's plain-Go sums.
func VectorSums() graph.Sums { return vectorSums{} }

type vectorSums struct{}

func (vectorSums) Add(dst, x, y []float32)  { kernels.Add(dst, x, y) }
func (vectorSums) AddTo(dst, src []float32) { kernels.AddTo(dst, src) }
