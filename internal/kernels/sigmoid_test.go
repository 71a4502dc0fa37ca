package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSigmoidFamilyMatchesTwinsAndDefinition checks Sigmoid, SiLU,
// SwiGLU and their gradients at every length up to 70 (vector body and
// Go tail) against the Go loops bit for bit, with guard values past the
// outputs, and against the float64 definitions.
func TestSigmoidFamilyMatchesTwinsAndDefinition(t *testing.T) {
	withISA(t, testSigmoidFamilyMatchesTwinsAndDefinition)
}

func testSigmoidFamilyMatchesTwinsAndDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for n := 1; n <= 70; n++ {
		x, b, dy := randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)
		for i := range x {
			x[i] *= 24 // −12 … 12: both tails of σ
		}
		out := func() []float32 { return append(make([]float32, n), guard) }
		y, yS, ySw, dx, dxS, da, db, dys := out(), out(), out(), out(), out(), out(), out(), out()
		Sigmoid(y, x)
		SiLU(yS, x)
		SwiGLU(ySw, x, b)
		SigmoidGrad(dys, y[:n], dy)
		SiLUGrad(dxS, x, dy)
		SwiGLUGrad(da, db, x, b, dy)
		_ = dx
		for _, o := range [][]float32{y, yS, ySw, dxS, da, db, dys} {
			if o[n] != guard {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
		for i, v := range x {
			s := sigma(v)
			twins := [][2]float32{
				{y[i], s}, {yS[i], v * s}, {ySw[i], float32(v*s) * b[i]},
				{dys[i], float32(y[i]*(1-y[i])) * dy[i]},
				{dxS[i], siluSlope(v, s) * dy[i]},
				{db[i], float32(v*s) * dy[i]}, {da[i], siluSlope(v, s) * float32(dy[i]*b[i])},
			}
			for k, tw := range twins {
				if math.Float32bits(tw[0]) != math.Float32bits(tw[1]) {
					t.Fatalf("n=%d [%d] output %d: %v, twin %v", n, i, k, tw[0], tw[1])
				}
			}
			// float64 definitions
			v64 := float64(v)
			s64 := 1 / (1 + math.Exp(-v64))
			slope := s64 * (1 + v64*(1-s64))
			want := []float64{s64, v64 * s64, v64 * s64 * float64(b[i]),
				s64 * (1 - s64) * float64(dy[i]), slope * float64(dy[i]),
				v64 * s64 * float64(dy[i]), slope * float64(dy[i]) * float64(b[i])}
			got := []float32{y[i], yS[i], ySw[i], dys[i], dxS[i], db[i], da[i]}
			for k, w := range want {
				// 1 − σ near σ = 1 loses what float32 cannot hold (as in
				// every framework's float32 σ'): an absolute 1.2e-7·(1+|x|)
				// of the slope on top of the relative error.
				cancel := 1.2e-7 * (1 + math.Abs(v64)) * math.Abs(float64(dy[i])) * (1 + math.Abs(float64(b[i])))
				if d := math.Abs(float64(got[k]) - w); d > 2e-6*(math.Abs(w)+1e-3)+cancel {
					t.Fatalf("n=%d x=%v output %d: %v, want %v", n, v, k, got[k], w)
				}
			}
		}
	}
}

// TestSigmoidFamilyEdges pins σ at the ends of the float32 range, zero
// and NaN: σ(±inf) is 1 and ≈0 (e^{−x} saturates at e^{87}), σ(0) = ½,
// NaN stays NaN; SiLU(0) = 0.
func TestSigmoidFamilyEdges(t *testing.T) { withISA(t, testSigmoidFamilyEdges) }

func testSigmoidFamilyEdges(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	x := make([]float32, 32)
	copy(x, []float32{0, inf, -inf, nan, 100, -100, 87, -87})
	copy(x[16:], x[:16]) // the vector body and the Go tail alike
	y, s := make([]float32, 32), make([]float32, 32)
	Sigmoid(y, x[:32])
	SiLU(s, x[:32])
	for _, off := range []int{0, 16} {
		if y[off] != 0.5 || y[off+1] != 1 || y[off+4] != 1 || s[off] != 0 {
			t.Errorf("σ(0) = %v, σ(inf) = %v, σ(100) = %v, SiLU(0) = %v", y[off], y[off+1], y[off+4], s[off])
		}
		if y[off+2] < 0 || y[off+2] > 2e-38 || y[off+5] < 0 || y[off+5] > 2e-38 {
			t.Errorf("σ(−inf) = %v, σ(−100) = %v, want tiny ≥ 0", y[off+2], y[off+5])
		}
		if y[off+3] == y[off+3] || s[off+3] == s[off+3] {
			t.Errorf("σ(NaN) = %v, SiLU(NaN) = %v, want NaN", y[off+3], s[off+3])
		}
	}
}
