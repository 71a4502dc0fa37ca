package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2+FMA element kernels: the 8-lane forms of the AVX-512 element
// kernels, for CPUs without AVX-512 (AMD Zen 2/3, Intel client CPUs).
// Each does the same operations in the same order as its Go twin, so
// the three give the same bits. With 16 vector registers, constants are
// read from memory (avx2Consts, each repeated in 8 lanes) instead of
// being held in registers; a kernel does whole vectors only and its Go
// caller does the rest of a row with the twin (reductions keep 16 lane
// sums, as the AVX-512 kernels do, so a row's result does not depend on
// the vector width).

// avx2ConstValues lists every constant the AVX2 kernels read; the table
// holds each as 8 lanes (32 bytes).
var avx2ConstValues = []uint32{
	f32(1), f32(87), f32(-87), f32(1.4426950408889634), f32(0.693145751953125), f32(1.428606765330187e-06),
	f32(1.0 / 5040), f32(1.0 / 720), f32(1.0 / 120), f32(1.0 / 24), f32(1.0 / 6), f32(1.0 / 2), f32(-0.5), 127,
	f32(-1), f32(2), f32(9), f32(-9), f32(0.044715), f32(0.7978845608028654), f32(3 * 0.044715),
	0xFFFF0000, 0x7FFF, 0x7FFFFFFF, 0x7F800000, 0x40, 0x8000, 1, 0x80, 0x7F, 0x7FC00000,
	// The word decodes' constants (two 16-bit lanes each).
	0x007F007F, 0x00070007, 0x00030003, 0x007C007C, 0x3C003C00, 0x38003800, 0x80008000, 0x7FC07FC0, 0x7F807F80,
	// NVFP4's.
	0x80000000, 8, 0xFF, f32(0.25), 7, 0x3F000000, 0x3F800000, 0x4B000000,
	0x00400000, f32(0x1p-9),
}

var avx2ConstMem Mem

// avx2ConstData emits the constant table.
func avx2ConstData() {
	avx2ConstMem = GLOBL("avx2Consts", RODATA|NOPTR)
	for i, v := range avx2ConstValues {
		for l := 0; l < 8; l++ {
			DATA(32*i+4*l, U32(v))
		}
	}
}

// ac returns the table address of the 8-lane constant with bits v.
func ac(v uint32) Mem {
	for i, c := range avx2ConstValues {
		if c == v {
			return avx2ConstMem.Offset(32 * i)
		}
	}
	panic(fmt.Sprintf("asmgen: constant %#x not in avx2ConstValues", v))
}

// acf is ac for a float32 constant.
func acf(v float64) Mem { return ac(f32(v)) }

// fastExpAVX2 emits e = fastExp(e) on 8 lanes (kernels.fastExp: the
// operations of fastExp in the AVX-512 form), t, tmp, tmp2, r and nn
// scratch.
func fastExpAVX2(e, t, tmp, tmp2, r, nn VecPhysical) {
	fastExpAVX2Sets([]expSet{{e, t, tmp, tmp2, r, nn}})
}

// expSet is one vector's registers for fastExpAVX2Sets: e in and out,
// the others scratch.
type expSet struct{ e, t, tmp, tmp2, r, nn VecPhysical }

// fastExpAVX2Sets is fastExpAVX2 on several vectors at once, their
// instructions interleaved: the dependency chain of one is as long as
// the out-of-order window can see, so a loop over one vector at a time
// waits on its latencies.
func fastExpAVX2Sets(sets []expSet) {
	all := func(f func(s expSet)) {
		for _, s := range sets {
			f(s)
		}
	}
	// Clamp with x as the second source, so a NaN stays (Go's min/max).
	all(func(s expSet) { VMOVUPS(acf(87), s.t); VMINPS(s.e, s.t, s.e) })
	all(func(s expSet) { VMOVUPS(acf(-87), s.t); VMAXPS(s.e, s.t, s.e) })
	all(func(s expSet) { VMULPS(acf(1.4426950408889634), s.e, s.t) })
	all(func(s expSet) { VADDPS(acf(0.5), s.t, s.tmp); VCVTTPS2DQ(s.tmp, s.tmp) })
	all(func(s expSet) { VSUBPS(acf(0.5), s.t, s.tmp2); VCVTTPS2DQ(s.tmp2, s.tmp2) })
	all(func(s expSet) { VCMPPS(U8(1), acf(-0.5), s.t, s.r) }) // t < −0.5
	all(func(s expSet) { VBLENDVPS(s.r, s.tmp2, s.tmp, s.tmp); VCVTDQ2PS(s.tmp, s.nn) })
	all(func(s expSet) { VMULPS(acf(0.693145751953125), s.nn, s.r); VSUBPS(s.r, s.e, s.r) })
	all(func(s expSet) { VMULPS(acf(1.428606765330187e-06), s.nn, s.tmp2); VSUBPS(s.tmp2, s.r, s.r) })
	all(func(s expSet) { VMULPS(acf(1.0/5040), s.r, s.e) })
	all(func(s expSet) { VADDPS(acf(1.0/720), s.e, s.e) })
	for _, c := range []float64{1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1} {
		all(func(s expSet) { VMULPS(s.e, s.r, s.e) })
		all(func(s expSet) { VADDPS(acf(c), s.e, s.e) })
	}
	all(func(s expSet) { VMULPS(s.e, s.r, s.e) })
	all(func(s expSet) { VADDPS(acf(1), s.e, s.e) })
	all(func(s expSet) { VPADDD(ac(127), s.tmp, s.tmp); VPSLLD(U8(23), s.tmp, s.tmp) })
	all(func(s expSet) { VMULPS(s.tmp, s.e, s.e) })
}

// geluAVX2 is gelu on 8 lanes: two vectors at a time, their
// instructions interleaved (see fastExpAVX2Sets; twice the rate of one
// at a time), then the last one alone.
func geluAVX2(backward bool) {
	name := "geluAVX2"
	sig := "func(y, x *float32, blocks int)"
	if backward {
		name, sig = "geluGradAVX2", "func(dx, x, dy *float32, blocks int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " is the 8-lane form of the Go loop in GELU or GELUGrad (activation.go) over 8·blocks values, bit for bit (AVX2).")
	var out, x, dy, n Register
	if backward {
		out, x, dy = Load(Param("dx"), GP64()), Load(Param("x"), GP64()), Load(Param("dy"), GP64())
	} else {
		out, x = Load(Param("y"), GP64()), Load(Param("x"), GP64())
	}
	n = Load(Param("blocks"), GP64())
	type set struct {
		v, u VecPhysical
		expSet
		off int // the vector's offset in bytes
	}
	sets := []set{{Y0, Y1, expSet{Y3, Y2, Y6, Y7, Y4, Y5}, 0}, {Y8, Y9, expSet{Y11, Y10, Y14, Y15, Y12, Y13}, 32}}
	body := func(sets []set) {
		all := func(f func(s set)) {
			for _, s := range sets {
				f(s)
			}
		}
		all(func(s set) { VMOVUPS(Mem{Base: x, Disp: s.off}, s.v) })
		all(func(s set) { VMULPS(acf(0.044715), s.v, s.u) })
		all(func(s set) { VMULPS(s.v, s.u, s.u) })
		all(func(s set) { VMULPS(s.v, s.u, s.u) })
		all(func(s set) { VADDPS(s.u, s.v, s.u) })
		all(func(s set) { VMULPS(acf(0.7978845608028654), s.u, s.u) })
		all(func(s set) { VMULPS(acf(2), s.u, s.e) })
		es := make([]expSet, len(sets))
		for i, s := range sets {
			es[i] = s.expSet
		}
		fastExpAVX2Sets(es)
		all(func(s set) { VADDPS(acf(1), s.e, s.e) })
		all(func(s set) { VMOVUPS(acf(2), s.t); VDIVPS(s.e, s.t, s.t) })
		all(func(s set) { VMOVUPS(acf(1), s.tmp); VSUBPS(s.t, s.tmp, s.t) })
		all(func(s set) { VCMPPS(U8(14), acf(9), s.u, s.tmp); VBLENDVPS(s.tmp, acf(1), s.t, s.t) })  // u > 9
		all(func(s set) { VCMPPS(U8(1), acf(-9), s.u, s.tmp); VBLENDVPS(s.tmp, acf(-1), s.t, s.t) }) // u < −9
		if !backward {
			all(func(s set) { VMULPS(acf(0.5), s.v, s.tmp); VADDPS(acf(1), s.t, s.t) })
			all(func(s set) { VMULPS(s.t, s.tmp, s.t); VMOVUPS(s.t, Mem{Base: out, Disp: s.off}) })
		} else {
			all(func(s set) { VMULPS(acf(3*0.044715), s.v, s.e); VMULPS(s.v, s.e, s.e) })
			all(func(s set) { VADDPS(acf(1), s.e, s.e); VMULPS(acf(0.7978845608028654), s.e, s.e) })
			all(func(s set) { VMULPS(s.t, s.t, s.tmp); VMOVUPS(acf(1), s.tmp2); VSUBPS(s.tmp, s.tmp2, s.tmp) })
			all(func(s set) { VMULPS(acf(0.5), s.v, s.tmp2); VMULPS(s.tmp, s.tmp2, s.tmp2) })
			all(func(s set) { VMULPS(s.e, s.tmp2, s.tmp2) })
			all(func(s set) { VADDPS(acf(1), s.t, s.t); VMULPS(acf(0.5), s.t, s.t) })
			all(func(s set) { VADDPS(s.tmp2, s.t, s.t) })
			all(func(s set) { VMOVUPS(Mem{Base: dy, Disp: s.off}, s.tmp); VMULPS(s.t, s.tmp, s.t) })
			all(func(s set) { VMOVUPS(s.t, Mem{Base: out, Disp: s.off}) })
			ADDQ(U32(32*len(sets)), dy)
		}
		ADDQ(U32(32*len(sets)), x)
		ADDQ(U32(32*len(sets)), out)
	}
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(1), pairs)
	loop(name+"_pairs", pairs, func() { body(sets) })
	ANDQ(U32(1), n)
	loop(name, n, func() { body(sets[:1]) })
	VZEROUPPER()
	RET()
}

// expSumAVX2 writes y = fastExp(x·scale − shift) over 16·blocks values
// and adds them into 16 lane sums (lane i: elements i, i+16, …), stored
// to lanes: expSumGo's order.
func expSumAVX2() {
	name := "expSumAVX2"
	TEXT(name, NOSPLIT, "func(y, x *float32, blocks int, scale, shift float32, lanes *[16]float32, mask *[16]int32)")
	Pragma("noescape")
	Doc(name + " writes y = fastExp(x·scale − shift) over 16·blocks values, then over the lanes of one more block that mask selects (mask nil: none), and stores their 16 lane sums; its Go twin is expSumGo (attention.go) (AVX2).")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("blocks"), GP64())
	scale, shift, sumLo, sumHi := Y8, Y9, Y10, Y11
	broadcastParams(scale, "scale", shift, "shift")
	VXORPS(sumLo, sumLo, sumLo)
	VXORPS(sumHi, sumHi, sumHi)
	// The two halves of a block side by side (fastExpAVX2Sets).
	sets := []expSet{{Y0, Y1, Y2, Y3, Y4, Y5}, {Y6, Y7, Y12, Y13, Y14, Y15}}
	sums := []VecPhysical{sumLo, sumHi}
	loop(name, n, func() {
		for h, s := range sets {
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, s.e)
			VMULPS(scale, s.e, s.e)
			VSUBPS(shift, s.e, s.e)
		}
		fastExpAVX2Sets(sets)
		for h, s := range sets {
			VMOVUPS(s.e, Mem{Base: y, Disp: 32 * h})
			VADDPS(s.e, sums[h], sums[h])
		}
		ADDQ(U32(64), x)
		ADDQ(U32(64), y)
	})
	// The last, partial block: the masked lanes read as 0 and add +0 to
	// their sums (which are sums of exponentials, never −0), and y there
	// is not written.
	m := Load(Param("mask"), GP64())
	TESTQ(m, m)
	JZ(LabelRef(name + "_store"))
	s, mk := sets[0], sets[1].e
	for h := 0; h < 2; h++ {
		VMOVDQU(Mem{Base: m, Disp: 32 * h}, mk)
		VMASKMOVPS(Mem{Base: x, Disp: 32 * h}, mk, s.e)
		VMULPS(scale, s.e, s.e)
		VSUBPS(shift, s.e, s.e)
		fastExpAVX2(s.e, s.t, s.tmp, s.tmp2, s.r, s.nn)
		VMASKMOVPS(s.e, mk, Mem{Base: y, Disp: 32 * h})
		VANDPS(mk, s.e, s.e)
		VADDPS(s.e, sums[h], sums[h])
	}
	Label(name + "_store")
	l := Load(Param("lanes"), GP64())
	VMOVUPS(sumLo, Mem{Base: l})
	VMOVUPS(sumHi, Mem{Base: l, Disp: 32})
	VZEROUPPER()
	RET()
}

// rowMaxAVX2 stores the 16 lane maxima of 16·blocks values to lanes
// (lanes start at −∞); rowMaxGo is its twin.
func rowMaxAVX2() {
	name := "rowMaxAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, lanes *[16]float32, mask *[16]int32)")
	Pragma("noescape")
	Doc(name + " stores the 16 lane maxima of 16·blocks values and of the lanes of one more block that mask selects (mask nil: none); its Go twin is rowMaxGo (attention.go) (AVX2).")
	x := Load(Param("x"), GP64())
	n := Load(Param("blocks"), GP64())
	lo, hi := Y0, Y1
	r := GP32()
	MOVL(U32(0xFF800000), r) // −∞
	MOVD(r, X0)
	VBROADCASTSS(X0, lo)
	VMOVAPS(lo, hi)
	loop(name, n, func() {
		VMAXPS(Mem{Base: x}, lo, lo)
		VMAXPS(Mem{Base: x, Disp: 32}, hi, hi)
		ADDQ(U32(64), x)
	})
	// The partial block: masked lanes read as −∞.
	m := Load(Param("mask"), GP64())
	TESTQ(m, m)
	JZ(LabelRef(name + "_store"))
	mk, v, inf := Y2, Y3, Y4
	ri := GP32()
	MOVL(U32(0xFF800000), ri)
	MOVD(ri, X4)
	VBROADCASTSS(X4, inf)
	for h, acc := range []VecPhysical{lo, hi} {
		VMOVDQU(Mem{Base: m, Disp: 32 * h}, mk)
		VMASKMOVPS(Mem{Base: x, Disp: 32 * h}, mk, v)
		VBLENDVPS(mk, v, inf, v)
		VMAXPS(v, acc, acc)
	}
	Label(name + "_store")
	l := Load(Param("lanes"), GP64())
	VMOVUPS(lo, Mem{Base: l})
	VMOVUPS(hi, Mem{Base: l, Disp: 32})
	VZEROUPPER()
	RET()
}

// softmaxGradRowAVX2 writes ds = (p·(dp − d))·scale over 8·blocks
// values.
func softmaxGradRowAVX2() {
	name := "softmaxGradRowAVX2"
	TEXT(name, NOSPLIT, "func(ds, p, dp *float32, blocks int, d, scale float32)")
	Pragma("noescape")
	Doc(name + " writes ds = (p·(dp − d))·scale over 8·blocks values; its Go twin is softmaxGradRowGo (attention.go) (AVX2).")
	ds := Load(Param("ds"), GP64())
	p := Load(Param("p"), GP64())
	dp := Load(Param("dp"), GP64())
	n := Load(Param("blocks"), GP64())
	d, scale := Y10, Y11
	broadcastParams(d, "d", scale, "scale")
	loop(name, n, func() {
		VMOVUPS(Mem{Base: dp}, Y0)
		VMOVUPS(Mem{Base: p}, Y1)
		VSUBPS(d, Y0, Y0)
		VMULPS(Y1, Y0, Y0)
		VMULPS(scale, Y0, Y0)
		VMOVUPS(Y0, Mem{Base: ds})
		for _, r := range []Register{ds, p, dp} {
			ADDQ(U32(32), r)
		}
	})
	VZEROUPPER()
	RET()
}

// widenBF16Kernel emits v[i] = the float32 of the bf16 bits h[i] (the
// bits moved to the upper half) over lanes·blocks values.
func widenBF16Kernel(name, isa string, vec func(int) VecPhysical, lanes int) {
	TEXT(name, NOSPLIT, "func(v *float32, h *uint16, blocks int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s writes the float32 values of %d·blocks bf16 values; its Go twin is the loop in WidenBF16 (fp8cast.go) (%s).", name, lanes, isa))
	v := Load(Param("v"), GP64())
	h := Load(Param("h"), GP64())
	n := Load(Param("blocks"), GP64())
	loop(name, n, func() {
		VPMOVZXWD(Mem{Base: h}, vec(0))
		VPSLLD(U8(16), vec(0), vec(0))
		VMOVUPS(vec(0), Mem{Base: v})
		ADDQ(U32(2*lanes), h)
		ADDQ(U32(4*lanes), v)
	})
	VZEROUPPER()
	RET()
}

// fp16DecodeKernel emits dst[i] = the float32 of the FP16 bits src[i]
// (VCVTPH2PS: exact; a signaling NaN quieted, as the multiplication
// after the table lookup of the Go twin quiets it) times scale, over
// lanes·blocks values.
func fp16DecodeKernel(name, isa string, vec func(int) VecPhysical, lanes int) {
	TEXT(name, NOSPLIT, "func(dst *float32, src *uint16, blocks int, scale float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s writes the values of %d·blocks FP16 bit patterns times scale; its Go twin is the loop in DecodeFP16 (fp16.go) (%s).", name, lanes, isa))
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	sv := vec(15)
	VBROADCASTSS(NewParamAddr("scale", 24), sv)
	loop(name, n, func() {
		VCVTPH2PS(Mem{Base: src}, vec(0))
		VMULPS(sv, vec(0), vec(0)) // the value first, as in v*scale
		VMOVUPS(vec(0), Mem{Base: dst})
		ADDQ(U32(2*lanes), src)
		ADDQ(U32(4*lanes), dst)
	})
	VZEROUPPER()
	RET()
}

// binaryKernels emits dst = x ∘ y (two arrays; not +, which Add has)
// and dst = x ∘ c (a scalar) for ∘ in +, −, ·, ÷, on AVX2 (8 lanes) and
// AVX-512 (16): one IEEE operation a value with x first, as Go's x ∘ y.
func binaryKernels() {
	ops := []struct {
		name string
		op   func(...Op)
	}{{"Add", VADDPS}, {"Sub", VSUBPS}, {"Mul", VMULPS}, {"Div", VDIVPS}}
	for _, isa := range []struct {
		sfx, doc string
		vec      func(int) VecPhysical
		lanes    int
	}{{"AVX2", "AVX2", ymm, 8}, {"AVX512", "AVX-512F", zmm, 16}} {
		for _, o := range ops {
			if o.name != "Add" {
				name := "binary" + o.name + isa.sfx
				TEXT(name, NOSPLIT, "func(dst, x, y *float32, blocks int)")
				Pragma("noescape")
				Doc(fmt.Sprintf("%s writes dst = x %s y over %d·blocks values; its Go twin is the loop in Binary (add.go) (%s).", name, strings.ToLower(o.name), isa.lanes, isa.doc))
				dst, x, y := Load(Param("dst"), GP64()), Load(Param("x"), GP64()), Load(Param("y"), GP64())
				n := Load(Param("blocks"), GP64())
				loop(name, n, func() {
					VMOVUPS(Mem{Base: x}, isa.vec(0))
					o.op(Mem{Base: y}, isa.vec(0), isa.vec(0))
					VMOVUPS(isa.vec(0), Mem{Base: dst})
					for _, p := range []Register{dst, x, y} {
						ADDQ(U32(4*isa.lanes), p)
					}
				})
				VZEROUPPER()
				RET()
			}
			name := "binary" + o.name + "Scalar" + isa.sfx
			TEXT(name, NOSPLIT, "func(dst, x *float32, blocks int, c float32)")
			Pragma("noescape")
			Doc(fmt.Sprintf("%s writes dst = x %s c over %d·blocks values; its Go twin is the loop in BinaryScalar (add.go) (%s).", name, strings.ToLower(o.name), isa.lanes, isa.doc))
			dst, x := Load(Param("dst"), GP64()), Load(Param("x"), GP64())
			n := Load(Param("blocks"), GP64())
			VBROADCASTSS(NewParamAddr("c", 24), isa.vec(15))
			loop(name, n, func() {
				VMOVUPS(Mem{Base: x}, isa.vec(0))
				o.op(isa.vec(15), isa.vec(0), isa.vec(0))
				VMOVUPS(isa.vec(0), Mem{Base: dst})
				ADDQ(U32(4*isa.lanes), dst)
				ADDQ(U32(4*isa.lanes), x)
			})
			VZEROUPPER()
			RET()
		}
	}
}

// unaryKernels emits y = √x (VSQRTPS: correctly rounded, as the
// scalar SQRTSS of math32.Sqrt) and y = −x (the sign bit flipped, as Go
// negates) over lanes·blocks values, for AVX2 and AVX-512.
func unaryKernels() {
	for _, isa := range []struct {
		sfx, doc string
		vec      func(int) VecPhysical
		lanes    int
	}{{"AVX2", "AVX2", ymm, 8}, {"AVX512", "AVX-512F", zmm, 16}} {
		for _, k := range []string{"sqrt", "neg"} {
			name := k + isa.sfx
			TEXT(name, NOSPLIT, "func(y, x *float32, blocks int)")
			Pragma("noescape")
			twin := map[string]string{"sqrt": "Sqrt", "neg": "Neg"}[k]
			Doc(fmt.Sprintf("%s writes y = %s over %d·blocks values; its Go twin is the loop in %s (add.go) (%s).", name, map[string]string{"sqrt": "√x", "neg": "−x"}[k], isa.lanes, twin, isa.doc))
			y, x := Load(Param("y"), GP64()), Load(Param("x"), GP64())
			n := Load(Param("blocks"), GP64())
			v := isa.vec(0)
			loop(name, n, func() {
				switch {
				case k == "sqrt":
					VSQRTPS(Mem{Base: x}, v)
				case isa.lanes == 8:
					VMOVUPS(Mem{Base: x}, v)
					VXORPS(ac(0x80000000), v, v)
				default:
					VMOVUPS(Mem{Base: x}, v)
					VPXORD_BCST(ac(0x80000000), v, v)
				}
				VMOVUPS(v, Mem{Base: y})
				ADDQ(U32(4*isa.lanes), x)
				ADDQ(U32(4*isa.lanes), y)
			})
			VZEROUPPER()
			RET()
		}
	}
}

// reluGradAVX2 is the 8-lane form of ReLUGrad's loop.
func reluGradAVX2() {
	TEXT("reluGradAVX2", NOSPLIT, "func(dx, x, dy *float32, blocks int)")
	Pragma("noescape")
	Doc("reluGradAVX2 is the 8-lane form of the Go loop in ReLUGrad (activation.go) over 8·blocks values (AVX2).")
	dx := Load(Param("dx"), GP64())
	x := Load(Param("x"), GP64())
	dy := Load(Param("dy"), GP64())
	n := Load(Param("blocks"), GP64())
	VXORPS(Y15, Y15, Y15)
	loop("relugrad2", n, func() {
		VMOVUPS(Mem{Base: x}, Y0)
		VCMPPS(U8(0x1E), Y15, Y0, Y0) // x > 0, ordered: false for NaN
		VANDPS(Mem{Base: dy}, Y0, Y1)
		VMOVUPS(Y1, Mem{Base: dx})
		ADDQ(U32(32), x)
		ADDQ(U32(32), dy)
		ADDQ(U32(32), dx)
	})
	VZEROUPPER()
	RET()
}

// adamAVX2 is adam on 8 lanes.
func adamAVX2() { adamKernel("adamAVX2", "adam2", "AVX2", 8, ymm, 7) }

// avx2ElementKernels emits the AVX2 element kernels and their table.
func avx2ElementKernels() {
	widenBF16Kernel("widenBF16AVX2", "AVX2", ymm, 8)
	widenBF16Kernel("widenBF16AVX512", "AVX-512F", zmm, 16)
	fp16DecodeKernel("fp16DecodeAVX2", "AVX2, F16C", ymm, 8)
	fp16DecodeKernel("fp16DecodeAVX512", "AVX-512F", zmm, 16)
	binaryKernels()
	unaryKernels()
	geluAVX2(false)
	geluAVX2(true)
	expSumAVX2()
	rowMaxAVX2()
	softmaxGradRowAVX2()
	reluGradAVX2()
	adamAVX2()
	bf16KernelsAVX2()
	packKernelsAVX2()
	quantizeKernelsAVX2()
	nvfp4KernelsAVX2()
	layerNormKernelsAVX2()
	addAVX2()
	amaxAVX2()
	reluAVX2()
	for kind := range sigmoidKernels {
		sigmoidFamilyAVX2(sigmoidKind(kind))
	}
	fp16EncodeAVX2()
	cpuidECX()
	decodeAVX2("decodeE4M3AVX2", false, false)
	decodeAVX2("decodeE5M2AVX2", true, false)
	decodeAVX2("decodeBlocks32E4M3AVX2", false, true)
	decodeAVX2("decodeBlocks32E5M2AVX2", true, true)
}

// decodeConsts are the registers of the 8-lane FP8 decode: the scale,
// the 2^rebias factor and the code magnitude marking NaN (E4M3) or
// infinity (E5M2), for the format's shift.
type decodeConsts struct {
	e5m2                  bool
	shift                 int
	scale, magic, special VecPhysical
}

// newDecodeConsts fills magic and special for E4M3 or E5M2 (the caller
// loads the scale).
func newDecodeConsts(e5m2 bool, scale, magic, special VecPhysical) decodeConsts {
	shift, rebias, sp := 20, 120, uint32(0x7F)
	if e5m2 {
		shift, rebias, sp = 21, 112, 0x7C
	}
	bcastY := func(v uint32, y VecPhysical) {
		r := GP32()
		MOVL(U32(v), r)
		MOVD(r, y.AsX())
		VPBROADCASTD(y.AsX(), y)
	}
	bcastY(uint32(127+rebias)<<23, magic)
	bcastY(sp, special)
	return decodeConsts{e5m2: e5m2, shift: shift, scale: scale, magic: magic, special: special}
}

// decodeLanesAVX2 decodes the 8 codes in c (one a lane, zero-extended)
// into f: the magnitude bits moved into float32 position and multiplied
// by 2^rebias (exact, denormal significands included), E5M2's infinity
// signed, NaN codes the tables' positive quiet NaN, the result times
// the scale. c is left as it was; t and nan are scratch.
func decodeLanesAVX2(k decodeConsts, c, f, t, nan VecPhysical) {
	VPAND(ac(0x7F), c, t)
	VPSLLD(U8(k.shift), t, f)
	VMULPS(k.magic, f, f)
	if k.e5m2 {
		VPCMPGTD(k.special, t, nan) // > 0x7C: NaN
		VPCMPEQD(k.special, t, t)   // == 0x7C: infinity
		VBLENDVPS(t, ac(0x7F800000), f, f)
	} else {
		VPCMPEQD(k.special, t, nan) // == 0x7F: NaN
	}
	VPAND(ac(0x80), c, t)
	VPSLLD(U8(24), t, t)
	VPOR(t, f, f)
	// The tables' positive quiet NaN, whatever the code's sign.
	VBLENDVPS(nan, ac(0x7FC00000), f, f)
	VMULPS(k.scale, f, f)
}

// decodeAVX2 is decode on 8 lanes (decodeLanesAVX2); with per32, each
// block of 32 codes times its own scale.
func decodeAVX2(name string, e5m2, per32 bool) {
	var scales Register
	if per32 {
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint8, scales *float32, blocks int)")
		Pragma("noescape")
		Doc(name + " decodes 32·blocks FP8 codes to float32, each block of 32 times its own scale; its Go twin is decodeFP8Go block by block (fp8cast.go) (AVX2).")
	} else {
		TEXT(name, NOSPLIT, "func(dst *float32, src *uint8, blocks int, scale float32)")
		Pragma("noescape")
		Doc(name + " decodes 8·blocks FP8 codes to float32 times scale; its Go twin is decodeFP8Go (fp8cast.go) (AVX2).")
	}
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	if per32 {
		scales = Load(Param("scales"), GP64())
	}
	n := Load(Param("blocks"), GP64())
	k := newDecodeConsts(e5m2, Y15, Y14, Y13)
	if !per32 {
		VBROADCASTSS(NewParamAddr("scale", 24), k.scale)
	}
	one := func(i int) {
		VPMOVZXBD(Mem{Base: src, Disp: 8 * i}, Y0)
		decodeLanesAVX2(k, Y0, Y2, Y3, Y4)
		VMOVUPS(Y2, Mem{Base: dst, Disp: 32 * i})
	}
	if per32 {
		loop(name, n, func() {
			VBROADCASTSS(Mem{Base: scales}, k.scale)
			for i := 0; i < 4; i++ {
				one(i)
			}
			ADDQ(U32(4), scales)
			ADDQ(U32(32), src)
			ADDQ(U32(128), dst)
		})
	} else {
		loop(name, n, func() {
			one(0)
			ADDQ(U32(8), src)
			ADDQ(U32(32), dst)
		})
	}
	VZEROUPPER()
	RET()
}

// fp16EncodeAVX2 is fp16Encode on 8 lanes (F16C's VCVTPS2PH, which every
// AVX2 CPU has; the caller checks cpuidECX's F16C bit).
func fp16EncodeAVX2() {
	TEXT("fp16EncodeAVX2", NOSPLIT, "func(dst *uint16, src *float32, blocks int, scale float32)")
	Pragma("noescape")
	Doc("fp16EncodeAVX2 stores 8·blocks values times scale as FP16, rounding to nearest even; its Go twin is encodeFP16Go (fp16.go) (AVX2, F16C).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	VBROADCASTSS(NewParamAddr("scale", 24), Y15)
	loop("fp16enc2", n, func() {
		VMULPS(Mem{Base: src}, Y15, Y0)
		VCVTPS2PH(U8(0), Y0, Mem{Base: dst})
		ADDQ(U32(32), src)
		ADDQ(U32(16), dst)
	})
	VZEROUPPER()
	RET()
}

// cpuidECX returns ECX of CPUID leaf 1 (feature bits golang.org/x/sys/cpu
// does not report, such as F16C's bit 29).
func cpuidECX() {
	TEXT("cpuidECX", NOSPLIT, "func() uint32")
	Doc("cpuidECX returns ECX of CPUID leaf 1.")
	MOVL(U32(1), EAX)
	XORL(ECX, ECX)
	CPUID()
	Store(ECX, ReturnIndex(0))
	RET()
}

// amaxAVX2 is amax on 8 lanes: the running max of |x| as float32 bits
// over 32·blocks values, four accumulators, the 8 lane maxima stored to
// out.
func amaxAVX2() {
	TEXT("amaxAVX2", NOSPLIT, "func(src *float32, blocks int, out *[8]uint32)")
	Pragma("noescape")
	Doc("amaxAVX2 records the lane-wise max of |x| bits over 32·blocks values; its Go twin is amaxBitsGo (fp8cast.go) (AVX2).")
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("out"), GP64())
	r := GP32()
	MOVL(U32(0x7FFFFFFF), r)
	MOVD(r, X15)
	VPBROADCASTD(X15, Y15)
	acc := []VecPhysical{Y0, Y1, Y2, Y3}
	for _, a := range acc {
		VPXOR(a, a, a)
	}
	loop("amax2", n, func() {
		for i, a := range acc {
			t := []VecPhysical{Y4, Y5, Y6, Y7}[i]
			VPAND(Mem{Base: src, Disp: 32 * i}, Y15, t)
			VPMAXUD(t, a, a)
		}
		ADDQ(U32(128), src)
	})
	VPMAXUD(Y1, Y0, Y0)
	VPMAXUD(Y3, Y2, Y2)
	VPMAXUD(Y2, Y0, Y0)
	VMOVDQU(Y0, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// reluAVX2 is relu on 8 lanes: max(x, 0) with Go's max (−0 gives +0, a
// NaN keeps its bits but the sign) over 8·blocks values.
func reluAVX2() {
	TEXT("reluAVX2", NOSPLIT, "func(dst, src *float32, blocks int)")
	Pragma("noescape")
	Doc("reluAVX2 writes max(x, 0) (Go's max: −0 gives +0, a NaN its bits with the sign cleared) over 8·blocks values; its Go twin is reluGo (add.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	r := GP32()
	MOVL(U32(0x7FFFFFFF), r)
	MOVD(r, X15)
	VPBROADCASTD(X15, Y15)
	VXORPS(Y14, Y14, Y14)
	// not (x ≤ 0): true for x > 0 and for NaN; those lanes keep x with
	// the sign bit cleared (which changes only NaNs), the others are +0.
	loop("relu2", n, func() {
		VMOVUPS(Mem{Base: src}, Y0)
		VCMPPS(U8(6), Y14, Y0, Y1)
		VANDPS(Y15, Y1, Y1)
		VANDPS(Y0, Y1, Y1)
		VMOVUPS(Y1, Mem{Base: dst})
		ADDQ(U32(32), src)
		ADDQ(U32(32), dst)
	})
	VZEROUPPER()
	RET()
}

// addAVX2 is add3's loop on 8 lanes: dst = x + y (x the first operand,
// as Go's x + y) over 8·blocks values; the Go caller does the rest.
func addAVX2() {
	TEXT("addAVX2", NOSPLIT, "func(dst, x, y *float32, blocks int)")
	Pragma("noescape")
	Doc("addAVX2 writes x + y to dst over 8·blocks values; its Go twin is addGo (add.go) (AVX2).")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	y := Load(Param("y"), GP64())
	n := Load(Param("blocks"), GP64())
	loop("addAVX2", n, func() {
		VMOVUPS(Mem{Base: x}, Y0)
		VADDPS(Mem{Base: y}, Y0, Y0)
		VMOVUPS(Y0, Mem{Base: dst})
		ADDQ(U8(32), x)
		ADDQ(U8(32), y)
		ADDQ(U8(32), dst)
	})
	VZEROUPPER()
	RET()
}
