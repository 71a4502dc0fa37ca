package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The LayerNorm row kernels (kernels/layernorm.go): each walks one row of
// 16·blocks values and a masked last vector (mask: its valid lanes),
// keeping any sums in 16 lanes (lane i takes elements i, i+16, …) that
// it stores for Go to add pairwise, as the Go twins do.

// rowLoop emits body over the full blocks and then once more under the
// mask in K1 when it is not empty; body gets whether it runs masked and
// advances the pointers itself.
func rowLoop(name string, n Register, body func(masked bool)) {
	loop(name, n, func() { body(false) })
	KORTESTW(K1, K1)
	JZ(LabelRef(name + "_end"))
	body(true)
	Label(name + "_end")
}

// load emits a (masked, zeroing) load.
func load(m Mem, masked bool, z VecPhysical) {
	if masked {
		VMOVUPS_Z(m, K1, z)
	} else {
		VMOVUPS(m, z)
	}
}

// store emits a (masked) store.
func store(z VecPhysical, masked bool, m Mem) {
	if masked {
		VMOVUPS(z, K1, m)
	} else {
		VMOVUPS(z, m)
	}
}

// lnSums emits the lane sums of x (withMean false) or of (x − mu)²
// (withMean true), stored to out.
func lnSums(name string, withMean bool) {
	sig := "func(x *float32, blocks int, mask uint16, out *[16]float32)"
	what := "x"
	if withMean {
		sig = "func(x *float32, blocks int, mask uint16, mu float32, out *[16]float32)"
		what = "(x − mu)²"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " stores the lane sums of " + what + " over one row; its Go twin is " + name[:len(name)-6] + "Go (layernorm.go) (AVX-512F).")
	x := Load(Param("x"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	mu, acc, v := Z10, Z0, Z1
	if withMean {
		broadcastParams(mu, "mu")
	}
	VPXORD(acc, acc, acc)
	rowLoop(name, n, func(masked bool) {
		load(Mem{Base: x}, masked, v)
		if withMean {
			VSUBPS(mu, v, v)
			VMULPS(v, v, v)
		}
		if masked {
			VADDPS(v, acc, K1, acc)
		} else {
			VADDPS(v, acc, acc)
		}
		ADDQ(U32(64), x)
	})
	out := Load(Param("out"), GP64())
	VMOVUPS(acc, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// lnApply emits y = ((x − mu)·r)·(γ + g0) + β over one row, or with rms
// (RMSNorm: no mean, no β) y = (x·r)·(γ + g0).
func lnApply(rms bool) {
	name, sig := "lnApplyAVX512", "func(y, x, gamma, beta *float32, blocks int, mask uint16, mu, r, g0 float32)"
	doc := " writes y = ((x − mu)·r)·(γ + g0) + β over one row; its Go twin is lnApplyGo (layernorm.go) (AVX-512F)."
	if rms {
		name, sig = "rmsApplyAVX512", "func(y, x, gamma *float32, blocks int, mask uint16, r, g0 float32)"
		doc = " writes y = (x·r)·(γ + g0) over one row; its Go twin is rmsApplyGo (layernorm.go) (AVX-512F)."
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + doc)
	y, x := Load(Param("y"), GP64()), Load(Param("x"), GP64())
	gamma := Load(Param("gamma"), GP64())
	ptrs := []Register{y, x, gamma}
	var beta Register
	if !rms {
		beta = Load(Param("beta"), GP64())
		ptrs = append(ptrs, beta)
	}
	n := Load(Param("blocks"), GP64())
	maskK1()
	mu, r, g0 := Z10, Z11, Z12
	if rms {
		broadcastParams(r, "r", g0, "g0")
	} else {
		broadcastParams(mu, "mu", r, "r", g0, "g0")
	}
	rowLoop(name, n, func(masked bool) {
		load(Mem{Base: x}, masked, Z0)
		load(Mem{Base: gamma}, masked, Z1)
		if !rms {
			load(Mem{Base: beta}, masked, Z2)
			VSUBPS(mu, Z0, Z0)
		}
		VMULPS(r, Z0, Z0)
		VADDPS(g0, Z1, Z1)
		VMULPS(Z1, Z0, Z0)
		if !rms {
			VADDPS(Z2, Z0, Z0)
		}
		store(Z0, masked, Mem{Base: y})
		for _, p := range ptrs {
			ADDQ(U32(64), p)
		}
	})
	VZEROUPPER()
	RET()
}

// rmsGradAccum emits, over one row of the RMSNorm backward, with xh =
// x·rs and g = dy·(γ + g0): the lane sums of g·xh (stored to out), and
// dγ += dy·xh.
func rmsGradAccum() {
	name := "rmsGradAccumAVX512"
	TEXT(name, NOSPLIT, "func(x, dy, gamma, dgamma *float32, blocks int, mask uint16, rs, g0 float32, out *[16]float32)")
	Pragma("noescape")
	Doc(name + " accumulates one row of the RMSNorm backward's sum and dγ; its Go twin is rmsGradAccumGo (layernorm.go) (AVX-512F).")
	x, dy, gamma := Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("gamma"), GP64())
	dg := Load(Param("dgamma"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	rs, g0 := Z11, Z12
	broadcastParams(rs, "rs", g0, "g0")
	mgx := Z21
	VPXORD(mgx, mgx, mgx)
	rowLoop(name, n, func(masked bool) {
		xh, gy, g, t := Z0, Z1, Z2, Z3
		load(Mem{Base: x}, masked, xh)
		load(Mem{Base: dy}, masked, gy)
		load(Mem{Base: gamma}, masked, g)
		VMULPS(rs, xh, xh)
		VADDPS(g0, g, g)
		VMULPS(gy, g, g)
		VMULPS(xh, g, t)
		if masked {
			VADDPS(t, mgx, K1, mgx)
		} else {
			VADDPS(t, mgx, mgx)
		}
		VMULPS(xh, gy, t)
		load(Mem{Base: dg}, masked, Z4)
		VADDPS(t, Z4, Z4)
		store(Z4, masked, Mem{Base: dg})
		for _, p := range []Register{x, dy, gamma, dg} {
			ADDQ(U32(64), p)
		}
	})
	out := Load(Param("out"), GP64())
	VMOVUPS(mgx, Mem{Base: out})
	VZEROUPPER()
	RET()
}

// lnGradAccum emits, over one row, with xh = (x − mu)·rs and g = dy·(γ +
// g0): lane sums of g and g·xh (stored to out[0:16] and out[16:32]), and
// dγ += dy·xh, dβ += dy.
func lnGradAccum() {
	name := "lnGradAccumAVX512"
	TEXT(name, NOSPLIT, "func(x, dy, gamma, dgamma, dbeta *float32, blocks int, mask uint16, mu, rs, g0 float32, out *[32]float32)")
	Pragma("noescape")
	Doc(name + " accumulates one row of the LayerNorm backward's sums and dγ, dβ; its Go twin is lnGradAccumGo (layernorm.go) (AVX-512F).")
	x, dy, gamma := Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("gamma"), GP64())
	dg, db := Load(Param("dgamma"), GP64()), Load(Param("dbeta"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	mu, rs, g0 := Z10, Z11, Z12
	broadcastParams(mu, "mu", rs, "rs", g0, "g0")
	mg, mgx := Z20, Z21
	VPXORD(mg, mg, mg)
	VPXORD(mgx, mgx, mgx)
	rowLoop(name, n, func(masked bool) {
		xh, gy, g, t := Z0, Z1, Z2, Z3
		load(Mem{Base: x}, masked, xh)
		load(Mem{Base: dy}, masked, gy)
		load(Mem{Base: gamma}, masked, g)
		VSUBPS(mu, xh, xh)
		VMULPS(rs, xh, xh)
		VADDPS(g0, g, g)
		VMULPS(gy, g, g)
		VMULPS(xh, g, t)
		if masked {
			VADDPS(g, mg, K1, mg)
			VADDPS(t, mgx, K1, mgx)
		} else {
			VADDPS(g, mg, mg)
			VADDPS(t, mgx, mgx)
		}
		VMULPS(xh, gy, t)
		load(Mem{Base: dg}, masked, Z4)
		VADDPS(t, Z4, Z4)
		store(Z4, masked, Mem{Base: dg})
		load(Mem{Base: db}, masked, Z5)
		VADDPS(gy, Z5, Z5)
		store(Z5, masked, Mem{Base: db})
		for _, p := range []Register{x, dy, gamma, dg, db} {
			ADDQ(U32(64), p)
		}
	})
	out := Load(Param("out"), GP64())
	VMOVUPS(mg, Mem{Base: out})
	VMOVUPS(mgx, Mem{Base: out, Disp: 64})
	VZEROUPPER()
	RET()
}

// lnGradDx emits dx = rs·((g − fm) − ((x − mu)·rs)·fmx), g = dy·(γ + g0),
// over one row.
func lnGradDx() {
	name := "lnGradDxAVX512"
	TEXT(name, NOSPLIT, "func(dx, x, dy, gamma *float32, blocks int, mask uint16, mu, rs, g0, fm, fmx float32)")
	Pragma("noescape")
	Doc(name + " writes one row of the LayerNorm backward's dx; its Go twin is lnGradDxGo (layernorm.go) (AVX-512F).")
	dx, x := Load(Param("dx"), GP64()), Load(Param("x"), GP64())
	dy, gamma := Load(Param("dy"), GP64()), Load(Param("gamma"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	mu, rs, g0, fm, fmx := Z10, Z11, Z12, Z13, Z14
	broadcastParams(mu, "mu", rs, "rs", g0, "g0", fm, "fm", fmx, "fmx")
	rowLoop(name, n, func(masked bool) {
		xh, g, t := Z0, Z1, Z2
		load(Mem{Base: x}, masked, xh)
		load(Mem{Base: gamma}, masked, g)
		load(Mem{Base: dy}, masked, t)
		VADDPS(g0, g, g)
		VMULPS(t, g, g)    // g = dy·(γ+g0)
		VSUBPS(fm, g, g)   // g − fm
		VSUBPS(mu, xh, xh) // x − mu
		VMULPS(rs, xh, xh)
		VMULPS(fmx, xh, xh)
		VSUBPS(xh, g, g)
		VMULPS(rs, g, g)
		store(g, masked, Mem{Base: dx})
		for _, p := range []Register{dx, x, dy, gamma} {
			ADDQ(U32(64), p)
		}
	})
	VZEROUPPER()
	RET()
}
