package inspect

import "math"

// TensorStatsOf computes the LogTensorStats statistics names of x into
// out (in the same order), in one pass and in float64: min, max, mean,
// std (with Bessel's correction, as torch.std), l1_norm, l2_norm,
// cur_amax (max |x|) and dynamic_range (log2 of max |x| over the
// smallest non-zero |x|; 0 when every value is 0). A NaN anywhere makes
// every statistic NaN.
func TensorStatsOf(x []float32, names []string, out []float64) {
	mn, mx := math.Inf(1), math.Inf(-1)
	var sum, sq, l1, amax float64
	amin := math.Inf(1)
	nan := false
	for _, v32 := range x {
		v := float64(v32)
		if v != v {
			nan = true
			break
		}
		mn, mx = math.Min(mn, v), math.Max(mx, v)
		sum += v
		sq += v * v
		a := math.Abs(v)
		l1 += a
		amax = math.Max(amax, a)
		if a != 0 && a < amin {
			amin = a
		}
	}
	n := float64(len(x))
	for i, name := range names {
		if nan || len(x) == 0 {
			out[i] = math.NaN()
			continue
		}
		switch name {
		case "min":
			out[i] = mn
		case "max":
			out[i] = mx
		case "mean":
			out[i] = sum / n
		case "std":
			if len(x) < 2 {
				out[i] = math.NaN() // torch.std of one value
				continue
			}
			mean := sum / n
			out[i] = math.Sqrt(math.Max(0, (sq-n*mean*mean)/(n-1)))
		case "l1_norm":
			out[i] = l1
		case "l2_norm":
			out[i] = math.Sqrt(sq)
		case "cur_amax":
			out[i] = amax
		case "dynamic_range":
			if amax == 0 {
				out[i] = 0
			} else {
				out[i] = math.Log2(amax) - math.Log2(amin)
			}
		default:
			out[i] = math.NaN()
		}
	}
}

// FP8Counts accumulates the LogFp8TensorStats statistics of one cast:
// add every (source, dequantized, saturated) triple, then Stats.
type FP8Counts struct {
	n, under, over int
	sqErr          float64
	invMin, invMax float64
}

// Reset clears the counts for a new cast.
func (c *FP8Counts) Reset() {
	*c = FP8Counts{invMin: math.Inf(1), invMax: math.Inf(-1)}
}

// Add records one element: its source value x, the value the FP8 tensor
// holds for it (decoded and scaled back), and whether the cast saturated
// it (|x| beyond the format's range at its scale).
func (c *FP8Counts) Add(x, dq float32, saturated bool) {
	c.n++
	if x != 0 && dq == 0 {
		c.under++
	}
	if saturated {
		c.over++
	}
	d := float64(dq) - float64(x)
	c.sqErr += d * d
}

// Scale records one of the tensor's inverse scales.
func (c *FP8Counts) Scale(inv float32) {
	c.invMin = math.Min(c.invMin, float64(inv))
	c.invMax = math.Max(c.invMax, float64(inv))
}

// Stats writes the named statistics into out: underflows% and
// overflows% (of the elements), scale_inv_min, scale_inv_max and mse.
func (c *FP8Counts) Stats(names []string, out []float64) {
	n := float64(c.n)
	for i, name := range names {
		switch {
		case c.n == 0:
			out[i] = math.NaN()
		case name == "underflows%":
			out[i] = 100 * float64(c.under) / n
		case name == "overflows%":
			out[i] = 100 * float64(c.over) / n
		case name == "scale_inv_min":
			out[i] = c.invMin
		case name == "scale_inv_max":
			out[i] = c.invMax
		case name == "mse":
			out[i] = c.sqErr / n
		default:
			out[i] = math.NaN()
		}
	}
}
