package fp8

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/octetml/octet/internal/kernels"
)

// decodedAt returns element (i, p) of op(X) as the GEMM must see it: the
// decoded code times its scale, in float64 (exact). outer is m for A and
// n for B; rowMajor says X is stored [outer][k].
func decodedAt(o *Operand, outer, k, i, p int, rowMajor bool) float64 {
	idx := i*k + p
	if !rowMajor {
		idx = p*outer + i
	}
	v := float64(o.Format.Decode(o.Codes[idx]))
	switch {
	case o.BlockScaleInv != nil:
		nb, bi := (k+Float8BlockSize-1)/Float8BlockSize, i
		if o.BlockTiles {
			bi = i / Float8BlockSize
		}
		v *= float64(o.BlockScaleInv[bi*nb+p/Float8BlockSize])
	case o.Block != nil:
		blocks := (k + BlockSize - 1) / BlockSize
		v *= float64(o.Block[i*blocks+p/BlockSize].Float32())
	case o.AxisScaleInv != nil:
		v *= float64(o.AxisScaleInv[i])
	default:
		v *= float64(o.ScaleInv)
	}
	return v
}

// TestScaledGEMMAccumulationBound checks ScaledGEMM against the float64
// product of the decoded operands (codes times scales): every element
// within the float32 accumulation bound k·2⁻²⁴·Σ|a·b|, for every layout,
// tensorwise, axiswise and MXFP8 scales, both formats, sizes that are
// not multiples of the tile, and C's guard band untouched. On CPUs with
// AVX512_BF16 this is the bf16 kernel; on the purego build its twin. The
// float32 path (no bf16 kernel) rounds each scaled value and product
// once more, so it is held to (k+2)·2⁻²⁴·Σ|a·b|.
func TestScaledGEMMAccumulationBound(t *testing.T) {
	checkAccumulationBound(t)
	if useBF16() {
		// The float32 path, as CPUs without AVX512_BF16 run it.
		useBF16 = func() bool { return false }
		defer func() { useBF16 = kernels.HasBF16 }()
		checkAccumulationBound(t)
	}
}

func checkAccumulationBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	extra := 0.0
	if !useBF16() {
		extra = 2
	}
	g := NewScaledGEMM()
	codes := func(n int, f Format) []uint8 {
		c := make([]uint8, n)
		for i := range c {
			for {
				c[i] = uint8(rng.IntN(256))
				if v := f.Decode(c[i]); !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
					break
				}
			}
		}
		return c
	}
	scales := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(0.001 + rng.Float64())
		}
		return s
	}
	blocks := func(n int) []E8M0 {
		s := make([]E8M0, n)
		for i := range s {
			s[i] = E8M0FromExp(rng.IntN(40) - 20)
		}
		return s
	}
	wideBlocks := func(n int) []E8M0 {
		s := make([]E8M0, n)
		for i := range s {
			s[i] = E8M0FromExp(60 - 120*(i%2)) // 2^60 and 2^-60
		}
		return s
	}
	// Float8BlockScaling scale_inv per 128 along k: powers of two (the
	// default) or any float32 (FP32 scales).
	block128 := func(n int, fp32 bool) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(math.Ldexp(1, rng.IntN(40)-20))
			if fp32 {
				s[i] *= float32(0.5 + rng.Float64())
			}
		}
		return s
	}
	for _, size := range [][3]int{{1, 1, 1}, {16, 48, 1}, {9, 33, 2}, {5, 7, 33}, {13, 50, 64}, {70, 33, 100}, {130, 97, 300}, {40, 260, 900}} {
		m, n, k := size[0], size[1], size[2]
		for _, kind := range []string{"tensorwise", "axiswise", "mxfp8", "mxfp8-wide", "block", "block-tilesA", "block-tilesB", "block-fp32", "block-fp32-tilesB"} {
			for _, f := range []Format{E4M3, E5M2} {
				for _, ta := range []bool{false, true} {
					for _, tb := range []bool{false, true} {
						a := Operand{Codes: codes(m*k, f), Format: f, Trans: ta}
						b := Operand{Codes: codes(k*n, E4M3), Format: E4M3, Trans: tb}
						switch kind {
						case "tensorwise":
							a.ScaleInv, b.ScaleInv = scales(1)[0], scales(1)[0]
						case "axiswise":
							a.AxisScaleInv, b.AxisScaleInv = scales(m), scales(n)
						case "mxfp8":
							nb := (k + BlockSize - 1) / BlockSize
							a.Block, b.Block = blocks(m*nb), blocks(n*nb)
						case "mxfp8-wide":
							// Block exponents spread too far to fold into
							// normal bf16 values: the float32 path.
							nb := (k + BlockSize - 1) / BlockSize
							a.Block, b.Block = wideBlocks(m*nb), blocks(n*nb)
						default: // Float8BlockScaling: 1-D (and 2-D) blocks of 128
							a.BlockTiles = strings.Contains(kind, "tilesA")
							b.BlockTiles = strings.Contains(kind, "tilesB")
							a.BlockScaleInv = block128(float8BlockFactors(m, k, a.BlockTiles), strings.Contains(kind, "fp32"))
							b.BlockScaleInv = block128(float8BlockFactors(n, k, b.BlockTiles), strings.Contains(kind, "fp32"))
						}
						kindExtra := extra
						if strings.Contains(kind, "fp32") {
							kindExtra = 2 // float32 factors: the float32 path
						}
						c := make([]float32, m*n+7)
						for i := range c {
							c[i] = -777
						}
						if err := g.Run(m, n, k, a, b, c); err != nil {
							t.Fatal(err)
						}
						name := fmt.Sprintf("%dx%dx%d %s %v ta=%v tb=%v", m, n, k, kind, f, ta, tb)
						// The operands decoded once, [outer][k], for the
						// float64 reference.
						da, db := make([]float64, m*k), make([]float64, n*k)
						for i := 0; i < m; i++ {
							for p := 0; p < k; p++ {
								da[i*k+p] = decodedAt(&a, m, k, i, p, !ta)
							}
						}
						for j := 0; j < n; j++ {
							for p := 0; p < k; p++ {
								db[j*k+p] = decodedAt(&b, n, k, j, p, tb)
							}
						}
						for i := 0; i < m; i++ {
							for j := 0; j < n; j++ {
								var s, abs float64
								ra, rb := da[i*k:i*k+k], db[j*k:j*k+k]
								for p := range ra {
									v := ra[p] * rb[p]
									s += v
									abs += math.Abs(v)
								}
								got := float64(c[i*n+j])
								bound := (float64(k) + kindExtra) * 0x1p-24 * abs
								if d := math.Abs(got - s); d > 0 && d > bound {
									t.Fatalf("%s: C[%d,%d] = %v, want %v (error %.3g > bound %.3g)", name, i, j, got, s, d, bound)
								}
							}
						}
						for _, v := range c[m*n:] {
							if v != -777 {
								t.Fatalf("%s: wrote past C", name)
							}
						}
					}
				}
			}
		}
	}
}

// TestScaledGEMMDecodesExactly multiplies every code of both formats by
// a one-hot B, with every E8M0 block scale on A (and a tensorwise scale
// of 1), and checks C is exactly each decoded value times its scale:
// FP8 → bf16 is exact alone and with every block scale whose products
// stay normal floats.
func TestScaledGEMMDecodesExactly(t *testing.T) {
	g := NewScaledGEMM()
	const m, k, n = 8, 32, 32 // 256 codes in A's 8 rows of one block
	a := Operand{Codes: make([]uint8, m*k)}
	for i := range a.Codes {
		a.Codes[i] = uint8(i)
	}
	one := E4M3.Encode(1)
	bCodes := make([]uint8, k*n)
	for p := 0; p < k; p++ {
		bCodes[p*n+p] = one // B = I
	}
	c := make([]float32, m*n)
	for _, f := range []Format{E4M3, E5M2} {
		a.Format = f
		// Non-finite codes would spread over their row through the zeros
		// of B (NaN·0, inf·0); they are left out (code 0 in their place).
		for i := range a.Codes {
			a.Codes[i] = uint8(i)
			if v := float64(f.Decode(uint8(i))); math.IsNaN(v) || math.IsInf(v, 0) {
				a.Codes[i] = 0
			}
		}
		check := func(name string, scale float64) {
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					want := float64(f.Decode(a.Codes[i*k+j])) * scale
					got := float64(c[i*n+j])
					if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
						t.Fatalf("%v %s: code %#x gave %v, want %v", f, name, a.Codes[i*k+j], got, want)
					}
				}
			}
		}
		a.ScaleInv, a.Block = 1, nil
		if err := g.Run(m, n, k, a, Operand{Codes: bCodes, Format: E4M3, ScaleInv: 1}, c); err != nil {
			t.Fatal(err)
		}
		check("tensorwise", 1)
		minExp, maxExp := -9, 8
		if f == E5M2 {
			minExp, maxExp = -16, 15
		}
		bBlock := make([]E8M0, n)
		for i := range bBlock {
			bBlock[i] = E8M0FromExp(0)
		}
		for e := -126 - minExp; e+maxExp <= 127; e++ {
			a.Block = make([]E8M0, m)
			for i := range a.Block {
				a.Block[i] = E8M0FromExp(e)
			}
			if err := g.Run(m, n, k, a, Operand{Codes: bCodes, Format: E4M3, Block: bBlock}, c); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("block 2^%d", e), math.Ldexp(1, e))
		}
	}
}

// TestScaledGEMMWideBlockSpread checks MXFP8 operands whose block
// exponents are too far apart to fold into normal bf16 values (they run
// on the float32 path): still the exact products.
func TestScaledGEMMWideBlockSpread(t *testing.T) {
	g := NewScaledGEMM()
	const m, n, k = 2, 16, 64
	a := Operand{Codes: make([]uint8, m*k), Format: E4M3, Block: []E8M0{E8M0FromExp(100), E8M0FromExp(-100), E8M0FromExp(0), E8M0FromExp(0)}}
	b := Operand{Codes: make([]uint8, k*n), Format: E4M3, Block: make([]E8M0, n*2)}
	for i := range a.Codes {
		a.Codes[i] = E4M3.Encode(1)
	}
	for i := range b.Codes {
		b.Codes[i] = E4M3.Encode(1)
	}
	for i := range b.Block {
		b.Block[i] = E8M0FromExp(-20)
	}
	c := make([]float32, m*n)
	if err := g.Run(m, n, k, a, b, c); err != nil {
		t.Fatal(err)
	}
	want0 := float32(32*math.Ldexp(1, 80) + 32*math.Ldexp(1, -120))
	if c[0] != want0 || c[n] != 64*float32(math.Ldexp(1, -20)) {
		t.Fatalf("C = %v, %v; want %v, %v", c[0], c[n], want0, 64*math.Ldexp(1, -20))
	}
}

// TestQuantizeMXMatchesEncode checks every code QuantizeMX writes, along
// either axis, against Encode of the value times its block's inverse
// scale, and every scale against BlockScale of its block's amax, on
// shapes that are not multiples of 32 with NaN, infinities, zero blocks
// and tiny values.
func TestQuantizeMXMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, f := range []Format{E4M3, E5M2} {
		for _, axis := range []int{0, 1} {
			rows, cols := 45, 70
			src := make([]float32, rows*cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
			}
			src[3], src[100], src[777] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
			for i := 40 * cols; i < rows*cols; i++ {
				src[i] = 0 // zero blocks along axis 1
			}
			dst := make([]uint8, len(src))
			scales := make([]E8M0, MXScaleCount(rows, cols, axis))
			if _, err := QuantizeMX(dst, scales, src, rows, cols, axis, f, ExpRoundUp); err != nil {
				t.Fatal(err)
			}
			blocksPerLine := (cols + BlockSize - 1) / BlockSize
			if axis == 0 {
				blocksPerLine = (rows + BlockSize - 1) / BlockSize
			}
			amax := make([]float32, len(scales))
			nan := make([]bool, len(scales))
			block := func(r, c int) int {
				if axis == 1 {
					return r*blocksPerLine + c/BlockSize
				}
				return c*blocksPerLine + r/BlockSize
			}
			for r := 0; r < rows; r++ {
				for c := 0; c < cols; c++ {
					b, v := block(r, c), src[r*cols+c]
					if v != v {
						nan[b] = true
					} else {
						amax[b] = max(amax[b], float32(math.Abs(float64(v))))
					}
				}
			}
			for b := range scales {
				want := BlockScale(amax[b], f, ExpRoundUp)
				if nan[b] {
					want = BlockScale(float32(math.NaN()), f, ExpRoundUp)
				}
				if scales[b] != want {
					t.Fatalf("%v axis %d block %d: scale %v, want %v", f, axis, b, scales[b], want)
				}
			}
			for r := 0; r < rows; r++ {
				for c := 0; c < cols; c++ {
					s := scales[block(r, c)]
					inv := float32(math.Ldexp(1, -s.Exp()))
					if s == E8M0NaN {
						inv = float32(math.NaN())
					}
					if want := f.Encode(src[r*cols+c] * inv); dst[r*cols+c] != want {
						t.Fatalf("%v axis %d (%d,%d): code %#x, want %#x", f, axis, r, c, dst[r*cols+c], want)
					}
				}
			}
		}
	}
}

// TestSliceFunctionsRefuseShortDestinations holds every slice-taking
// entry point to one rule: a destination shorter than its source, or a
// format that is not E4M3 or E5M2, is an error, not a panic, and nothing
// is written.
func TestSliceFunctionsRefuseShortDestinations(t *testing.T) {
	src := []float32{1, 2, 3, 4}
	codes := []uint8{0x38, 0x40, 0x44, 0x48}
	short8, short32 := []uint8{0xAA, 0xAA}, []float32{-1, -1}
	if _, err := Quantize(short8, src, E4M3, 1); err == nil || short8[0] != 0xAA {
		t.Fatalf("Quantize into a short dst: %v, dst %v", err, short8)
	}
	if err := Dequantize(short32, codes, E4M3, 1); err == nil || short32[0] != -1 {
		t.Fatalf("Dequantize into a short dst: %v, dst %v", err, short32)
	}
	if _, err := Quantize(make([]uint8, 4), src, Format(7), 1); err == nil {
		t.Fatal("Quantize accepted Format(7)")
	}
	if err := Dequantize(make([]float32, 4), codes, Format(7), 1); err == nil {
		t.Fatal("Dequantize accepted Format(7)")
	}
	if _, err := QuantizeMX(short8, make([]E8M0, 1), src, 1, 4, 1, E4M3, ExpRoundUp); err == nil {
		t.Fatal("QuantizeMX into a short dst")
	}
	if err := QuantizeAxiswise(short8, make([]float32, 1), nil, src, 1, 4, 1, E4M3, false); err == nil {
		t.Fatal("QuantizeAxiswise into a short dst")
	}
	if err := NewScaledGEMM().Run(2, 2, 2, Operand{Codes: codes, Format: Format(9), ScaleInv: 1}, Operand{Codes: codes, Format: E4M3, ScaleInv: 1}, make([]float32, 4)); err == nil {
		t.Fatal("ScaledGEMM accepted Format(9)")
	}
	if err := NewScaledGEMM().Run(2, 2, 2, Operand{Codes: codes, Format: E4M3, ScaleInv: 1}, Operand{Codes: codes, Format: E4M3, ScaleInv: 1}, short32[:1]); err == nil {
		t.Fatal("ScaledGEMM into a short C")
	}
	if err := NewScaledGEMM().Run(2, 2, 2, Operand{Codes: codes, Format: E4M3, Block: []E8M0{127}}, Operand{Codes: codes, Format: E4M3, Block: []E8M0{127, 127}}, make([]float32, 4)); err == nil {
		t.Fatal("ScaledGEMM with too few block scales")
	}
	if err := NewScaledGEMM().Run(2, 2, 2, Operand{Codes: codes, Format: E4M3, AxisScaleInv: []float32{1}}, Operand{Codes: codes, Format: E4M3, AxisScaleInv: []float32{1, 1}}, make([]float32, 4)); err == nil {
		t.Fatal("ScaledGEMM with too few axiswise scales")
	}
}

// nvfp4Random returns a rows × cols NVFP4 tensor of normal values (1×16
// blocks, or 16×16 tiles).
func nvfp4Random(rng *rand.Rand, rows, cols int, tiles bool) *NVFP4 {
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	q, err := QuantizeNVFP4(v, rows, cols, Quantizer{Kind: NVFP4Blocks, BlockDim: nvfp4Dim(tiles)})
	if err != nil {
		panic(err)
	}
	return q
}

// BenchmarkScaledGEMMScalings compares one GEMM's scalings at the MLP's
// shapes (fprop 128×512×784, wgrad 512×784×128): tensorwise (delayed and
// current scaling), MXFP8, Float8BlockScaling (power-of-two scales) and
// NVFP4 (1×16 blocks times 16×16 weight tiles).
func BenchmarkScaledGEMMScalings(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sz := range [][3]int{{128, 512, 784}, {512, 784, 128}} {
		m, n, k := sz[0], sz[1], sz[2]
		codes := func(sz int) []uint8 {
			c := make([]uint8, sz)
			for i := range c {
				c[i] = uint8(rng.IntN(0x70)) | uint8(rng.IntN(2))<<7
			}
			return c
		}
		ca, cb := codes(m*k), codes(n*k)
		nb32, nb128 := (k+31)/32, (k+127)/128
		e8 := func(n int) []E8M0 {
			s := make([]E8M0, n)
			for i := range s {
				s[i] = E8M0FromExp(rng.IntN(8) - 4)
			}
			return s
		}
		p2 := func(n int) []float32 {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(math.Ldexp(1, rng.IntN(8)-4))
			}
			return s
		}
		for _, c := range []struct {
			name string
			a, b Operand
		}{
			{"tensorwise", Operand{Codes: ca, Format: E4M3, ScaleInv: 0.5}, Operand{Codes: cb, Format: E4M3, ScaleInv: 2, Trans: true}},
			{"mxfp8", Operand{Codes: ca, Format: E4M3, Block: e8(m * nb32)}, Operand{Codes: cb, Format: E4M3, Block: e8(n * nb32), Trans: true}},
			{"block", Operand{Codes: ca, Format: E4M3, BlockScaleInv: p2(m * nb128)}, Operand{Codes: cb, Format: E4M3, BlockScaleInv: p2(((n + 127) / 128) * nb128), BlockTiles: true, Trans: true}},
			{"nvfp4", Operand{FP4: nvfp4Random(rng, m, k, false)}, Operand{FP4: nvfp4Random(rng, n, k, true), Trans: true}},
		} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", m, n, k, c.name), func(b *testing.B) {
				g := NewScaledGEMM()
				out := make([]float32, m*n)
				for i := 0; i < b.N; i++ {
					if err := g.Run(m, n, k, c.a, c.b, out); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestFoldBlocksMatchesReference checks foldBlocks (the vector scale
// kernels, the zero-block search) against its definition on operands
// with NaN scales, all-zero blocks under the smallest scales, scales
// far apart, along either layout: the shift (largest exponent), the
// lower bound on the folded exponents, whether the fold is exact, and
// every folded value of an exact fold.
func TestFoldBlocksMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(95, 96))
	g := NewScaledGEMM()
	folded := 0
	defer func() {
		if folded < 50 {
			t.Errorf("only %d of 300 operands folded", folded)
		}
	}()
	for trial := 0; trial < 300; trial++ {
		outer, k := 1+rng.IntN(40), 1+rng.IntN(150)
		blocks := (k + BlockSize - 1) / BlockSize
		o := &Operand{Codes: make([]uint8, outer*k), Format: []Format{E4M3, E5M2}[rng.IntN(2)], Block: make([]E8M0, outer*blocks)}
		for i := range o.Codes {
			o.Codes[i] = uint8(rng.IntN(0x7E))
		}
		rowMajor := rng.IntN(2) == 0
		at := func(i, p int) int {
			if rowMajor {
				return i*k + p
			}
			return p*outer + i
		}
		base := rng.IntN(200) + 20
		for j := range o.Block {
			o.Block[j] = E8M0(base + rng.IntN(8))
			switch rng.IntN(8) {
			case 0:
				o.Block[j] = E8M0NaN
			case 1, 2: // an all-zero block, often under a tiny scale
				i, bi := j/blocks, j%blocks
				for p := bi * BlockSize; p < min(k, (bi+1)*BlockSize); p++ {
					o.Codes[at(i, p)] = 0x80 * uint8(rng.IntN(2))
				}
				if rng.IntN(2) == 0 {
					o.Block[j] = E8M0(rng.IntN(base))
				}
			case 3:
				if trial%3 == 0 {
					o.Block[j] = E8M0(rng.IntN(255))
				}
			}
		}
		// The definition.
		wShift, wMin, any := math.MinInt, math.MaxInt, false
		for j, s := range o.Block {
			if s == E8M0NaN {
				continue
			}
			wShift = max(wShift, s.Exp())
			any = true
			if s.Exp() < wMin && !zeroBlock(o.Codes, j/blocks, j%blocks, outer, k, rowMajor) {
				wMin = s.Exp()
			}
		}
		if !any {
			wShift = 0
		}
		_, sub := math.Frexp(float64(o.Format.MinSubnormal()))
		wMinExp, wOK := 0, true
		if wMin != math.MaxInt {
			wMinExp = wMin - wShift + sub - 1
			wOK = wMinExp >= -126
		}
		var dst kernels.Operand
		var buf []float32
		shift, minExp, ok := g.foldBlocks(&dst, &buf, o, outer, k, rowMajor)
		if shift != wShift || minExp != wMinExp || ok != wOK {
			t.Fatalf("trial %d: shift %d minExp %d ok %v, want %d %d %v", trial, shift, minExp, ok, wShift, wMinExp, wOK)
		}
		if !ok {
			continue // the values are not used
		}
		folded++
		for i := 0; i < outer; i++ {
			for p := 0; p < k; p++ {
				s := o.Block[i*blocks+p/BlockSize]
				want := float32(float64(o.Format.Decode(o.Codes[at(i, p)])) * math.Ldexp(1, s.Exp()-wShift))
				if s == E8M0NaN {
					want = float32(math.NaN())
				}
				got := dst.F32[at(i, p)]
				if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
					t.Fatalf("trial %d: value (%d, %d) code %#x scale %v: %g, want %g", trial, i, p, o.Codes[at(i, p)], s, got, want)
				}
			}
		}
	}
}

// TestMXFP8ShiftsMatchFold: MXFP8 GEMMs with the block scales as
// exponent shifts give C bit for bit equal to the folded operands', for
// every layout, ragged k, zero blocks under tiny scales, scales spread
// wide (some past the fold's reach, where both take the float32 path)
// and a NaN scale (folded).
func TestMXFP8ShiftsMatchFold(t *testing.T) {
	if !useBF16() {
		t.Skip("no bf16 kernel")
	}
	defer func() { mxShifts = true }()
	rng := rand.New(rand.NewPCG(97, 98))
	for trial := 0; trial < 40; trial++ {
		m, n, k := 1+rng.IntN(70), 1+rng.IntN(70), 1+rng.IntN(300)
		if trial < 4 {
			// Operands large enough for the fold to split over the
			// workers (1<<15 values).
			m, n, k = 150+rng.IntN(70), 150+rng.IntN(70), 250+rng.IntN(100)
		}
		nb := (k + BlockSize - 1) / BlockSize
		spread := []int{4, 30, 120}[trial%3]
		mk := func(outer int, f Format) Operand {
			o := Operand{Codes: make([]uint8, outer*k), Format: f, Block: make([]E8M0, outer*nb)}
			for i := range o.Codes {
				o.Codes[i] = uint8(rng.IntN(256))
				if v := f.Decode(o.Codes[i]); v != v || math.IsInf(float64(v), 0) {
					o.Codes[i] = 0x01
				}
			}
			for j := range o.Block {
				o.Block[j] = E8M0(100 + rng.IntN(spread))
			}
			// An all-zero block under a tiny scale.
			if j := rng.IntN(len(o.Block)); outer > 1 {
				o.Block[j] = 3
				for p := (j % nb) * BlockSize; p < min(k, (j%nb+1)*BlockSize); p++ {
					o.Codes[(j/nb)*k+p] = 0 // rows of k: A as stored when not transposed
				}
			}
			if trial%10 == 9 {
				o.Block[rng.IntN(len(o.Block))] = E8M0NaN
			}
			return o
		}
		a, b := mk(m, E4M3), mk(n, []Format{E4M3, E5M2}[trial%2])
		// The zero block above is a zero block of op(A) only when A is
		// stored [m][k]; transposed layouts keep it as plain codes.
		a.Trans, b.Trans = trial%4 >= 2, trial%2 == 0
		got, want := make([]float32, m*n), make([]float32, m*n)
		g := NewScaledGEMM()
		mxShifts = true
		if err := g.Run(m, n, k, a, b, got); err != nil {
			t.Fatal(err)
		}
		mxShifts = false
		if err := g.Run(m, n, k, a, b, want); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
				t.Fatalf("trial %d (%d×%d×%d, trans %v %v, spread %d): C[%d] = %v, folded %v", trial, m, n, k, a.Trans, b.Trans, spread, i, got[i], want[i])
			}
		}
	}
}

// TestMXFP8CombinedSpreadTakesFloat32: two MXFP8 operands whose block
// exponents each stay within the shifts' reach but whose smallest
// products would not (the sum of their lower bounds below −126) take
// the float32 path: the products of their small blocks, 2^−150 relative
// to the largest scales, are kept, where the bf16 kernel would flush them.
func TestMXFP8CombinedSpreadTakesFloat32(t *testing.T) {
	const m, n, k = 2, 16, 64
	one := E4M3.Encode(1)
	a := Operand{Codes: make([]uint8, m*k), Format: E4M3, Block: make([]E8M0, m*2)}
	b := Operand{Codes: make([]uint8, k*n), Format: E4M3, Block: make([]E8M0, n*2), Trans: true}
	for i := 0; i < m; i++ {
		a.Block[2*i], a.Block[2*i+1] = E8M0FromExp(60), E8M0FromExp(-15)
		for p := 0; p < k; p++ {
			a.Codes[i*k+p] = one
		}
	}
	for j := 0; j < n; j++ {
		// Block 0 under the large scale holds zeros; block 1 the ones.
		b.Block[2*j], b.Block[2*j+1] = E8M0FromExp(60), E8M0FromExp(-15)
		for p := 32; p < k; p++ {
			b.Codes[j*k+p] = one
		}
	}
	c := make([]float32, m*n)
	if err := NewScaledGEMM().Run(m, n, k, a, b, c); err != nil {
		t.Fatal(err)
	}
	want := float32(32 * math.Ldexp(1, -30))
	for i, v := range c {
		if v != want {
			t.Fatalf("C[%d] = %g, want %g", i, v, want)
		}
	}
}

// TestMXFP8NaNScale: an MXFP8 block whose scale is NaN makes its row
// (of A) or column (of B) of C NaN (its values are NaN), the rest exact,
// whatever the other scales (here 2^−27: a NaN scale taken as an
// exponent shift would give small finite values instead).
func TestMXFP8NaNScale(t *testing.T) {
	const m, n, k = 3, 16, 64
	one := E4M3.Encode(1)
	a := Operand{Codes: make([]uint8, m*k), Format: E4M3, Block: make([]E8M0, m*2)}
	b := Operand{Codes: make([]uint8, k*n), Format: E4M3, Block: make([]E8M0, n*2), Trans: true}
	for i := range a.Codes {
		a.Codes[i] = one
	}
	for i := range b.Codes {
		b.Codes[i] = one
	}
	for i := range a.Block {
		a.Block[i] = E8M0FromExp(-27)
	}
	for i := range b.Block {
		b.Block[i] = E8M0FromExp(-27)
	}
	a.Block[1] = E8M0NaN // row 0's second block
	b.Block[1] = E8M0NaN // column 0's
	c := make([]float32, m*n)
	if err := NewScaledGEMM().Run(m, n, k, a, b, c); err != nil {
		t.Fatal(err)
	}
	want := float32(64 * math.Ldexp(1, -54))
	for i, v := range c {
		if nan := i < n || i%n == 0; nan && v == v || !nan && v != want {
			t.Fatalf("C[%d] = %g (row 0 and column 0 NaN, the others %g)", i, v, want)
		}
	}
}

// TestMXFP8FoldAtTheBoundary: folded MXFP8 operands (a NaN scale sends
// them past the exponent shifts) whose smallest products are exactly
// 2^−126 relative to the scales still take the bf16 kernel, whose
// order of addition (each pair's odd product, then its even one) shows
// in C: 0 + 2^−18 + 2^−18 + 64 in k order is 64 + 2^−17, in the pairs'
// order (2^−18, 0, 64, 2^−18) 64.
func TestMXFP8FoldAtTheBoundary(t *testing.T) {
	if !useBF16() {
		t.Skip("no bf16 kernel")
	}
	const m, n, k = 3, 16, 64
	tiny, eight := E4M3.Encode(0x1p-9), E4M3.Encode(8)
	a := Operand{Codes: make([]uint8, m*k), Format: E4M3, Block: make([]E8M0, m*2)}
	b := Operand{Codes: make([]uint8, k*n), Format: E4M3, Block: make([]E8M0, n*2), Trans: true}
	// Rows of op(A) and columns of op(B) alike: k = 1, 2 tiny, k = 3
	// eight, one value in block 1 (scale 2^−54: each operand's bound
	// −63, their sum −126).
	fill := func(codes []uint8, blocks []E8M0) {
		codes[1], codes[2], codes[3], codes[40] = tiny, tiny, eight, eight
		blocks[0], blocks[1] = E8M0FromExp(0), E8M0FromExp(-54)
	}
	for i := 0; i < m; i++ {
		fill(a.Codes[i*k:(i+1)*k], a.Block[2*i:2*i+2])
	}
	for j := 0; j < n; j++ {
		fill(b.Codes[j*k:(j+1)*k], b.Block[2*j:2*j+2])
	}
	a.Block[0] = E8M0NaN // row 0
	c := make([]float32, m*n)
	if err := NewScaledGEMM().Run(m, n, k, a, b, c); err != nil {
		t.Fatal(err)
	}
	for i, v := range c {
		if i < n && v == v || i >= n && v != 64 {
			t.Fatalf("C[%d] = %v (row 0 NaN, the others 64)", i, v)
		}
	}
}
