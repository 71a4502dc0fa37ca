package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// withBF16Kernel runs f once with each bf16 micro-kernel this build has
// (the assembly ones where the CPU has AVX512_BF16, and the pure-Go twin
// always), then once with none (the rounded float32 fallback).
func withBF16Kernel(t *testing.T, f func(t *testing.T)) {
	saved := kern16
	defer func() { kern16 = saved; resetParts() }()
	ks := availableBF16Kernels()
	for i := range ks {
		kern16 = &ks[i]
		resetParts()
		t.Run(ks[i].name, f)
	}
	kern16 = nil
	resetParts()
	t.Run("fallback", f)
}

func resetParts() {
	partsMu.Lock()
	freeParts = nil // buffers are sized for the kernels in use
	partsMu.Unlock()
}

// bf16Ref is an independent rounding: nearest even on the dropped 16
// bits, computed with float64 arithmetic on the neighbours.
func bf16Ref(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7F800000 == 0 {
		return float32(math.Copysign(0, float64(x)))
	}
	if x != x {
		return x
	}
	lo := math.Float32frombits(b &^ 0xFFFF)
	hi := math.Float32frombits((b &^ 0xFFFF) + 0x10000)
	// The next bf16 value up in magnitude, as a real number (2^128 past
	// the largest finite one).
	hi64 := float64(lo) + math.Copysign(math.Ldexp(1, int(b>>23&0xFF)-127-7), float64(x))
	dl, dh := math.Abs(float64(x)-float64(lo)), math.Abs(hi64-float64(x))
	switch {
	case dl < dh:
		return lo
	case dh < dl:
		return hi
	}
	if (math.Float32bits(lo)>>16)&1 == 0 {
		return lo
	}
	return hi
}

func TestBF16Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(x float32) {
		got := BF16ToFloat32(BF16FromFloat32(x))
		want := bf16Ref(x)
		if x != x {
			if got == got || math.Float32bits(got)&0x00400000 == 0 {
				t.Fatalf("NaN %#x became %#x, want a quiet NaN", math.Float32bits(x), math.Float32bits(got))
			}
			return
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("bf16(%g = %#x) = %#x, want %#x", x, math.Float32bits(x), math.Float32bits(got), math.Float32bits(want))
		}
	}
	specials := []uint32{0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0x7F7F7FFF,
		0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFFFFFFF}
	for _, b := range specials {
		check(math.Float32frombits(b))
	}
	for i := 0; i < 1<<20; i++ {
		check(math.Float32frombits(rng.Uint32()))
	}
}

// TestBF16KernelsMatchReference runs each bf16 micro-kernel against the
// twin: the accumulation bit for bit (alpha 1, C zero), and the two-part
// store bit for bit too (fma32 rounds once, as the hardware does), with
// guard values around the tile.
func TestBF16KernelsMatchReference(t *testing.T) { withISA(t, testBF16KernelsMatchReference) }

func testBF16KernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	ks := availableBF16Kernels()
	pairs := func(n int, wild bool) []uint32 {
		p := make([]uint32, n)
		for i := range p {
			lo := BF16FromFloat32(float32(rng.NormFloat64()))
			hi := BF16FromFloat32(float32(rng.NormFloat64()))
			if wild && rng.IntN(8) == 0 {
				lo = uint16(rng.Uint32()) // any bit pattern: denormals, huge, NaN
			}
			p[i] = bf16Pair(lo, hi)
		}
		return p
	}
	for _, k := range ks {
		if k.run == nil {
			continue // a tile kernel: TestAMXTiles
		}
		for _, depth := range []int{1, 2, 7, 192} {
			for _, wild := range []bool{false, true} {
				a, b := pairs(k.mr*depth, wild), pairs(k.nr*depth, wild)
				ldc := k.nr + 3
				exact := make([]float32, k.mr*ldc+5)
				want := make([]float32, len(exact))
				for i := range exact {
					exact[i], want[i] = guard, guard
				}
				for r := 0; r < k.mr; r++ {
					clear(exact[r*ldc : r*ldc+k.nr])
					clear(want[r*ldc : r*ldc+k.nr])
				}
				bf16KernelRef(k.mr, k.nr, depth, a, b, want, ldc, 1, 0, false)
				k.runPairs(depth, a, b, exact, ldc, 1, 0, false)
				same := func(what string, got []float32) {
					t.Helper()
					for i := range got {
						g, w := got[i], want[i]
						if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
							t.Fatalf("%s k=%d wild=%v %s: c[%d] = %v (%#x), reference %v (%#x)", k.name, depth, wild, what, i, g, math.Float32bits(g), w, math.Float32bits(w))
						}
					}
				}
				same("accumulate", exact)
				// Overwriting: C's old values (NaN here) are not read.
				over := make([]float32, len(exact))
				for i := range over {
					over[i] = guard
				}
				for r := 0; r < k.mr; r++ {
					for j := 0; j < k.nr; j++ {
						over[r*ldc+j] = float32(math.NaN())
					}
				}
				k.runPairs(depth, a, b, over, ldc, 1, 0, true)
				same("overwrite", over)
				if wild {
					continue
				}
				// The two-part store, onto a C that is not zero and over it.
				hi, lo, _ := splitAlpha(float64(float32(0.3)) * float64(float32(1.7)))
				for _, overwrite := range []bool{false, true} {
					c := append([]float32(nil), exact...)
					for r := 0; r < k.mr; r++ {
						for j := 0; j < k.nr; j++ {
							c[r*ldc+j] = float32(rng.NormFloat64())
						}
					}
					want = append(want[:0], c...)
					bf16KernelRef(k.mr, k.nr, depth, a, b, want, ldc, hi, lo, overwrite)
					k.runPairs(depth, a, b, c, ldc, hi, lo, overwrite)
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(want[i]) && !(c[i] != c[i] && want[i] != want[i]) {
							t.Fatalf("%s k=%d store overwrite=%v: c[%d] = %v, reference %v", k.name, depth, overwrite, i, c[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestBF16KernelSpecialCases pins down what VDPBF16PS does at the edges,
// on each kernel and the twin: a denormal input reads as zero, a
// denormal result is flushed to zero, the odd element is added first,
// and infinities and NaN propagate.
func TestBF16KernelSpecialCases(t *testing.T) { withISA(t, testBF16KernelSpecialCases) }

func testBF16KernelSpecialCases(t *testing.T) {
	one, big := BF16FromFloat32(1), BF16FromFloat32(0x1p100)
	small := BF16FromFloat32(0x1p-70)
	cases := []struct {
		name     string
		aLo, aHi uint16
		bLo, bHi uint16
		want     float32
	}{
		{"denormal input is zero", 0x0040, 0, big, 0, 0},
		{"denormal input is zero (odd)", 0, 0x8040, 0, big, 0},
		{"denormal result flushed", small, 0, small, 0, 0},
		{"odd first", BF16FromFloat32(0x1p-30), BF16FromFloat32(0x1p30), one, one, 0x1p30}, // (0 + 2^30) + 2^-30 rounds to 2^30
		{"cancellation after odd", one, BF16FromFloat32(0x1p30), BF16FromFloat32(0x1p-30), BF16FromFloat32(1), 0x1p30},
		{"inf", 0x7F80, 0, one, 0, float32(math.Inf(1))},
		{"inf·0 is NaN", 0x7F80, 0, 0, 0, float32(math.NaN())},
	}
	ks := availableBF16Kernels()
	for _, k := range ks {
		if k.run == nil {
			continue // a tile kernel: TestAMXTiles
		}
		for _, tc := range cases {
			a, b := make([]uint32, k.mr), make([]uint32, k.nr)
			for i := range a {
				a[i] = bf16Pair(tc.aLo, tc.aHi)
			}
			for i := range b {
				b[i] = bf16Pair(tc.bLo, tc.bHi)
			}
			for _, overwrite := range []bool{false, true} {
				c := make([]float32, k.mr*k.nr)
				k.runPairs(1, a, b, c, k.nr, 1, 0, overwrite)
				for i, v := range c {
					if math.Float32bits(v) != math.Float32bits(tc.want) && !(v != v && tc.want != tc.want) {
						t.Fatalf("%s, %s, overwrite %v: c[%d] = %v, want %v", k.name, tc.name, overwrite, i, v, tc.want)
					}
				}
			}
		}
	}
}

// TestBF16PackKernels checks the vector packing kernels against their Go
// loops on float32 values with every kind of special value, and on every
// FP8 code of both formats with power-of-two scales.
func TestBF16PackKernels(t *testing.T) { withISA(t, testBF16PackKernels) }

func testBF16PackKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 96
	f := make([]float32, 2*n)
	specials := []uint32{0, 0x80000000, 1, 0x807FFFFF, 0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00001}
	for i := range f {
		if i < len(specials) {
			f[i] = math.Float32frombits(specials[i])
		} else {
			f[i] = math.Float32frombits(rng.Uint32())
		}
	}
	ops := []*Operand{{F32: f}, e2m1OperandForTest(rng, 2, 200, false), e2m1OperandForTest(rng, 40, 37, true)}
	for format := 0; format < 2; format++ {
		codes := make([]uint8, 2*n+256)
		for i := range codes {
			codes[i] = uint8(i)
		}
		for _, scale := range []float32{1, 0x1p-20, 0x1p30} {
			ops = append(ops, fp8OperandForTest(codes, format, scale))
		}
	}
	same := func(a, b uint32) bool {
		for _, h := range [2]uint16{uint16(a), uint16(a >> 16)} {
			_ = h
		}
		nan := func(h uint16) bool { return h&0x7F80 == 0x7F80 && h&0x7F != 0 }
		return a == b || (nan(uint16(a)) && nan(uint16(b)) && (nan(uint16(a>>16)) && nan(uint16(b>>16)) || uint16(a>>16) == uint16(b>>16))) ||
			(nan(uint16(a>>16)) && nan(uint16(b>>16)) && uint16(a) == uint16(b))
	}
	for oi, x := range ops {
		for _, length := range []int{16, 32, 48, 64, 80} {
			for off := 0; off < 3; off++ {
				got, want := make([]uint32, length+4), make([]uint32, length+4)
				x.pairs16(got, off, off+length+off, length)
				for j := 0; j < length; j++ {
					want[j] = bf16Pair(x.bf16At(off+j), x.bf16At(off+length+off+j))
				}
				for j := range want {
					if !same(got[j], want[j]) {
						t.Fatalf("operand %d pairs len %d off %d: lane %d = %#x, want %#x", oi, length, off, j, got[j], want[j])
					}
				}
				got, want = make([]uint32, length/2+4), make([]uint32, length/2+4)
				x.row16(got, off, length)
				for q := 0; q < length/2; q++ {
					want[q] = bf16Pair(x.bf16At(off+2*q), x.bf16At(off+2*q+1))
				}
				for q := range want {
					if !same(got[q], want[q]) {
						t.Fatalf("operand %d row len %d off %d: lane %d = %#x, want %#x", oi, length, off, q, got[q], want[q])
					}
				}
			}
		}
	}
}

// TestBF16PairsGroups checks the grouped form of the pairs kernel (one
// group per sliver, groups stride lanes apart) against pairs16 run by
// run, leaving the lanes between groups untouched.
func TestBF16PairsGroups(t *testing.T) { withISA(t, testBF16PairsGroups) }

func testBF16PairsGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	f := randSlice(rng, 2048)
	codes := make([]uint8, 2048)
	for i := range codes {
		codes[i] = uint8(rng.IntN(256))
	}
	for _, x := range []*Operand{{F32: f}, fp8OperandForTest(codes, 1, 0.5), e2m1OperandForTest(rng, 30, 75, false)} {
		for _, width := range []int{16, 32, 48, 40} {
			for _, groups := range []int{1, 3, 7} {
				stride := width*5 + 3
				got := make([]uint32, groups*stride+8)
				for i := range got {
					got[i] = 0xDEADBEEF
				}
				want := append([]uint32(nil), got...)
				x.pairs16Groups(got, 5, 5+groups*width+9, groups, width, stride)
				for g := 0; g < groups; g++ {
					x.pairs16(want[g*stride:], 5+g*width, 5+groups*width+9+g*width, width)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("width %d groups %d: lane %d = %#x, want %#x", width, groups, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestTransposeInto checks the vector transpose (and its scalar tail)
// for every row count up to 16 and pair counts around the 16-lane
// blocks: each lane where the loop puts it, nothing else written.
func TestTransposeInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for rows := 1; rows <= 16; rows++ {
		for _, kp := range []int{1, 15, 16, 17, 33, 64} {
			for _, w := range []int{rows, 12, 32, 48} {
				if w < rows {
					continue
				}
				for _, c := range []int{0, w - rows} {
					src := make([]uint32, 16*kp)
					for i := range src {
						src[i] = rng.Uint32()
					}
					got := make([]uint32, kp*w+5)
					for i := range got {
						got[i] = 0xDEADBEEF
					}
					want := append([]uint32(nil), got...)
					transposeInto(got, w, c, src, kp, rows)
					for q := 0; q < kp; q++ {
						for i := 0; i < rows; i++ {
							want[q*w+c+i] = src[i*kp+q]
						}
					}
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("rows %d kp %d w %d c %d: lane %d = %#x, want %#x", rows, kp, w, c, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// fp8OperandForTest is an FP8 operand with its bf16 table, as RunBF16
// prepares it for the vector packs.
// e2m1OperandForTest returns NVFP4 codes of rows × cols elements (any
// code, the padding nibble of odd rows set too) with factors of every
// E4M3 kind (zero, subnormal, large), per row or per 16×16 tile.
func e2m1OperandForTest(rng *rand.Rand, rows, cols int, tiles bool) *Operand {
	codes := make([]uint8, rows*((cols+1)/2))
	for i := range codes {
		codes[i] = uint8(rng.IntN(256))
	}
	fr := rows
	if tiles {
		fr = (rows + 15) / 16
	}
	f := make([]float32, fr*((cols+15)/16))
	for i := range f {
		f[i] = fp8TableForTest(0, 1)[rng.IntN(127)] * float32(math.Ldexp(1, rng.IntN(40)-20))
	}
	return &Operand{E2M1: codes, E2M1Factors: f, E2M1Cols: cols, E2M1Tiles: tiles}
}

func fp8OperandForTest(codes []uint8, format int, scale float32) *Operand {
	x := &Operand{Codes: codes, Table: fp8TableForTest(format, scale), Cast: testCasts[format], Scale: scale}
	var t [128]uint16
	if !bf16Table(&t, x.Table) {
		panic("table not usable")
	}
	x.bf16Tab = &t
	return x
}

// TestPostScaleVectorMatchesLoop compares the epilogue pass's vector
// kernel with its loop bit for bit (the loop runs on a tail shorter than
// 8), with and without per-column factors.
func TestPostScaleVectorMatchesLoop(t *testing.T) { withISA(t, testPostScaleVectorMatchesLoop) }

func testPostScaleVectorMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for trial := 0; trial < 200; trial++ {
		v, col := randSlice(rng, 9), randSlice(rng, 9)
		if trial%10 == 0 {
			v[3] = float32(math.Inf(1))
			col[5] = float32(math.NaN())
		}
		f := rng.NormFloat64() * math.Ldexp(1, rng.IntN(60)-30)
		for _, withCol := range []bool{false, true} {
			ep := Epilogue{Alpha: f}
			if withCol {
				ep.Col = col
			}
			// One row of 9: lanes 0–7 go through the kernel, lane 8
			// through the loop; both must match the plain formula.
			c := append([]float32(nil), v...)
			postScale(&ep, c, 9, 0, 1, 0, 9)
			ref := append([]float32(nil), v...)
			for j := range ref {
				x := float64(ref[j]) * f
				if withCol {
					x = float64(ref[j]) * (f * float64(col[j]))
				}
				ref[j] = float32(x)
			}
			for j := 0; j < 9; j++ {
				if math.Float32bits(c[j]) != math.Float32bits(ref[j]) && !(c[j] != c[j] && ref[j] != ref[j]) {
					t.Fatalf("trial %d col=%v lane %d: %v, want %v", trial, withCol, j, c[j], ref[j])
				}
			}
		}
	}
}

// fp8TableForTest decodes every code of a format times scale, with the
// independent decoder of TestDecodeFP8MatchesTables.
func fp8TableForTest(format int, scale float32) *[256]float32 {
	var t [256]float32
	for c := range t {
		t[c] = float32(fp8Ref(format, uint8(c)) * float64(scale))
	}
	return &t
}

// TestFP8CodesAreExactBF16 checks that every FP8 code of both formats,
// times every power of two that keeps it a normal bf16 value, packs to
// exactly its value.
func TestFP8CodesAreExactBF16(t *testing.T) {
	codes := make([]uint8, 256)
	for i := range codes {
		codes[i] = uint8(i)
	}
	for format := 0; format < 2; format++ {
		minExp, maxExp := -9, 8 // E4M3: 2^-9 … 448
		if format == 1 {
			minExp, maxExp = -16, 15
		}
		for e := -126 - minExp; e+maxExp <= 127; e++ {
			scale := float32(math.Ldexp(1, e))
			x := fp8OperandForTest(codes, format, scale)
			got := make([]uint32, 128)
			x.row16(got, 0, 256)
			for c := 0; c < 256; c++ {
				h := uint16(got[c/2] >> (16 * (c % 2)))
				v := fp8Ref(format, uint8(c)) * float64(scale)
				g := float64(BF16ToFloat32(h))
				if g != v && !(math.IsNaN(g) && math.IsNaN(v)) {
					t.Fatalf("format %d scale 2^%d code %#x: bf16 %v, want %v", format, e, c, g, v)
				}
			}
		}
	}
}

// TestGemmBF16AgainstFloat64 checks RunBF16 against a float64 product of
// the bf16-rounded operands, within the float32 accumulation bound, for
// every layout, sizes that are not multiples of the tile, each epilogue
// form, with guard values around C.
func TestGemmBF16AgainstFloat64(t *testing.T) { withBF16Kernel(t, testGemmBF16) }

func testGemmBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {13, 33, 2}, {17, 33, 65}, {64, 64, 300}, {130, 70, 257}, {257, 1030, 20}, {200, 300, 801}}
	if testing.Short() {
		// (-short, as CI runs it under an emulator): every path —
		// direct, blocked with k over two blocks, a wide op(B) — at
		// small sizes.
		sizes = [][3]int{{1, 1, 1}, {3, 5, 7}, {13, 33, 2}, {17, 33, 65}, {20, 40, 801}, {6, 1100, 512}}
	}
	g := NewGemm()
	for _, s := range sizes {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, epi := range []string{"alpha", "alpha2", "rowcol"} {
					m, n, k := s[0], s[1], s[2]
					lda, ldb, ldc := k+3, n+2, n+5
					arows, brows := m, k
					if tA {
						lda, arows = m+3, k
					}
					if tB {
						ldb, brows = k+2, n
					}
					a := &Operand{F32: randSlice(rng, arows*lda)}
					b := &Operand{F32: randSlice(rng, brows*ldb)}
					c := make([]float32, m*ldc+8)
					for i := range c {
						c[i] = guard
					}
					ep := Epilogue{Alpha: 1}
					switch epi {
					case "alpha2":
						ep.Alpha = float64(float32(1.1)) * float64(float32(0.37))
					case "rowcol":
						ep.Alpha = 0.5
						ep.Row, ep.Col = randSlice(rng, m), randSlice(rng, n)
					}
					g.RunBF16(tA, tB, m, n, k, a, lda, b, ldb, c, ldc, ep)
					name := fmt.Sprintf("%dx%dx%d tA=%v tB=%v %s", m, n, k, tA, tB, epi)
					checkBF16Result(t, name, tA, tB, m, n, k, a, lda, b, ldb, c, ldc, ep)
				}
			}
		}
	}
}

// checkBF16Result compares C with the float64 product of the operands
// as bf16, scaled by the epilogue: each element within k·2⁻²⁴·Σ|a·b|
// (k − 1 accumulation roundings and one for the store), and C's guard
// bands untouched.
func checkBF16Result(t *testing.T, name string, tA, tB bool, m, n, k int, a *Operand, lda int, b *Operand, ldb int, c []float32, ldc int, ep Epilogue) {
	t.Helper()
	// op(A) row-major and op(B) column-major, as float64 bf16 values.
	av, bv := make([]float64, m*k), make([]float64, n*k)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			o := i*lda + p
			if tA {
				o = p*lda + i
			}
			av[i*k+p] = float64(BF16ToFloat32(a.bf16At(o)))
		}
	}
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			o := p*ldb + j
			if tB {
				o = j*ldb + p
			}
			bv[j*k+p] = float64(BF16ToFloat32(b.bf16At(o)))
		}
	}
	for i := 0; i < m; i++ {
		for j := 0; j < ldc; j++ {
			got := c[i*ldc+j]
			if j >= n {
				if got != guard {
					t.Fatalf("%s: wrote outside C at (%d,%d)", name, i, j)
				}
				continue
			}
			f := ep.Alpha
			if ep.Row != nil {
				f *= float64(ep.Row[i])
			}
			if ep.Col != nil {
				f *= float64(ep.Col[j])
			}
			var s, abs float64
			ar, bc := av[i*k:(i+1)*k], bv[j*k:(j+1)*k]
			for p, x := range ar {
				v := x * bc[p]
				s += v
				abs += math.Abs(v)
			}
			want, bound := s*f, float64(k)*0x1p-24*abs*math.Abs(f)
			if d := math.Abs(float64(got) - want); d > bound*(1+1e-6) && d > 0 {
				t.Fatalf("%s: C[%d,%d] = %v, want %v (error %.3g, bound %.3g)", name, i, j, got, want, d, bound)
			}
		}
	}
	for _, v := range c[m*ldc:] {
		if v != guard {
			t.Fatalf("%s: wrote past the end of C", name)
		}
	}
}

// TestKernelEnv checks that OCTET_GEMM_KERNEL accepts the kernels this
// CPU runs (comma-separated, underscores for spaces) and refuses anything
// else, listing what it accepts.
func TestKernelEnv(t *testing.T) {
	f32, b16 := availableKernels(), availableBF16Kernels()
	for _, tc := range []struct {
		env, k, k16, err string
	}{
		{"", f32[0].name, b16[0].name, ""},
		{"go_4x4", "go 4x4", b16[0].name, ""},
		{"fp32", f32[0].name, "none", ""},
		{"go 4x4, go bf16 4x16", "go 4x4", "go bf16 4x16", ""},
		{"bogus", f32[0].name, b16[0].name, `unknown or unsupported kernel "bogus"`},
		{"go 4x4,", f32[0].name, b16[0].name, `kernel ""`},
	} {
		t.Setenv(KernelEnv, tc.env)
		k, k16, err := chooseKernels(f32, b16, true)
		name := "none"
		if k16 != nil {
			name = k16.name
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "go 4x4") {
				t.Fatalf("%q: error %v, want one containing %q and the valid names", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || k.name != tc.k || name != tc.k16 {
			t.Fatalf("%q: %s / %s / %v, want %s / %s", tc.env, k.name, name, err, tc.k, tc.k16)
		}
	}
	// A CPU without AVX512_BF16 uses no bf16 kernel unless told to.
	t.Setenv(KernelEnv, "")
	if _, k16, _ := chooseKernels(f32, b16, false); k16 != nil {
		t.Fatalf("default without AVX512_BF16: %s, want none", k16.name)
	}
	t.Setenv(KernelEnv, "go bf16 4x16")
	if _, k16, _ := chooseKernels(f32, b16, false); k16 == nil || k16.name != "go bf16 4x16" {
		t.Fatalf("forced twin without AVX512_BF16: %v", k16)
	}
}

// BenchmarkGemmBF16 runs the n=1024 bf16 GEMM with float32 operands
// (rounded while packing) and with FP8 codes.
func BenchmarkGemmBF16(b *testing.B) {
	const n = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	x, y, z := randSlice(rng, n*n), randSlice(rng, n*n), make([]float32, n*n)
	codes := make([]uint8, n*n)
	for i := range codes {
		codes[i] = uint8(rng.IntN(0x7E))
	}
	for _, src := range []string{"f32", "e4m3"} {
		b.Run(src, func(b *testing.B) {
			a, bb := &Operand{F32: x}, &Operand{F32: y}
			if src == "e4m3" {
				tab := fp8TableForTest(0, 1)
				a = &Operand{Codes: codes, Table: tab, Cast: testCasts[0], Scale: 1}
				bb = a
			}
			g := NewGemm()
			for i := 0; i < b.N; i++ {
				g.RunBF16(false, false, n, n, n, a, n, bb, n, z, n, Epilogue{Alpha: 1})
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// gemmShapes are the GEMMs of the baby GPT's and the MLP's training
// steps (m, n, k and the transposes the linear layers use: fprop x·Wᵀ,
// dgrad dy·W, wgrad dyᵀ·x); bench/openblas_shapes.py times the same
// list with OpenBLAS.
var gemmShapes = []struct {
	name           string
	m, n, k        int
	transA, transB bool
}{
	{"gpt_qkv_fprop", 768, 384, 128, false, true}, {"gpt_qkv_dgrad", 768, 128, 384, false, false}, {"gpt_qkv_wgrad", 384, 128, 768, true, false},
	{"gpt_attnproj_fprop", 768, 128, 128, false, true}, {"gpt_attnproj_dgrad", 768, 128, 128, false, false}, {"gpt_attnproj_wgrad", 128, 128, 768, true, false},
	{"gpt_fc_fprop", 768, 512, 128, false, true}, {"gpt_fc_dgrad", 768, 128, 512, false, false}, {"gpt_fc_wgrad", 512, 128, 768, true, false},
	{"gpt_proj2_fprop", 768, 128, 512, false, true}, {"gpt_proj2_dgrad", 768, 512, 128, false, false}, {"gpt_proj2_wgrad", 128, 512, 768, true, false},
	{"gpt_head_fprop", 768, 104, 128, false, true}, {"gpt_head_dgrad", 768, 128, 104, false, false}, {"gpt_head_wgrad", 104, 128, 768, true, false},
	{"mlp_fc1_fprop", 128, 512, 784, false, true}, {"mlp_fc1_wgrad", 512, 784, 128, true, false},
	{"mlp_fc2_fprop", 128, 512, 512, false, true}, {"mlp_fc2_dgrad", 128, 512, 512, false, false}, {"mlp_fc2_wgrad", 512, 512, 128, true, false},
	{"mlp_fc3_fprop", 128, 10, 512, false, true}, {"mlp_fc3_dgrad", 128, 512, 10, false, false}, {"mlp_fc3_wgrad", 10, 512, 128, true, false},
}

// BenchmarkGemmShapes runs gemmShapes in float32 and on the bf16 kernel
// with FP8 codes.
func BenchmarkGemmShapes(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range gemmShapes {
		x, y, z := randSlice(rng, s.m*s.k), randSlice(rng, s.k*s.n), make([]float32, s.m*s.n)
		codes := make([]uint8, max(s.m, s.n)*s.k)
		for i := range codes {
			codes[i] = uint8(rng.IntN(0x7E))
		}
		lda, ldb := s.k, s.n
		if s.transA {
			lda = s.m
		}
		if s.transB {
			ldb = s.k
		}
		flops := 2 * float64(s.m*s.n*s.k)
		g := NewGemm()
		b.Run(s.name+"/f32", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g.Run(s.transA, s.transB, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, z, s.n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		if kern16 == nil {
			continue
		}
		fa, fb := &Operand{F32: x}, &Operand{F32: y}
		b.Run(s.name+"/bf16", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g.RunBF16(s.transA, s.transB, s.m, s.n, s.k, fa, lda, fb, ldb, z, s.n, Epilogue{Alpha: 1})
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		tab := fp8TableForTest(0, 1)
		op := &Operand{Codes: codes, Table: tab, Cast: testCasts[0], Scale: 1}
		b.Run(s.name+"/fp8", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				g.RunBF16(s.transA, s.transB, s.m, s.n, s.k, op, lda, op, ldb, z, s.n, Epilogue{Alpha: 0.5})
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestGemmBF16Operands: RunBF16 with NVFP4 operands (codes decoded to
// bf16 by the packs, factors per row or per 16×16 tile) computes exactly what it
// computes from float32 operands holding the same values, on every
// kernel and the fallback, for every layout, on the direct and the
// blocked path and ragged sizes.
func TestGemmBF16Operands(t *testing.T) { withBF16Kernel(t, testGemmBF16Operands) }

func testGemmBF16Operands(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	g := NewGemm()
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {130, 70, 257}, {200, 300, 801}, {64, 1100, 512}}
	if testing.Short() {
		sizes = [][3]int{{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {20, 40, 801}, {6, 1100, 512}}
	}
	for _, s := range sizes {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				m, n, k := s[0], s[1], s[2]
				lda, ldb := k, n
				arows, brows := m, k
				if tA {
					lda, arows = m, k
				}
				if tB {
					ldb, brows = k, n
				}
				// NVFP4 codes (per-row factors for A, tiles for B) and
				// their float32 values.
				operand := func(rows, cols int, tiles bool) (*Operand, *Operand) {
					h := e2m1OperandForTest(rng, rows, cols, tiles)
					f := make([]float32, rows*cols)
					for i := range f {
						f[i] = BF16ToFloat32(h.bf16At(i))
					}
					return &Operand{F32: f}, h
				}
				fa, ha := operand(arows, lda, false)
				fb, hb := operand(brows, ldb, true)
				want, got := make([]float32, m*n), make([]float32, m*n)
				ep := Epilogue{Alpha: 0.37}
				g.RunBF16(tA, tB, m, n, k, fa, lda, fb, ldb, want, n, ep)
				g.RunBF16(tA, tB, m, n, k, ha, lda, hb, ldb, got, n, ep)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v tA=%v tB=%v: C[%d] = %v, from float32 %v", s, tA, tB, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// The strided pairs kernel writes, group by group, exactly what pairs16
// writes for each pair of rows, for FP8 codes and float32 values, and
// nothing past its groups' lanes.
func TestStridedPairsMatchPairs16(t *testing.T) { withISA(t, testStridedPairsMatchPairs16) }

func testStridedPairsMatchPairs16(t *testing.T) {
	if !hasBF16 && !hasAVX2 {
		t.Skip("no vector pack kernels on this build or CPU")
	}
	rng := rand.New(rand.NewPCG(23, 23))
	const ld = 77
	codes := make([]uint8, 40*ld)
	for i := range codes {
		codes[i] = uint8(rng.IntN(256))
	}
	f32 := randSlice(rng, 40*ld)
	g := NewGemm()
	for _, x := range []*Operand{g.op16(0, &Operand{Codes: codes, Table: fp8TableForTest(0, 1), Cast: testCasts[0], Scale: 1}), {F32: f32}} {
		for _, c := range []struct{ o0, groups, width, stride int }{{0, 1, 16, 16}, {5, 7, 32, 40}, {3, 19, 48, 48}} {
			got := make([]uint32, c.groups*c.stride+8)
			want := make([]uint32, len(got))
			for i := range got {
				got[i], want[i] = 0xDEADBEEF, 0xDEADBEEF
			}
			if !stridedPairsVector(x, got, c.o0, c.o0+ld, c.groups, c.width, c.stride, 2*ld) {
				t.Fatal("no vector path")
			}
			for q := 0; q < c.groups; q++ {
				x.pairs16(want[q*c.stride:q*c.stride+c.width], c.o0+2*q*ld, c.o0+2*q*ld+ld, c.width)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("codes=%v %+v: lane %d = %08x, want %08x", x.Codes != nil, c, i, got[i], want[i])
				}
			}
		}
	}
}

// The strided pairs kernel with exponent shifts writes, group by group,
// what pairs16Exp writes with the same shifts for each pair of rows.
func TestStridedPairsExpMatchPairs16Exp(t *testing.T) {
	if !hasBF16 {
		t.Skip("no AVX512_BF16 kernels on this build or CPU")
	}
	rng := rand.New(rand.NewPCG(29, 29))
	const ld = 93
	codes := make([]uint8, 140*ld)
	for i := range codes {
		codes[i] = uint8(rng.IntN(256))
	}
	g := NewGemm()
	x := g.op16(0, &Operand{Codes: codes, Table: fp8TableForTest(0, 1), Cast: testCasts[0], Scale: 1})
	for _, c := range []struct{ o0, groups, width, stride int }{{0, 1, 16, 16}, {7, 64, 32, 40}, {2, 5, 48, 48}} {
		shifts := make([]uint32, c.width)
		for i := range shifts {
			shifts[i] = shiftLane(rng.IntN(41) - 20)
		}
		got := make([]uint32, c.groups*c.stride+8)
		want := make([]uint32, len(got))
		for i := range got {
			got[i], want[i] = 0xDEADBEEF, 0xDEADBEEF
		}
		if !stridedPairsExpVector(x, got, c.o0, c.o0+ld, c.groups, c.width, c.stride, 2*ld, shifts) {
			t.Fatal("no vector path")
		}
		for q := 0; q < c.groups; q++ {
			x.pairs16Exp(want[q*c.stride:q*c.stride+c.width], c.o0+2*q*ld, c.o0+2*q*ld+ld, c.width, shifts)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: lane %d = %08x, want %08x", c, i, got[i], want[i])
			}
		}
	}
}

// NVFP4 operands (one factor row per code row) take the strided pairs
// kernel too, group by group what pairs16 writes; tiles and unaligned
// runs are refused.
func TestStridedPairsE2M1MatchPairs16(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 kernels on this build or CPU")
	}
	rng := rand.New(rand.NewPCG(31, 31))
	const rows, cols = 50, 80
	x := e2m1OperandForTest(rng, rows, cols, false)
	for _, c := range []struct{ r, c0, groups, width, stride int }{{0, 0, 1, 16, 16}, {3, 16, 20, 48, 56}, {1, 64, 24, 16, 16}} {
		o0 := c.r*cols + c.c0
		got := make([]uint32, c.groups*c.stride+8)
		want := make([]uint32, len(got))
		for i := range got {
			got[i], want[i] = 0xDEADBEEF, 0xDEADBEEF
		}
		if !stridedPairsVector(x, got, o0, o0+cols, c.groups, c.width, c.stride, 2*cols) {
			t.Fatalf("%+v: no vector path", c)
		}
		for q := 0; q < c.groups; q++ {
			x.pairs16(want[q*c.stride:q*c.stride+c.width], o0+2*q*cols, o0+2*q*cols+cols, c.width)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%+v: lane %d = %08x, want %08x", c, i, got[i], want[i])
			}
		}
	}
	tiles := e2m1OperandForTest(rng, rows, cols, true)
	buf := make([]uint32, 64)
	if stridedPairsVector(tiles, buf, 0, cols, 1, 16, 16, 2*cols) || stridedPairsVector(x, buf, 8, 8+cols, 1, 16, 16, 2*cols) {
		t.Fatal("tiles or a run off the blocks took the vector path")
	}
}

// TestPairConversionsMatchLoop checks the vector conversions of float32
// values and FP8 codes into bf16 pairs — rows (consecutive pairs) and
// pairs of two rows, groups and strides — against bf16At's loop bit for
// bit, at every length to 70, on values that round to even, overflow,
// are denormal, infinite or NaN, on each instruction set.
func TestPairConversionsMatchLoop(t *testing.T) { withISA(t, testPairConversionsMatchLoop) }

func testPairConversionsMatchLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	special := []uint32{0, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFF800001, 0x7F7FFFFF,
		0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x00800000, 0x80800000}
	var table [256]float32
	for c := range table {
		// Sign-symmetric as package fp8's tables are (a NaN included).
		table[c] = float32(fp8Ref(0, uint8(c&0x7F))) * 0.25
		if c&0x80 != 0 {
			table[c] = math.Float32frombits(math.Float32bits(table[c]) | 0x80000000)
		}
	}
	var tab16 [128]uint16
	if !bf16Table(&tab16, &table) {
		t.Fatal("the E4M3 table times 1/4 should be bf16 values")
	}
	for n := 1; n <= 70; n++ {
		f := make([]float32, 2*n)
		codes := make([]uint8, 2*n)
		for i := range f {
			if rng.IntN(3) == 0 {
				f[i] = math.Float32frombits(special[rng.IntN(len(special))])
			} else {
				f[i] = math.Float32frombits(rng.Uint32())
			}
			codes[i] = uint8(rng.IntN(256))
		}
		for _, x := range []*Operand{{F32: f}, {Codes: codes, Table: &table, bf16Tab: &tab16}} {
			want := func(o int) uint16 { return x.bf16At(o) }
			row := make([]uint32, (n+1)/2+1)
			row[len(row)-1] = 0xDEADBEEF
			x.row16(row, 0, n)
			for q := 0; q < (n+1)/2; q++ {
				w := uint32(want(2 * q))
				if 2*q+1 < n {
					w |= uint32(want(2*q+1)) << 16
				}
				if row[q] != w {
					t.Fatalf("n=%d codes=%v: row pair %d = %#x, loop %#x", n, x.Codes != nil, q, row[q], w)
				}
			}
			if row[len(row)-1] != 0xDEADBEEF {
				t.Fatalf("n=%d: row16 wrote past its pairs", n)
			}
			p := make([]uint32, n)
			x.pairs16(p, 0, n, n)
			for j := range p {
				if w := bf16Pair(want(j), want(n+j)); p[j] != w {
					t.Fatalf("n=%d codes=%v: pair %d = %#x, loop %#x", n, x.Codes != nil, j, p[j], w)
				}
			}
		}
	}
}

// TestShiftPeriodicMatchesTwin checks shiftPeriodic (the AVX2 kernel
// where the period is whole vectors) against bf16ShiftGo run by run, on
// pairs with zero, subnormal, infinite and NaN halves among them.
func TestShiftPeriodicMatchesTwin(t *testing.T) { withISA(t, testShiftPeriodic) }

func testShiftPeriodic(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	halves := []uint16{0, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0x3F80, 0x0080}
	for _, period := range []int{1, 3, 4, 5, 6, 8, 12, 16, 20, 47, 48} {
		for reps := 1; reps <= 17; reps++ {
			shifts := make([]uint32, period)
			for i := range shifts {
				shifts[i] = shiftLane(-rng.IntN(9))
			}
			d := make([]uint32, period*reps)
			for i := range d {
				lo, hi := uint16(rng.Uint32()), uint16(rng.Uint32())
				if rng.IntN(3) == 0 {
					lo = halves[rng.IntN(len(halves))]
				}
				if rng.IntN(3) == 0 {
					hi = halves[rng.IntN(len(halves))]
				}
				d[i] = uint32(hi)<<16 | uint32(lo)
			}
			want := append([]uint32(nil), d...)
			for i := 0; i < len(want); i += period {
				bf16ShiftGo(want[i:i+period], shifts)
			}
			shiftPeriodic(d, shifts)
			for i := range d {
				if d[i] != want[i] {
					t.Fatalf("period %d reps %d: lane %d = %#x, want %#x", period, reps, i, d[i], want[i])
				}
			}
		}
	}
}

// TestPairs16GroupsExpMatchesTwin checks pairs16GroupsExp (the AVX-512
// kernel that shifts as it converts, the AVX2 pairs then one call of
// the grouped shift, or the loops) against pairs16 and bf16ShiftGo run
// by run, lanes between the runs untouched.
func TestPairs16GroupsExpMatchesTwin(t *testing.T) { withISA(t, testPairs16GroupsExp) }

func testPairs16GroupsExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	codes := make([]uint8, 4096)
	for i := range codes {
		codes[i] = uint8(rng.IntN(256))
	}
	f := randSlice(rng, 4096)
	f[3], f[40] = 0, float32(math.Inf(1))
	for _, x := range []*Operand{fp8OperandForTest(codes, 0, 1), fp8OperandForTest(codes, 1, 1), {F32: f}} {
		for _, width := range []int{8, 16, 24, 48, 20} {
			for _, groups := range []int{1, 3, 7} {
				stride := width*3 + 5
				shifts := make([]uint32, groups*width)
				for i := range shifts {
					shifts[i] = shiftLane(-rng.IntN(9))
				}
				got := make([]uint32, groups*stride+8)
				for i := range got {
					got[i] = 0xDEADBEEF
				}
				want := append([]uint32(nil), got...)
				o0, o1 := 5, 5+groups*width+11
				x.pairs16GroupsExp(got, o0, o1, groups, width, stride, shifts)
				for g := 0; g < groups; g++ {
					run := want[g*stride : g*stride+width]
					x.pairs16(run, o0+g*width, o1+g*width, width)
					bf16ShiftGo(run, shifts[g*width:(g+1)*width])
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("codes=%v width %d groups %d: lane %d = %#x, want %#x", x.Codes != nil, width, groups, i, got[i], want[i])
					}
				}
			}
		}
	}
}
