package main

import (
	"bytes"
	"fmt"
	"math"
)

// fp8Format holds a format's cast constants, as kernels.NewFP8Cast
// derives them (and asmgen's quantize kernels take them).
type fp8Format struct {
	name             string
	mbits, bias      int
	maxCode, nanCode uint32
}

var fp8Formats = []fp8Format{{"E4M3", 3, 7, 0x7E, 0x7F}, {"E5M2", 2, 15, 0x7B, 0x7E}}

// quantizeKernel writes the tensorwise cast of one format,
// quantizeFP8Go's operations on four lanes:
//
//	func neonQuantize<F>(dst *uint8, src *float32, n int, scale float32, amax *[4]uint32)
//
// n a multiple of 16; amax receives the lanes' largest |x| bit patterns
// (a NaN's above +inf's), UMAX of the absolute bits. With lanes, each
// value has its own scale, read from scales beside it
// (quantizeFP8LanesGo's operations):
//
//	func neonQuantizeLanes<F>(dst *uint8, src *float32, scales *float32, n int, amax *[4]uint32)
func quantizeKernel(b *bytes.Buffer, f fp8Format, lanes bool) {
	e := emitter{b}
	emin := 1 - f.bias
	minNorm := math.Float32bits(float32(math.Ldexp(1, emin)))
	magic := math.Float32bits(float32(math.Ldexp(1, emin-f.mbits+23)))
	shift := 23 - f.mbits
	off := uint32(127-f.bias) << f.mbits
	half := uint32(1)<<(shift-1) - 1
	name := "neonQuantize" + f.name
	// The scale of input vector i: one for all, or four loaded a step.
	scaleReg := func(int) int { return 26 }
	if lanes {
		name = "neonQuantizeLanes" + f.name
		fmt.Fprintf(b, "\n// func %s(dst *uint8, src *float32, scales *float32, n int, amax *[4]uint32)\n", name)
		fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
		e.w("MOVD dst+0(FP), R0")
		e.w("MOVD src+8(FP), R1")
		e.w("MOVD scales+16(FP), R2")
		e.w("MOVD n+24(FP), R9")
		scaleReg = func(i int) int { return []int{29, 30, 31, 15}[i] } // free in the loop
	} else {
		fmt.Fprintf(b, "\n// func %s(dst *uint8, src *float32, n int, scale float32, amax *[4]uint32)\n", name)
		fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
		e.w("MOVD dst+0(FP), R0")
		e.w("MOVD src+8(FP), R1")
		e.w("MOVD n+16(FP), R9")
		e.bcast(26, "scale+24(FP)")
	}
	e.w("MOVD amax+32(FP), R3")
	for _, c := range []struct {
		v int
		x uint32
	}{{16, minNorm}, {17, magic}, {19, off}, {20, half}, {21, f.maxCode}, {22, f.nanCode}, {23, 0x7FFFFFFF}, {24, 0x7F800000}, {25, 1}, {27, 0x80}} {
		e.w("MOVW $0x%08X, R14", c.x)
		e.w("VDUP R14, V%d.S4", c.v)
	}
	e.w("VEOR V28.B16, V28.B16, V28.B16")
	e.w("LSR $4, R9, R9")
	e.w("CBZ R9, %s_done", name)
	fmt.Fprintf(b, "%s_loop:\n", name)
	e.w("VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]")
	if lanes {
		for i := 0; i < 4; i++ {
			e.w("VLD1.P 16(R2), [V%d.S4]", scaleReg(i))
		}
	}
	for i := 0; i < 4; i++ {
		v, y, s, t, m := i, 4, 5, 8+i, 6
		e.w("VAND V23.B16, V%d.B16, V%d.B16", v, m)
		e.word(umax(28, 28, m), "UMAX V28.4S, V28.4S, V%d.4S", m)
		e.fmul(y, v, scaleReg(i))                               // y = x·scale
		e.w("VAND V23.B16, V%d.B16, V%d.B16", y, m)             // ya
		e.fadd(s, m, 17)                                        // ya + magic (float)
		e.w("VSUB V17.S4, V%d.S4, V%d.S4", s, s)                // − magic bits: the subnormal code
		e.w("VUSHR $%d, V%d.S4, V%d.S4", shift, m, t)           // ya >> shift
		e.w("VAND V25.B16, V%d.B16, V%d.B16", t, t)             // & 1
		e.w("VADD V%d.S4, V%d.S4, V%d.S4", m, t, t)             // + ya
		e.w("VADD V20.S4, V%d.S4, V%d.S4", t, t)                // + half
		e.w("VUSHR $%d, V%d.S4, V%d.S4", shift, t, t)           // >> shift
		e.w("VSUB V19.S4, V%d.S4, V%d.S4", t, t)                // − offset: the normal code
		e.word(cmhi(7, 16, m), "CMHI V7.4S, V16.4S, V%d.4S", m) // ya < minNorm
		e.bit(t, s, 7)
		e.word(umin(t, t, 21), "UMIN V%d.4S, V%d.4S, V21.4S", t, t)
		e.word(cmhi(7, m, 24), "CMHI V7.4S, V%d.4S, V24.4S", m) // NaN
		e.bit(t, 22, 7)
		e.w("VUSHR $24, V%d.S4, V%d.S4", y, y)
		e.w("VAND V27.B16, V%d.B16, V%d.B16", y, y)
		e.w("VORR V%d.B16, V%d.B16, V%d.B16", y, t, t) // the sign
	}
	e.word(xtn4h(12, 8), "XTN V12.4H, V8.4S")
	e.word(xtn28h(12, 9), "XTN2 V12.8H, V9.4S")
	e.word(xtn4h(13, 10), "XTN V13.4H, V10.4S")
	e.word(xtn28h(13, 11), "XTN2 V13.8H, V11.4S")
	e.word(xtn8b(14, 12), "XTN V14.8B, V12.8H")
	e.word(xtn216b(14, 13), "XTN2 V14.16B, V13.8H")
	e.w("VST1.P [V14.B16], 16(R0)")
	e.w("SUBS $1, R9, R9")
	e.w("BNE %s_loop", name)
	fmt.Fprintf(b, "%s_done:\n", name)
	e.w("VST1 [V28.S4], (R3)")
	e.w("RET")
}
