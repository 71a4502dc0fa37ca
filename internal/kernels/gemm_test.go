package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

func refGemm(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if tA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if tB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

const guard = float32(-12345.5)

// withKernel runs f once with each micro-kernel this CPU supports.
func withKernel(t *testing.T, f func(t *testing.T)) {
	saved := kern
	defer func() { kern = saved; partsMu.Lock(); freeParts = nil; partsMu.Unlock() }()
	for _, k := range availableKernels() {
		kern = k
		partsMu.Lock()
		freeParts = nil // buffers are sized for a kernel
		partsMu.Unlock()
		t.Run(k.name, f)
	}
}

// TestMicroKernelsMatchReference checks each micro-kernel against the
// loop it replaces, bit for bit, with guard values around the tile: accumulating into
// C, and overwriting it (C's old values, NaN here, never read).
func TestMicroKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range availableKernels() {
		for _, depth := range []int{1, 2, 7, 256} {
			for _, overwrite := range []bool{false, true} {
				a, b := randSlice(rng, k.mr*depth), randSlice(rng, k.nr*depth)
				ldc := k.nr + 3
				c := make([]float32, k.mr*ldc+5)
				for i := range c {
					c[i] = guard
				}
				want := append([]float32(nil), c...)
				for r := 0; r < k.mr; r++ {
					for j := 0; j < k.nr; j++ {
						c[r*ldc+j] = float32(rng.NormFloat64())
						want[r*ldc+j] = c[r*ldc+j]
						if overwrite {
							c[r*ldc+j] = float32(math.NaN())
						}
					}
				}
				microKernelRef(k.mr, k.nr, depth, a, b, want, ldc, 0.5, overwrite)
				k.run(depth, a, b, c, ldc, 0.5, overwrite)
				// The same fused multiply-adds in the same order: the
				// same bits.
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s k=%d overwrite=%v: c[%d] = %v, reference %v", k.name, depth, overwrite, i, c[i], want[i])
					}
				}
			}
		}
	}
}

// TestGemmAgainstFloat64 checks the float32 GEMM, on the direct path and
// on the blocked one, with every micro-kernel.
func TestGemmAgainstFloat64(t *testing.T) {
	saved := directGemm
	defer func() { directGemm = saved }()
	for _, direct := range []bool{true, false} {
		directGemm = direct
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { withKernel(t, testGemmAgainstFloat64) })
	}
}

// TestDirectGemmChosen pins which GEMMs take the direct path: the
// training step's shapes with op(B) in L2 read as stored, or Bᵀ with few
// rows or columns, do, on every CPU and kernel (the choice decides the
// grouping of the sums); large ones and many rows times a wide Bᵀ do
// not.
func TestDirectGemmChosen(t *testing.T) {
	for _, s := range [][3]int{{768, 384, 128}, {512, 128, 768}, {128, 512, 784}, {1, 1, 1}} {
		if !useDirect(s[0], s[1], s[2], false) {
			t.Errorf("%v: blocked, want direct", s)
		}
	}
	if !useDirect(31, 512, 784, true) || useDirect(32, 512, 784, true) || !useDirect(768, 128, 512, true) || useDirect(768, 129, 512, true) {
		t.Error("op(B) = Bᵀ: direct only below 32 rows or up to 128 columns")
	}
	if useDirect(1024, 1024, 1024, false) || useDirect(4, 4, 0, false) || useDirect(4, 1024, 513, false) {
		t.Error("op(B) over 2^19 elements or k = 0: direct, want blocked")
	}
}

func testGemmAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 4, 4}, {17, 33, 65}, {64, 64, 300}, {130, 70, 257}, {257, 1030, 20}, {200, 300, 520}}
	g := NewGemm()
	for si, s := range sizes {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				m, n, k := s[0], s[1], s[2]
				lda := k + 3
				if tA {
					lda = m + 3
				}
				ldb := n + 2
				if tB {
					ldb = k + 2
				}
				ldc := n + 5
				arows, brows := m, k
				if tA {
					arows = k
				}
				if tB {
					brows = n
				}
				a := randSlice(rng, arows*lda)
				b := randSlice(rng, brows*ldb)
				c := make([]float32, m*ldc+8)
				for i := range c {
					c[i] = guard
				}
				// beta 0.5, 0 (C starts as NaN: it must be overwritten) and 1.
				alpha, beta := float32(0.75), []float32{0.5, 0, 1}[si%3]
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						c[i*ldc+j] = float32(rng.NormFloat64())
					}
				}
				want := refGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
				if beta == 0 {
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							c[i*ldc+j] = float32(math.NaN())
						}
					}
				}
				g.Run(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
				name := fmt.Sprintf("%dx%dx%d tA=%v tB=%v", m, n, k, tA, tB)
				for i := 0; i < m; i++ {
					for j := 0; j < ldc; j++ {
						got := c[i*ldc+j]
						if j >= n {
							if got != guard {
								t.Fatalf("%s: wrote outside C at (%d,%d)", name, i, j)
							}
							continue
						}
						w := want[i*n+j]
						if math.Abs(float64(got)-w) > 1e-4*math.Sqrt(float64(k))*(1+math.Abs(w)) {
							t.Fatalf("%s: C[%d,%d] = %v, want %v", name, i, j, got, w)
						}
					}
				}
				for _, v := range c[m*ldc:] {
					if v != guard {
						t.Fatalf("%s: wrote past the end of C", name)
					}
				}
			}
		}
	}
}

func TestGemmBetaZeroOverwritesNaN(t *testing.T) {
	a := []float32{1, 2, 3, 4}
	c := []float32{float32(math.NaN()), float32(math.NaN()), float32(math.NaN()), float32(math.NaN())}
	Sgemm(false, false, 2, 2, 2, 1, a, 2, a, 2, 0, c, 2)
	want := []float32{7, 10, 15, 22}
	for i := range c {
		if c[i] != want[i] {
			t.Fatalf("c = %v, want %v", c, want)
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// BenchmarkKernels runs the n=1024 GEMM with each available micro-kernel.
func BenchmarkKernels(b *testing.B) {
	saved := kern
	defer func() { kern = saved; freeParts = nil }()
	for _, k := range availableKernels() {
		kern = k
		freeParts = nil
		b.Run(strings.ReplaceAll(k.name, " ", "_"), BenchmarkGemm1024)
	}
}

func BenchmarkGemm1024(b *testing.B) {
	const n = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	x, y, z := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
	g := NewGemm()
	b.SetBytes(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g.Run(false, false, n, n, n, 1, x, n, y, n, 0, z, n)
	}
	b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkGonumSgemm1024(b *testing.B) {
	const n = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	x := blas32.General{Rows: n, Cols: n, Stride: n, Data: randSlice(rng, n*n)}
	y := blas32.General{Rows: n, Cols: n, Stride: n, Data: randSlice(rng, n*n)}
	z := blas32.General{Rows: n, Cols: n, Stride: n, Data: make([]float32, n*n)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, x, y, 0, z)
	}
	b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestFP8OperandsDecodeInPack checks that packing FP8 codes (with outer
// and block factors) gives exactly the GEMM of the decoded float32
// matrices.
func TestFP8OperandsDecodeInPack(t *testing.T) { withKernel(t, testFP8Operands) }

func testFP8Operands(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var table [256]float32
	for i := range table {
		table[i] = float32(i%37-18) * 0.125
	}
	g := NewGemm()
	for _, s := range [][3]int{{5, 7, 33}, {70, 50, 100}, {130, 97, 300}} {
		m, n, k := s[0], s[1], s[2]
		blocks := (k + 31) / 32
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, mode := range []string{"plain", "outer", "block"} {
					codes := func(l int) []uint8 {
						c := make([]uint8, l)
						for i := range c {
							c[i] = uint8(rng.IntN(256))
						}
						return c
					}
					qa := &Operand{Codes: codes(m * k), Table: &table}
					qb := &Operand{Codes: codes(k * n), Table: &table}
					switch mode {
					case "outer":
						qa.Outer, qb.Outer = randSlice(rng, m), randSlice(rng, n)
					case "block":
						qa.Block, qa.Blocks = randSlice(rng, m*blocks), blocks
						qb.Block, qb.Blocks = randSlice(rng, n*blocks), blocks
					}
					// Decode to float32 matrices as stored.
					da, db := make([]float32, m*k), make([]float32, k*n)
					for i := 0; i < m; i++ {
						for p := 0; p < k; p++ {
							idx := i*k + p
							if tA {
								idx = p*m + i
							}
							da[idx] = table[qa.Codes[idx]] * qa.factor(i, p)
						}
					}
					for p := 0; p < k; p++ {
						for j := 0; j < n; j++ {
							idx := p*n + j
							if tB {
								idx = j*k + p
							}
							db[idx] = table[qb.Codes[idx]] * qb.factor(j, p)
						}
					}
					lda, ldb := k, n
					if tA {
						lda = m
					}
					if tB {
						ldb = k
					}
					want, got := make([]float32, m*n), make([]float32, m*n)
					g.Run(tA, tB, m, n, k, 1, da, lda, db, ldb, 0, want, n)
					g.RunOperands(tA, tB, m, n, k, 1, qa, lda, qb, ldb, 0, got, n)
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%dx%dx%d tA=%v tB=%v %s: C[%d] = %v, want %v", m, n, k, tA, tB, mode, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestGemmRunBias checks C = alpha·op(A)·op(B) + bias on the direct and
// the blocked path (C starts as NaN: it is written, not read).
func TestGemmRunBias(t *testing.T) {
	saved := directGemm
	defer func() { directGemm = saved }()
	rng := rand.New(rand.NewPCG(3, 9))
	for _, direct := range []bool{true, false} {
		directGemm = direct
		for _, s := range [][3]int{{1, 1, 1}, {7, 104, 33}, {130, 70, 128}, {768, 128, 64}, {5, 9, 0}} {
			m, n, k := s[0], s[1], s[2]
			a, b, bias := randSlice(rng, m*k+1), randSlice(rng, n*k+1), randSlice(rng, n)
			c := make([]float32, m*n)
			for i := range c {
				c[i] = float32(math.NaN())
			}
			want := refGemm(false, true, m, n, k, 0.5, a, k, b, k, 0, make([]float32, m*n), n)
			g := NewGemm()
			g.RunBias(false, true, m, n, k, 0.5, a, k, b, k, bias, c, n)
			for i := range want {
				w := want[i] + float64(bias[i%n])
				if math.Abs(float64(c[i])-w) > 1e-4*math.Sqrt(float64(k+1))*(1+math.Abs(w)) {
					t.Fatalf("direct=%v %v: C[%d] = %v, want %v", direct, s, i, c[i], w)
				}
			}
		}
	}
}

// TestPacksMatchDefinition checks packA and packB (their vector
// transposes and row-order copies included) against their definitions,
// element by element, for every sliver width of the micro-kernels, both
// layouts, ragged blocks and every tail of k, with guard values past the
// packed panel.
func TestPacksMatchDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const ld = 400 // the source is ld×ld, op(X) read from it either way
	src := randSlice(rng, ld*ld)
	opX := func(trans bool, i, p int) float32 {
		if trans {
			return src[p*ld+i]
		}
		return src[i*ld+p]
	}
	check := func(name string, w int, trans bool, mb, kb int, dst []float32, want func(i, p int) float32) {
		t.Helper()
		panel := roundUp(mb, w) * kb
		for s := 0; s < mb; s += w {
			for p := 0; p < kb; p++ {
				for r := 0; r < w; r++ {
					v := float32(0)
					if s+r < mb {
						v = want(s+r, p)
					}
					if got := dst[s*kb+p*w+r]; math.Float32bits(got) != math.Float32bits(v) {
						t.Fatalf("%s w=%d trans=%v %d×%d: sliver %d p %d lane %d = %v, want %v", name, w, trans, mb, kb, s/w, p, r, got, v)
					}
				}
			}
		}
		for i := panel; i < len(dst); i++ {
			if math.Float32bits(dst[i]) != math.Float32bits(guard) {
				t.Fatalf("%s w=%d trans=%v %d×%d wrote past its panel", name, w, trans, mb, kb)
			}
		}
	}
	const i0, p0 = 5, 3
	for _, w := range []int{4, 6, 8, 12, 16, 32, 48} {
		for _, trans := range []bool{false, true} {
			for _, kb := range []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 384} {
				for _, mb := range []int{1, w - 1, w, w + 1, 2*w + 5, 3 * w} {
					if mb <= 0 {
						continue
					}
					dst := make([]float32, roundUp(mb, w)*kb+8)
					for i := range dst {
						dst[i] = guard
					}
					packA(dst, w, trans, src, ld, i0, p0, mb, kb)
					check("packA", w, trans, mb, kb, dst, func(i, p int) float32 { return opX(trans, i0+i, p0+p) })
					for i := range dst {
						dst[i] = guard
					}
					// packB's slivers are columns of op(B): op(B)[p][j] is
					// op(X)ᵀ's, so B transposed is X not transposed.
					packB(dst, w, trans, src, ld, p0, i0, kb, mb)
					check("packB", w, trans, mb, kb, dst, func(j, p int) float32 { return opX(!trans, i0+j, p0+p) })
				}
			}
		}
	}
}

// TestDirectGemmSameBitsOnEveryISA checks the direct float32 GEMM, every
// layout, beta 0 and 1, on every vector ISA against the first one (and
// the portable loop) bit for bit — including op(A) = Aᵀ transposed by
// the workers first and op(B) too large for L2, swept in bands of
// columns.
func TestDirectGemmSameBitsOnEveryISA(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// (13, 200, 700): k·n over rowGemmBandB; (70, 33, 90): a narrow
	// ragged op(B); (128, 512, 768): the GPT's MLP wgrad; (200, 40,
	// 2000): Aᵀ transposed in chunks of 30 rows (directRowsA).
	sizes := [][3]int{{13, 200, 700}, {70, 33, 90}, {7, 17, 5}, {128, 512, 768}, {200, 40, 2000}}
	for _, s := range sizes {
		m, n, k := s[0], s[1], s[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				if !useDirect(m, n, k, tB) {
					continue
				}
				lda, ldb := k, n
				if tA {
					lda = m
				}
				if tB {
					ldb = k
				}
				a, b, c0 := randSlice(rng, m*k), randSlice(rng, k*n), randSlice(rng, m*n)
				var ref [2][]float32
				withISA(t, func(t *testing.T) {
					g := NewGemm()
					for bi, beta := range []float32{0, 1} {
						c := append([]float32(nil), c0...)
						g.Run(tA, tB, m, n, k, 0.75, a, lda, b, ldb, beta, c, n)
						if ref[bi] == nil {
							ref[bi] = c
							continue
						}
						for i := range c {
							if math.Float32bits(c[i]) != math.Float32bits(ref[bi][i]) {
								t.Fatalf("%v tA=%v tB=%v beta=%v: c[%d] = %v, first ISA %v", s, tA, tB, beta, i, c[i], ref[bi][i])
							}
						}
					}
				})
			}
		}
	}
}
