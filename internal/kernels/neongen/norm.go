package main

import (
	"bytes"
	"fmt"
)

// The LayerNorm and RMSNorm rows (layernorm.go's twins): sums in 16
// lanes — lane i taking elements i, i+16, … — kept in four vectors,
// every product rounded before it is added.

// normKernel writes a kernel whose loop takes step elements (16 for the
// lane sums, 4 for the element-wise ones) from the argument registers
// set by prologue; R9 holds n.
func (e emitter) normKernel(name, sig string, args, step int, prologue, body, epilogue func()) {
	fmt.Fprintf(e.b, "\n// func %s%s\n// n a multiple of %d.\n", name, sig, step)
	fmt.Fprintf(e.b, "TEXT ·%s(SB), NOSPLIT, $0-%d\n", name, args)
	prologue()
	shift := map[int]int{4: 2, 16: 4}[step]
	e.w("LSR $%d, R9, R9", shift)
	e.w("CBZ R9, %s_done", name)
	fmt.Fprintf(e.b, "%s_loop:\n", name)
	body()
	e.w("SUBS $1, R9, R9")
	e.w("BNE %s_loop", name)
	fmt.Fprintf(e.b, "%s_done:\n", name)
	epilogue()
	e.w("RET")
}

func (e emitter) bcast(v int, arg string) {
	e.w("FMOVS %s, F%d", arg, v)
	e.w("VDUP V%d.S[0], V%d.S4", v, v)
}

func normKernels(b *bytes.Buffer) {
	e := emitter{b}
	none := func() {}
	loadLanes := func(reg string, first int) {
		e.w("VLD1 (%s), [V%d.S4, V%d.S4, V%d.S4, V%d.S4]", reg, first, first+1, first+2, first+3)
	}
	storeLanes := func(reg string, first int) {
		e.w("VST1 [V%d.S4, V%d.S4, V%d.S4, V%d.S4], (%s)", first, first+1, first+2, first+3, reg)
	}

	// lnSumGo: lanes += x.
	e.normKernel("neonLnSum", "(x *float32, n int, lanes *[16]float32)", 24, 16, func() {
		e.w("MOVD x+0(FP), R1")
		e.w("MOVD n+8(FP), R9")
		e.w("MOVD lanes+16(FP), R3")
		loadLanes("R3", 0)
	}, func() {
		e.w("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
		for i := 0; i < 4; i++ {
			e.fadd(i, i, 4+i)
		}
	}, func() { storeLanes("R3", 0) })

	// lnSqDevGo: lanes += (x − mu)².
	e.normKernel("neonLnSqDev", "(x *float32, n int, mu float32, lanes *[16]float32)", 32, 16, func() {
		e.w("MOVD x+0(FP), R1")
		e.w("MOVD n+8(FP), R9")
		e.bcast(28, "mu+16(FP)")
		e.w("MOVD lanes+24(FP), R3")
		loadLanes("R3", 0)
	}, func() {
		e.w("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
		for i := 0; i < 4; i++ {
			e.fsub(4+i, 4+i, 28)
			e.fmul(4+i, 4+i, 4+i)
			e.fadd(i, i, 4+i)
		}
	}, func() { storeLanes("R3", 0) })

	// lnApplyGo: y = (((x − mu)·r)·(γ + g0)) + β.
	e.normKernel("neonLnApply", "(y, x, gamma, beta *float32, n int, mu, r, g0 float32)", 52, 4, func() {
		e.w("MOVD y+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD gamma+16(FP), R2")
		e.w("MOVD beta+24(FP), R3")
		e.w("MOVD n+32(FP), R9")
		e.bcast(28, "mu+40(FP)")
		e.bcast(29, "r+44(FP)")
		e.bcast(30, "g0+48(FP)")
	}, func() {
		e.w("VLD1.P 16(R1), [V0.S4]")
		e.w("VLD1.P 16(R2), [V1.S4]")
		e.w("VLD1.P 16(R3), [V2.S4]")
		e.fsub(0, 0, 28)
		e.fmul(0, 0, 29)
		e.fadd(1, 1, 30)
		e.fmul(0, 0, 1)
		e.fadd(0, 0, 2)
		e.w("VST1.P [V0.S4], 16(R0)")
	}, none)

	// lnGradAccumGo: x̂ = (x − mu)·rs, g = (γ + g0)·dy; lanes[i%16] += g,
	// lanes[16+i%16] += g·x̂, dγ += dy·x̂, dβ += dy.
	e.normKernel("neonLnGradAccum", "(x, dy, gamma, dgamma, dbeta *float32, n int, mu, rs, g0 float32, lanes *[32]float32)", 72, 16, func() {
		e.w("MOVD x+0(FP), R1")
		e.w("MOVD dy+8(FP), R2")
		e.w("MOVD gamma+16(FP), R3")
		e.w("MOVD dgamma+24(FP), R4")
		e.w("MOVD dbeta+32(FP), R5")
		e.w("MOVD n+40(FP), R9")
		e.bcast(28, "mu+48(FP)")
		e.bcast(29, "rs+52(FP)")
		e.bcast(30, "g0+56(FP)")
		e.w("MOVD lanes+64(FP), R6")
		loadLanes("R6", 0)
		e.w("ADD $64, R6, R7")
		loadLanes("R7", 4)
	}, func() {
		for i := 0; i < 4; i++ {
			e.w("VLD1.P 16(R1), [V8.S4]")
			e.w("VLD1.P 16(R2), [V9.S4]")
			e.w("VLD1.P 16(R3), [V10.S4]")
			e.w("VLD1 (R4), [V11.S4]")
			e.w("VLD1 (R5), [V12.S4]")
			e.fsub(8, 8, 28)
			e.fmul(8, 8, 29) // x̂
			e.fadd(10, 10, 30)
			e.fmul(10, 10, 9) // g
			e.fadd(i, i, 10)
			e.fmul(13, 10, 8)
			e.fadd(4+i, 4+i, 13)
			e.fmul(13, 9, 8)
			e.fadd(11, 11, 13)
			e.fadd(12, 12, 9)
			e.w("VST1.P [V11.S4], 16(R4)")
			e.w("VST1.P [V12.S4], 16(R5)")
		}
	}, func() {
		storeLanes("R6", 0)
		storeLanes("R7", 4)
	})

	// lnGradDxGo: dx = (((γ + g0)·dy − fm) − ((x − mu)·rs)·fmx)·rs.
	e.normKernel("neonLnGradDx", "(dx, x, dy, gamma *float32, n int, mu, rs, g0, fm, fmx float32)", 60, 4, func() {
		e.w("MOVD dx+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD dy+16(FP), R2")
		e.w("MOVD gamma+24(FP), R3")
		e.w("MOVD n+32(FP), R9")
		e.bcast(27, "mu+40(FP)")
		e.bcast(28, "rs+44(FP)")
		e.bcast(29, "g0+48(FP)")
		e.bcast(30, "fm+52(FP)")
		e.bcast(31, "fmx+56(FP)")
	}, func() {
		e.w("VLD1.P 16(R1), [V0.S4]")
		e.w("VLD1.P 16(R2), [V1.S4]")
		e.w("VLD1.P 16(R3), [V2.S4]")
		e.fadd(2, 2, 29)
		e.fmul(2, 2, 1)
		e.fsub(2, 2, 30) // g
		e.fsub(0, 0, 27)
		e.fmul(0, 0, 28)
		e.fmul(0, 0, 31) // x̂·fmx
		e.fsub(2, 2, 0)
		e.fmul(2, 2, 28)
		e.w("VST1.P [V2.S4], 16(R0)")
	}, none)

	// rmsApplyGo: y = (x·r)·(γ + g0).
	e.normKernel("neonRmsApply", "(y, x, gamma *float32, n int, r, g0 float32)", 40, 4, func() {
		e.w("MOVD y+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD gamma+16(FP), R2")
		e.w("MOVD n+24(FP), R9")
		e.bcast(29, "r+32(FP)")
		e.bcast(30, "g0+36(FP)")
	}, func() {
		e.w("VLD1.P 16(R1), [V0.S4]")
		e.w("VLD1.P 16(R2), [V1.S4]")
		e.fmul(0, 0, 29)
		e.fadd(1, 1, 30)
		e.fmul(0, 0, 1)
		e.w("VST1.P [V0.S4], 16(R0)")
	}, none)

	// rmsGradAccumGo: x̂ = x·rs, g = (γ + g0)·dy; lanes += g·x̂, dγ += dy·x̂.
	e.normKernel("neonRmsGradAccum", "(x, dy, gamma, dgamma *float32, n int, rs, g0 float32, lanes *[16]float32)", 56, 16, func() {
		e.w("MOVD x+0(FP), R1")
		e.w("MOVD dy+8(FP), R2")
		e.w("MOVD gamma+16(FP), R3")
		e.w("MOVD dgamma+24(FP), R4")
		e.w("MOVD n+32(FP), R9")
		e.bcast(29, "rs+40(FP)")
		e.bcast(30, "g0+44(FP)")
		e.w("MOVD lanes+48(FP), R6")
		loadLanes("R6", 0)
	}, func() {
		for i := 0; i < 4; i++ {
			e.w("VLD1.P 16(R1), [V8.S4]")
			e.w("VLD1.P 16(R2), [V9.S4]")
			e.w("VLD1.P 16(R3), [V10.S4]")
			e.w("VLD1 (R4), [V11.S4]")
			e.fmul(8, 8, 29) // x̂
			e.fadd(10, 10, 30)
			e.fmul(10, 10, 9) // g
			e.fmul(13, 10, 8)
			e.fadd(i, i, 13)
			e.fmul(13, 9, 8)
			e.fadd(11, 11, 13)
			e.w("VST1.P [V11.S4], 16(R4)")
		}
	}, func() { storeLanes("R6", 0) })
}
