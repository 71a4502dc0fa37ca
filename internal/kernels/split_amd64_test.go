//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDirect16SplitMatchesPairs runs the AVX2 direct bf16 path with op(A)
// widened to float32 values (the split row kernels) against the same
// GEMM through bf16 pairs and the Go row loop, bit for bit: both layouts
// of A, even and odd k (the last pair padded after a GEMM that left NaN
// in the buffer), row counts that leave every kernel height, column
// tails, op(B) as stored and transposed, and float32 and FP8 operands (E4M3 and E5M2 at scale 1, a
// scaled table, with and without Float8BlockScaling's exponent shifts over several k-blocks).
func TestDirect16SplitMatchesPairs(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	s16, sk := hasBF16, kern16
	defer func() { hasBF16, kern16 = s16, sk; useRow16Vector = true; resetParts() }()
	hasBF16, kern16 = false, &avx2bf16Kernel
	resetParts()
	rng := rand.New(rand.NewPCG(61, 62))
	codes := func(n int) []uint8 {
		c := make([]uint8, n)
		for i := range c {
			c[i] = uint8(rng.IntN(256))
		}
		return c
	}
	g := NewGemm()
	for _, sz := range [][3]int{{13, 40, 7}, {50, 70, 33}, {97, 129, 128}, {6, 16, 1}, {200, 64, 65}, {30, 40, 301}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, ta := range []bool{false, true} {
			for kind := 0; kind < 8; kind++ {
				var a *Operand
				switch kind {
				case 6, 7: // FP8 codes with Float8BlockScaling's exponent shifts
					a = fp8OperandForTest(codes(m*k), kind-6, 1)
					a.ExpBlocks = (k + ExpBlock - 1) / ExpBlock
					a.Exp = make([]int8, m*a.ExpBlocks)
					for i := range a.Exp {
						a.Exp[i] = int8(-rng.IntN(9))
					}
				case 4, 5: // NVFP4 codes, 1×16 blocks or 16×16 tiles
					rows, cols := m, k
					if ta {
						rows, cols = k, m
					}
					a = e2m1OperandForTest(rng, rows, cols, kind == 5)
					for i := 0; i < len(a.E2M1Factors); i += 5 {
						a.E2M1Factors[i] = float32(rng.Float64()) + 0.1 // products that are not bf16 values
					}
				case 0:
					f := randSlice(rng, m*k)
					f[0], f[len(f)-1] = float32(math.Inf(-1)), 0x1p-130 // a denormal reads as zero
					a = &Operand{F32: f}
				case 1, 2:
					a = fp8OperandForTest(codes(m*k), kind-1, 1)
				case 3:
					a = fp8OperandForTest(codes(m*k), 1, 0.5)
				}
				b := &Operand{F32: randSlice(rng, k*n)}
				lda, tb, ldb := k, kind%2 == 1, n // op(B) = Bᵀ for half the kinds
				if ta {
					lda = m
				}
				if tb {
					ldb = k
				}
				if !useDirect16(m, n, k) {
					t.Fatalf("%v: not on the direct path", sz)
				}
				// Leave NaN in the workers' buffers first.
				nan := make([]float32, 64*96)
				for i := range nan {
					nan[i] = float32(math.NaN())
				}
				g.RunBF16(false, false, 64, 8, 96, &Operand{F32: nan}, 96, &Operand{F32: nan[:96*8]}, 8, make([]float32, 64*8), 8, Epilogue{Alpha: 1})
				got, want := make([]float32, m*n), make([]float32, m*n)
				useRow16Vector = true
				g.RunBF16(ta, tb, m, n, k, a, lda, b, ldb, got, n, Epilogue{Alpha: 0.3})
				useRow16Vector = false
				g.RunBF16(ta, tb, m, n, k, a, lda, b, ldb, want, n, Epilogue{Alpha: 0.3})
				useRow16Vector = true
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("%v transA=%v transB=%v kind %d: C[%d] = %v, want %v", sz, ta, tb, kind, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestWidenRowsMatchesTwin checks the widening kernels (float32 rounded
// to bf16; E4M3 and E5M2 codes at scale 1, every code; NVFP4 codes
// times their factors) against bf16At widened, at every row length up
// to 70, rows ld apart, leaving the buffer past each row alone.
func TestWidenRowsMatchesTwin(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(63, 64))
	const rows, ld, ldd = 3, 83, 77
	f := make([]float32, rows*ld)
	specials := []uint32{0, 0x80000000, 1, 0x807FFFFF, 0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF}
	for i := range f {
		f[i] = math.Float32frombits(rng.Uint32())
		if i < len(specials) {
			f[i] = math.Float32frombits(specials[i])
		}
	}
	codes := make([]uint8, rows*ld)
	for i := range codes {
		codes[i] = uint8(i)
	}
	// NVFP4 operands of 80 columns: runs from column 32 (on a block;
	// past 48 values they run into the next stored row, the loop's
	// case), and from column 2 (not on a block, the loop's too).
	nv := []*Operand{e2m1OperandForTest(rng, 2*rows, 80, false), e2m1OperandForTest(rng, 2*rows, 80, true)}
	for _, x := range nv {
		for i := 0; i < len(x.E2M1Factors); i += 3 {
			x.E2M1Factors[i] = float32(rng.Float64()) + 0.1
		}
	}
	for xi, x := range []*Operand{{F32: f}, fp8OperandForTest(codes, 0, 1), fp8OperandForTest(codes, 1, 1), nv[0], nv[1], nv[0]} {
		o, ld := 2, ld
		if xi >= 3 {
			o, ld = 32, 160 // every other stored row
			if xi == 5 {
				o = 2
			}
		}
		for n := 1; n <= 70; n++ {
			got := make([]float32, rows*ldd)
			for i := range got {
				got[i] = -7
			}
			x.widenRows(got, o, ld, rows, n, ldd)
			for r := 0; r < rows; r++ {
				for j := 0; j < ldd; j++ {
					want := float32(-7)
					if j < n {
						want = math.Float32frombits(uint32(x.bf16At(o+r*ld+j)) << 16)
					}
					g := got[r*ldd+j]
					if math.Float32bits(g) != math.Float32bits(want) && !(g != g && want != want) {
						t.Fatalf("codes=%v n=%d row %d: value %d = %#x, want %#x", x.Codes != nil, n, r, j, math.Float32bits(g), math.Float32bits(want))
					}
				}
			}
		}
	}
}
