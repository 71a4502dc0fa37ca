//go:build !purego

package kernels

// The NEON LayerNorm and RMSNorm rows (asm_arm64.s): the whole blocks of
// 16 values (four vectors of lanes) run there, the rest in the Go twin,
// which continues in the same lanes (the blocks end at a multiple of 16),
// so the bits are the twin's. blocks and mask are the AVX-512 kernels'
// tail description; here only blocks is used.

//go:noescape
func neonLnSum(x *float32, n int, lanes *[16]float32)

//go:noescape
func neonLnSqDev(x *float32, n int, mu float32, lanes *[16]float32)

//go:noescape
func neonLnApply(y, x, gamma, beta *float32, n int, mu, r, g0 float32)

//go:noescape
func neonLnGradAccum(x, dy, gamma, dgamma, dbeta *float32, n int, mu, rs, g0 float32, lanes *[32]float32)

//go:noescape
func neonLnGradDx(dx, x, dy, gamma *float32, n int, mu, rs, g0, fm, fmx float32)

//go:noescape
func neonRmsApply(y, x, gamma *float32, n int, r, g0 float32)

//go:noescape
func neonRmsGradAccum(x, dy, gamma, dgamma *float32, n int, rs, g0 float32, lanes *[16]float32)

// whole returns the length of x's whole blocks of 16, 0 without NEON.
func whole(x []float32, blocks int) int {
	if !hasNEON {
		return 0
	}
	return min(blocks*16, len(x)&^15)
}

func lnSumVector(x []float32, blocks int, mask uint16, lanes *[16]float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	neonLnSum(&x[0], n, lanes)
	for i, v := range x[n:] {
		lanes[i%16] += v
	}
	return true
}

func lnSqDevVector(x []float32, blocks int, mask uint16, mu float32, lanes *[16]float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	neonLnSqDev(&x[0], n, mu, lanes)
	for i, v := range x[n:] {
		d := v - mu
		lanes[i%16] += float32(d * d)
	}
	return true
}

func lnApplyVector(y, x, gamma, beta []float32, blocks int, mask uint16, mu, r, g0 float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	_, _, _ = y[len(x)-1], gamma[len(x)-1], beta[len(x)-1]
	neonLnApply(&y[0], &x[0], &gamma[0], &beta[0], n, mu, r, g0)
	lnApplyGo(y[n:], x[n:], gamma[n:], beta[n:], mu, r, g0)
	return true
}

func lnGradAccumVector(x, dy, gamma, dgamma, dbeta []float32, blocks int, mask uint16, mu, rs, g0 float32, lanes *[32]float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	_, _, _, _ = dy[len(x)-1], gamma[len(x)-1], dgamma[len(x)-1], dbeta[len(x)-1]
	neonLnGradAccum(&x[0], &dy[0], &gamma[0], &dgamma[0], &dbeta[0], n, mu, rs, g0, lanes)
	lnGradAccumGo(x[n:], dy[n:], gamma[n:], dgamma[n:], dbeta[n:], mu, rs, g0, lanes)
	return true
}

func lnGradDxVector(dx, x, dy, gamma []float32, blocks int, mask uint16, mu, rs, g0, fm, fmx float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	_, _, _ = dx[len(x)-1], dy[len(x)-1], gamma[len(x)-1]
	neonLnGradDx(&dx[0], &x[0], &dy[0], &gamma[0], n, mu, rs, g0, fm, fmx)
	lnGradDxGo(dx[n:], x[n:], dy[n:], gamma[n:], mu, rs, g0, fm, fmx)
	return true
}

func rmsApplyVector(y, x, gamma []float32, blocks int, mask uint16, r, g0 float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	_, _ = y[len(x)-1], gamma[len(x)-1]
	neonRmsApply(&y[0], &x[0], &gamma[0], n, r, g0)
	rmsApplyGo(y[n:], x[n:], gamma[n:], r, g0)
	return true
}

func rmsGradAccumVector(x, dy, gamma, dgamma []float32, blocks int, mask uint16, rs, g0 float32, lanes *[16]float32) bool {
	n := whole(x, blocks)
	if n == 0 {
		return false
	}
	_, _, _ = dy[len(x)-1], gamma[len(x)-1], dgamma[len(x)-1]
	neonRmsGradAccum(&x[0], &dy[0], &gamma[0], &dgamma[0], n, rs, g0, lanes)
	rmsGradAccumGo(x[n:], dy[n:], gamma[n:], dgamma[n:], rs, g0, lanes)
	return true
}
