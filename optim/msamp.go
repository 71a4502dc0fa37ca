package optim

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unsafe"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/recipe"
)

// fp16Max is the largest finite FP16 value.
const fp16Max = 65504

// pow2Scale returns the power-of-two scale that maps amax to at most max
// (1 when amax is 0 or not finite), as MS-AMP's scaling does.
func pow2Scale(amax, max float32) float32 {
	if !(amax > 0) || math.IsInf(float64(amax), 0) {
		return 1
	}
	return fp8.RoundDownPow2(max / amax)
}

// FP16Tensor is a tensor stored as FP16 with a per-tensor power-of-two
// scale: value ≈ FP16(bits)/Scale.
type FP16Tensor struct {
	Bits  []uint16
	Scale float32
}

// Encode stores src with a scale chosen from its amax.
func (t *FP16Tensor) Encode(src []float32) {
	t.Scale = pow2Scale(fp8.Amax(src), fp16Max)
	encode16(t.Bits, src, t.Scale)
}

// Decode writes the values to dst.
func (t *FP16Tensor) Decode(dst []float32) { decode16(dst, t.Bits, t.Scale) }

// encode16 stores src·scale as FP16 (round to nearest even).
func encode16(dst []uint16, src []float32, scale float32) { kernels.EncodeFP16(dst, src, scale) }

// decode16 writes FP16 values divided by scale to dst.
func decode16(dst []float32, src []uint16, scale float32) { kernels.DecodeFP16(dst, src, 1/scale) }

// FP8Tensor is a tensor stored as FP8 E4M3 codes with a per-tensor
// power-of-two scale.
type FP8Tensor struct {
	Codes []uint8
	Scale float32
}

// Encode stores src with a scale chosen from its amax; src longer than
// Codes is an error.
func (t *FP8Tensor) Encode(src []float32) error {
	if len(t.Codes) < len(src) {
		return fmt.Errorf("optim: FP8 tensor of %d codes for %d values", len(t.Codes), len(src))
	}
	t.Scale = pow2Scale(fp8.Amax(src), fp8.E4M3.Max())
	_, err := fp8.Quantize(t.Codes, src, fp8.E4M3, t.Scale)
	return err
}

// Decode writes the values to dst (at least as long as Codes).
func (t *FP8Tensor) Decode(dst []float32) error {
	return fp8.Dequantize(dst, t.Codes, fp8.E4M3, 1/t.Scale)
}

// MemoryStats is an optimizer's persistent storage per parameter value.
type MemoryStats struct {
	// WeightBytes, GradBytes and StateBytes are bytes per parameter
	// value: the master weights, the weight gradients and the optimizer
	// state (all buffers together).
	WeightBytes, GradBytes, StateBytes float64
	// States gives the bytes per value of each state buffer.
	States map[string]float64
}

// StatesString lists the state buffers' bytes per value by name, in
// name order: "exp_avg 4 B, exp_avg_sq 4 B".
func (m MemoryStats) StatesString() string {
	names := make([]string, 0, len(m.States))
	for n := range m.States {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %g B", n, m.States[n])
	}
	return strings.Join(parts, ", ")
}

// LowBitAdam is MS-AMP's Adam/AdamW at optimization level O1 or O2:
//
//   - O1: master weights in FP16 with a per-tensor power-of-two scale
//     (no float32 master copy), weight gradients in FP8 E4M3 with a
//     per-tensor scale, moments in float32 (8 bytes of state per value);
//   - O2: as O1, and the first moment in FP8 E4M3, the second in FP16,
//     each with a per-tensor power-of-two scale (3 bytes per value).
//
// Each Param's W is the float32 buffer the model computes with; after
// every step it holds the decoded FP16 master weights. With Comm set,
// gradients are averaged across data-parallel ranks by MS-AMP's FP8
// all-reduce (see AllReduceFP8).
type LowBitAdam struct {
	Params       []Param
	Level        string
	Beta1, Beta2 float32
	Eps          float32
	WeightDecay  float32
	Decoupled    bool
	Comm         dist.Communicator

	w          []FP16Tensor
	g          []FP8Tensor
	m32, v32   [][]float32 // O1
	m8         []FP8Tensor // O2
	v16        []FP16Tensor
	wf, gf     []float32 // scratch
	mf, vf     []float32
	steps      int
	reduce     *FP8AllReduce
	Overflows  int
	Underflows int
	err        error
	scaleBufs  map[string][]float32 // handed to a checkpoint loader

	// The update runs split over the cores (see splitter); cur holds the
	// operands of the parameter being updated, and the three bodies are
	// method values made once, so a step allocates nothing.
	split                  *splitter
	cur                    stepOperands
	gradAmax, update, save func(k, lo, hi int)
}

// stepOperands are one parameter's buffers and constants during Step.
type stepOperands struct {
	i                   int
	w, g, m, v, wOut, G []float32
	castGrad, decay     bool
	lr, step, bc2s      float32
	mMax, vMax          []float32 // partial maxima per part
}

// Err returns the first error of a data-parallel gradient all-reduce (a
// collective that failed); the update of that step was skipped.
func (o *LowBitAdam) Err() error { return o.err }

// NewLowBitAdam returns MS-AMP's AdamW (decoupled weight decay) at the
// recipe's level (O1 or O2), the recipe the model's GEMMs were converted
// with; the weights in params are rounded to their FP16 master form at
// once.
func NewLowBitAdam(params []Param, r recipe.MSAMP, weightDecay float32, comm dist.Communicator) (*LowBitAdam, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	o := &LowBitAdam{Params: params, Level: r.Level(), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay, Decoupled: true, Comm: comm}
	maxLen := 0
	for _, p := range params {
		n := len(p.W)
		maxLen = max(maxLen, n)
		w := FP16Tensor{Bits: make([]uint16, n)}
		w.Encode(p.W)
		w.Decode(p.W)
		o.w = append(o.w, w)
		o.g = append(o.g, FP8Tensor{Codes: make([]uint8, n), Scale: 1})
		if o.Level == "O1" {
			o.m32 = append(o.m32, make([]float32, n))
			o.v32 = append(o.v32, make([]float32, n))
		} else {
			o.m8 = append(o.m8, FP8Tensor{Codes: make([]uint8, n), Scale: 1})
			o.v16 = append(o.v16, FP16Tensor{Bits: make([]uint16, n), Scale: 1})
		}
	}
	o.wf, o.gf, o.mf, o.vf = make([]float32, maxLen), make([]float32, maxLen), make([]float32, maxLen), make([]float32, maxLen)
	o.split = newSplitter()
	o.cur.mMax, o.cur.vMax = make([]float32, o.split.parts), make([]float32, o.split.parts)
	o.gradAmax, o.update, o.save = o.gradAmaxPart, o.updatePart, o.savePart
	if comm != nil {
		o.reduce = NewFP8AllReduce(comm, maxLen)
	}
	return o, nil
}

// Steps returns the number of updates applied.
func (o *LowBitAdam) Steps() int { return o.steps }

// SetSteps sets the number of updates already applied.
func (o *LowBitAdam) SetSteps(n int) { o.steps = n }

// StateBuffers returns the float32 state for checkpoints: the moments at
// O1 ("msamp.m/<p>", "msamp.v/<p>") and, at both levels, each parameter's
// scales ("msamp.scales/<p>": weight, first moment, second moment). A
// loader writes into these buffers and then calls StateLoaded.
func (o *LowBitAdam) StateBuffers() map[string][]float32 {
	out := map[string][]float32{}
	o.scaleBufs = map[string][]float32{}
	for i, p := range o.Params {
		sc := []float32{o.w[i].Scale, 1, 1}
		if o.Level == "O1" {
			out["msamp.m/"+p.Name], out["msamp.v/"+p.Name] = o.m32[i], o.v32[i]
		} else {
			sc[1], sc[2] = o.m8[i].Scale, o.v16[i].Scale
		}
		out["msamp.scales/"+p.Name] = sc
		o.scaleBufs[p.Name] = sc
	}
	return out
}

// RawStateBuffers returns the encoded state as bytes, for checkpoints: the
// FP16 master weights ("msamp.w16/<p>", little-endian) and at O2 the FP8
// first moment ("msamp.m8/<p>") and FP16 second moment ("msamp.v16/<p>").
// A loader writes into these buffers.
func (o *LowBitAdam) RawStateBuffers() map[string][]byte {
	out := map[string][]byte{}
	for i, p := range o.Params {
		out["msamp.w16/"+p.Name] = u16Bytes(o.w[i].Bits)
		if o.Level == "O2" {
			out["msamp.m8/"+p.Name] = o.m8[i].Codes
			out["msamp.v16/"+p.Name] = u16Bytes(o.v16[i].Bits)
		}
	}
	return out
}

// StateLoaded takes the scales a checkpoint loader wrote into the buffers
// StateBuffers returned.
func (o *LowBitAdam) StateLoaded() {
	for i, p := range o.Params {
		sc, ok := o.scaleBufs[p.Name]
		if !ok {
			continue
		}
		o.w[i].Scale = sc[0]
		if o.Level == "O2" {
			o.m8[i].Scale, o.v16[i].Scale = sc[1], sc[2]
		}
	}
}

// u16Bytes views FP16 bits as little-endian bytes (the layout of every
// platform Octet builds for).
func u16Bytes(b []uint16) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 2*len(b))
}

// MemoryStats reports the bytes per parameter value of the master
// weights (2, FP16), the gradients (1, FP8) and the states (8 at O1,
// 3 at O2); per-tensor scales are not counted.
func (o *LowBitAdam) MemoryStats() MemoryStats {
	if o.Level == "O1" {
		return MemoryStats{WeightBytes: 2, GradBytes: 1, StateBytes: 8, States: map[string]float64{"exp_avg": 4, "exp_avg_sq": 4}}
	}
	return MemoryStats{WeightBytes: 2, GradBytes: 1, StateBytes: 3, States: map[string]float64{"exp_avg": 1, "exp_avg_sq": 2}}
}

// Float32MemoryStats is what plain AdamW keeps: float32 weights,
// gradients and two float32 moments.
func Float32MemoryStats() MemoryStats {
	return MemoryStats{WeightBytes: 4, GradBytes: 4, StateBytes: 8, States: map[string]float64{"exp_avg": 4, "exp_avg_sq": 4}}
}

// Step applies one update with learning rate lr.
func (o *LowBitAdam) Step(lr float32) {
	o.steps++
	t := float64(o.steps)
	bc1 := 1 - math.Pow(float64(o.Beta1), t)
	c := &o.cur
	c.lr = lr
	c.bc2s = float32(math.Sqrt(1 - math.Pow(float64(o.Beta2), t)))
	c.step = float32(float64(lr) / bc1)
	for i, p := range o.Params {
		n := len(p.W)
		c.i, c.G, c.wOut = i, p.G[:n], p.W
		c.w, c.g = o.wf[:n], o.gf[:n]
		c.decay = p.Decay && o.WeightDecay != 0
		if o.Level == "O1" {
			c.m, c.v = o.m32[i], o.v32[i]
		} else {
			c.m, c.v = o.mf[:n], o.vf[:n]
		}
		// Weight gradient in FP8 E4M3 (averaged across ranks with the
		// FP8 all-reduce when data-parallel).
		c.castGrad = o.reduce == nil
		if o.reduce != nil {
			ov, un, err := o.reduce.Average(c.G, c.g)
			if err != nil {
				if o.err == nil {
					o.err = fmt.Errorf("optim: %s: %w", p.Name, err)
				}
				return
			}
			o.Overflows += ov
			o.Underflows += un
		} else {
			parts := o.split.do(n, o.gradAmax)
			o.g[i].Scale = pow2Scale(o.split.maxOf(parts), fp8.E4M3.Max())
		}
		parts := o.split.do(n, o.update)
		o.w[i].Scale = pow2Scale(o.split.maxOf(parts), fp16Max)
		if o.Level == "O2" {
			copy(o.split.maxes, c.mMax[:parts])
			o.m8[i].Scale = pow2Scale(o.split.maxOf(parts), fp8.E4M3.Max())
			copy(o.split.maxes, c.vMax[:parts])
			o.v16[i].Scale = pow2Scale(o.split.maxOf(parts), fp16Max)
		}
		o.split.do(n, o.save)
	}
}

// gradAmaxPart is the amax of part k of the float32 gradient.
func (o *LowBitAdam) gradAmaxPart(k, lo, hi int) {
	o.split.maxes[k] = fp8.Amax(o.cur.G[lo:hi])
}

// updatePart casts part of the gradient to FP8 and back (unless the
// all-reduce did), decodes the master weights and moments, applies the
// Adam update in float32 and records the amaxes that choose the new
// scales.
func (o *LowBitAdam) updatePart(k, lo, hi int) {
	c, i := &o.cur, o.cur.i
	w, g, m, v := c.w[lo:hi], c.g[lo:hi], c.m[lo:hi], c.v[lo:hi]
	// The buffers were made for these parameters: the casts cannot fail.
	if c.castGrad {
		gt := &o.g[i]
		_, _ = fp8.Quantize(gt.Codes[lo:hi], c.G[lo:hi], fp8.E4M3, gt.Scale)
		_ = fp8.Dequantize(g, gt.Codes[lo:hi], fp8.E4M3, 1/gt.Scale)
	}
	decode16(w, o.w[i].Bits[lo:hi], o.w[i].Scale)
	if o.Level == "O2" {
		_ = fp8.Dequantize(m, o.m8[i].Codes[lo:hi], fp8.E4M3, 1/o.m8[i].Scale)
		decode16(v, o.v16[i].Bits[lo:hi], o.v16[i].Scale)
	}
	kc := adamConsts(o.Beta1, o.Beta2, o.Eps, c.step, c.bc2s, c.lr, o.WeightDecay, c.decay, o.Decoupled)
	kernels.Adam(w, g, m, v, &kc) // AdamW's kernel: one update rule for both
	o.split.maxes[k] = fp8.Amax(w)
	if o.Level == "O2" {
		c.mMax[k], c.vMax[k] = fp8.Amax(m), fp8.Amax(v)
	}
}

// savePart encodes part of the updated state with the new scales and
// writes the decoded FP16 master weights to the model's buffer.
func (o *LowBitAdam) savePart(_, lo, hi int) {
	c, i := &o.cur, o.cur.i
	wt := &o.w[i]
	encode16(wt.Bits[lo:hi], c.w[lo:hi], wt.Scale)
	decode16(c.wOut[lo:hi], wt.Bits[lo:hi], wt.Scale)
	if o.Level == "O2" {
		_, _ = fp8.Quantize(o.m8[i].Codes[lo:hi], c.m[lo:hi], fp8.E4M3, o.m8[i].Scale) // sized at construction
		encode16(o.v16[i].Bits[lo:hi], c.v[lo:hi], o.v16[i].Scale)
	}
}

// FP8AllReduce averages gradients across data-parallel ranks the way
// MS-AMP does: every rank's amax is all-reduced with MAX into one shared
// power-of-two scale, multiplied by 1/√N before the cast so that the sum
// of N values has headroom; the FP8 values are summed (in rank order,
// the result cast to FP8 again, as an FP8 wire format would), and the
// sum is divided by N through the inverse scale. Casts that saturate
// (overflow) or flush a non-zero value to zero (underflow) are counted.
type FP8AllReduce struct {
	comm     dist.Communicator
	amax     []float32
	codes    []uint8
	gathered []uint8
	counts   []int
}

// NewFP8AllReduce prepares buffers for gradients of up to n values.
func NewFP8AllReduce(comm dist.Communicator, n int) *FP8AllReduce {
	return &FP8AllReduce{comm: comm, amax: make([]float32, 1), codes: make([]uint8, n),
		gathered: make([]uint8, n*comm.Size()), counts: make([]int, comm.Size())}
}

// Average writes the rank average of every rank's g to out and returns
// the overflow and underflow counts of this rank's casts.
func (r *FP8AllReduce) Average(g, out []float32) (overflows, underflows int, err error) {
	n, size := len(g), r.comm.Size()
	if n > len(r.codes) {
		return 0, 0, fmt.Errorf("FP8 all-reduce: %d values, buffers for %d", n, len(r.codes))
	}
	r.amax[0] = fp8.Amax(g)
	if err := r.comm.AllReduceF32(r.amax, dist.Max); err != nil {
		return 0, 0, fmt.Errorf("FP8 all-reduce: %w", err)
	}
	scale := pow2Scale(r.amax[0], fp8.E4M3.Max()) / float32(math.Sqrt(float64(size)))
	codes := r.codes[:n]
	if _, err := fp8.Quantize(codes, g, fp8.E4M3, scale); err != nil {
		return 0, 0, fmt.Errorf("FP8 all-reduce: %w", err)
	}
	// This rank's cast cannot saturate: every |v| is at most the shared
	// amax, and the scale keeps amax·scale ≤ max/√N. It can flush small
	// values to zero.
	for i, v := range g {
		if v != 0 && codes[i]&0x7F == 0 {
			underflows++
		}
	}
	max := fp8.E4M3.Max()
	for i := range r.counts {
		r.counts[i] = n
	}
	all := r.gathered[:n*size]
	if err := r.comm.AllGatherU8(all, codes, r.counts); err != nil {
		return 0, 0, fmt.Errorf("FP8 all-reduce: %w", err)
	}
	inv := 1 / (scale * float32(size))
	for i := 0; i < n; i++ {
		var s float32
		for rk := 0; rk < size; rk++ {
			s += fp8.E4M3.Decode(all[rk*n+i])
		}
		q := fp8.E4M3.Encode(s)
		if d := fp8.E4M3.Decode(q); (d == max || d == -max) && math.Abs(float64(s)) > float64(max) {
			overflows++
		}
		out[i] = fp8.E4M3.Decode(q) * inv
	}
	return overflows, underflows, nil
}
