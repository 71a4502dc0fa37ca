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

// A column-wise Float8BlockScaling cast (blocks of 128 values down each
// column) split by bands of 128 rows: each part can run on its own
// worker, reading only its rows, and together they write what the
// whole cast writes.
func ExampleQuantizeFloat8BlockBands() {
	const rows, cols = 256, 2
	x := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		x[r*cols] = float32(r + 1) // column 0: 1 … 256
		x[r*cols+1] = 0.5          // column 1: 0.5
	}
	c := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}
	n := fp8.Float8BlockScaleCount(rows, cols, 0, 1) // [cols][bands]
	codes, inv := make([]uint8, len(x)), make([]float32, n)
	for band := 0; band < 2; band++ {
		if _, err := fp8.QuantizeFloat8BlockBands(codes, inv, x, rows, cols, c, band, band+1, nil); err != nil {
			fmt.Println(err)
		}
	}
	whole, wholeInv := make([]uint8, len(x)), make([]float32, n)
	amax, _ := fp8.QuantizeFloat8BlockAxis(whole, wholeInv, x, rows, cols, 0, c, nil)
	// Column 0's bands have amaxes 128 and 256: scales 448/128 and
	// 448/256 rounded down to powers of two, 2 and 1; column 1's 0.5:
	// 896, rounded down to 512.
	fmt.Println("scale_inv [column][band]:", inv)
	fmt.Println("as the whole cast:", string(codes) == string(whole), amax)
	// Output:
	// scale_inv [column][band]: [0.5 1 0.001953125 0.001953125]
	// as the whole cast: true 256
}

// An MXFP8 cast along the columns (blocks of 32 values down each
// column) in two ranges of bands of 32 rows — each range can run on its
// own worker — writes what QuantizeMX writes.
func ExampleQuantizeMXRange() {
	const rows, cols = 64, 2
	x := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		x[r*cols] = float32(r + 1) // column 0: 1 … 64
		x[r*cols+1] = 0.25         // column 1: 0.25
	}
	slices := fp8.MXSlices(rows, cols, 0) // 2 bands of 32 rows
	n := fp8.MXScaleCount(rows, cols, 0)  // [cols][bands]
	codes, scales := make([]uint8, len(x)), make([]fp8.E8M0, n)
	for s := 0; s < slices; s++ {
		if _, err := fp8.QuantizeMXRange(codes, scales, x, rows, cols, 0, fp8.E4M3, fp8.ExpRoundUp, s, s+1); err != nil {
			fmt.Println(err)
		}
	}
	whole, wholeScales := make([]uint8, len(x)), make([]fp8.E8M0, n)
	amax, _ := fp8.QuantizeMX(whole, wholeScales, x, rows, cols, 0, fp8.E4M3, fp8.ExpRoundUp)
	// Column 0's bands have amaxes 32 and 64: ⌈log2(32/448)⌉ = −3 and
	// −2; column 1's 0.25: −10.
	fmt.Println("scales [column][band]:", scales)
	fmt.Println("as the whole cast:", string(codes) == string(whole), fmt.Sprint(scales) == fmt.Sprint(wholeScales), amax)
	// Output:
	// scales [column][band]: [2^-3 2^-2 2^-10 2^-10]
	// as the whole cast: true true 64
}

// torchao's rowwise cast of a weight's columns (one scale per column),
// in two ranges of columns — each range can run on its own worker —
// writes what QuantizeAxiswise writes.
func ExampleQuantizeAxiswiseRange() {
	const rows, cols = 2, 4
	x := []float32{
		1, -2, 0.5, 100,
		-3, 4, 0.25, -50,
	}
	codes, scales := make([]uint8, len(x)), make([]float32, cols)
	for _, r := range [][2]int{{2, 4}, {0, 2}} {
		if err := fp8.QuantizeAxiswiseRange(codes, scales, nil, x, rows, cols, 0, fp8.E4M3, true, r[0], r[1]); err != nil {
			fmt.Println(err)
		}
	}
	whole, wholeScales := make([]uint8, len(x)), make([]float32, cols)
	if err := fp8.QuantizeAxiswise(whole, wholeScales, nil, x, rows, cols, 0, fp8.E4M3, true); err != nil {
		fmt.Println(err)
	}
	// Power-of-two scales: 448/3 → 2^7, 448/4 → 2^6, 448/0.5 → 2^9, 448/100 → 2^2.
	fmt.Println("scales:", scales)
	fmt.Println("as the whole cast:", string(codes) == string(whole), fmt.Sprint(scales) == fmt.Sprint(wholeScales))
	// Output:
	// scales: [128 64 512 4]
	// as the whole cast: true true
}
