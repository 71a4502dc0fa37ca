package main

import (
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The sigmoid family (kernels/sigmoid.go): σ(v) = 1/(1 + fastExp(−v)),
// computed with the operations of the Go twins in their order (no fused
// multiply-add), over 16·blocks values.

// sigmoidKind names one kernel of the family.
type sigmoidKind int

const (
	sigSigmoid     sigmoidKind = iota // y = σ(x)
	sigSigmoidGrad                    // dx = dy·(y·(1 − y)), from y
	sigSiLU                           // y = x·σ(x)
	sigSiLUGrad                       // dx = dy·(σ·(1 + x·(1 − σ)))
	sigSwiGLU                         // y = (a·σ(a))·b
	sigSwiGLUGrad                     // db = dy·(a·σ(a)); da = (dy·b)·(σ·(1 + a·(1 − σ)))
)

var sigmoidKernels = []struct {
	name, sig, twin string
	ptrs            []string // outputs first, then inputs
}{
	sigSigmoid:     {"sigmoidAVX512", "func(y, x *float32, blocks int)", "Sigmoid", []string{"y", "x"}},
	sigSigmoidGrad: {"sigmoidGradAVX512", "func(dx, y, dy *float32, blocks int)", "SigmoidGrad", []string{"dx", "y", "dy"}},
	sigSiLU:        {"siluAVX512", "func(y, x *float32, blocks int)", "SiLU", []string{"y", "x"}},
	sigSiLUGrad:    {"siluGradAVX512", "func(dx, x, dy *float32, blocks int)", "SiLUGrad", []string{"dx", "x", "dy"}},
	sigSwiGLU:      {"swigluAVX512", "func(y, a, b *float32, blocks int)", "SwiGLU", []string{"y", "a", "b"}},
	sigSwiGLUGrad:  {"swigluGradAVX512", "func(da, db, a, b, dy *float32, blocks int)", "SwiGLUGrad", []string{"da", "db", "a", "b", "dy"}},
}

// sigmoidFamily emits one kernel of the family on AVX-512 (16 lanes).
func sigmoidFamily(kind sigmoidKind) { sigmoidKernel(kind, false) }

// sigmoidFamilyAVX2 emits one kernel of the family on AVX2 (8 lanes),
// named as the AVX-512 kernel with AVX2 for AVX512.
func sigmoidFamilyAVX2(kind sigmoidKind) { sigmoidKernel(kind, true) }

// sigmoidKernel emits kernel kind over 16·blocks values (AVX-512) or
// 8·blocks (avx2): the Go twin's operations in its order.
func sigmoidKernel(kind sigmoidKind, avx2 bool) {
	k := sigmoidKernels[kind]
	name, isa, lanes, vec := k.name, "AVX-512F", 16, zmm
	if avx2 {
		name, isa, lanes, vec = strings.TrimSuffix(k.name, "AVX512")+"AVX2", "AVX2", 8, ymm
	}
	TEXT(name, NOSPLIT, k.sig)
	Pragma("noescape")
	if avx2 {
		Doc(name + " is the 8-lane form of the Go loop in " + k.twin + " (sigmoid.go), bit for bit (" + isa + ").")
	} else {
		Doc(name + " is the vector form of the Go loop in " + k.twin + " (sigmoid.go), bit for bit (" + isa + ").")
	}
	p := map[string]Register{}
	var regs []Register
	for _, name := range k.ptrs {
		p[name] = Load(Param(name), GP64())
		regs = append(regs, p[name])
	}
	n := Load(Param("blocks"), GP64())
	// zero, one and exp: constants in registers and fastExp for the ISA.
	var zero, one VecPhysical
	var exp func(s, t, tmp, tmp2, r, nn VecPhysical)
	if avx2 {
		zero, one = Y15, Y14
		VXORPS(zero, zero, zero)
		VMOVUPS(acf(1), one)
		exp = fastExpAVX2
	} else {
		c := &constRegs{next: 12}
		e := newExpRegsFrom(c)
		zero, one = c.reg(0), e.one
		exp = func(s, t, tmp, tmp2, r, nn VecPhysical) { fastExp(e, s, t, tmp, tmp2, r, nn) }
	}
	// sigma writes σ(v) into s (v kept), with t, tmp, tmp2, r, nn scratch.
	sigma := func(v, s, t, tmp, tmp2, r, nn VecPhysical) {
		VSUBPS(v, zero, s) // −v
		exp(s, t, tmp, tmp2, r, nn)
		VADDPS(one, s, s)
		VDIVPS(s, one, s) // 1/(1+e)
	}
	loop(name, n, func() {
		v, s, t, tmp, tmp2, r, nn, w := vec(0), vec(1), vec(2), vec(3), vec(4), vec(5), vec(6), vec(7)
		switch kind {
		case sigSigmoid:
			VMOVUPS(Mem{Base: p["x"]}, v)
			sigma(v, s, t, tmp, tmp2, r, nn)
			VMOVUPS(s, Mem{Base: p["y"]})
		case sigSigmoidGrad:
			VMOVUPS(Mem{Base: p["y"]}, v)
			VSUBPS(v, one, t) // 1 − y
			VMULPS(t, v, t)   // y·(1 − y)
			VMULPS(Mem{Base: p["dy"]}, t, t)
			VMOVUPS(t, Mem{Base: p["dx"]})
		case sigSiLU:
			VMOVUPS(Mem{Base: p["x"]}, v)
			sigma(v, s, t, tmp, tmp2, r, nn)
			VMULPS(s, v, s)
			VMOVUPS(s, Mem{Base: p["y"]})
		case sigSiLUGrad, sigSwiGLUGrad:
			in, dst := "x", "dx"
			if kind == sigSwiGLUGrad {
				in, dst = "a", "da"
			}
			VMOVUPS(Mem{Base: p[in]}, v)
			sigma(v, s, t, tmp, tmp2, r, nn)
			VMOVUPS(Mem{Base: p["dy"]}, w)
			if kind == sigSwiGLUGrad {
				VMULPS(s, v, t) // a·σ
				VMULPS(t, w, t) // dy·(a·σ)
				VMOVUPS(t, Mem{Base: p["db"]})
				VMULPS(Mem{Base: p["b"]}, w, w) // dy·b
			}
			VSUBPS(s, one, t) // 1 − σ
			VMULPS(t, v, t)   // x·(1 − σ)
			VADDPS(one, t, t) // 1 + x·(1 − σ)
			VMULPS(t, s, t)   // σ·(…)
			VMULPS(t, w, t)   // dy·(…)
			VMOVUPS(t, Mem{Base: p[dst]})
		case sigSwiGLU:
			VMOVUPS(Mem{Base: p["a"]}, v)
			sigma(v, s, t, tmp, tmp2, r, nn)
			VMULPS(s, v, s)
			VMULPS(Mem{Base: p["b"]}, s, s)
			VMOVUPS(s, Mem{Base: p["y"]})
		}
		for _, r := range regs {
			ADDQ(U32(4*lanes), r)
		}
	})
	VZEROUPPER()
	RET()
}
