package kernels

import (
	"math"
)

// Fused causal self-attention, forward and backward, after
// FlashAttention-2 (Dao, 2023) on the CPU: tiles of queries against tiles
// of keys and values with an online softmax, so the forward keeps no T×T
// matrix — only each query row's log-sum-exp — and the backward
// recomputes each tile of probabilities from it.
//
// The heads are read from and written to the layouts the projections
// use: q, k and v side by side in each row of a [B T (H+2·Hkv)·D] tensor
// (query head h at columns h·D, key and value head g at H·D + g·D and
// (H+Hkv)·D + g·D; Hkv = H is the [B T 3C] of multi-head attention), the
// output [B T H·D] with the heads concatenated, and the gradient like the
// input, so no slice, permute or concatenation surrounds the op.
//
// Grouped-query attention (Ainslie et al., 2023): each key/value head
// serves H/Hkv consecutive query heads; the backward runs a group's heads
// on one worker, which sums their gradients of the shared key and value.
//
// Rotary position embeddings (Su et al.; Hugging Face Llama's
// convention): before the scores, q and k of position t are rotated,
// x_i' = x_i·cos(t·f_i) − x_{i+D/2}·sin(t·f_i) and x_{i+D/2}' =
// x_{i+D/2}·cos(t·f_i) + x_i·sin(t·f_i) for i < D/2, with f_i =
// θ^(−2i/D); the backward rotates the gradients of the rotated q and k
// back (the transpose of the rotation).

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
	// KVHeads is the number of key/value heads (Hkv), a divisor of H;
	// NewAttention sets it to H.
	KVHeads int
	Scale   float32
	// Rope holds the rotary embeddings' tables (SetRoPE), or nil.
	Rope *RoPE
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
	// With rotary embeddings: the head's rotated q and k (T×D), and the
	// gradients of the rotated q and k (backward).
	qr, kr, dqr, dkr []float32
}

// NewAttention returns an Attention with scratch for workers goroutines.
func NewAttention(b, t, h, d int, scale float32, workers int) *Attention {
	a := &Attention{B: b, T: t, H: h, KVHeads: h, D: d, Scale: scale, work: make([]attnScratch, workers)}
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

// RoPE holds the rotary embeddings' cos and sin of position t and
// frequency i at [t·D/2 + i], for t < T and i < D/2.
type RoPE struct {
	Cos, Sin []float32
}

// NewRoPE returns the tables for t positions and head width d (even)
// with base theta, as Hugging Face's Llama computes them in float32: f_i
// = 1/θ^(2i/d) (the exponent and the power rounded to float32), the
// angle t·f_i rounded to float32, and its cosine and sine.
func NewRoPE(t, d int, theta float64) *RoPE {
	h := d / 2
	r := &RoPE{Cos: make([]float32, t*h), Sin: make([]float32, t*h)}
	th := float32(theta)
	for i := 0; i < h; i++ {
		e := float32(2*i) / float32(d)
		f := 1 / float32(exp64(float64(float64(e)*log64(float64(th))))) // th^e, the same bits on every machine
		for p := 0; p < t; p++ {
			ang := float64(float32(p) * f)
			sn, cs := sinCos64(ang) // the same bits on every machine, unlike math.Sin and Cos
			r.Cos[p*h+i], r.Sin[p*h+i] = float32(cs), float32(sn)
		}
	}
	return r
}

// SetRoPE turns the rotary embeddings on with the tables r (T positions,
// width D), making each worker's scratch for the rotated heads.
func (a *Attention) SetRoPE(r *RoPE) {
	a.Rope = r
	for i := range a.work {
		w := &a.work[i]
		n := a.T * a.D
		w.qr, w.kr, w.dqr, w.dkr = make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	}
}

// rotate writes the T rows of src (ld apart, D wide) rotated by their
// positions into dst (T×D); inverse applies the transposed rotation (the
// backward of the forward's).
func (a *Attention) rotate(dst, src []float32, ld int, inverse bool) {
	d, h := a.D, a.D/2
	for p := 0; p < a.T; p++ {
		x, y := src[p*ld:p*ld+d], dst[p*d:p*d+d]
		cs, sn := a.Rope.Cos[p*h:p*h+h], a.Rope.Sin[p*h:p*h+h]
		for i := 0; i < h; i++ {
			lo, hi, c, s := x[i], x[i+h], cs[i], sn[i]
			if inverse {
				y[i], y[i+h] = float32(lo*c)+float32(hi*s), float32(hi*c)-float32(lo*s)
			} else {
				y[i], y[i+h] = float32(lo*c)-float32(hi*s), float32(hi*c)+float32(lo*s)
			}
		}
	}
}

// Heads returns the number of (batch, head) pairs, the unit of work of
// the forward.
func (a *Attention) Heads() int { return a.B * a.H }

// Groups returns the number of (batch, key/value head) pairs, the unit
// of work of the backward (each runs its group's query heads).
func (a *Attention) Groups() int { return a.B * a.kvHeads() }

func (a *Attention) kvHeads() int {
	if a.KVHeads <= 0 {
		return a.H
	}
	return a.KVHeads
}

// ld returns the row stride of qkv: (H + 2·Hkv)·D.
func (a *Attention) ld() int { return (a.H + 2*a.kvHeads()) * a.D }

// offsets returns where head bh's q, k and v columns start in qkv (k
// and v those of its key/value head) and its output columns in y.
func (a *Attention) offsets(bh int) (q, k, v, y int) {
	b, h := bh/a.H, bh%a.H
	kv := a.kvHeads()
	g := h / (a.H / kv)
	base := b * a.T * a.ld()
	return base + h*a.D, base + (a.H+g)*a.D, base + (a.H+kv+g)*a.D, b*a.T*a.H*a.D + h*a.D
}

// queries returns head bh's queries as the tiles read them, and their
// row stride: in qkv, or rotated into the worker's scratch.
func (a *Attention) queries(w *attnScratch, qkv []float32, q0 int) ([]float32, int) {
	if a.Rope == nil {
		return qkv[q0:], a.ld()
	}
	a.rotate(w.qr, qkv[q0:], a.ld(), false)
	return w.qr, a.D
}

// keys transposes head bh's keys (rotated first, with rotary embeddings)
// into w.kt and returns them as rows with their stride.
func (a *Attention) keys(w *attnScratch, qkv []float32, k0 int) ([]float32, int) {
	src, ld := qkv[k0:], a.ld()
	if a.Rope != nil {
		a.rotate(w.kr, src, ld, false)
		src, ld = w.kr, a.D
	}
	transposeF32(w.kt, a.T, src, ld, a.T, a.D)
	return src, ld
}

// causalRows is the height of the row chunks whose scores are computed
// together: a chunk computes the columns up to its last row's diagonal,
// so a diagonal tile wastes at most a 16×16 triangle per chunk.
const causalRows = 16

// scores computes the tile S = Q[i0:i0+br]·Kᵀ[:, j0:j0+bc] into s (rows
// attnTile apart), each chunk of causalRows rows over the columns
// chunkCols gives it; q holds the queries' rows ldq apart.
func (a *Attention) scores(w *attnScratch, q []float32, ldq, i0, j0, br, bc int) {
	for r := 0; r < br; r += causalRows {
		if n := chunkCols(i0, r, br, j0, bc); n > 0 {
			RowGemm(min(causalRows, br-r), n, a.D, q[(i0+r)*ldq:], ldq, 1, w.kt[j0:], a.T, w.s[r*attnTile:], attnTile, false)
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
	t, d, ld, c := a.T, a.D, a.ld(), a.H*a.D
	q0, k0, v0, y0 := a.offsets(bh)
	q, ldq := a.queries(w, qkv, q0)
	a.keys(w, qkv, k0)
	for i0 := 0; i0 < t; i0 += attnTile {
		br := min(attnTile, t-i0)
		for j0 := 0; j0 < i0+br; j0 += attnTile {
			bc := min(attnTile, t-j0)
			a.scores(w, q, ldq, i0, j0, br, bc)
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
					w.l[r] = float32(w.l[r]*corr) + ExpSum(row[:valid], row[:valid], a.Scale, mnew)
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
			lse[bh*t+i0+r] = w.m[r] + Log32(w.l[r]) // the same bits on every machine (math32.Log is assembly on amd64)
		}
	}
}

// Backward computes key/value group gi's part of dqkv (gi < Groups():
// the dQ of each query head of the group, and the dK and dV they share,
// summed over them) from qkv, the forward's output y and log-sum-exps
// lse, and dy, the gradient of y, on worker worker's scratch. Without
// grouping (Hkv = H) a group is one head, gi its (batch, head) index.
func (a *Attention) Backward(worker, gi int, qkv, y, lse, dy, dqkv []float32) {
	w := &a.work[worker]
	t, d, ld := a.T, a.D, a.ld()
	kv := a.kvHeads()
	group := a.H / kv
	b, g := gi/kv, gi%kv
	first := b*a.H + g*group
	_, k0, v0, _ := a.offsets(first)
	for i := 0; i < t; i++ {
		clear(dqkv[k0+i*ld : k0+i*ld+d])
		clear(dqkv[v0+i*ld : v0+i*ld+d])
	}
	k, ldk := a.keys(w, qkv, k0)
	transposeF32(w.vt, t, qkv[v0:], ld, t, d)
	// dK accumulates over the group's heads: in dqkv, or for the rotated
	// keys in scratch, rotated back at the end.
	dk, lddk := dqkv[k0:], ld
	if a.Rope != nil {
		clear(w.dkr)
		dk, lddk = w.dkr, d
	}
	for bh := first; bh < first+group; bh++ {
		a.backwardHead(w, bh, qkv, y, lse, dy, dqkv, k, ldk, dk, lddk)
	}
	if a.Rope != nil {
		a.rotate(w.dkr, w.dkr, d, true) // row by row, in place
		for i := 0; i < t; i++ {
			copy(dqkv[k0+i*ld:k0+i*ld+d], w.dkr[i*d:i*d+d])
		}
	}
}

// backwardHead adds head bh's gradients to dV (in dqkv) and dK (dk, rows
// lddk apart) and writes its dQ, with the head's keys k (rows ldk apart,
// rotated with rotary embeddings) and their transpose in w.kt and the
// values' in w.vt.
func (a *Attention) backwardHead(w *attnScratch, bh int, qkv, y, lse, dy, dqkv, k []float32, ldk int, dk []float32, lddk int) {
	t, d, ld, c := a.T, a.D, a.ld(), a.H*a.D
	q0, _, v0, y0 := a.offsets(bh)
	for i := 0; i < t; i++ {
		o, g := y[y0+i*c:y0+i*c+d], dy[y0+i*c:y0+i*c+d]
		var s float32
		for p, v := range o {
			s += float32(v * g[p]) // converted: never a fused multiply-add
		}
		w.dd[i] = s
	}
	q, ldq := a.queries(w, qkv, q0)
	dq, lddq := dqkv[q0:], ld
	if a.Rope != nil {
		dq, lddq = w.dqr, d
	}
	for i := 0; i < t; i++ {
		clear(dq[i*lddq : i*lddq+d])
	}
	for j0 := 0; j0 < t; j0 += attnTile {
		bc := min(attnTile, t-j0)
		for i0 := j0; i0 < t; i0 += attnTile {
			br := min(attnTile, t-i0)
			a.scores(w, q, ldq, i0, j0, br, bc)
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
					RowGemm(min(causalRows, br-r), d, n, w.dp[r*attnTile:], attnTile, 1, k[j0*ldk:], ldk, dq[(i0+r)*lddq:], lddq, true)
				}
			}
			for kc := 0; kc < bc; kc += causalRows {
				p0 := max(0, j0+kc-i0)
				if p0 >= br {
					break
				}
				rows := min(causalRows, bc-kc)
				probs := w.s
				if a.Dropout > 0 {
					probs = w.pd
				}
				RowGemm(rows, d, br-p0, probs[p0*attnTile+kc:], 1, attnTile, dy[y0+(i0+p0)*c:], c, dqkv[v0+(j0+kc)*ld:], ld, true)
				RowGemm(rows, d, br-p0, w.dp[p0*attnTile+kc:], 1, attnTile, q[(i0+p0)*ldq:], ldq, dk[(j0+kc)*lddk:], lddk, true)
			}
		}
	}
	if a.Rope != nil {
		a.rotate(w.dqr, w.dqr, d, true)
		for i := 0; i < t; i++ {
			copy(dqkv[q0+i*ld:q0+i*ld+d], w.dqr[i*d:i*d+d])
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

// rowGemmGo is rowGemm's loop: the sum of the k products in order, each
// a fused multiply-add (fma32), then times alpha, plus S in the same
// rounding — the vector kernels' bits exactly.
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
				av := a[i*rsA+p*csA]
				brow := b[p*ldb+j0 : p*ldb+j1]
				for j, bv := range brow {
					s[j] = fma32(av, bv, s[j])
				}
			}
			crow := c[i*ldc+j0 : i*ldc+j1]
			if add != nil {
				srow := add[i*ldadd+j0 : i*ldadd+j1]
				for j, v := range s {
					crow[j] = fma32(alpha, v, srow[j])
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
	return maxLanes(&lanes)
}

// maxLanes returns the largest lane, lane 0 first.
func maxLanes(lanes *[16]float32) float32 {
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
