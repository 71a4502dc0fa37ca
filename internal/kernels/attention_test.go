package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowGemmMatchesReference checks the row GEMM on the vector kernels
// and its twin against float64 products, for plain and transposed A,
// overwrite and accumulate, every tail width, with guard values around C.
func TestRowGemmMatchesReference(t *testing.T) { withISA(t, testRowGemmMatchesReference) }

func testRowGemmMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {3, 5, 2}, {8, 16, 7}, {9, 17, 33}, {6, 64, 32}, {13, 70, 64}, {20, 130, 5}, {7, 48, 1}, {7, 9, 3}, {5, 15, 4}, {11, 31, 9}, {3, 8, 2}, {14, 24, 6}, {9, 45, 5}} {
		for _, trans := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				name := fmt.Sprintf("%dx%dx%d/trans=%v/acc=%v", s.m, s.n, s.k, trans, acc)
				t.Run(name, func(t *testing.T) {
					a := randSlice(rng, s.m*s.k)
					rsA, csA := s.k, 1
					if trans {
						rsA, csA = 1, s.m
					}
					ldb, ldc := s.n+3, s.n+5
					b := randSlice(rng, s.k*ldb)
					c0 := make([]float32, s.m*ldc)
					for i := range c0 {
						c0[i] = guard
					}
					for i := 0; i < s.m; i++ {
						for j := 0; j < s.n; j++ {
							c0[i*ldc+j] = rng.Float32() - 0.5
						}
					}
					want := make([]float64, s.m*s.n)
					for i := 0; i < s.m; i++ {
						for j := 0; j < s.n; j++ {
							var sum float64
							for p := 0; p < s.k; p++ {
								sum += float64(a[i*rsA+p*csA]) * float64(b[p*ldb+j])
							}
							if acc {
								sum += float64(c0[i*ldc+j])
							}
							want[i*s.n+j] = sum
						}
					}
					cv, cg := append([]float32(nil), c0...), append([]float32(nil), c0...)
					RowGemm(s.m, s.n, s.k, a, rsA, csA, b, ldb, cv, ldc, acc)
					var add []float32
					if acc {
						add = cg
					}
					rowGemmGo(s.m, s.n, s.k, 1, a, rsA, csA, b, ldb, cg, ldc, add, ldc)
					for i := 0; i < s.m; i++ {
						for j := 0; j < ldc; j++ {
							o := i*ldc + j
							if j >= s.n {
								if cv[o] != guard || cg[o] != guard {
									t.Fatalf("C[%d][%d] outside the tile written: %v / %v", i, j, cv[o], cg[o])
								}
								continue
							}
							w := want[i*s.n+j]
							if d := math.Abs(float64(cv[o]) - w); d > 1e-5*(1+math.Abs(w)) {
								t.Fatalf("vector C[%d][%d] = %v, want %v", i, j, cv[o], w)
							}
							if d := math.Abs(float64(cg[o]) - w); d > 1e-5*(1+math.Abs(w)) {
								t.Fatalf("twin C[%d][%d] = %v, want %v", i, j, cg[o], w)
							}
							// Both round each multiply-add once, in the
							// same order: the same bits.
							if math.Float32bits(cv[o]) != math.Float32bits(cg[o]) {
								t.Fatalf("C[%d][%d]: vector %v, twin %v", i, j, cv[o], cg[o])
							}
						}
					}
				})
			}
		}
	}
}

// TestSoftmaxRowKernelsMatchTwins checks ExpSum, RowMax and
// SoftmaxGradRow against their Go twins bit for bit, at every length up
// to 70 (every tail mask), and ExpSum against math.Exp.
func TestSoftmaxRowKernelsMatchTwins(t *testing.T) { withISA(t, testSoftmaxRowKernelsMatchTwins) }

func testSoftmaxRowKernelsMatchTwins(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 1; n <= 70; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = 20 * (rng.Float32() - 0.5)
		}
		const scale = 0.17677669
		shift := RowMax(x) * scale
		var lanes [16]float32
		rowMaxGo(x, &lanes)
		m := lanes[0]
		for _, v := range lanes[1:] {
			m = max(m, v)
		}
		if m*scale != shift {
			t.Fatalf("n=%d: RowMax·scale %v, twin %v", n, shift, m*scale)
		}
		yv, yg := make([]float32, n+1), make([]float32, n+1)
		yv[n], yg[n] = guard, guard
		sv := ExpSum(yv, x, scale, shift)
		lanes = [16]float32{}
		expSumGo(yg, x, scale, shift, &lanes)
		sg := sumLanes(&lanes)
		if sv != sg || yv[n] != guard {
			t.Fatalf("n=%d: sum %v, twin %v (guard %v)", n, sv, sg, yv[n])
		}
		var exact float64
		for i := range x {
			if yv[i] != yg[i] {
				t.Fatalf("n=%d: y[%d] = %v, twin %v", n, i, yv[i], yg[i])
			}
			w := math.Exp(float64(x[i])*scale - float64(shift))
			exact += w
			if math.Abs(float64(yv[i])-w) > 3e-7*w {
				t.Fatalf("n=%d: exp %v, want %v", n, yv[i], w)
			}
		}
		if math.Abs(float64(sv)-exact) > 1e-6*exact {
			t.Fatalf("n=%d: sum %v, want %v", n, sv, exact)
		}
		dp := randSlice(rng, n)
		dv, dg := make([]float32, n+1), make([]float32, n+1)
		dv[n], dg[n] = guard, guard
		SoftmaxGradRow(dv, yv[:n], dp, 0.3, scale)
		softmaxGradRowGo(dg, yv[:n], dp, 0.3, scale)
		for i := range dv {
			if dv[i] != dg[i] {
				t.Fatalf("n=%d: ds[%d] = %v, twin %v", n, i, dv[i], dg[i])
			}
		}
	}
}

// naiveAttention is causal attention in float64 from its definition:
// per head softmax(mask(q·kᵀ·scale))·v, and the gradients of qkv for an
// upstream gradient dy.
func naiveAttention(b, t, h, d int, scale float64, qkv, dy []float32) (y, dqkv []float64) {
	return naiveAttentionDropout(b, t, h, d, scale, qkv, dy, 0, 0)
}

// naiveAttentionDropout is naiveAttention with attention dropout p under
// key: probabilities times the mask (Keep) and 1/(1−p).
func naiveAttentionDropout(b, t, h, d int, scale float64, qkv, dy []float32, p float32, key uint64) (y, dqkv []float64) {
	c := h * d
	y, dqkv = make([]float64, b*t*c), make([]float64, b*t*3*c)
	at := func(bi, i, part, hi, p int) int { return (bi*t+i)*3*c + part*c + hi*d + p }
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			for i := 0; i < t; i++ {
				s := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					for e := 0; e < d; e++ {
						s[j] += float64(qkv[at(bi, i, 0, hi, e)]) * float64(qkv[at(bi, j, 1, hi, e)])
					}
					s[j] *= scale
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range s {
					s[j] /= sum
				}
				z := make([]float64, i+1) // mask times 1/(1−p)
				for j := range z {
					z[j] = 1
					if p > 0 {
						z[j] = 0
						if Keep(key, bi*h+hi, t, i, j, p) {
							z[j] = 1 / (1 - float64(p))
						}
					}
				}
				g := dy[(bi*t+i)*c+hi*d:]
				dp := make([]float64, i+1)
				var dd float64
				for j := range s {
					for e := 0; e < d; e++ {
						v := float64(qkv[at(bi, j, 2, hi, e)])
						y[(bi*t+i)*c+hi*d+e] += s[j] * z[j] * v
						dp[j] += float64(g[e]) * v * z[j]
						dqkv[at(bi, j, 2, hi, e)] += s[j] * z[j] * float64(g[e])
					}
					dd += s[j] * dp[j]
				}
				for j := range s {
					ds := s[j] * (dp[j] - dd) * scale
					for e := 0; e < d; e++ {
						dqkv[at(bi, i, 0, hi, e)] += ds * float64(qkv[at(bi, j, 1, hi, e)])
						dqkv[at(bi, j, 1, hi, e)] += ds * float64(qkv[at(bi, i, 0, hi, e)])
					}
				}
			}
		}
	}
	return y, dqkv
}

// TestAttentionMatchesDefinition checks the fused forward and backward
// against the float64 definition on shapes that cover one tile, tile
// edges, several tiles, chunk edges and head widths that are not
// multiples of 16.
func TestAttentionMatchesDefinition(t *testing.T) { withISA(t, testAttentionMatchesDefinition) }

func testAttentionMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range []struct {
		b, t, h, d int
		p          float32
	}{{1, 1, 1, 4, 0}, {2, 5, 2, 8, 0}, {1, 17, 3, 16, 0}, {2, 64, 4, 32, 0}, {1, 70, 2, 24, 0}, {1, 150, 1, 48, 0}, {1, 33, 2, 80, 0},
		{2, 5, 2, 8, 0.3}, {2, 64, 4, 32, 0.1}, {1, 150, 1, 48, 0.5}, {1, 64, 1, 48, 0.5}, {1, 150, 1, 48, 0.1}, {1, 130, 1, 16, 0.5}} {
		t.Run(fmt.Sprintf("B%dT%dH%dD%dp%v", s.b, s.t, s.h, s.d, s.p), func(t *testing.T) {
			c := s.h * s.d
			qkv, dy := randSlice(rng, s.b*s.t*3*c), randSlice(rng, s.b*s.t*c)
			for i := range qkv {
				qkv[i] *= 3
			}
			scale := 1 / math.Sqrt(float64(s.d))
			a := NewAttention(s.b, s.t, s.h, s.d, float32(scale), 1)
			a.Dropout, a.Key = s.p, 12345
			y, lse, dqkv := make([]float32, len(dy)), make([]float32, s.b*s.h*s.t), make([]float32, len(qkv))
			for i := range dqkv {
				dqkv[i] = guard
			}
			for bh := 0; bh < a.Heads(); bh++ {
				a.Forward(0, bh, qkv, y, lse)
			}
			for bh := 0; bh < a.Heads(); bh++ {
				a.Backward(0, bh, qkv, y, lse, dy, dqkv)
			}
			wy, wd := naiveAttentionDropout(s.b, s.t, s.h, s.d, scale, qkv, dy, s.p, a.Key)
			// Each element within 1e-5 of the tensor's largest: float32
			// sums of a hundred terms of size ~10 lose ~1e-5 to
			// cancellation in their small elements.
			check := func(what string, got []float32, want []float64) {
				big := 1.0
				for _, w := range want {
					big = max(big, math.Abs(w))
				}
				for i, w := range want {
					if d := math.Abs(float64(got[i]) - w); !(d <= 1e-5*big) {
						t.Fatalf("%s[%d] = %v, want %v (largest %v)", what, i, got[i], w, big)
					}
				}
			}
			check("y", y, wy)
			check("dqkv", dqkv, wd)
		})
	}
}

// TestExpKernelsKeepNaN checks that a NaN input stays NaN through the
// vector exponential (its clamp must not turn NaN into e^±87), in ExpSum
// and in GELU, as in their Go twins.
func TestExpKernelsKeepNaN(t *testing.T) { withISA(t, testExpKernelsKeepNaN) }

func testExpKernelsKeepNaN(t *testing.T) {
	nan := float32(math.NaN())
	for _, n := range []int{1, 16, 19, 40} {
		x := make([]float32, n)
		x[n-1] = nan
		y := make([]float32, n)
		if s := ExpSum(y, x, 1, 0); s == s || y[n-1] == y[n-1] {
			t.Fatalf("n=%d: ExpSum of a NaN gave %v (sum %v)", n, y[n-1], s)
		}
		g := make([]float32, n)
		GELU(g, x)
		GELUGrad(y, x, x)
		if g[n-1] == g[n-1] || y[n-1] == y[n-1] {
			t.Fatalf("n=%d: GELU(NaN) = %v, GELU'(NaN)·NaN = %v", n, g[n-1], y[n-1])
		}
	}
}

// BenchmarkAttention runs the fused attention at the baby GPT's shape
// (B 12, T 64, 4 heads of 32), forward and backward, on one goroutine.
func BenchmarkAttention(b *testing.B) {
	const bs, t, h, d = 12, 64, 4, 32
	rng := rand.New(rand.NewPCG(1, 2))
	qkv, dy := randSlice(rng, bs*t*3*h*d), randSlice(rng, bs*t*h*d)
	a := NewAttention(bs, t, h, d, float32(1/math.Sqrt(d)), 1)
	y, lse, dqkv := make([]float32, len(dy)), make([]float32, bs*h*t), make([]float32, len(qkv))
	b.Run("forward", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for bh := 0; bh < a.Heads(); bh++ {
				a.Forward(0, bh, qkv, y, lse)
			}
		}
	})
	b.Run("backward", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for bh := 0; bh < a.Heads(); bh++ {
				a.Backward(0, bh, qkv, y, lse, dy, dqkv)
			}
		}
	})
}

// TestKeepDropsAtTheRate checks the dropout mask's rate and that it
// depends on the key and on every coordinate.
func TestKeepDropsAtTheRate(t *testing.T) {
	for _, p := range []float32{0, 0.1, 0.5, 0.9} {
		kept := 0
		const heads, tt = 8, 64
		for bh := 0; bh < heads; bh++ {
			for i := 0; i < tt; i++ {
				for j := 0; j < tt; j++ {
					if Keep(7, bh, tt, i, j, p) {
						kept++
					}
				}
			}
		}
		rate := 1 - float64(kept)/(heads*tt*tt)
		if math.Abs(rate-float64(p)) > 0.01 {
			t.Errorf("p=%v: dropped %.4f", p, rate)
		}
	}
	differ := 0
	for i := 0; i < 1000; i++ {
		if Keep(1, 0, 64, i%64, i/64, 0.5) != Keep(2, 0, 64, i%64, i/64, 0.5) {
			differ++
		}
	}
	if differ < 400 || differ > 600 {
		t.Errorf("keys 1 and 2 differ on %d of 1000 elements", differ)
	}
}

// naiveAttentionGQA is causal attention in float64 from its definition
// with hkv key/value heads (each serving h/hkv consecutive query heads)
// and, with rope, q and k rotated by the tables' cos and sin (read as
// float64): per head softmax(mask(R·q·(R·k)ᵀ·scale))·v, and the gradients
// of the [B T (h+2·hkv)·d] input for an upstream gradient dy.
func naiveAttentionGQA(b, t, h, hkv, d int, scale float64, qkv, dy []float32, rope *RoPE) (y, dqkv []float64) {
	ld, c := (h+2*hkv)*d, h*d
	y, dqkv = make([]float64, b*t*c), make([]float64, b*t*ld)
	half := d / 2
	// rot returns row x of position p rotated (inverse: transposed).
	rot := func(x []float64, p int, inverse bool) []float64 {
		if rope == nil {
			return x
		}
		out := make([]float64, d)
		for i := 0; i < half; i++ {
			cs, sn := float64(rope.Cos[p*half+i]), float64(rope.Sin[p*half+i])
			if inverse {
				sn = -sn
			}
			out[i] = x[i]*cs - x[i+half]*sn
			out[i+half] = x[i+half]*cs + x[i]*sn
		}
		return out
	}
	row := func(bi, i, col int) []float64 {
		r := make([]float64, d)
		for e := range r {
			r[e] = float64(qkv[(bi*t+i)*ld+col+e])
		}
		return r
	}
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			g := hi / (h / hkv)
			qc, kc, vc := hi*d, (h+g)*d, (h+hkv+g)*d
			qs, ks := make([][]float64, t), make([][]float64, t)
			for i := 0; i < t; i++ {
				qs[i], ks[i] = rot(row(bi, i, qc), i, false), rot(row(bi, i, kc), i, false)
			}
			dqs, dks := make([][]float64, t), make([][]float64, t)
			for i := range dqs {
				dqs[i], dks[i] = make([]float64, d), make([]float64, d)
			}
			for i := 0; i < t; i++ {
				s := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					for e := 0; e < d; e++ {
						s[j] += qs[i][e] * ks[j][e]
					}
					s[j] *= scale
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range s {
					s[j] /= sum
				}
				gr := dy[(bi*t+i)*c+hi*d:]
				dp := make([]float64, i+1)
				var dd float64
				for j := range s {
					for e := 0; e < d; e++ {
						v := float64(qkv[(bi*t+j)*ld+vc+e])
						y[(bi*t+i)*c+hi*d+e] += s[j] * v
						dp[j] += float64(gr[e]) * v
						dqkv[(bi*t+j)*ld+vc+e] += s[j] * float64(gr[e])
					}
					dd += s[j] * dp[j]
				}
				for j := range s {
					ds := s[j] * (dp[j] - dd) * scale
					for e := 0; e < d; e++ {
						dqs[i][e] += ds * ks[j][e]
						dks[j][e] += ds * qs[i][e]
					}
				}
			}
			for i := 0; i < t; i++ {
				dq, dk := rot(dqs[i], i, true), rot(dks[i], i, true)
				for e := 0; e < d; e++ {
					dqkv[(bi*t+i)*ld+qc+e] += dq[e]
					dqkv[(bi*t+i)*ld+kc+e] += dk[e]
				}
			}
		}
	}
	return y, dqkv
}

// TestAttentionGQARoPEMatchesDefinition checks the fused forward and
// backward with grouped key/value heads (Hkv of 1, 2 and H) and rotary
// embeddings, on and off, against the float64 definition, across tile
// edges and ragged lengths, with guard values around the gradient's
// rows (which every group writes whole).
func TestAttentionGQARoPEMatchesDefinition(t *testing.T) {
	withISA(t, testAttentionGQARoPEMatchesDefinition)
}

func testAttentionGQARoPEMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, s := range []struct{ b, t, h, hkv, d int }{
		{1, 1, 2, 1, 4}, {2, 5, 4, 2, 8}, {1, 17, 4, 1, 16}, {2, 64, 4, 4, 32}, {1, 70, 6, 2, 24}, {1, 150, 2, 1, 48}, {1, 33, 3, 3, 80},
	} {
		for _, theta := range []float64{0, 10000, 500000} {
			t.Run(fmt.Sprintf("B%dT%dH%dKV%dD%dθ%g", s.b, s.t, s.h, s.hkv, s.d, theta), func(t *testing.T) {
				ld, c := (s.h+2*s.hkv)*s.d, s.h*s.d
				qkv, dy := randSlice(rng, s.b*s.t*ld), randSlice(rng, s.b*s.t*c)
				for i := range qkv {
					qkv[i] *= 3
				}
				scale := 1 / math.Sqrt(float64(s.d))
				a := NewAttention(s.b, s.t, s.h, s.d, float32(scale), 2)
				a.KVHeads = s.hkv
				var rope *RoPE
				if theta > 0 {
					rope = NewRoPE(s.t, s.d, theta)
					a.SetRoPE(rope)
				}
				y, lse, dqkv := make([]float32, len(dy)), make([]float32, s.b*s.h*s.t), make([]float32, len(qkv)+5)
				for i := range dqkv {
					dqkv[i] = guard
				}
				for bh := 0; bh < a.Heads(); bh++ {
					a.Forward(bh%2, bh, qkv, y, lse)
				}
				for gi := 0; gi < a.Groups(); gi++ {
					a.Backward(gi%2, gi, qkv, y, lse, dy, dqkv)
				}
				for _, v := range dqkv[len(qkv):] {
					if v != guard {
						t.Fatal("wrote past the gradient")
					}
				}
				wy, wd := naiveAttentionGQA(s.b, s.t, s.h, s.hkv, s.d, scale, qkv, dy, rope)
				check := func(what string, got []float32, want []float64) {
					big := 1.0
					for _, w := range want {
						big = max(big, math.Abs(w))
					}
					for i, w := range want {
						if d := math.Abs(float64(got[i]) - w); !(d <= 1e-5*big) {
							t.Fatalf("%s[%d] = %v, want %v (largest %v)", what, i, got[i], w, big)
						}
					}
				}
				check("y", y, wy)
				check("dqkv", dqkv[:len(qkv)], wd)
			})
		}
	}
}

// TestRoPETables checks NewRoPE against the float64 definition: the
// angle t·θ^(−2i/d) within the float32 rounding of its two factors and
// product, cos and sin of the float32 angle correctly rounded.
func TestRoPETables(t *testing.T) {
	for _, theta := range []float64{10000, 500000} {
		const T, d = 300, 64
		r := NewRoPE(T, d, theta)
		for p := 0; p < T; p++ {
			for i := 0; i < d/2; i++ {
				ang := float64(p) * math.Pow(theta, -float64(2*i)/d)
				tol := 4 * 0x1p-24 * math.Abs(ang)
				if c := float64(r.Cos[p*d/2+i]); math.Abs(c-math.Cos(ang)) > tol+0x1p-24 {
					t.Fatalf("θ=%g cos[%d][%d] = %v, want %v", theta, p, i, c, math.Cos(ang))
				}
				if s := float64(r.Sin[p*d/2+i]); math.Abs(s-math.Sin(ang)) > tol+0x1p-24 {
					t.Fatalf("θ=%g sin[%d][%d] = %v, want %v", theta, p, i, s, math.Sin(ang))
				}
			}
		}
		if r.Cos[0] != 1 || r.Sin[0] != 0 || r.Cos[1] != 1 {
			t.Fatal("position 0 is not the identity")
		}
	}
}
