package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randPairs returns n random bf16 pairs of values in [−1, 1), some of
// them exact zeros.
func randPairs(rng *rand.Rand, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		lo := BF16FromFloat32(2*rng.Float32() - 1)
		hi := BF16FromFloat32(2*rng.Float32() - 1)
		if rng.IntN(8) == 0 {
			hi = 0
		}
		p[i] = bf16Pair(lo, hi)
	}
	return p
}

// TestRowGemm16MatchesTwin compares the bf16 row kernels with their Go
// twin on every column tail (1 to 70 columns), row counts past one
// kernel's height, A stored along rows and down columns, one- and
// two-part alphas, B in panels of 64 columns, with guard values around
// C, bit for bit (the AVX512_BF16 kernels and, with AVX-512 switched
// off, the AVX2 ones).
func TestRowGemm16MatchesTwin(t *testing.T) { withISA(t, testRowGemm16MatchesTwin) }

func testRowGemm16MatchesTwin(t *testing.T) {
	if !hasBF16 && !hasAVX2 {
		t.Skip("no bf16 row kernel: the direct bf16 path runs the twin only")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for n := 1; n <= 70; n++ {
		for _, s := range []struct{ m, kp int }{{1, 1}, {7, 3}, {13, 40}, {9, 1}} {
			for _, trans := range []bool{false, true} {
				for _, alpha := range [][2]float32{{1, 0}, {0.75, 0}, {1.1, 3e-9}} {
					m, kp := s.m, s.kp
					a := randPairs(rng, m*kp)
					rsA, csA := kp, 1
					if trans {
						rsA, csA = 1, m
					}
					ldc := n + 5
					b := randPairs(rng, (n+63)/64*64*kp)
					cv, cg := make([]float32, m*ldc+7), make([]float32, m*ldc+7)
					for i := range cv {
						cv[i], cg[i] = guard, guard
					}
					if !rowGemm16Vector(m, n, kp, a, rsA, csA, b, cv, ldc, alpha[0], alpha[1]) {
						t.Fatal("vector kernel not run")
					}
					rowGemm16Go(m, n, kp, a, rsA, csA, b, cg, ldc, alpha[0], alpha[1])
					for o := range cv {
						i, j := o/ldc, o%ldc
						if i >= m || j >= n {
							if cv[o] != guard {
								t.Fatalf("n=%d %v: wrote outside C at %d", n, s, o)
							}
							continue
						}
						v, w := cv[o], cg[o]
						if math.Float32bits(v) != math.Float32bits(w) {
							t.Fatalf("n=%d %v trans=%v alpha=%v: C[%d][%d] vector %v, twin %v", n, s, trans, alpha, i, j, v, w)
						}
						if d := math.Abs(float64(v - w)); d > 0x1p-23*math.Abs(float64(w)) {
							t.Fatalf("n=%d %v trans=%v alpha=%v: C[%d][%d] vector %v, twin %v", n, s, trans, alpha, i, j, v, w)
						}
					}
				}
			}
		}
	}
}

// TestDirectGemm16Chosen pins which bf16 GEMMs run direct: a training
// step's shapes with op(B) as pairs in L2, on an AVX512_BF16 kernel or
// the portable twin alike (the choice decides the grouping of the sums);
// not k = 0, not a wide op(B), not AMX.
func TestDirectGemm16Chosen(t *testing.T) {
	saved := kern16
	defer func() { kern16 = saved }()
	for _, k := range availableBF16Kernels() {
		kern16 = &k
		direct := k.tiles == nil
		for _, s := range [][3]int{{768, 384, 128}, {128, 512, 784}, {128, 10, 512}, {1, 1, 1}} {
			if useDirect16(s[0], s[1], s[2]) != direct {
				t.Errorf("%s %v: direct = %v, want %v", k.name, s, !direct, direct)
			}
		}
		if useDirect16(4, 4, 0) || useDirect16(256, 2304, 768) || useDirect16(4, 2, 8194) {
			t.Errorf("%s: k = 0, op(B) over 2^18 pairs or k over 8192 runs direct", k.name)
		}
	}
	kern16 = nil
	if useDirect16(768, 384, 128) {
		t.Error("direct bf16 path without a bf16 kernel")
	}
}

// TestGemmBF16DirectMatchesBlocked runs RunBF16 on the direct path (with
// the row kernels and with their twin) and on the blocked one, for every
// layout, float32 and FP8 operands, sizes that are not multiples of the
// tiles or of 16, each epilogue form, with guard values around C: each
// against the float64 product within the float32 accumulation bound, and
// — k within one block of the blocked path, where both accumulate the
// same pairs in the same order — the two paths bit for bit.
func TestGemmBF16DirectMatchesBlocked(t *testing.T) {
	if !hasBF16 {
		t.Skip("no AVX512_BF16 kernel")
	}
	savedK, savedD, savedV := kern16, directGemm, useRow16Vector
	defer func() { kern16, directGemm, useRow16Vector = savedK, savedD, savedV; resetParts() }()
	ks := availableBF16Kernels()
	for i := range ks {
		if ks[i].tiles == nil && ks[i].name != goBF16Kernel.name {
			kern16 = &ks[i]
			break
		}
	}
	resetParts()
	rng := rand.New(rand.NewPCG(41, 42))
	g := NewGemm()
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {13, 33, 2}, {17, 70, 65}, {64, 64, 300}, {130, 70, 257}, {200, 130, 383}, {97, 20, 1001}, {700, 100, 128}}
	for _, s := range sizes {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, kind := range []string{"f32 alpha", "f32 alpha2", "fp8 rowcol", "fp8 alpha2"} {
					m, n, k := s[0], s[1], s[2]
					lda, ldb, ldc := k+3, n+2, n+5
					arows, brows := m, k
					if tA {
						lda, arows = m+3, k
					}
					if tB {
						ldb, brows = k+2, n
					}
					var a, b *Operand
					if kind[:3] == "fp8" {
						ca, cb := make([]uint8, arows*lda), make([]uint8, brows*ldb)
						for i := range ca {
							ca[i] = uint8(rng.IntN(256)) &^ 0x78 // finite E4M3 codes, no NaN
						}
						for i := range cb {
							cb[i] = uint8(rng.IntN(256)) &^ 0x40 // finite E5M2 codes
						}
						a, b = fp8OperandForTest(ca, 0, 1), fp8OperandForTest(cb, 1, 0.5)
						a.bf16Tab, b.bf16Tab = nil, nil
					} else {
						a, b = &Operand{F32: randSlice(rng, arows*lda)}, &Operand{F32: randSlice(rng, brows*ldb)}
					}
					ep := Epilogue{Alpha: 1}
					switch kind[4:] {
					case "alpha2":
						ep.Alpha = float64(float32(1.1)) * float64(float32(0.37))
					case "rowcol":
						ep.Alpha = 0.5
						ep.Row, ep.Col = randSlice(rng, m), randSlice(rng, n)
					}
					directGemm = true
					if !useDirect16(m, n, k) {
						t.Fatalf("%v: not on the direct path", s)
					}
					var outs [3][]float32
					for v, mode := range []string{"direct", "direct twin", "blocked"} {
						directGemm, useRow16Vector = mode != "blocked", mode != "direct twin"
						c := make([]float32, m*ldc+8)
						for i := range c {
							c[i] = guard
						}
						g.RunBF16(tA, tB, m, n, k, a, lda, b, ldb, c, ldc, ep)
						name := fmt.Sprintf("%s %dx%dx%d tA=%v tB=%v %s", mode, m, n, k, tA, tB, kind)
						checkBF16Result(t, name, tA, tB, m, n, k, a, lda, b, ldb, c, ldc, ep)
						outs[v] = c
					}
					for i := range outs[0] {
						d, tw, bl := outs[0][i], outs[1][i], outs[2][i]
						same := math.Float32bits(d) == math.Float32bits(bl)
						if k <= kc && !same {
							t.Fatalf("%dx%dx%d tA=%v tB=%v %s: C[%d] direct %v, blocked %v", m, n, k, tA, tB, kind, i, d, bl)
						}
						if kind != "f32 alpha2" && kind != "fp8 alpha2" && math.Float32bits(d) != math.Float32bits(tw) {
							t.Fatalf("%dx%dx%d tA=%v tB=%v %s: C[%d] kernels %v, twin %v", m, n, k, tA, tB, kind, i, d, tw)
						}
					}
				}
			}
		}
	}
}

// TestAddBiasVectorMatchesLoop checks AddBias on every length up to 40
// (every tail mask) against the loop, bit for bit, and that it touches
// only its block.
func TestAddBiasVectorMatchesLoop(t *testing.T) { withISA(t, testAddBiasVectorMatchesLoop) }

func testAddBiasVectorMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for n := 1; n <= 40; n++ {
		ldc := n + 9
		c := randSlice(rng, 3*ldc)
		bias := randSlice(rng, n+6)
		want := append([]float32(nil), c...)
		for r := 1; r < 3; r++ {
			for j := 2; j < 2+n && j < ldc; j++ {
				if j < n+6 {
					want[r*ldc+j] += bias[j]
				}
			}
		}
		c1 := min(n+2, n+6)
		AddBias(c, ldc, bias, 1, 3, 2, c1)
		for i := range c {
			if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: c[%d] = %v, want %v", n, i, c[i], want[i])
			}
		}
	}
}

// TestBF16Exp: FP8 codes with per-block exponent shifts (Operand.Exp)
// give C bit for bit equal to the same product of the values with the
// factors folded in as float32, on every bf16 kernel (AMX's tiles and
// the portable twins included), on the direct path and the blocked one
// (several blocks of k and of rows, A packed once and shared), for every
// layout, ragged sizes, zero and NaN codes, shifts of 0 to −40, an entry
// per 128 values along k (Float8BlockScaling), per 32 (MXFP8) or 64; and
// the twin of the shift kernel equals it.
func TestBF16Exp(t *testing.T) {
	savedK, savedD := kern16, directGemm
	defer func() { kern16, directGemm = savedK, savedD; resetParts() }()
	ks := availableBF16Kernels()
	for i := range ks {
		kern16 = &ks[i]
		resetParts()
		for _, direct := range []bool{true, false} {
			directGemm = direct
			t.Run(fmt.Sprintf("%s/direct=%v", ks[i].name, direct), testBF16Exp)
		}
	}
}

func testBF16Exp(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	tab := &testCasts[0].Decode
	g := NewGemm()
	for _, sz := range [][4]int{{5, 7, 33, 0}, {48, 70, 260, 0}, {130, 64, 129, 0}, {300, 45, 800, 0}, {20, 700, 400, 0},
		{5, 7, 33, 32}, {48, 70, 260, 32}, {130, 64, 129, 32}, {300, 45, 800, 32}, {20, 700, 400, 32}, {37, 50, 150, 64}} {
		m, n, k, er := sz[0], sz[1], sz[2], sz[3]
		run := ExpBlock
		if er != 0 {
			run = er
		}
		nb := (k + run - 1) / run
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				mk := func(outer int) ([]uint8, []int8) {
					c := make([]uint8, outer*k)
					for i := range c {
						c[i] = uint8(rng.IntN(0x7E)) | uint8(rng.IntN(2))<<7
					}
					e := make([]int8, outer*nb)
					for i := range e {
						e[i] = int8(-rng.IntN(41))
					}
					return c, e
				}
				ca, ea := mk(m)
				cb, eb := mk(n)
				// Folded float32 operands in the stored layouts.
				fold := func(c []uint8, e []int8, outer int, rowMajor bool) []float32 {
					f := make([]float32, len(c))
					for i := 0; i < outer; i++ {
						for p := 0; p < k; p++ {
							idx := i*k + p
							if !rowMajor {
								idx = p*outer + i
							}
							f[idx] = tab[c[idx]] * float32(math.Ldexp(1, int(e[i*nb+p/run])))
						}
					}
					return f
				}
				lda, ldb := k, n
				if ta {
					lda = m
				}
				if tb {
					ldb = k
				}
				fa, fb := fold(ca, ea, m, !ta), fold(cb, eb, n, tb)
				want, got := make([]float32, m*n), make([]float32, m*n)
				ep := Epilogue{Alpha: 1}
				g.RunBF16(ta, tb, m, n, k, &Operand{F32: fa}, lda, &Operand{F32: fb}, ldb, want, n, ep)
				// With the table alone, and with the cast it came from
				// (the vector widening kernels' operands).
				for _, cast := range []*FP8Cast{nil, testCasts[0]} {
					clear(got)
					g.RunBF16(ta, tb, m, n, k, &Operand{Codes: ca, Table: tab, Cast: cast, Scale: 1, Exp: ea, ExpBlocks: nb, ExpRun: er}, lda,
						&Operand{Codes: cb, Table: tab, Cast: cast, Scale: 1, Exp: eb, ExpBlocks: nb, ExpRun: er}, ldb, got, n, ep)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v ta=%v tb=%v cast %v: C[%d] = %v, folded %v", sz, ta, tb, cast != nil, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	// The shift kernel against its twin, NaN, inf and zero halves left alone.
	d := make([]uint32, 100)
	for i := range d {
		d[i] = rng.Uint32()
	}
	d[0], d[1], d[2] = 0x7F800000, 0x7FC00000|0x8000, 0
	sh := make([]uint32, len(d))
	for i := range sh {
		sh[i] = shiftLane(-rng.IntN(30))
	}
	want := append([]uint32(nil), d...)
	bf16ShiftGo(want, sh)
	shiftLanes(d, sh)
	for i := range d {
		if d[i] != want[i] {
			t.Fatalf("lane %d: %#x, twin %#x", i, d[i], want[i])
		}
	}
	if want[0]>>16 != 0x7F80 || want[1]&0xFFFF != 0x8000 {
		t.Fatalf("inf or NaN halves shifted: %#x %#x", want[0], want[1])
	}
	// The per-run shift kernel (64 lanes a run, one int8 each) against
	// the same shifts lane by lane, a short last run included; and the
	// runs of any length (the AVX2 kernel's multiples of 8, MXFP8's 16
	// pairs, the widened values' 32) on every ISA.
	withISA(t, func(t *testing.T) {
		for _, rl := range []int{64, 16, 32, 8, 24, 5} {
			for _, n := range []int{rl, 200, rl * 5, 3*rl + 7} {
				d := make([]uint32, n)
				for i := range d {
					d[i] = rng.Uint32()
				}
				d[0], d[1], d[n-1] = 0x7F800000, 0x7FC00000|0x8000, 0
				exp := make([]int8, (n+rl-1)/rl)
				for i := range exp {
					exp[i] = int8(-rng.IntN(30))
				}
				exp[0] = 0
				lanes := make([]uint32, n)
				for i := range lanes {
					lanes[i] = shiftLane(int(exp[i/rl]))
				}
				want := append([]uint32(nil), d...)
				bf16ShiftGo(want, lanes)
				if rl%2 == 0 && rl >= 16 {
					shiftRow(d, exp, 2*rl)
				} else {
					shiftRuns(d, exp, rl)
				}
				for i := range d {
					if d[i] != want[i] {
						t.Fatalf("runs of %d, n=%d lane %d: %#x, lane by lane %#x", rl, n, i, d[i], want[i])
					}
				}
			}
		}
	})
}

// TestRowsKernelsMatchTwins checks the row kernels of FP8 codes and of
// float32 values (every row length from 1 to 300, so every tail of a
// 32-value block and of a 128-code run, odd ones included; rows apart by
// more than their length; FP8 with and without Float8BlockScaling's
// exponent shifts) against the conversion pair by pair, shifted run by
// run: the pairs written (a NaN half's sign aside), and no lane past a
// row's pairs touched.
func TestRowsKernelsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const rows = 3
	for n := 1; n <= 300; n++ {
		ld, kp := n+5, (n+1)/2
		ldd := kp + 3
		nb := (n + ExpBlock - 1) / ExpBlock
		es := nb + 1
		codes := make([]uint8, rows*ld)
		for i := range codes {
			codes[i] = uint8(rng.IntN(256))
		}
		codes[0] = 0x7F // NaN: not shifted
		exp := make([]int8, rows*es)
		for i := range exp {
			exp[i] = int8(-rng.IntN(20))
		}
		f := make([]float32, rows*ld)
		for i := range f {
			f[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
		}
		f[1] = float32(math.Inf(-1))
		x := fp8OperandForTest(codes, n%2, 1)
		for _, kind := range []string{"fp8", "fp8 shifted", "float32"} {
			shift := kind == "fp8 shifted"
			if kind == "float32" {
				x = &Operand{F32: f}
			}
			const fill = 0xDEADBEEF
			got, want := make([]uint32, rows*ldd), make([]uint32, rows*ldd)
			for i := range got {
				got[i], want[i] = fill, fill
			}
			for r := 0; r < rows; r++ {
				o, w := r*ld, want[r*ldd:r*ldd+kp]
				for q := range w {
					var hi uint16
					if 2*q+1 < n {
						hi = x.bf16At(o + 2*q + 1)
					}
					w[q] = bf16Pair(x.bf16At(o+2*q), hi)
				}
				if shift {
					bf16ShiftRunsGo(w, exp[r*es:r*es+nb], ExpBlock/2)
				}
			}
			if shift {
				x.rows16Exp(got, 0, ld, rows, n, ldd, exp, es)
			} else {
				x.rows16(got, 0, ld, rows, n, ldd)
			}
			nan := func(h uint32) bool { return h&0x7F80 == 0x7F80 && h&0x7F != 0 }
			half := func(a, b uint32) bool { return a == b || nan(a) && nan(b) } // NaN's sign is free
			for i := range got {
				if !half(got[i]&0xFFFF, want[i]&0xFFFF) || !half(got[i]>>16, want[i]>>16) {
					t.Fatalf("n=%d %s: lane %d (row %d) = %#x, want %#x", n, kind, i, i/ldd, got[i], want[i])
				}
			}
		}
	}
}

// TestE2M1RowsMatchTwin checks the NVFP4 row decode (rows16 and row16 of
// E2M1 operands: whole blocks through the table kernel, two blocks a
// lookup and an odd last one alone) against e2m1At pair by pair, for 1×16
// blocks and 16×16 tiles, runs starting on any block of a row, bands of
// rows crossing tile boundaries, zero and NaN factors; no lane past a
// row's pairs is touched.
func TestE2M1RowsMatchTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, tiles := range []bool{false, true} {
		const rows, cols = 40, 112 // 7 blocks a row
		x := e2m1OperandForTest(rng, rows, cols, tiles)
		x.E2M1Factors[0], x.E2M1Factors[3] = 0, float32(math.NaN())
		for _, c := range []struct{ r0, nr, c0, n int }{
			{0, 40, 0, 112}, {3, 30, 16, 64}, {14, 5, 32, 16}, {1, 1, 0, 48}, {17, 20, 96, 16}, {0, 33, 16, 96},
		} {
			ldd := c.n/2 + 5
			const fill = 0xDEADBEEF
			got := make([]uint32, c.nr*ldd)
			for i := range got {
				got[i] = fill
			}
			want := append([]uint32(nil), got...)
			o := c.r0*cols + c.c0
			for r := 0; r < c.nr; r++ {
				for q := 0; q < c.n/2; q++ {
					e := o + r*cols + 2*q
					want[r*ldd+q] = bf16Pair(x.e2m1At(e), x.e2m1At(e+1))
				}
			}
			x.rows16(got, o, cols, c.nr, c.n, ldd)
			single := make([]uint32, c.n/2)
			x.row16(single, o, c.n)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("tiles=%v %+v: lane %d (row %d) = %#x, want %#x", tiles, c, i, i/ldd, got[i], want[i])
				}
			}
			for q := range single {
				if single[q] != want[q] {
					t.Fatalf("tiles=%v %+v: row16 lane %d = %#x, want %#x", tiles, c, q, single[q], want[q])
				}
			}
		}
	}
}

// TestE2M1PairsGroupsMatchTwin checks pairs16Groups of NVFP4 codes (the
// groups of a pair of rows in one call of the strided pairs kernel)
// against e2m1At lane by lane, for 1×16 blocks and 16×16 tiles, rows
// within and across a band of tiles, runs starting on any block: every
// group's lanes, and nothing between the groups touched.
func TestE2M1PairsGroupsMatchTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	for _, tiles := range []bool{false, true} {
		const rows, cols = 40, 192
		x := e2m1OperandForTest(rng, rows, cols, tiles)
		// Factors whose products are not bf16 values (a tensor scale
		// folded in): the kernels keep the top halves, as e2m1At does.
		for i := 0; i < len(x.E2M1Factors); i += 7 {
			x.E2M1Factors[i] = float32(rng.Float64()) + 0.1
		}
		for _, c := range []struct{ r0, r1, c0, width, groups int }{
			{0, 1, 0, 64, 3}, {14, 15, 32, 16, 10}, {15, 16, 0, 32, 6}, {6, 30, 64, 64, 2}, {2, 3, 176, 16, 1},
		} {
			stride := c.width + 7
			got := make([]uint32, c.groups*stride)
			for i := range got {
				got[i] = 0xDEADBEEF
			}
			want := append([]uint32(nil), got...)
			o0, o1 := c.r0*cols+c.c0, c.r1*cols+c.c0
			for g := 0; g < c.groups; g++ {
				for j := 0; j < c.width; j++ {
					e := g*c.width + j
					want[g*stride+j] = bf16Pair(x.e2m1At(o0+e), x.e2m1At(o1+e))
				}
			}
			x.pairs16Groups(got, o0, o1, c.groups, c.width, stride)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("tiles=%v %+v: lane %d = %#x, want %#x", tiles, c, i, got[i], want[i])
				}
			}
		}
	}
}
