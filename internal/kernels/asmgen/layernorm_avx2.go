package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 forms of the LayerNorm and RMSNorm row kernels: whole blocks
// only (16 values for the kernels that keep lane sums, in two 8-lane
// registers each, so the 16 lane partials are the AVX-512 kernels'; 8
// for the element-wise ones); the Go caller does a row's rest with the
// twin, into the same lanes. No fused multiply-add, as in the twins.

// lnSumsAVX2 emits lnSumAVX2 (lanes = Σ x) or lnSqDevAVX2 (lanes =
// Σ (x − mu)²) over 16·blocks values.
func lnSumsAVX2(name string, dev bool) {
	sig := "func(x *float32, blocks int, lanes *[16]float32)"
	if dev {
		sig = "func(x *float32, blocks int, mu float32, lanes *[16]float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " stores 16 lane sums over 16·blocks values; its Go twin is lnSumGo or lnSqDevGo (layernorm.go) (AVX2).")
	x := Load(Param("x"), GP64())
	n := Load(Param("blocks"), GP64())
	mu := Y10
	if dev {
		VBROADCASTSS(paramAddr("mu"), mu)
	}
	acc := []VecPhysical{Y0, Y1}
	VXORPS(Y0, Y0, Y0)
	VXORPS(Y1, Y1, Y1)
	loop(name, n, func() {
		for h := 0; h < 2; h++ {
			t := Y2
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, t)
			if dev {
				VSUBPS(mu, t, t)
				VMULPS(t, t, t)
			}
			VADDPS(t, acc[h], acc[h])
		}
		ADDQ(U32(64), x)
	})
	l := Load(Param("lanes"), GP64())
	VMOVUPS(Y0, Mem{Base: l})
	VMOVUPS(Y1, Mem{Base: l, Disp: 32})
	VZEROUPPER()
	RET()
}

// lnApplyAVX2 emits y = ((x − mu)·r)·(γ + g0) + β over 8·blocks values,
// or for RMSNorm y = (x·r)·(γ + g0).
func lnApplyAVX2(rms bool) {
	name, sig := "lnApplyAVX2", "func(y, x, gamma, beta *float32, blocks int, mu, r, g0 float32)"
	if rms {
		name, sig = "rmsApplyAVX2", "func(y, x, gamma *float32, blocks int, r, g0 float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " normalises 8·blocks values of a row; its Go twin is lnApplyGo or rmsApplyGo (layernorm.go) (AVX2).")
	y, x, gamma := Load(Param("y"), GP64()), Load(Param("x"), GP64()), Load(Param("gamma"), GP64())
	var beta Register
	if !rms {
		beta = Load(Param("beta"), GP64())
	}
	n := Load(Param("blocks"), GP64())
	mu, r, g0 := Y10, Y11, Y12
	if !rms {
		VBROADCASTSS(paramAddr("mu"), mu)
	}
	broadcastParams(r, "r", g0, "g0")
	loop(name, n, func() {
		t, u := Y0, Y1
		VMOVUPS(Mem{Base: x}, t)
		if !rms {
			VSUBPS(mu, t, t)
		}
		VMULPS(r, t, t)
		VMOVUPS(Mem{Base: gamma}, u)
		VADDPS(g0, u, u)
		VMULPS(u, t, t)
		if !rms {
			VADDPS(Mem{Base: beta}, t, t)
			ADDQ(U32(32), beta)
		}
		VMOVUPS(t, Mem{Base: y})
		for _, p := range []Register{y, x, gamma} {
			ADDQ(U32(32), p)
		}
	})
	VZEROUPPER()
	RET()
}

// lnGradAccumAVX2 emits the backward's sums over 16·blocks values: with
// x̂ = (x − mu)·rs (RMSNorm: x·rs) and g = (γ + g0)·dy, lanes[0:16] +=
// g and lanes[16:32] += g·x̂ (RMSNorm: lanes[0:16] += g·x̂ only), dγ +=
// dy·x̂ and (LayerNorm) dβ += dy.
func lnGradAccumAVX2(rms bool) {
	name := "lnGradAccumAVX2"
	sig := "func(x, dy, gamma, dgamma, dbeta *float32, blocks int, mu, rs, g0 float32, lanes *[32]float32)"
	if rms {
		name, sig = "rmsGradAccumAVX2", "func(x, dy, gamma, dgamma *float32, blocks int, rs, g0 float32, lanes *[16]float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " accumulates a row's backward sums over 16·blocks values; its Go twin is lnGradAccumGo or rmsGradAccumGo (layernorm.go) (AVX2).")
	x, dy, gamma, dgamma := Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("gamma"), GP64()), Load(Param("dgamma"), GP64())
	var dbeta Register
	if !rms {
		dbeta = Load(Param("dbeta"), GP64())
	}
	n := Load(Param("blocks"), GP64())
	mu, rs, g0 := Y10, Y11, Y12
	if !rms {
		VBROADCASTSS(paramAddr("mu"), mu)
	}
	broadcastParams(rs, "rs", g0, "g0")
	sumG := []VecPhysical{Y4, Y5}  // Σ g (LayerNorm)
	sumGX := []VecPhysical{Y6, Y7} // Σ g·x̂
	for _, z := range []VecPhysical{Y4, Y5, Y6, Y7} {
		VXORPS(z, z, z)
	}
	loop(name, n, func() {
		for h := 0; h < 2; h++ {
			xh, gy, g, t := Y0, Y1, Y2, Y3
			d := 32 * h
			VMOVUPS(Mem{Base: x, Disp: d}, xh)
			if !rms {
				VSUBPS(mu, xh, xh)
			}
			VMULPS(rs, xh, xh)
			VMOVUPS(Mem{Base: dy, Disp: d}, gy)
			VMOVUPS(Mem{Base: gamma, Disp: d}, g)
			VADDPS(g0, g, g)
			VMULPS(gy, g, g)
			if !rms {
				VADDPS(g, sumG[h], sumG[h])
			}
			VMULPS(xh, g, t)
			VADDPS(t, sumGX[h], sumGX[h])
			VMULPS(xh, gy, t)
			VADDPS(Mem{Base: dgamma, Disp: d}, t, t)
			VMOVUPS(t, Mem{Base: dgamma, Disp: d})
			if !rms {
				VADDPS(Mem{Base: dbeta, Disp: d}, gy, t)
				VMOVUPS(t, Mem{Base: dbeta, Disp: d})
			}
		}
		ptrs := []Register{x, dy, gamma, dgamma}
		if !rms {
			ptrs = append(ptrs, dbeta)
		}
		for _, p := range ptrs {
			ADDQ(U32(64), p)
		}
	})
	l := Load(Param("lanes"), GP64())
	if rms {
		VMOVUPS(Y6, Mem{Base: l})
		VMOVUPS(Y7, Mem{Base: l, Disp: 32})
	} else {
		VMOVUPS(Y4, Mem{Base: l})
		VMOVUPS(Y5, Mem{Base: l, Disp: 32})
		VMOVUPS(Y6, Mem{Base: l, Disp: 64})
		VMOVUPS(Y7, Mem{Base: l, Disp: 96})
	}
	VZEROUPPER()
	RET()
}

// lnGradDxAVX2 emits dx = (((γ + g0)·dy − fm) − ((x − mu)·rs)·fmx)·rs
// over 8·blocks values.
func lnGradDxAVX2() {
	name := "lnGradDxAVX2"
	TEXT(name, NOSPLIT, "func(dx, x, dy, gamma *float32, blocks int, mu, rs, g0, fm, fmx float32)")
	Pragma("noescape")
	Doc(name + " writes a row's dx over 8·blocks values; its Go twin is lnGradDxGo (layernorm.go) (AVX2).")
	dx, x, dy, gamma := Load(Param("dx"), GP64()), Load(Param("x"), GP64()), Load(Param("dy"), GP64()), Load(Param("gamma"), GP64())
	n := Load(Param("blocks"), GP64())
	mu, rs, g0, fm, fmx := Y10, Y11, Y12, Y13, Y14
	broadcastParams(mu, "mu", rs, "rs", g0, "g0", fm, "fm", fmx, "fmx")
	loop(name, n, func() {
		g, xh := Y0, Y1
		VMOVUPS(Mem{Base: gamma}, g)
		VADDPS(g0, g, g)
		VMULPS(Mem{Base: dy}, g, g)
		VSUBPS(fm, g, g)
		VMOVUPS(Mem{Base: x}, xh)
		VSUBPS(mu, xh, xh)
		VMULPS(rs, xh, xh)
		VMULPS(fmx, xh, xh)
		VSUBPS(xh, g, g)
		VMULPS(rs, g, g)
		VMOVUPS(g, Mem{Base: dx})
		for _, p := range []Register{dx, x, dy, gamma} {
			ADDQ(U32(32), p)
		}
	})
	VZEROUPPER()
	RET()
}

// layerNormKernelsAVX2 emits the AVX2 LayerNorm and RMSNorm kernels.
func layerNormKernelsAVX2() {
	lnSumsAVX2("lnSumAVX2", false)
	lnSumsAVX2("lnSqDevAVX2", true)
	lnApplyAVX2(false)
	lnApplyAVX2(true)
	lnGradAccumAVX2(false)
	lnGradAccumAVX2(true)
	lnGradDxAVX2()
}
