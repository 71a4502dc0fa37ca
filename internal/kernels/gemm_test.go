package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
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

func TestGemmAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 4, 4}, {17, 33, 65}, {64, 64, 300}, {130, 70, 257}, {257, 1030, 20}, {200, 300, 520}}
	g := NewGemm()
	for _, s := range sizes {
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
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						c[i*ldc+j] = float32(rng.NormFloat64())
					}
				}
				alpha, beta := float32(0.75), float32(0.5)
				want := refGemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
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
