package kernels

import (
	"math"

	"github.com/chewxy/math32"
)

// Fused causal self-attention, forward and backward, after
// FlashAttention-2 (Dao, 2023) on the CPU: tiles of queries against tiles
// of keys and values with an online softmax, so the forward keeps no T×T
// matrix — only each query row's log-sum-exp — and the backward
// recomputes each tile of probabilities from it.
//
// The heads are read from and written to the layouts the projections
// use: q, k and v side by side in each row of a [B T 3C] tensor (head h
// at columns h·D of each), the output [B T C] with the heads
// concatenated, and the gradient [B T 3C] like the input, so no slice,
// permute or concatenation surrounds the op.

// attnTile is the query and key tile size. 64 keeps a tile of scores
// (16 KiB) and the head's K and V rows of a tile in L1.
const attnTile = 64

// Attention runs fused causal self-attention on a [B T 3C] qkv tensor of
// H heads of width D (C = H·D), scores scaled by Scale. Make one per
// call site (it owns its scratch) with NewAttention; Forward and
// Backward on one Attention must not overlap, but the heads of one call
// may run on different goroutines, each with its own worker index.
type Attention struct {
	B, T, H, D int
	Scale      float32
	// Dropout is the probability of dropping each attention
	// probability (training only; 0 for none). The mask is a function
	// of Key, the head, the query and the key position (see Keep), so
	// the backward finds the forward's mask without storing it.
	Dropout float32
	Key     uint64
	work    []attnScratch
}

// attnScratch is one worker's tiles.
type attnScratch struct {
	s, dp  []float32 // attnTile×attnTile scores / probabilities and their gradient
	pd     []float32 // the dropped probabilities (backward with dropout)
	kt, vt []float32 // D×T: the head's K and V transposed
	m, l   []float32 // running max and sum of each query row of a tile
	dd     []float32 // T: rowsum(dO∘O) (backward)
}

// NewAttention returns an Attention with scratch for workers goroutines.
func NewAttention(b, t, h, d int, scale float32, workers int) *Attention {
	a := &Attention{B: b, T: t, H: h, D: d, Scale: scale, work: make([]attnScratch, workers)}
	for i := range a.work {
		a.work[i] = attnScratch{
			s: make([]float32, attnTile*attnTile), dp: make([]float32, attnTile*attnTile), pd: make([]float32, attnTile*attnTile),
			kt: make([]float32, d*t), vt: make([]float32, d*t),
			m: make([]float32, attnTile), l: make([]float32, attnTile), dd: make([]float32, t),
		}
	}
	return a
}

// Keep reports whether dropout keeps the probability of query i and key j
// of head bh under key: a counter-based hash (SplitMix64's finaliser of
// key + the element's index), kept when its top 32 bits are at least
// p·2³².
func Keep(key uint64, bh, t, i, j int, p float32) bool {
	z := key + uint64((bh*t+i)*t+j)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return uint32(z>>32) >= uint32(float64(p)*(1<<32))
}

// dropRow multiplies row (query i, keys j0…) by the dropout mask and
// 1/(1−p).
func (a *Attention) dropRow(row []float32, bh, i, j0 int) {
	inv := 1 / (1 - a.Dropout)
	for c := range row {
		if Keep(a.Key, bh, a.T, i, j0+c, a.Dropout) {
			row[c] *= inv
		} else {
			row[c] = 0
		}
	}
}

// Heads returns the number of (batch, head) pairs, the unit of work.
func (a *Attention) Heads() int { return a.B * a.H }

// offsets returns where head bh's q, k and v columns start in qkv and its
// output columns in y.
func (a *Attention) offsets(bh int) (q, k, v, y int) {
	b, h := bh/a.H, bh%a.H
	c := a.H * a.D
	q = b*a.T*3*c + h*a.D
	return q, q + c, q + 2*c, b*a.T*c + h*a.D
}

// causalRows is the height of the row chunks whose scores are computed
// together: a chunk computes the columns up to its last row's diagonal,
// so a diagonal tile wastes at most a 16×16 triangle per chunk.
const causalRows = 16

// scores computes the tile S = Q[i0:i0+br]·Kᵀ[:, j0:j0+bc] into s (rows
// attnTile apart), each chunk of causalRows rows over the columns
// chunkCols gives it.
func (a *Attention) scores(w *attnScratch, qkv []float32, q0, i0, j0, br, bc int) {
	ld := 3 * a.H * a.D
	for r := 0; r < br; r += causalRows {
		if n := chunkCols(i0, r, br, j0, bc); n > 0 {
			RowGemm(min(causalRows, br-r), n, a.D, qkv[q0+(i0+r)*ld:], ld, 1, w.kt[j0:], a.T, w.s[r*attnTile:], attnTile, false)
		}
	}
}

// chunkCols returns how many of a key tile's bc columns (from key j0)
// the chunk of causalRows query rows holding row i0+r of a tile of br
// rows attends to: up to the diagonal of its last row (≤ 0: none).
func chunkCols(i0, r, br, j0, bc int) int {
	r0 := r / causalRows * causalRows
	return min(bc, i0+min(r0+causalRows, br)-j0)
}

// Forward computes head bh's output rows into y ([B T C]) and each query
// row's log-sum-exp of the scaled scores into lse ([B·H·T]), on worker
// worker's scratch.
func (a *Attention) Forward(worker, bh int, qkv, y, lse []float32) {
	w := &a.work[worker]
	t, d, ld, c := a.T, a.D, 3*a.H*a.D, a.H*a.D
	q0, k0, v0, y0 := a.offsets(bh)
	transposeF32(w.kt, t, qkv[k0:], ld, t, d)
	for i0 := 0; i0 < t; i0 += attnTile {
		br := min(attnTile, t-i0)
		for j0 := 0; j0 < i0+br; j0 += attnTile {
			bc := min(attnTile, t-j0)
			a.scores(w, qkv, q0, i0, j0, br, bc)
			first := j0 == 0
			for r := 0; r < br; r++ {
				n := max(0, chunkCols(i0, r, br, j0, bc))
				row := w.s[r*attnTile : r*attnTile+n]
				valid := min(n, i0+r-j0+1)
				yr := y[y0+(i0+r)*c : y0+(i0+r)*c+d]
				if valid <= 0 {
					clear(row)
					continue
				}
				mx := RowMax(row[:valid]) * a.Scale
				if first {
					w.m[r] = mx
					w.l[r] = ExpSum(row[:valid], row[:valid], a.Scale, mx)
				} else {
					mnew := max(w.m[r], mx)
					corr := fastExp(w.m[r] - mnew)
					w.m[r] = mnew
					w.l[r] = w.l[r]*corr + ExpSum(row[:valid], row[:valid], a.Scale, mnew)
					for i := range yr {
						yr[i] *= corr
					}
				}
				if a.Dropout > 0 {
					a.dropRow(row[:valid], bh, i0+r, j0)
				}
				clear(row[valid:])
			}
			// O (+)= P·V, a chunk of rows at a time over the columns it has.
			for r := 0; r < br; r += causalRows {
				if n := chunkCols(i0, r, br, j0, bc); n > 0 {
					RowGemm(min(causalRows, br-r), d, n, w.s[r*attnTile:], attnTile, 1, qkv[v0+j0*ld:], ld, y[y0+(i0+r)*c:], c, !first)
				}
			}
		}
		for r := 0; r < br; r++ {
			yr := y[y0+(i0+r)*c : y0+(i0+r)*c+d]
			inv := 1 / w.l[r]
			for i := range yr {
				yr[i] *= inv
			}
			lse[bh*t+i0+r] = w.m[r] + math32.Log(w.l[r])
		}
	}
}

// Backward computes head bh's part of dqkv ([B T 3C]: dQ, dK and dV in
// the head's columns) from qkv, the forward's output y and log-sum-exps
// lse, and dy, the gradient of y, on worker worker's scratch.
func (a *Attention) Backward(worker, bh int, qkv, y, lse, dy, dqkv []float32) {
	w := &a.work[worker]
	t, d, ld, c := a.T, a.D, 3*a.H*a.D, a.H*a.D
	q0, k0, v0, y0 := a.offsets(bh)
	for i := 0; i < t; i++ {
		o, g := y[y0+i*c:y0+i*c+d], dy[y0+i*c:y0+i*c+d]
		var s float32
		for p, v := range o {
			s += v * g[p]
		}
		w.dd[i] = s
		clear(dqkv[q0+i*ld : q0+i*ld+d])
		clear(dqkv[k0+i*ld : k0+i*ld+d])
		clear(dqkv[v0+i*ld : v0+i*ld+d])
	}
	transposeF32(w.kt, t, qkv[k0:], ld, t, d)
	transposeF32(w.vt, t, qkv[v0:], ld, t, d)
	for j0 := 0; j0 < t; j0 += attnTile {
		bc := min(attnTile, t-j0)
		for i0 := j0; i0 < t; i0 += attnTile {
			br := min(attnTile, t-i0)
			a.scores(w, qkv, q0, i0, j0, br, bc)
			for r := 0; r < br; r += causalRows {
				if n := chunkCols(i0, r, br, j0, bc); n > 0 {
					RowGemm(min(causalRows, br-r), n, d, dy[y0+(i0+r)*c:], c, 1, w.vt[j0:], t, w.dp[r*attnTile:], attnTile, false)
				}
			}
			for r := 0; r < br; r++ {
				n := chunkCols(i0, r, br, j0, bc)
				row, dp := w.s[r*attnTile:r*attnTile+bc], w.dp[r*attnTile:r*attnTile+bc]
				valid := max(0, min(n, i0+r-j0+1))
				if valid > 0 {
					ExpSum(row[:valid], row[:valid], a.Scale, lse[bh*t+i0+r])
					if a.Dropout > 0 {
						// dV takes the dropped probabilities; the
						// gradient reaches P through the same mask.
						pd := w.pd[r*attnTile : r*attnTile+valid]
						copy(pd, row[:valid])
						a.dropRow(pd, bh, i0+r, j0)
						a.dropRow(dp[:valid], bh, i0+r, j0)
						clear(w.pd[r*attnTile+valid : r*attnTile+bc])
					}
					SoftmaxGradRow(dp[:valid], row[:valid], dp[:valid], w.dd[i0+r], a.Scale)
				} else if a.Dropout > 0 {
					clear(w.pd[r*attnTile : r*attnTile+bc])
				}
				clear(row[valid:])
				clear(dp[valid:])
			}
			// dQ += dS·K over the columns each chunk of query rows has;
			// dV += Pᵀ·dO and dK += dSᵀ·Q over the query rows that can
			// see each chunk of keys (from p0 on).
			for r := 0; r < br; r += causalRows {
				if n := chunkCols(i0, r, br, j0, bc); n > 0 {
					RowGemm(min(causalRows, br-r), d, n, w.dp[r*attnTile:], attnTile, 1, qkv[k0+j0*ld:], ld, dqkv[q0+(i0+r)*ld:], ld, true)
				}
			}
			for k := 0; k < bc; k += causalRows {
				p0 := max(0, j0+k-i0)
				if p0 >= br {
					break
				}
				rows := min(causalRows, bc-k)
				probs := w.s
				if a.Dropout > 0 {
					probs = w.pd
				}
				RowGemm(rows, d, br-p0, probs[p0*attnTile+k:], 1, attnTile, dy[y0+(i0+p0)*c:], c, dqkv[v0+(j0+k)*ld:], ld, true)
				RowGemm(rows, d, br-p0, w.dp[p0*attnTile+k:], 1, attnTile, qkv[q0+(i0+p0)*ld:], ld, dqkv[k0+(j0+k)*ld:], ld, true)
			}
		}
	}
}

// RowGemm computes C[m×n] = A·B, or C += A·B with acc, where A[i][p] is
// a[i·rsA + p·csA] (any strides, so a transposed A costs nothing), B[p]
// is the row b[p·ldb : p·ldb+n] and C's rows are ldc apart. Each element
// accumulates its k products in order with fused multiply-adds on the
// vector kernels and then adds C (acc); rowGemmGo is the twin.
func RowGemm(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	var add []float32
	if acc {
		add = c
	}
	rowGemm(m, n, k, 1, a, rsA, csA, b, ldb, c, ldc, add, ldc)
}

// rowGemm is RowGemm computing C = alpha·A·B + S, where S's rows are
// ldadd apart in add (add = c for C += …; ldadd = 0 repeats one row, a
// bias), or C = alpha·A·B when add is nil.
func rowGemm(m, n, k int, alpha float32, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, add []float32, ldadd int) {
	if m <= 0 || n <= 0 {
		return
	}
	if k <= 0 || alpha == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if add == nil {
				clear(row)
			} else {
				copy(row, add[i*ldadd:i*ldadd+n])
			}
		}
		return
	}
	// Touch the last element of each operand so that a short slice
	// panics here rather than in the assembly.
	_, _, _ = a[(m-1)*rsA+(k-1)*csA], b[(k-1)*ldb+n-1], c[(m-1)*ldc+n-1]
	if add != nil {
		_ = add[(m-1)*ldadd+n-1]
	}
	if !rowGemmVector(m, n, k, a, rsA, csA, b, ldb, c, ldc, add, ldadd, alpha) {
		rowGemmGo(m, n, k, alpha, a, rsA, csA, b, ldb, c, ldc, add, ldadd)
	}
}

// rowGemmGo is rowGemm's loop: the sum of the k products in order, then
// times alpha, plus S in the same rounding. Its multiply-adds round twice
// (to float64, then float32), so on rare ties it differs from the
// kernels' fused ones by an ulp.
func rowGemmGo(m, n, k int, alpha float32, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, add []float32, ldadd int) {
	// 64 columns at a time in a stack accumulator, the rows of B read
	// in order (each element still sums its products in k order).
	var acc [64]float32
	for i := 0; i < m; i++ {
		for j0 := 0; j0 < n; j0 += len(acc) {
			j1 := min(n, j0+len(acc))
			s := acc[:j1-j0]
			clear(s)
			for p := 0; p < k; p++ {
				av := float64(a[i*rsA+p*csA])
				brow := b[p*ldb+j0 : p*ldb+j1]
				for j, bv := range brow {
					s[j] = float32(math.FMA(av, float64(bv), float64(s[j])))
				}
			}
			crow := c[i*ldc+j0 : i*ldc+j1]
			if add != nil {
				srow := add[i*ldadd+j0 : i*ldadd+j1]
				for j, v := range s {
					crow[j] = float32(math.FMA(float64(alpha), float64(v), float64(srow[j])))
				}
				continue
			}
			for j, v := range s {
				crow[j] = alpha * v
			}
		}
	}
}

// tailMask returns the number of whole 16-lane blocks of n values and
// the mask of the valid lanes of the last, partial one.
func tailMask(n int) (blocks int, mask uint16) {
	return n / 16, uint16(1<<(n%16) - 1)
}

// ExpSum writes y = fastExp(x·scale − shift) (len(x) values) and returns
// their sum, added in 16 lanes (lane i takes elements i, i+16, …) and
// then pairwise (lane i + lane i+8, …): the vector kernel's order, which
// expSumGo follows, so both give the same bits.
func ExpSum(y, x []float32, scale, shift float32) float32 {
	if len(x) == 0 {
		return 0
	}
	y = y[:len(x)]
	if s, ok := expSumVector(y, x, scale, shift); ok {
		return s
	}
	var lanes [16]float32
	expSumGo(y, x, scale, shift, &lanes)
	return sumLanes(&lanes)
}

// expSumGo is expSumAVX512's twin.
func expSumGo(y, x []float32, scale, shift float32, lanes *[16]float32) {
	for i, v := range x {
		e := fastExp(float32(v*scale) - shift)
		y[i] = e
		lanes[i%16] += e
	}
}

// sumLanes adds 16 lane sums pairwise: lanes i and i+8, then i and i+4, …
func sumLanes(l *[16]float32) float32 {
	for h := 8; h >= 1; h /= 2 {
		for i := 0; i < h; i++ {
			l[i] += l[i+h]
		}
	}
	return l[0]
}

// RowMax returns the largest of x (at least one value); a NaN in x gives
// an unspecified value (the attention's result is NaN either way).
func RowMax(x []float32) float32 {
	if m, ok := rowMaxVector(x); ok {
		return m
	}
	var lanes [16]float32
	rowMaxGo(x, &lanes)
	m := lanes[0]
	for _, v := range lanes[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// rowMaxGo is rowMaxAVX512's twin: lane maxima, −∞ where a lane has no
// value.
func rowMaxGo(x []float32, lanes *[16]float32) {
	for i := range lanes {
		lanes[i] = float32(math.Inf(-1))
	}
	for i, v := range x {
		if v > lanes[i%16] {
			lanes[i%16] = v
		}
	}
}

// SoftmaxGradRow writes ds = (p·(dp − d))·scale: the gradient of one row
// of scaled scores, given the probabilities p, their gradient dp and d =
// Σ p·dp (len(p) values). ds may be dp.
func SoftmaxGradRow(ds, p, dp []float32, d, scale float32) {
	if len(p) == 0 {
		return
	}
	ds, dp = ds[:len(p)], dp[:len(p)]
	if !softmaxGradRowVector(ds, p, dp, d, scale) {
		softmaxGradRowGo(ds, p, dp, d, scale)
	}
}

// softmaxGradRowGo is softmaxGradRowAVX512's twin.
func softmaxGradRowGo(ds, p, dp []float32, d, scale float32) {
	for i, v := range p {
		ds[i] = float32(float32(dp[i]-d)*v) * scale
	}
}
