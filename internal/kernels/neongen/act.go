package main

import (
	"bytes"
	"fmt"
)

// actKernels writes the amax of |x| (current scaling's first pass),
// ReLU and the sigmoid family (Sigmoid, SiLU, SwiGLU and their
// gradients), each its Go twin's operations in its order.
func actKernels(b *bytes.Buffer) {
	e := emitter{b}

	// Amax: the lane-wise unsigned max of |x|'s bits (NaN above +inf)
	// over n values, n a multiple of 16, four accumulators.
	fmt.Fprintf(b, "\n// func neonAmax(src *float32, n int, out *[4]uint32)\n// n a multiple of 16.\n")
	fmt.Fprintf(b, "TEXT ·neonAmax(SB), NOSPLIT, $0-24\n")
	e.w("MOVD src+0(FP), R1")
	e.w("MOVD n+8(FP), R9")
	e.w("MOVD out+16(FP), R2")
	e.w("MOVW $0x7FFFFFFF, R14")
	e.w("VDUP R14, V31.S4")
	for i := 0; i < 4; i++ {
		e.w("VEOR V%d.B16, V%d.B16, V%d.B16", i, i, i)
	}
	e.w("LSR $4, R9, R9")
	e.w("CBZ R9, neonAmax_done")
	fmt.Fprintf(b, "neonAmax_loop:\n")
	e.w("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 0; i < 4; i++ {
		e.w("VAND V31.B16, V%d.B16, V%d.B16", 4+i, 4+i)
		e.word(umax(i, i, 4+i), "UMAX V%d.4S, V%d.4S, V%d.4S", i, i, 4+i)
	}
	e.w("SUBS $1, R9, R9")
	e.w("BNE neonAmax_loop")
	fmt.Fprintf(b, "neonAmax_done:\n")
	e.word(umax(0, 0, 1), "UMAX V0.4S, V0.4S, V1.4S")
	e.word(umax(2, 2, 3), "UMAX V2.4S, V2.4S, V3.4S")
	e.word(umax(0, 0, 2), "UMAX V0.4S, V0.4S, V2.4S")
	e.w("VST1 [V0.S4], (R2)")
	e.w("RET")

	// AmaxColsBand: the column amaxes of a band of rows, strips of 16
	// columns, each strip's maxima held in V0–V3 down the rows (ld bytes
	// apart), NaN lanes left out (zeroed by BIT from V29 where |x|'s bits
	// exceed +inf's), and the lane-wise max of the raw |x| bits (V28).
	fmt.Fprintf(b, "\n// func neonAmaxColsBand(acc *uint32, src *float32, strips int, rows int, ld int, seen *[4]uint32)\n")
	fmt.Fprintf(b, "TEXT ·neonAmaxColsBand(SB), NOSPLIT, $0-48\n")
	e.w("MOVD acc+0(FP), R0")
	e.w("MOVD src+8(FP), R1")
	e.w("MOVD strips+16(FP), R9")
	e.w("MOVD rows+24(FP), R10")
	e.w("MOVD ld+32(FP), R11")
	e.w("MOVD seen+40(FP), R3")
	e.w("MOVW $0x7FFFFFFF, R14")
	e.w("VDUP R14, V31.S4")
	e.w("MOVW $0x7F800000, R14")
	e.w("VDUP R14, V30.S4")
	e.w("VEOR V29.B16, V29.B16, V29.B16")
	e.w("VEOR V28.B16, V28.B16, V28.B16")
	e.w("CBZ R9, neonAmaxColsBand_done")
	fmt.Fprintf(b, "neonAmaxColsBand_strip:\n")
	for i := 0; i < 4; i++ {
		e.w("VEOR V%d.B16, V%d.B16, V%d.B16", i, i, i)
	}
	e.w("MOVD R1, R4")
	e.w("MOVD R10, R12")
	e.w("CBZ R12, neonAmaxColsBand_store")
	fmt.Fprintf(b, "neonAmaxColsBand_row:\n")
	e.w("VLD1 (R4), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 0; i < 4; i++ {
		x, t := 4+i, 8+i
		e.w("VAND V31.B16, V%d.B16, V%d.B16", x, x)
		e.word(umax(28, 28, x), "UMAX V28.4S, V28.4S, V%d.4S", x)
		e.word(cmhi(t, x, 30), "CMHI V%d.4S, V%d.4S, V30.4S", t, x) // a NaN
		e.bit(x, 29, t)
		e.word(umax(i, i, x), "UMAX V%d.4S, V%d.4S, V%d.4S", i, i, x)
	}
	e.w("ADD R11, R4, R4")
	e.w("SUBS $1, R12, R12")
	e.w("BNE neonAmaxColsBand_row")
	fmt.Fprintf(b, "neonAmaxColsBand_store:\n")
	e.w("VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)")
	e.w("ADD $64, R1, R1")
	e.w("SUBS $1, R9, R9")
	e.w("BNE neonAmaxColsBand_strip")
	fmt.Fprintf(b, "neonAmaxColsBand_done:\n")
	e.w("VST1 [V28.S4], (R3)")
	e.w("RET")

	// ReLU: max(x, 0) as Go's max compiles on arm64: FMAX, which gives
	// +0 for −0, the greater value, and a NaN quieted (its sign and
	// payload kept).
	e.loop4("neonReLU", "(y, x *float32, n int)", 24, func() {
		e.w("MOVD y+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD n+16(FP), R9")
		e.w("VEOR V30.B16, V30.B16, V30.B16")
	}, []string{"VLD1.P 16(R1), [V0.S4]"}, func() {
		e.fmax(1, 0, 30)
	}, []string{"VST1.P [V1.S4], 16(R0)"})

	// The sigmoid family: σ(v) = 1/(1 + fastExp(−v)), in V30 = 0.
	sigma := func(v, s int) {
		e.fsub(s, 30, v)
		e.fastExp(s, 8, 9, 10)
		e.fadd(s, s, vOne)
		e.fdiv(s, vOne, s)
	}
	prologue := func(names ...string) func() {
		return func() {
			for i, n := range names {
				e.w("MOVD %s+%d(FP), R%d", n, 8*i, i)
			}
			e.w("MOVD n+%d(FP), R9", 8*len(names))
			e.loadConsts()
			e.w("VEOR V30.B16, V30.B16, V30.B16")
		}
	}
	// Sigmoid: y = σ(x).
	e.loop4("neonSigmoid", "(y, x *float32, n int)", 24, prologue("y", "x"),
		[]string{"VLD1.P 16(R1), [V0.S4]"}, func() { sigma(0, 1) }, []string{"VST1.P [V1.S4], 16(R0)"})
	// SigmoidGrad: dx = dy·(y·(1 − y)).
	e.loop4("neonSigmoidGrad", "(dx, y, dy *float32, n int)", 32, prologue("dx", "y", "dy"),
		[]string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V1.S4]"}, func() {
			e.fsub(2, vOne, 0)
			e.fmul(2, 0, 2)
			e.fmul(2, 2, 1)
		}, []string{"VST1.P [V2.S4], 16(R0)"})
	// SiLU: y = x·σ(x).
	e.loop4("neonSiLU", "(y, x *float32, n int)", 24, prologue("y", "x"),
		[]string{"VLD1.P 16(R1), [V0.S4]"}, func() {
			sigma(0, 1)
			e.fmul(1, 1, 0)
		}, []string{"VST1.P [V1.S4], 16(R0)"})
	// slope leaves dy·(σ·(1 + v·(1 − σ))) in t, from v, σ in s and dy in w.
	slope := func(v, s, w, t int) {
		e.fsub(t, vOne, s)
		e.fmul(t, t, v)
		e.fadd(t, t, vOne)
		e.fmul(t, t, s)
		e.fmul(t, t, w)
	}
	// SiLUGrad: dx = dy·(σ·(1 + x·(1 − σ))).
	e.loop4("neonSiLUGrad", "(dx, x, dy *float32, n int)", 32, prologue("dx", "x", "dy"),
		[]string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V7.S4]"}, func() {
			sigma(0, 1)
			slope(0, 1, 7, 2)
		}, []string{"VST1.P [V2.S4], 16(R0)"})
	// SwiGLU: y = (a·σ(a))·b.
	e.loop4("neonSwiGLU", "(y, a, b *float32, n int)", 32, prologue("y", "a", "b"),
		[]string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V3.S4]"}, func() {
			sigma(0, 1)
			e.fmul(1, 1, 0)
			e.fmul(1, 1, 3)
		}, []string{"VST1.P [V1.S4], 16(R0)"})
	// SwiGLUGrad: db = dy·(a·σ(a)); da = (dy·b)·(σ·(1 + a·(1 − σ))).
	e.loop4("neonSwiGLUGrad", "(da, db, a, b, dy *float32, n int)", 48, prologue("da", "db", "a", "b", "dy"),
		[]string{"VLD1.P 16(R2), [V0.S4]", "VLD1.P 16(R3), [V3.S4]", "VLD1.P 16(R4), [V7.S4]"}, func() {
			sigma(0, 1)
			e.fmul(2, 0, 1)
			e.fmul(2, 2, 7)
			e.w("VST1.P [V2.S4], 16(R1)")
			e.fmul(7, 7, 3)
			slope(0, 1, 7, 2)
		}, []string{"VST1.P [V2.S4], 16(R0)"})
}

// decodeKernels writes the FP8 → float32 decode of each format (decode
// in asmgen, on 4 lanes): the magnitude bits moved into float32
// position and multiplied by 2^rebias (exact, denormal significands
// included), E5M2's infinity signed, NaN codes the tables' positive
// quiet NaN, the result times scale — decodeFP8Go's bits.
func decodeKernels(b *bytes.Buffer) {
	e := emitter{b}
	for _, f := range []struct {
		name          string
		shift, rebias int
		e5m2          bool
	}{{"neonDecodeE4M3", 20, 120, false}, {"neonDecodeE5M2", 21, 112, true}} {
		fmt.Fprintf(b, "\n// func %s(dst *float32, src *uint8, n int, scale float32)\n// n a multiple of 8.\n", f.name)
		fmt.Fprintf(b, "TEXT ·%s(SB), NOSPLIT, $0-28\n", f.name)
		e.w("MOVD dst+0(FP), R0")
		e.w("MOVD src+8(FP), R1")
		e.w("MOVD n+16(FP), R9")
		e.w("FMOVS scale+24(FP), F26")
		e.w("VDUP V26.S[0], V26.S4")
		for _, c := range []struct {
			v   int
			val uint32
		}{{20, uint32(127+f.rebias) << 23}, {21, 0x7F}, {22, 0x80}, {24, 0x7FC00000}, {25, 0x7F800000}} {
			e.w("MOVW $0x%08X, R14", c.val)
			e.w("VDUP R14, V%d.S4", c.v)
		}
		special := uint32(0x7F)
		if f.e5m2 {
			special = 0x7C
		}
		e.w("MOVW $0x%08X, R14", special)
		e.w("VDUP R14, V23.S4")
		e.w("LSR $3, R9, R9")
		e.w("CBZ R9, %s_done", f.name)
		fmt.Fprintf(b, "%s_loop:\n", f.name)
		e.w("VLD1.P 8(R1), [V0.B8]")
		e.w("VUXTL V0.B8, V1.H8")
		e.w("VUXTL V1.H4, V2.S4")
		e.w("VUXTL2 V1.H8, V3.S4")
		for i, c := range []int{2, 3} {
			out, m, t, nan := 5+i, 7+3*i, 8+3*i, 9+3*i
			e.w("VAND V21.B16, V%d.B16, V%d.B16", c, m)
			e.w("VSHL $%d, V%d.S4, V%d.S4", f.shift, m, out)
			e.fmul(out, out, 20)
			if f.e5m2 {
				e.w("VCMEQ V23.S4, V%d.S4, V%d.S4", m, t) // == 0x7C: infinity
				e.bit(out, 25, t)
				e.word(cmhi(nan, m, 23), "CMHI V%d.4S, V%d.4S, V23.4S", nan, m) // > 0x7C: NaN
			} else {
				e.w("VCMEQ V23.S4, V%d.S4, V%d.S4", m, nan) // == 0x7F: NaN
			}
			e.w("VAND V22.B16, V%d.B16, V%d.B16", c, t)
			e.w("VSHL $24, V%d.S4, V%d.S4", t, t)
			e.w("VORR V%d.B16, V%d.B16, V%d.B16", t, out, out)
			e.bit(out, 24, nan)
			e.fmul(out, out, 26)
		}
		e.w("VST1.P [V5.S4, V6.S4], 32(R0)")
		e.w("SUBS $1, R9, R9")
		e.w("BNE %s_loop", f.name)
		fmt.Fprintf(b, "%s_done:\n", f.name)
		e.w("RET")
	}
}
