package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerNormRowsMatchTwins checks the LayerNorm row kernels against
// their Go twins bit for bit at every length up to 70 (every tail mask),
// with guard values past the row, and against the float64 definitions.
func TestLayerNormRowsMatchTwins(t *testing.T) { withISA(t, testLayerNormRowsMatchTwins) }

func testLayerNormRowsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const eps = 1e-5
	for n := 1; n <= 70; n++ {
		for _, g0 := range []float32{0, 1} {
			x, dy, gamma, beta := randSlice(rng, n), randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)
			for i := range x {
				x[i] = 3*x[i] + 2
			}
			// Vector (when this CPU has it) and twin.
			var sv, sq [16]float32

			lnSumGo(x, &sv)
			mu := sumLanes(&sv) / float32(n)
			lnSqDevGo(x, mu, &sq)
			rstd := 1 / float32(math.Sqrt(float64(sumLanes(&sq)/float32(n)+eps)))
			gmu, grs := LayerNormStats(x, eps)
			if gmu != mu || grs != rstd {
				t.Fatalf("n=%d: stats %v %v, twin %v %v", n, gmu, grs, mu, rstd)
			}
			y, yt := append(make([]float32, n), guard), append(make([]float32, n), guard)
			LayerNormRow(y, x, gamma, beta, eps, g0)
			lnApplyGo(yt, x, gamma, beta, mu, rstd, g0)
			dx, dxt := append(make([]float32, n), guard), append(make([]float32, n), guard)
			dg, db := append(make([]float32, n), guard), append(make([]float32, n), guard)
			dgt, dbt := append(make([]float32, n), guard), append(make([]float32, n), guard)
			LayerNormGradRow(dx, dg, db, x, dy, gamma, eps, g0)
			var lanes [32]float32
			lnGradAccumGo(x, dy, gamma, dgt, dbt, mu, rstd, g0, &lanes)
			fm, fmx := sumLanes((*[16]float32)(lanes[:16]))/float32(n), sumLanes((*[16]float32)(lanes[16:]))/float32(n)
			lnGradDxGo(dxt, x, dy, gamma, mu, rstd, g0, fm, fmx)
			for i := 0; i <= n; i++ {
				if y[i] != yt[i] || dx[i] != dxt[i] || dg[i] != dgt[i] || db[i] != dbt[i] {
					t.Fatalf("n=%d g0=%v [%d]: y %v/%v dx %v/%v dγ %v/%v dβ %v/%v", n, g0, i, y[i], yt[i], dx[i], dxt[i], dg[i], dgt[i], db[i], dbt[i])
				}
			}
			// The float64 definitions.
			var m, v float64
			for _, a := range x {
				m += float64(a)
			}
			m /= float64(n)
			for _, a := range x {
				v += (float64(a) - m) * (float64(a) - m)
			}
			r := 1 / math.Sqrt(v/float64(n)+eps)
			var mg, mgx float64
			for i, a := range x {
				xh := (float64(a) - m) * r
				g := float64(dy[i]) * (float64(gamma[i]) + float64(g0))
				mg += g
				mgx += g * xh
				want := xh*(float64(gamma[i])+float64(g0)) + float64(beta[i])
				if math.Abs(float64(y[i])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("n=%d: y[%d] = %v, want %v", n, i, y[i], want)
				}
				if w := float64(dy[i]) * xh; math.Abs(float64(dg[i])-w) > 1e-5*(1+math.Abs(w)) {
					t.Fatalf("n=%d: dγ[%d] = %v, want %v", n, i, dg[i], w)
				}
				if db[i] != dy[i] {
					t.Fatalf("n=%d: dβ[%d] = %v, want %v", n, i, db[i], dy[i])
				}
			}
			for i, a := range x {
				xh := (float64(a) - m) * r
				g := float64(dy[i]) * (float64(gamma[i]) + float64(g0))
				want := r * (g - mg/float64(n) - xh*mgx/float64(n))
				if math.Abs(float64(dx[i])-want) > 1e-4*(1+math.Abs(want)) {
					t.Fatalf("n=%d: dx[%d] = %v, want %v", n, i, dx[i], want)
				}
			}
		}
	}
}

// TestRMSNormRowsMatchTwins checks the RMSNorm rows against their Go
// twins bit for bit at every length up to 70 (every tail mask), with
// guard values past the row, and against the float64 definitions.
func TestRMSNormRowsMatchTwins(t *testing.T) { withISA(t, testRMSNormRowsMatchTwins) }

func testRMSNormRowsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const eps = 1e-6
	for n := 1; n <= 70; n++ {
		for _, g0 := range []float32{0, 1} {
			x, dy, gamma := randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)
			for i := range x {
				x[i] = 3*x[i] + 2
			}
			var sq [16]float32
			lnSqDevGo(x, 0, &sq)
			rstd := 1 / float32(math.Sqrt(float64(sumLanes(&sq)/float32(n)+eps)))
			if got := RMSNormStats(x, eps); got != rstd {
				t.Fatalf("n=%d: 1/rms %v, twin %v", n, got, rstd)
			}
			y, yt := append(make([]float32, n), guard), append(make([]float32, n), guard)
			if r := RMSNormRow(y, x, gamma, eps, g0); r != rstd {
				t.Fatalf("n=%d: RMSNormRow returned %v, want %v", n, r, rstd)
			}
			rmsApplyGo(yt, x, gamma, rstd, g0)
			dx, dxt := append(make([]float32, n), guard), append(make([]float32, n), guard)
			dg, dgt := append(make([]float32, n), guard), append(make([]float32, n), guard)
			RMSNormGradRow(dx, dg, x, dy, gamma, eps, g0)
			var lanes [16]float32
			rmsGradAccumGo(x, dy, gamma, dgt, rstd, g0, &lanes)
			lnGradDxGo(dxt, x, dy, gamma, 0, rstd, g0, 0, sumLanes(&lanes)/float32(n))
			for i := 0; i <= n; i++ {
				if math.Float32bits(y[i]) != math.Float32bits(yt[i]) || dx[i] != dxt[i] || dg[i] != dgt[i] {
					t.Fatalf("n=%d g0=%v [%d]: y %v/%v dx %v/%v dγ %v/%v", n, g0, i, y[i], yt[i], dx[i], dxt[i], dg[i], dgt[i])
				}
			}
			var ms float64
			for _, a := range x {
				ms += float64(a) * float64(a)
			}
			r := 1 / math.Sqrt(ms/float64(n)+eps)
			var mgx float64
			for i, a := range x {
				xh := float64(a) * r
				g := float64(dy[i]) * (float64(gamma[i]) + float64(g0))
				mgx += g * xh
				want := xh * (float64(gamma[i]) + float64(g0))
				if math.Abs(float64(y[i])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("n=%d: y[%d] = %v, want %v", n, i, y[i], want)
				}
				if w := float64(dy[i]) * xh; math.Abs(float64(dg[i])-w) > 1e-5*(1+math.Abs(w)) {
					t.Fatalf("n=%d: dγ[%d] = %v, want %v", n, i, dg[i], w)
				}
			}
			for i, a := range x {
				xh := float64(a) * r
				g := float64(dy[i]) * (float64(gamma[i]) + float64(g0))
				want := r * (g - xh*mgx/float64(n))
				if math.Abs(float64(dx[i])-want) > 1e-4*(1+math.Abs(want)) {
					t.Fatalf("n=%d: dx[%d] = %v, want %v", n, i, dx[i], want)
				}
			}
		}
	}
}
