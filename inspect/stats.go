package inspect

import "math"

// Partial holds the mergeable accumulators behind the statistics of one
// tensor (or of one FP8 cast) on one rank: counts, sums and extremes.
// Ranks of a data-parallel run merge their partials, so that the logged
// statistics describe the whole global batch.
type Partial struct {
	N, Sum, Sq, L1       float64
	Min, Max, Amax, Amin float64 // Amin: the smallest non-zero |x|
	NaN                  float64 // NaN values seen
	Under, Over, SqErr   float64 // FP8 casts: code 0x00, saturated, Σ(dq − x)²
	InvMin, InvMax       float64 // FP8 casts: the inverse scales' range
	Flushed              float64 // FP8 casts: non-zero values sent to zero
}

// PartialLen is the number of float32s Encode writes.
const PartialLen = 15

// Reset empties the partial.
func (p *Partial) Reset() {
	*p = Partial{Min: math.Inf(1), Max: math.Inf(-1), Amin: math.Inf(1), InvMin: math.Inf(1), InvMax: math.Inf(-1)}
}

// AddTensor accumulates the values of x.
func (p *Partial) AddTensor(x []float32) {
	for _, v32 := range x {
		v := float64(v32)
		if v != v {
			p.NaN++
			continue
		}
		p.N++
		p.Min, p.Max = math.Min(p.Min, v), math.Max(p.Max, v)
		p.Sum += v
		p.Sq += float64(v * v)
		a := math.Abs(v)
		p.L1 += a
		p.Amax = math.Max(p.Amax, a)
		if a != 0 && a < p.Amin {
			p.Amin = a
		}
	}
}

// AddCast records one element of an FP8 cast: its source value x, the
// value the FP8 tensor holds for it (decoded and scaled back), and
// whether the cast saturated it (|x| beyond the format's range at its
// scale). An element whose code is 0x00 — a positive zero: exact zeros
// of the input included, negative zeros (0x80) not — counts as an
// underflow, as Transformer Engine counts them; a non-zero x whose code
// is a zero of either sign counts as flushed.
func (p *Partial) AddCast(x, dq float32, saturated bool) {
	p.N++
	if dq == 0 && !math.Signbit(float64(dq)) {
		p.Under++
	}
	if x != 0 && dq == 0 {
		p.Flushed++
	}
	if saturated {
		p.Over++
	}
	d := float64(dq) - float64(x)
	p.SqErr += float64(d * d)
}

// Scale records one of an FP8 tensor's inverse scales.
func (p *Partial) Scale(inv float32) {
	p.InvMin = math.Min(p.InvMin, float64(inv))
	p.InvMax = math.Max(p.InvMax, float64(inv))
}

// Merge folds another rank's partial into p.
func (p *Partial) Merge(q *Partial) {
	p.N += q.N
	p.Sum += q.Sum
	p.Sq += q.Sq
	p.L1 += q.L1
	p.NaN += q.NaN
	p.Under += q.Under
	p.Flushed += q.Flushed
	p.Over += q.Over
	p.SqErr += q.SqErr
	p.Min, p.Max = math.Min(p.Min, q.Min), math.Max(p.Max, q.Max)
	p.Amax, p.Amin = math.Max(p.Amax, q.Amax), math.Min(p.Amin, q.Amin)
	p.InvMin, p.InvMax = math.Min(p.InvMin, q.InvMin), math.Max(p.InvMax, q.InvMax)
}

// Encode writes the partial as PartialLen float32s (for a gather across
// ranks).
func (p *Partial) Encode(dst []float32) {
	for i, v := range [PartialLen]float64{p.N, p.Sum, p.Sq, p.L1, p.Min, p.Max, p.Amax, p.Amin, p.NaN, p.Under, p.Over, p.SqErr, p.InvMin, p.InvMax, p.Flushed} {
		dst[i] = float32(v)
	}
}

// Decode reads what Encode wrote.
func (p *Partial) Decode(src []float32) {
	f := func(i int) float64 { return float64(src[i]) }
	*p = Partial{N: f(0), Sum: f(1), Sq: f(2), L1: f(3), Min: f(4), Max: f(5), Amax: f(6), Amin: f(7), NaN: f(8),
		Under: f(9), Over: f(10), SqErr: f(11), InvMin: f(12), InvMax: f(13), Flushed: f(14)}
}

// TensorStats writes the LogTensorStats statistics names into out (in
// the same order): min, max, mean, std (with Bessel's correction, as
// torch.std), l1_norm, l2_norm, cur_amax (max |x|) and dynamic_range
// (log2 of max |x| over the smallest non-zero |x|; 0 when every value is
// 0). A NaN anywhere, or no value, makes every statistic NaN.
func (p *Partial) TensorStats(names []string, out []float64) {
	for i, name := range names {
		if p.NaN > 0 || p.N == 0 {
			out[i] = math.NaN()
			continue
		}
		switch name {
		case "min":
			out[i] = p.Min
		case "max":
			out[i] = p.Max
		case "mean":
			out[i] = p.Sum / p.N
		case "std":
			if p.N < 2 {
				out[i] = math.NaN() // torch.std of one value
				continue
			}
			mean := p.Sum / p.N
			out[i] = math.Sqrt(math.Max(0, (p.Sq-float64(p.N*mean*mean))/(p.N-1)))
		case "l1_norm":
			out[i] = p.L1
		case "l2_norm":
			out[i] = math.Sqrt(p.Sq)
		case "cur_amax":
			out[i] = p.Amax
		case "dynamic_range":
			if p.Amax == 0 {
				out[i] = 0
			} else {
				out[i] = math.Log2(p.Amax) - math.Log2(p.Amin)
			}
		default:
			out[i] = math.NaN()
		}
	}
}

// FP8Stats writes the LogFp8TensorStats statistics names into out:
// underflows% (elements whose code is 0x00, Transformer Engine's
// definition), flushed% (Octet's: non-zero values the cast sent to
// zero) and overflows%, all in percent of the elements, scale_inv_min,
// scale_inv_max and mse.
func (p *Partial) FP8Stats(names []string, out []float64) {
	for i, name := range names {
		switch {
		case p.N == 0:
			out[i] = math.NaN()
		case name == "underflows%":
			out[i] = 100 * p.Under / p.N
		case name == "flushed%":
			out[i] = 100 * p.Flushed / p.N
		case name == "overflows%":
			out[i] = 100 * p.Over / p.N
		case name == "scale_inv_min":
			out[i] = p.InvMin
		case name == "scale_inv_max":
			out[i] = p.InvMax
		case name == "mse":
			out[i] = p.SqErr / p.N
		default:
			out[i] = math.NaN()
		}
	}
}

// TensorStatsOf computes the LogTensorStats statistics names of x into
// out, in one pass and in float64 (see Partial.TensorStats).
func TensorStatsOf(x []float32, names []string, out []float64) {
	var p Partial
	p.Reset()
	p.AddTensor(x)
	p.TensorStats(names, out)
}
