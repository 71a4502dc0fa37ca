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

// sigmoidFamily emits one kernel of the family.
func sigmoidFamily(kind sigmoidKind) {
	k := sigmoidKernels[kind]
	TEXT(k.name, NOSPLIT, k.sig)
	Pragma("noescape")
	Doc(k.name + " is the vector form of the Go loop in " + k.twin + " (sigmoid.go), bit for bit (AVX-512F).")
	p := map[string]Register{}
	var regs []Register
	for _, name := range k.ptrs {
		p[name] = Load(Param(name), GP64())
		regs = append(regs, p[name])
	}
	n := Load(Param("blocks"), GP64())
	c := &constRegs{next: 12}
	e := newExpRegsFrom(c)
	zero := c.reg(0)
	// sigma writes σ(v) into s (v kept), with t, tmp, tmp2, r, nn scratch.
	sigma := func(v, s, t, tmp, tmp2, r, nn VecPhysical) {
		VSUBPS(v, zero, s) // −v
		fastExp(e, s, t, tmp, tmp2, r, nn)
		VADDPS(e.one, s, s)
		VDIVPS(s, e.one, s) // 1/(1+e)
	}
	loop(k.name, n, func() {
		v, s, t, tmp, tmp2, r, nn, w := Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7
		switch kind {
		case sigSigmoid:
			VMOVUPS(Mem{Base: p["x"]}, v)
			sigma(v, s, t, tmp, tmp2, r, nn)
			VMOVUPS(s, Mem{Base: p["y"]})
		case sigSigmoidGrad:
			VMOVUPS(Mem{Base: p["y"]}, v)
			VSUBPS(v, e.one, t) // 1 − y
			VMULPS(t, v, t)     // y·(1 − y)
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
			VSUBPS(s, e.one, t) // 1 − σ
			VMULPS(t, v, t)     // x·(1 − σ)
			VADDPS(e.one, t, t) // 1 + x·(1 − σ)
			VMULPS(t, s, t)     // σ·(…)
			VMULPS(t, w, t)     // dy·(…)
			VMOVUPS(t, Mem{Base: p[dst]})
		case sigSwiGLU:
			VMOVUPS(Mem{Base: p["a"]}, v)
			sigma(v, s, t, tmp, tmp2, r, nn)
			VMULPS(s, v, s)
			VMULPS(Mem{Base: p["b"]}, s, s)
			VMOVUPS(s, Mem{Base: p["y"]})
		}
		for _, r := range regs {
			ADDQ(U32(64), r)
		}
	})
	VZEROUPPER()
	RET()
}

// sigmoidFamilyAVX2 emits one kernel of the family on 8 lanes (AVX2):
// the same operations in the same order as sigmoidFamily and the Go
// twin, over 8·blocks values; name is the AVX-512 kernel's with AVX2 for
// AVX512.
func sigmoidFamilyAVX2(kind sigmoidKind) {
	k := sigmoidKernels[kind]
	name := strings.TrimSuffix(k.name, "AVX512") + "AVX2"
	TEXT(name, NOSPLIT, k.sig)
	Pragma("noescape")
	Doc(name + " is the 8-lane form of the Go loop in " + k.twin + " (sigmoid.go), bit for bit (AVX2).")
	p := map[string]Register{}
	var regs []Register
	for _, name := range k.ptrs {
		p[name] = Load(Param(name), GP64())
		regs = append(regs, p[name])
	}
	n := Load(Param("blocks"), GP64())
	zero, one := Y15, Y14
	VXORPS(zero, zero, zero)
	VMOVUPS(acf(1), one)
	sigma := func(v, s, t, tmp, tmp2, r, nn VecPhysical) {
		VSUBPS(v, zero, s) // −v
		fastExpAVX2(s, t, tmp, tmp2, r, nn)
		VADDPS(one, s, s)
		VDIVPS(s, one, s) // 1/(1+e)
	}
	loop(name, n, func() {
		v, s, t, tmp, tmp2, r, nn, w := Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7
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
			ADDQ(U32(32), r)
		}
	})
	VZEROUPPER()
	RET()
}
