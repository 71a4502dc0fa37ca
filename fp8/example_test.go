package fp8_test

import (
	"fmt"

	"github.com/octetml/octet/fp8"
)

func ExampleFormat_Encode() {
	for _, x := range []float32{1, 0.3, 464, 465, -1e9} {
		b := fp8.E4M3.Encode(x)
		fmt.Printf("%g -> %#02x -> %g\n", x, b, fp8.E4M3.Decode(b))
	}
	fmt.Printf("no saturation: %#02x %#02x\n", fp8.E4M3.EncodeNoSat(465), fp8.E5M2.EncodeNoSat(61440))
	// Output:
	// 1 -> 0x38 -> 1
	// 0.3 -> 0x2a -> 0.3125
	// 464 -> 0x7e -> 448
	// 465 -> 0x7e -> 448
	// -1e+09 -> 0xfe -> -448
	// no saturation: 0x7f 0x7c
}

// Delayed scaling: each step quantizes with the scale computed from the
// amaxes of earlier steps.
func ExampleMeta() {
	// E4M3, a 1024-step window, margin 2, the most recent amax, updated
	// every step (recipe.TE{Margin: 2}'s input).
	input := fp8.NewMeta(fp8.E4M3, 1024, 2, fp8.MostRecent, 1)
	q := make([]uint8, 4)
	for step := 0; step < 3; step++ {
		x := []float32{float32(step) + 0.25, 0, 0, 0}
		amax, err := fp8.Quantize(q, x, input.Format, input.Scale)
		if err != nil {
			fmt.Println(err)
			return
		}
		input.Record(amax)
		input.Update()
		fmt.Printf("step %d: scale %.4g\n", step, input.Scale)
	}
	// Output:
	// step 0: scale 448
	// step 1: scale 89.6
	// step 2: scale 49.78
}

func ExampleScaledGEMM() {
	a := []float32{1, 2, 3, 4} // 2×2
	b := []float32{0.5, 0, 0, 0.25}
	qa, qb := make([]uint8, 4), make([]uint8, 4)
	sa := fp8.CurrentScale(fp8.Amax(a), fp8.E4M3, true) // torchao-style, power of two
	sb := fp8.CurrentScale(fp8.Amax(b), fp8.E4M3, true)
	fp8.Quantize(qa, a, fp8.E4M3, sa)
	fp8.Quantize(qb, b, fp8.E4M3, sb)
	c := make([]float32, 4)
	err := fp8.NewScaledGEMM().Run(2, 2, 2,
		fp8.Operand{Codes: qa, Format: fp8.E4M3, ScaleInv: 1 / sa},
		fp8.Operand{Codes: qb, Format: fp8.E4M3, ScaleInv: 1 / sb}, c)
	fmt.Println(c, err)
	// Output:
	// [0.5 0.5 1.5 1] <nil>
}

// A Cast is an operand's cast, built once for its quantizer, shape and
// contraction axis: here a column-wise Float8BlockScaling cast (blocks
// of 128 values down each column, the wgrad operand), which writes what
// QuantizeFloat8BlockAxis writes and hands the GEMM its operand.
func ExampleCast() {
	const rows, cols = 256, 2
	x := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		x[r*cols] = float32(r + 1) // column 0: 1 … 256
		x[r*cols+1] = 0.5          // column 1: 0.5
	}
	q := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}
	c, err := fp8.NewCast(q, rows, cols, 0, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	codes := make([]uint8, len(x))
	if err := c.Quantize(codes, x, 0, false); err != nil {
		fmt.Println(err)
	}
	whole, wholeInv := make([]uint8, len(x)), make([]float32, fp8.Float8BlockScaleCount(rows, cols, 0, 1))
	amax, _ := fp8.QuantizeFloat8BlockAxis(whole, wholeInv, x, rows, cols, 0, q, nil)
	// Column 0's bands have amaxes 128 and 256: scales 448/128 and
	// 448/256 rounded down to powers of two, 2 and 1; column 1's 0.5:
	// 896, rounded down to 512.
	fmt.Println("scale_inv [column][band]:", c.BlockScaleInv)
	fmt.Println("as the whole cast:", string(codes) == string(whole), c.Amax == amax, c.Amax)
	op := c.Operand(codes, false, true)
	fmt.Println("operand:", len(op.Codes), op.BlockScaleInv)
	// Output:
	// scale_inv [column][band]: [0.5 1 0.001953125 0.001953125]
	// as the whole cast: true true 256
	// operand: 512 [0.5 1 0.001953125 0.001953125]
}

// A Cast casts fewer rows than it was built for as a Cast built for
// those rows does: one expert's tokens in a grouped GEMM. Here an MXFP8
// cast along the columns (blocks of 32 values down each column, the
// expert's wgrad operand) of 40 of up to 64 rows.
func ExampleCast_QuantizeRows() {
	const maxRows, rows, cols = 64, 40, 2
	x := make([]float32, maxRows*cols)
	for r := 0; r < maxRows; r++ {
		x[r*cols] = float32(r + 1) // column 0: 1 … 64
		x[r*cols+1] = 0.25         // column 1: 0.25
	}
	q := fp8.Quantizer{Kind: fp8.MXFP8Blocks, Format: fp8.E4M3}
	grouped, _ := fp8.NewCast(q, maxRows, cols, 0, nil)
	exact, _ := fp8.NewCast(q, rows, cols, 0, nil)
	a, b := make([]uint8, maxRows*cols), make([]uint8, rows*cols)
	if err := grouped.QuantizeRows(a, x, rows, 0, false); err != nil {
		fmt.Println(err)
	}
	if err := exact.Quantize(b, x[:rows*cols], 0, false); err != nil {
		fmt.Println(err)
	}
	n := fp8.MXScaleCount(rows, cols, 0) // [cols][⌈rows/32⌉]
	// Column 0's blocks have amaxes 32 and 40 (rows 33…40 only):
	// ⌈log2(32/448)⌉ = −3 and ⌈log2(40/448)⌉ = −3; column 1's 0.25: −10.
	fmt.Println("scales [column][block]:", grouped.Block[:n])
	fmt.Println("as a cast of those rows:", string(a[:rows*cols]) == string(b), fmt.Sprint(grouped.Block[:n]) == fmt.Sprint(exact.Block), grouped.Amax)
	// Output:
	// scales [column][block]: [2^-3 2^-3 2^-10 2^-10]
	// as a cast of those rows: true true 40
}
