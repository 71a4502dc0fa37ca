package kernels

import "github.com/chewxy/math32"

// The LayerNorm rows, forward and backward, on AVX-512 kernels with Go
// twins that follow their order (sums kept in 16 lanes, lane i taking
// elements i, i+16, …, then added pairwise; no fused multiply-add: every
// product is converted to float32 before it is added, which keeps the Go
// compiler from fusing it on architectures with FMA), so both give the
// same bits on every machine.

// LayerNormStats returns the mean of x and 1/√(variance + eps), the
// variance taken about the mean in a second pass.
func LayerNormStats(x []float32, eps float32) (mu, rstd float32) {
	var lanes [16]float32
	blocks, mask := tailMask(len(x))
	if !lnSumVector(x, blocks, mask, &lanes) {
		lnSumGo(x, &lanes)
	}
	n := float32(len(x))
	mu = sumLanes(&lanes) / n
	lanes = [16]float32{}
	if !lnSqDevVector(x, blocks, mask, mu, &lanes) {
		lnSqDevGo(x, mu, &lanes)
	}
	return mu, 1 / math32.Sqrt(sumLanes(&lanes)/n+eps)
}

// LayerNormRow normalises one row, y = ((x − μ)/σ)·(γ + g0) + β (g0 = 1
// for zero-centred γ), and returns μ and 1/σ.
func LayerNormRow(y, x, gamma, beta []float32, eps, g0 float32) (mu, rstd float32) {
	if len(x) == 0 {
		return 0, 0
	}
	mu, rstd = LayerNormStats(x, eps)
	y, gamma, beta = y[:len(x)], gamma[:len(x)], beta[:len(x)]
	blocks, mask := tailMask(len(x))
	if !lnApplyVector(y, x, gamma, beta, blocks, mask, mu, rstd, g0) {
		lnApplyGo(y, x, gamma, beta, mu, rstd, g0)
	}
	return mu, rstd
}

// LayerNormGradRow does one row of the backward: with x̂ = (x − μ)/σ and
// g = dy·(γ + g0), dx = (g − mean(g) − x̂·mean(g·x̂))/σ; it adds dy·x̂ to
// dγ and dy to dβ.
func LayerNormGradRow(dx, dgamma, dbeta, x, dy, gamma []float32, eps, g0 float32) {
	if len(x) == 0 {
		return
	}
	mu, rs := LayerNormStats(x, eps)
	dx, dy, gamma, dgamma, dbeta = dx[:len(x)], dy[:len(x)], gamma[:len(x)], dgamma[:len(x)], dbeta[:len(x)]
	var lanes [32]float32
	blocks, mask := tailMask(len(x))
	if !lnGradAccumVector(x, dy, gamma, dgamma, dbeta, blocks, mask, mu, rs, g0, &lanes) {
		lnGradAccumGo(x, dy, gamma, dgamma, dbeta, mu, rs, g0, &lanes)
	}
	n := float32(len(x))
	fm, fmx := sumLanes((*[16]float32)(lanes[:16]))/n, sumLanes((*[16]float32)(lanes[16:]))/n
	if !lnGradDxVector(dx, x, dy, gamma, blocks, mask, mu, rs, g0, fm, fmx) {
		lnGradDxGo(dx, x, dy, gamma, mu, rs, g0, fm, fmx)
	}
}

// lnSumGo is lnSumAVX512's twin.
func lnSumGo(x []float32, lanes *[16]float32) {
	for i, v := range x {
		lanes[i%16] += v
	}
}

// lnSqDevGo is lnSqDevAVX512's twin.
func lnSqDevGo(x []float32, mu float32, lanes *[16]float32) {
	for i, v := range x {
		d := v - mu
		lanes[i%16] += float32(d * d)
	}
}

// lnApplyGo is lnApplyAVX512's twin.
func lnApplyGo(y, x, gamma, beta []float32, mu, r, g0 float32) {
	for i, v := range x {
		y[i] = float32(float32(float32(v-mu)*r)*float32(gamma[i]+g0)) + beta[i]
	}
}

// lnGradAccumGo is lnGradAccumAVX512's twin.
func lnGradAccumGo(x, dy, gamma, dgamma, dbeta []float32, mu, rs, g0 float32, lanes *[32]float32) {
	for i, v := range x {
		xh := float32(float32(v-mu) * rs)
		gy := dy[i]
		g := float32(float32(gamma[i]+g0) * gy)
		lanes[i%16] += g
		lanes[16+i%16] += float32(g * xh)
		dgamma[i] += float32(gy * xh)
		dbeta[i] += gy
	}
}

// lnGradDxGo is lnGradDxAVX512's twin.
func lnGradDxGo(dx, x, dy, gamma []float32, mu, rs, g0, fm, fmx float32) {
	for i, v := range x {
		g := float32(float32(gamma[i]+g0)*dy[i]) - fm
		xh := float32(float32(float32(v-mu)*rs) * fmx)
		dx[i] = float32(g-xh) * rs
	}
}

// RMSNorm rows (Zhang & Sennrich; Llama's, Transformer Engine's
// normalization="RMSNorm"): the LayerNorm kernels without the mean and
// without β, in the same lane order, so vector kernels and twins agree
// bit for bit.

// RMSNormStats returns 1/√(mean(x²) + eps), the sum of squares kept in
// 16 lanes then added pairwise (LayerNormStats's second pass about 0).
func RMSNormStats(x []float32, eps float32) (rstd float32) {
	var lanes [16]float32
	blocks, mask := tailMask(len(x))
	if !lnSqDevVector(x, blocks, mask, 0, &lanes) {
		lnSqDevGo(x, 0, &lanes)
	}
	return 1 / math32.Sqrt(sumLanes(&lanes)/float32(len(x))+eps)
}

// RMSNormRow normalises one row, y = (x/rms)·(γ + g0) with rms =
// √(mean(x²) + eps) (g0 = 1 for zero-centred γ), and returns 1/rms.
func RMSNormRow(y, x, gamma []float32, eps, g0 float32) (rstd float32) {
	if len(x) == 0 {
		return 0
	}
	rstd = RMSNormStats(x, eps)
	y, gamma = y[:len(x)], gamma[:len(x)]
	blocks, mask := tailMask(len(x))
	if !rmsApplyVector(y, x, gamma, blocks, mask, rstd, g0) {
		rmsApplyGo(y, x, gamma, rstd, g0)
	}
	return rstd
}

// RMSNormGradRow does one row of the RMSNorm backward: with x̂ = x/rms
// and g = dy·(γ + g0), dx = (g − x̂·mean(g·x̂))/rms; it adds dy·x̂ to dγ.
func RMSNormGradRow(dx, dgamma, x, dy, gamma []float32, eps, g0 float32) {
	if len(x) == 0 {
		return
	}
	rs := RMSNormStats(x, eps)
	dx, dy, gamma, dgamma = dx[:len(x)], dy[:len(x)], gamma[:len(x)], dgamma[:len(x)]
	var lanes [16]float32
	blocks, mask := tailMask(len(x))
	if !rmsGradAccumVector(x, dy, gamma, dgamma, blocks, mask, rs, g0, &lanes) {
		rmsGradAccumGo(x, dy, gamma, dgamma, rs, g0, &lanes)
	}
	fmx := sumLanes(&lanes) / float32(len(x))
	// LayerNorm's dx with mean 0 and no mean(g) term: g − 0 is g.
	if !lnGradDxVector(dx, x, dy, gamma, blocks, mask, 0, rs, g0, 0, fmx) {
		lnGradDxGo(dx, x, dy, gamma, 0, rs, g0, 0, fmx)
	}
}

// rmsApplyGo is rmsApplyAVX512's twin.
func rmsApplyGo(y, x, gamma []float32, r, g0 float32) {
	for i, v := range x {
		y[i] = float32(float32(v*r) * float32(gamma[i]+g0))
	}
}

// rmsGradAccumGo is rmsGradAccumAVX512's twin.
func rmsGradAccumGo(x, dy, gamma, dgamma []float32, rs, g0 float32, lanes *[16]float32) {
	for i, v := range x {
		xh := float32(v * rs)
		gy := dy[i]
		g := float32(float32(gamma[i]+g0) * gy)
		lanes[i%16] += float32(g * xh)
		dgamma[i] += float32(gy * xh)
	}
}
