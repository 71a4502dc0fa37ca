package fp8_test

import (
	"fmt"
	"math"

	"github.com/octetml/octet/fp8"
)

// Float8BlockScaling (DeepSeek-V3's recipe, TE's Float8BlockScaling): a
// scale per 1×128 block along each row, a power of two by default, and
// the codes dequantized with each block's scale_inv.
func ExampleQuantizeFloat8Block() {
	const rows, cols = 2, 130 // each row: a block of 128 and a ragged one of 2
	x := make([]float32, rows*cols)
	for j := range x {
		x[j] = float32(j%cols) / 16 // row values 0 … 8.0625
	}
	x[cols+129] = 1000 // the second row's ragged block
	c := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}
	sr, sc := fp8.Float8BlockScaleShape(rows, cols, c.Dim())
	codes, inv := make([]uint8, len(x)), make([]float32, sr*sc)
	if err := fp8.QuantizeFloat8Block(codes, inv, x, rows, cols, c); err != nil {
		fmt.Println(err)
		return
	}
	back := make([]float32, len(x))
	if err := fp8.DequantizeFloat8Block(back, codes, inv, rows, cols, c); err != nil {
		fmt.Println(err)
		return
	}
	// Amaxes 7.9375 and 8.0625: scales 448/amax rounded down to a power
	// of two (32), decoded with 1/32; 1000: 448/1000 rounds down to 0.25.
	fmt.Printf("scale_inv %v, shape [%d %d]\n", inv, sr, sc)
	fmt.Println(x[5], "→", back[5], "|", x[cols+129], "→", back[cols+129])
	// Output:
	// scale_inv [0.03125 0.03125 0.03125 4], shape [2 2]
	// 0.3125 → 0.3125 | 1000 → 1024
}

// A block-scaled GEMM multiplies each 128-long slice of k exactly and
// applies both operands' scale_inv to the slice's partial sum. Here A
// is cast in 1×128 blocks and B, a weight, in 128×128 tiles.
func ExampleFloat8BlockGEMM() {
	const m, n, k = 2, 3, 200
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(math.Sin(float64(i)))
	}
	for i := range b {
		b[i] = float32(math.Cos(float64(i))) / 8
	}
	ac := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}
	bc := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 2, Format: fp8.E4M3}
	qa, qb := make([]uint8, len(a)), make([]uint8, len(b))
	ar, acn := fp8.Float8BlockScaleShape(m, k, ac.Dim())
	br, bcn := fp8.Float8BlockScaleShape(n, k, bc.Dim())
	ia, ib := make([]float32, ar*acn), make([]float32, br*bcn)
	_ = fp8.QuantizeFloat8Block(qa, ia, a, m, k, ac)
	_ = fp8.QuantizeFloat8Block(qb, ib, b, n, k, bc)
	c := make([]float32, m*n)
	if err := fp8.Float8BlockGEMM(c, m, n, k, qa, ia, ac, qb, ib, bc); err != nil {
		fmt.Println(err)
		return
	}
	// The float64 product of the unquantized operands, for comparison.
	var worst float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i*k+p]) * float64(b[j*k+p])
			}
			worst = max(worst, math.Abs(float64(c[i*n+j])-s))
		}
	}
	fmt.Printf("scale_inv shapes A [%d %d], B [%d %d]; largest error %.2f\n", ar, acn, br, bcn, worst)
	fmt.Println(fp8.Float8BlockGEMM(c, m, n, k, qa, ia, bc, qb, ib, bc))
	// Output:
	// scale_inv shapes A [2 2], B [1 2]; largest error 0.05
	// fp8: block GEMM: both operands have 2-D (128×128) blocks; Transformer Engine multiplies a 2-D operand only with a 1-D one
}

// NVFP4: E2M1 values two to a byte, an E4M3 scale per 16 values and a
// float32 scale per tensor. Stochastic rounding (gradients) is
// reproducible from its key.
func ExampleQuantizeNVFP4() {
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j) / 4 // 0 … 7.75
	}
	q, err := fp8.QuantizeNVFP4(x, 1, 32, fp8.Quantizer{Kind: fp8.NVFP4Blocks})
	if err != nil {
		fmt.Println(err)
		return
	}
	back := make([]float32, 32)
	_ = q.Dequantize(back)
	// S_enc = 2688/amax; a block's scale is E4M3(its amax·S_enc/6): 3.75
	// gives 216.8, stored as 224, and 7.75 gives 448. 0.75·S_enc/224 =
	// 1.16 rounds to E2M1's 1, which decodes to 224·S_dec = 0.6458.
	fmt.Printf("amax %v, S_dec %.6g, block scales %v (E4M3 %v, %v)\n", q.Amax, q.SDec, q.BlockScales,
		fp8.E4M3.Decode(q.BlockScales[0]), fp8.E4M3.Decode(q.BlockScales[1]))
	fmt.Printf("%v → %.4g, %v → %.4g; codes of elements 0–3: %#x %#x\n", x[3], back[3], x[31], back[31], q.Codes[0], q.Codes[1])
	a, _ := fp8.QuantizeNVFP4(x, 1, 32, fp8.Quantizer{Kind: fp8.NVFP4Blocks, Stochastic: true, Seed: 7})
	b, _ := fp8.QuantizeNVFP4(x, 1, 32, fp8.Quantizer{Kind: fp8.NVFP4Blocks, Stochastic: true, Seed: 7})
	fmt.Println("same key, same codes:", string(a.Codes) == string(b.Codes))
	_, err = fp8.QuantizeNVFP4(x[:24], 1, 24, fp8.Quantizer{Kind: fp8.NVFP4Blocks, RHT: true})
	fmt.Println(err)
	// Output:
	// amax 7.75, S_dec 0.00288318, block scales [118 126] (E4M3 224, 448)
	// 0.75 → 0.6458, 7.75 → 7.75; codes of elements 0–3: 0x10 0x22
	// same key, same codes: true
	// fp8: quantize NVFP4: the random Hadamard transform needs rows of a multiple of 16 values, got 24
}

// An NVFP4 GEMM: A [m k] in 1×16 blocks, B a weight stored [n k] in
// 16×16 tiles (Trans: op(B) is its transpose). Every E2M1 value times its
// E4M3 block scale is exact in bf16, so the product equals the float64
// product of the dequantized operands up to float32 accumulation.
func ExampleScaledGEMM_nvfp4() {
	const m, n, k = 4, 16, 64
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(math.Sin(float64(i) / 3))
	}
	for i := range b {
		b[i] = float32(math.Cos(float64(i)/5)) / 4
	}
	qa, _ := fp8.QuantizeNVFP4(a, m, k, fp8.Quantizer{Kind: fp8.NVFP4Blocks})
	qb, _ := fp8.QuantizeNVFP4(b, n, k, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2})
	c := make([]float32, m*n)
	if err := fp8.NewScaledGEMM().Run(m, n, k, fp8.Operand{FP4: qa}, fp8.Operand{FP4: qb, Trans: true}, c); err != nil {
		fmt.Println(err)
		return
	}
	da, db := make([]float32, m*k), make([]float32, n*k)
	_ = qa.Dequantize(da)
	_ = qb.Dequantize(db)
	var worst float64
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(da[i*k+p]) * float64(db[j*k+p])
			}
			worst = max(worst, math.Abs(float64(c[i*n+j])-s)/max(math.Abs(s), 1e-3))
		}
	}
	fmt.Println("relative error below 1e-6:", worst < 1e-6)
	// Output:
	// relative error below 1e-6: true
}
