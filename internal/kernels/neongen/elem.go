package main

import (
	"bytes"
	"fmt"
	"math"
)

// The element kernels: each the Go twin's operations in its order, every
// product and sum rounded to float32 (no fused multiply-add: the twins
// use none), four lanes at a time.

// elemConsts is the constant table the element kernels load into
// V16–V29: fastExp's clamp, reduction and polynomial, 1 and the exponent
// bias.
var elemConsts = []uint32{
	f32(87), f32(-87), f32(1.4426950408889634), f32(0.5), f32(-0.5), f32(0.693145751953125), f32(1.428606765330187e-06),
	f32(1.0 / 5040), f32(1.0 / 720), f32(1.0 / 120), f32(1.0 / 24), f32(1.0 / 6), f32(1), 127,
}

func f32(x float64) uint32 { return math.Float32bits(float32(x)) }

const (
	vC87 = 16 + iota
	vCm87
	vLog2e
	vHalf
	vMHalf
	vLn2hi
	vLn2lo
	vP5040
	vP720
	vP120
	vP24
	vP6
	vOne
	vBias
)

// emitter writes instructions.
type emitter struct{ b *bytes.Buffer }

func (e emitter) w(format string, args ...any) { fmt.Fprintf(e.b, "\t"+format+"\n", args...) }
func (e emitter) word(enc uint32, format string, args ...any) {
	fmt.Fprintf(e.b, "\tWORD $0x%08X // "+format+"\n", append([]any{enc}, args...)...)
}
func (e emitter) fadd(d, n, m int)  { e.word(fadd(d, n, m), "FADD V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) fsub(d, n, m int)  { e.word(fsub(d, n, m), "FSUB V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) fmul(d, n, m int)  { e.word(fmul(d, n, m), "FMUL V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) fdiv(d, n, m int)  { e.word(fdiv(d, n, m), "FDIV V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) fmin(d, n, m int)  { e.word(fmin(d, n, m), "FMIN V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) fmax(d, n, m int)  { e.word(fmax(d, n, m), "FMAX V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) fcmgt(d, n, m int) { e.word(fcmgt(d, n, m), "FCMGT V%d.4S, V%d.4S, V%d.4S", d, n, m) }
func (e emitter) bit(d, n, m int)   { e.word(bit(d, n, m), "BIT V%d.16B, V%d.16B, V%d.16B", d, n, m) }
func (e emitter) fcvtzs(d, n int)   { e.word(fcvtzs(d, n), "FCVTZS V%d.4S, V%d.4S", d, n) }
func (e emitter) scvtf(d, n int)    { e.word(scvtf(d, n), "SCVTF V%d.4S, V%d.4S", d, n) }
func (e emitter) fsqrt(d, n int)    { e.word(fsqrt(d, n), "FSQRT V%d.4S, V%d.4S", d, n) }

// loadConsts loads elemConsts into V16–V29 (R15 as the pointer).
func (e emitter) loadConsts() {
	e.w("MOVD $neonElemConsts<>(SB), R15")
	for i := range elemConsts {
		e.w("VLD1R.P 4(R15), [V%d.S4]", 16+i)
	}
}

// splat puts a float32 constant into all lanes of v (R14 as scratch).
func (e emitter) splat(v int, x float32) {
	e.w("MOVW $0x%08X, R14", math.Float32bits(x))
	e.w("VDUP R14, V%d.S4", v)
}

// fastExp computes fastExp of each lane of x in place (temps a, b, c),
// as the Go twin: clamp to ±87, n = trunc(t ± 0.5) for t = x·log2e,
// r = (x − n·ln2hi) − n·ln2lo, the degree-7 polynomial by Horner's rule
// with p = (p + c)·r, then p·2^n. FMIN and FMAX keep a NaN, as Go's min
// and max do.
func (e emitter) fastExp(x, a, b, c int) {
	e.fmin(x, x, vC87)
	e.fmax(x, x, vCm87)
	e.fmul(a, x, vLog2e) // t
	e.fadd(b, a, vHalf)
	e.fcvtzs(b, b)
	e.scvtf(b, b) // n = float32(int32(t + 0.5))
	e.fsub(c, a, vHalf)
	e.fcvtzs(c, c)
	e.scvtf(c, c)         // float32(int32(t − 0.5))
	e.fcmgt(a, vMHalf, a) // t < −0.5
	e.bit(b, c, a)        // n
	e.fmul(a, b, vLn2hi)
	e.fsub(c, x, a)
	e.fmul(a, b, vLn2lo)
	e.fsub(c, c, a) // r
	e.fmul(a, c, vP5040)
	for _, k := range []int{vP720, vP120, vP24, vP6, vHalf, vOne} {
		e.fadd(a, a, k)
		e.fmul(a, a, c)
	}
	e.fadd(a, a, vOne)
	e.fcvtzs(b, b)
	e.w("VADD V%d.S4, V%d.S4, V%d.S4", vBias, b, b)
	e.w("VSHL $23, V%d.S4, V%d.S4", b, b)
	e.fmul(x, a, b)
}

func elemKernels(b *bytes.Buffer) {
	e := emitter{b}
	fmt.Fprintf(b, "\n// fastExp's constants (elemConsts).\n")
	for i, c := range elemConsts {
		fmt.Fprintf(b, "DATA neonElemConsts<>+%d(SB)/4, $0x%08X\n", 4*i, c)
	}
	fmt.Fprintf(b, "GLOBL neonElemConsts<>(SB), RODATA|NOPTR, $%d\n", 4*len(elemConsts))

	// ExpSum: y = fastExp(x·scale − shift), summed into 16 lanes.
	fmt.Fprintf(b, "\n// func neonExpSum(y, x *float32, n int, scale, shift float32, lanes *[16]float32)\n")
	fmt.Fprintf(b, "// n a multiple of 16; lanes holds the running lane sums (expSumGo's).\n")
	fmt.Fprintf(b, "TEXT ·neonExpSum(SB), NOSPLIT, $0-40\n")
	e.w("MOVD y+0(FP), R0")
	e.w("MOVD x+8(FP), R1")
	e.w("MOVD n+16(FP), R2")
	e.w("FMOVS scale+24(FP), F30")
	e.w("VDUP V30.S[0], V30.S4")
	e.w("FMOVS shift+28(FP), F31")
	e.w("VDUP V31.S[0], V31.S4")
	e.w("MOVD lanes+32(FP), R3")
	e.loadConsts()
	e.w("VLD1 (R3), [V0.S4, V1.S4, V2.S4, V3.S4]")
	e.w("LSR $4, R2, R2")
	e.w("CBZ R2, neonExpSum_done")
	fmt.Fprintf(b, "neonExpSum_loop:\n")
	e.w("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 0; i < 4; i++ {
		v, t := 4+i, 8+(i%2)*3
		e.fmul(v, v, 30)
		e.fsub(v, v, 31)
		e.fastExp(v, t, t+1, t+2)
	}
	e.w("VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)")
	for i := 0; i < 4; i++ {
		e.fadd(i, i, 4+i)
	}
	e.w("SUBS $1, R2, R2")
	e.w("BNE neonExpSum_loop")
	fmt.Fprintf(b, "neonExpSum_done:\n")
	e.w("VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R3)")
	e.w("RET")

	// RowMax: lane maxima, a lane taking v only where v > lane (a NaN
	// never does), as rowMaxGo.
	fmt.Fprintf(b, "\n// func neonRowMax(x *float32, n int, lanes *[16]float32)\n")
	fmt.Fprintf(b, "// n a multiple of 16; lanes holds the running lane maxima.\n")
	fmt.Fprintf(b, "TEXT ·neonRowMax(SB), NOSPLIT, $0-24\n")
	e.w("MOVD x+0(FP), R1")
	e.w("MOVD n+8(FP), R2")
	e.w("MOVD lanes+16(FP), R3")
	e.w("VLD1 (R3), [V0.S4, V1.S4, V2.S4, V3.S4]")
	e.w("LSR $4, R2, R2")
	e.w("CBZ R2, neonRowMax_done")
	fmt.Fprintf(b, "neonRowMax_loop:\n")
	e.w("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for i := 0; i < 4; i++ {
		e.fcmgt(8+i, 4+i, i)
		e.bit(i, 4+i, 8+i)
	}
	e.w("SUBS $1, R2, R2")
	e.w("BNE neonRowMax_loop")
	fmt.Fprintf(b, "neonRowMax_done:\n")
	e.w("VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R3)")
	e.w("RET")

	// SoftmaxGradRow: ds = ((dp − d)·p)·scale.
	fmt.Fprintf(b, "\n// func neonSoftmaxGradRow(ds, p, dp *float32, n int, d, scale float32)\n")
	fmt.Fprintf(b, "// n a multiple of 4; ds may be dp.\n")
	fmt.Fprintf(b, "TEXT ·neonSoftmaxGradRow(SB), NOSPLIT, $0-40\n")
	e.w("MOVD ds+0(FP), R0")
	e.w("MOVD p+8(FP), R1")
	e.w("MOVD dp+16(FP), R2")
	e.w("MOVD n+24(FP), R3")
	e.w("FMOVS d+32(FP), F30")
	e.w("VDUP V30.S[0], V30.S4")
	e.w("FMOVS scale+36(FP), F31")
	e.w("VDUP V31.S[0], V31.S4")
	e.w("LSR $2, R3, R3")
	e.w("CBZ R3, neonSoftmaxGradRow_done")
	fmt.Fprintf(b, "neonSoftmaxGradRow_loop:\n")
	e.w("VLD1.P 16(R2), [V0.S4]")
	e.w("VLD1.P 16(R1), [V1.S4]")
	e.fsub(0, 0, 30)
	e.fmul(0, 0, 1)
	e.fmul(0, 0, 31)
	e.w("VST1.P [V0.S4], 16(R0)")
	e.w("SUBS $1, R3, R3")
	e.w("BNE neonSoftmaxGradRow_loop")
	fmt.Fprintf(b, "neonSoftmaxGradRow_done:\n")
	e.w("RET")

	// GELU: u = √(2/π)·(x + ((0.044715·x)·x)·x), y = (0.5·x)·(1 + tanh u)
	// with FastTanh's tanh: 1 − 2/(fastExp(2u) + 1), ±1 beyond ±9.
	fmt.Fprintf(b, "\n// func neonGELU(y, x *float32, n int)\n")
	fmt.Fprintf(b, "// n a multiple of 4.\n")
	fmt.Fprintf(b, "TEXT ·neonGELU(SB), NOSPLIT, $0-24\n")
	e.w("MOVD y+0(FP), R0")
	e.w("MOVD x+8(FP), R1")
	e.w("MOVD n+16(FP), R2")
	e.loadConsts()
	e.splat(30, float32(0.7978845608028654))
	e.splat(31, 0.044715)
	e.splat(11, 2)
	e.splat(12, 9)
	e.splat(13, -9)
	e.splat(14, -1)
	e.w("LSR $2, R2, R2")
	e.w("CBZ R2, neonGELU_done")
	fmt.Fprintf(b, "neonGELU_loop:\n")
	e.w("VLD1.P 16(R1), [V0.S4]")
	e.fmul(1, 31, 0)
	e.fmul(1, 1, 0)
	e.fmul(1, 1, 0)
	e.fadd(1, 0, 1)
	e.fmul(1, 30, 1) // u
	e.fmul(2, 11, 1) // 2u
	e.fastExp(2, 3, 4, 5)
	e.fadd(2, 2, vOne)
	e.fdiv(2, 11, 2)
	e.fsub(2, vOne, 2) // tanh
	e.fcmgt(3, 1, 12)  // u > 9
	e.bit(2, vOne, 3)
	e.fcmgt(3, 13, 1) // u < −9
	e.bit(2, 14, 3)
	e.fmul(3, vHalf, 0)
	e.fadd(2, vOne, 2)
	e.fmul(3, 3, 2)
	e.w("VST1.P [V3.S4], 16(R0)")
	e.w("SUBS $1, R2, R2")
	e.w("BNE neonGELU_loop")
	fmt.Fprintf(b, "neonGELU_done:\n")
	e.w("RET")
}

// loop4 writes a kernel over n elements (a multiple of 4) four at a
// time: prologue, then for each step body between its loads and stores.
func (e emitter) loop4(name, sig string, args int, prologue func(), loads []string, body func(), stores []string) {
	fmt.Fprintf(e.b, "\n// func %s%s\n// n a multiple of 4.\n", name, sig)
	fmt.Fprintf(e.b, "TEXT ·%s(SB), NOSPLIT, $0-%d\n", name, args)
	prologue()
	e.w("LSR $2, R9, R9")
	e.w("CBZ R9, %s_done", name)
	fmt.Fprintf(e.b, "%s_loop:\n", name)
	for _, l := range loads {
		e.w("%s", l)
	}
	body()
	for _, s := range stores {
		e.w("%s", s)
	}
	e.w("SUBS $1, R9, R9")
	e.w("BNE %s_loop", name)
	fmt.Fprintf(e.b, "%s_done:\n", name)
	e.w("RET")
}

// moreElemKernels writes Add, ReLUGrad, GELUGrad and Adam.
func moreElemKernels(b *bytes.Buffer) {
	e := emitter{b}
	// Add: dst = x + y.
	e.loop4("neonAdd", "(dst, x, y *float32, n int)", 32, func() {
		e.w("MOVD dst+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD y+16(FP), R2")
		e.w("MOVD n+24(FP), R9")
	}, []string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V1.S4]"}, func() { e.fadd(0, 0, 1) }, []string{"VST1.P [V0.S4], 16(R0)"})

	// ReLUGrad: dx = dy where x > 0, else +0 (a NaN x gives +0).
	e.loop4("neonReLUGrad", "(dx, x, dy *float32, n int)", 32, func() {
		e.w("MOVD dx+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD dy+16(FP), R2")
		e.w("MOVD n+24(FP), R9")
		e.w("VEOR V31.B16, V31.B16, V31.B16")
	}, []string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V1.S4]"}, func() {
		e.fcmgt(2, 0, 31)
		e.w("VAND V2.B16, V1.B16, V1.B16")
	}, []string{"VST1.P [V1.S4], 16(R0)"})

	// GELUGrad: dx = dy·(0.5·(1 + t) + ((0.5·x)·(1 − t·t))·du), t =
	// FastTanh(u), du = √(2/π)·(1 + (0.134145·x)·x), as GELUGrad's loop.
	e.loop4("neonGELUGrad", "(dx, x, dy *float32, n int)", 32, func() {
		e.w("MOVD dx+0(FP), R0")
		e.w("MOVD x+8(FP), R1")
		e.w("MOVD dy+16(FP), R2")
		e.w("MOVD n+24(FP), R9")
		e.loadConsts()
		e.splat(30, float32(0.7978845608028654))
		e.splat(31, 0.044715)
		e.splat(11, 2)
		e.splat(12, 9)
		e.splat(13, -9)
		e.splat(14, -1)
		e.splat(15, float32(3*0.044715))
	}, []string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V1.S4]"}, func() {
		e.fmul(2, 31, 0)
		e.fmul(2, 2, 0)
		e.fmul(2, 2, 0)
		e.fadd(2, 0, 2)
		e.fmul(2, 30, 2) // u
		e.fmul(3, 11, 2)
		e.fastExp(3, 4, 5, 6)
		e.fadd(3, 3, vOne)
		e.fdiv(3, 11, 3)
		e.fsub(3, vOne, 3) // t
		e.fcmgt(4, 2, 12)
		e.bit(3, vOne, 4)
		e.fcmgt(4, 13, 2)
		e.bit(3, 14, 4)
		e.fmul(4, 15, 0)
		e.fmul(4, 4, 0)
		e.fadd(4, vOne, 4)
		e.fmul(4, 30, 4) // du
		e.fadd(5, vOne, 3)
		e.fmul(5, vHalf, 5) // 0.5·(1 + t)
		e.fmul(6, vHalf, 0)
		e.fmul(7, 3, 3)
		e.fsub(7, vOne, 7)
		e.fmul(6, 6, 7)
		e.fmul(6, 6, 4)
		e.fadd(5, 5, 6) // g
		e.fmul(1, 1, 5)
	}, []string{"VST1.P [V1.S4], 16(R0)"})

	// Adam, as adamRef: gi = g + l2·w; wi = w·df; m = β1·m + (1−β1)·gi;
	// v = β2·v + ((1−β2)·gi)·gi; w = wi − (step·m)/(√v/√(1−β2ᵗ) + ε).
	e.loop4("neonAdam", "(w, grad, m, v *float32, n int, c *AdamConsts)", 48, func() {
		e.w("MOVD w+0(FP), R0")
		e.w("MOVD grad+8(FP), R1")
		e.w("MOVD m+16(FP), R2")
		e.w("MOVD v+24(FP), R3")
		e.w("MOVD n+32(FP), R9")
		e.w("MOVD c+40(FP), R15")
		for i := 0; i < 9; i++ {
			e.w("VLD1R.P 4(R15), [V%d.S4]", 16+i) // l2, df, b1, c1, b2, c2, step, bc2s, eps
		}
	}, []string{"VLD1 (R0), [V0.S4]", "VLD1.P 16(R1), [V1.S4]", "VLD1 (R2), [V2.S4]", "VLD1 (R3), [V3.S4]"}, func() {
		e.fmul(4, 16, 0)
		e.fadd(4, 1, 4)  // gi
		e.fmul(5, 0, 17) // wi
		e.fmul(6, 18, 2)
		e.fmul(7, 19, 4)
		e.fadd(6, 6, 7) // mi
		e.fmul(7, 20, 3)
		e.fmul(8, 21, 4)
		e.fmul(8, 8, 4)
		e.fadd(7, 7, 8) // vi
		e.fsqrt(8, 7)
		e.fdiv(8, 8, 23)
		e.fadd(8, 8, 24) // den
		e.fmul(9, 22, 6)
		e.fdiv(9, 9, 8)
		e.fsub(5, 5, 9) // w
	}, []string{"VST1.P [V6.S4], 16(R2)", "VST1.P [V7.S4], 16(R3)", "VST1.P [V5.S4], 16(R0)"})
}

// binaryKernels writes dst = x ∘ y (Sub, Mul, Div: Add has its own) and
// dst = x ∘ c with a scalar c (Add, Sub, Mul, Div): one operation a
// lane, x first, as the Go loops of kernels.Binary and BinaryScalar.
func binaryKernels(b *bytes.Buffer) {
	e := emitter{b}
	ops := []struct {
		name string
		op   func(d, n, m int)
	}{{"Add", e.fadd}, {"Sub", e.fsub}, {"Mul", e.fmul}, {"Div", e.fdiv}}
	for _, o := range ops {
		if o.name != "Add" {
			op := o.op
			e.loop4("neon"+o.name, "(dst, x, y *float32, n int)", 32, func() {
				e.w("MOVD dst+0(FP), R0")
				e.w("MOVD x+8(FP), R1")
				e.w("MOVD y+16(FP), R2")
				e.w("MOVD n+24(FP), R9")
			}, []string{"VLD1.P 16(R1), [V0.S4]", "VLD1.P 16(R2), [V1.S4]"}, func() { op(0, 0, 1) }, []string{"VST1.P [V0.S4], 16(R0)"})
		}
		op := o.op
		e.loop4("neon"+o.name+"Scalar", "(dst, x *float32, n int, c float32)", 28, func() {
			e.w("MOVD dst+0(FP), R0")
			e.w("MOVD x+8(FP), R1")
			e.w("MOVD n+16(FP), R9")
			e.bcast(31, "c+24(FP)")
		}, []string{"VLD1.P 16(R1), [V0.S4]"}, func() { op(0, 0, 31) }, []string{"VST1.P [V0.S4], 16(R0)"})
	}
}

// unaryKernels writes Sqrt (FSQRT, as math32.Sqrt's scalar FSQRT) and
// Neg (FNEG: the sign bit flipped, as Go negates).
func unaryKernels(b *bytes.Buffer) {
	e := emitter{b}
	for _, k := range []struct {
		name string
		enc  func(d, n int) uint32
		text string
	}{{"neonSqrt", fsqrt, "FSQRT V0.4S, V0.4S"}, {"neonNeg", fneg, "FNEG V0.4S, V0.4S"}} {
		enc, text := k.enc, k.text
		e.loop4(k.name, "(y, x *float32, n int)", 24, func() {
			e.w("MOVD y+0(FP), R0")
			e.w("MOVD x+8(FP), R1")
			e.w("MOVD n+16(FP), R9")
		}, []string{"VLD1.P 16(R1), [V0.S4]"}, func() { e.word(enc(0, 0), "%s", text) }, []string{"VST1.P [V0.S4], 16(R0)"})
	}
}

// widenKernels writes WidenBF16 (each bf16 moved to the upper half of a
// float32, SHLL #16) and DecodeFP16 (FCVTL, then times scale, as the
// Go loop's table value times scale).
func widenKernels(b *bytes.Buffer) {
	e := emitter{b}
	e.loop4("neonWidenBF16", "(v *float32, h *uint16, n int)", 24, func() {
		e.w("MOVD v+0(FP), R0")
		e.w("MOVD h+8(FP), R1")
		e.w("MOVD n+16(FP), R9")
	}, []string{"VLD1.P 8(R1), [V1.H4]"}, func() {
		e.word(shll4s(0, 1), "SHLL V0.4S, V1.4H, #16")
	}, []string{"VST1.P [V0.S4], 16(R0)"})
	e.loop4("neonDecodeFP16", "(dst *float32, src *uint16, n int, scale float32)", 28, func() {
		e.w("MOVD dst+0(FP), R0")
		e.w("MOVD src+8(FP), R1")
		e.w("MOVD n+16(FP), R9")
		e.bcast(31, "scale+24(FP)")
	}, []string{"VLD1.P 8(R1), [V1.H4]"}, func() {
		e.word(fcvtl4s(0, 1), "FCVTL V0.4S, V1.4H")
		e.fmul(0, 0, 31)
	}, []string{"VST1.P [V0.S4], 16(R0)"})
}
