package optim

import (
	"math"

	"github.com/octetml/octet/internal/parallel"
	"github.com/x448/float16"
)

// splitMin is the smallest loop the splitter spreads over the workers;
// below it the hand-off costs more than it saves.
const splitMin = 1 << 14

// splitter runs an elementwise loop body over [0, n) in one contiguous
// part per worker. It allocates nothing per call: the bodies it runs are
// method values made once, and their operands live in the caller.
// Every result is the same whatever the split, because each element is
// computed on its own and partial maxima combine in any order.
type splitter struct {
	group parallel.Group
	parts int
	n     int
	body  func(k, lo, hi int)
	run   func(int)
	maxes []float32 // one partial max per part
}

func newSplitter() *splitter {
	s := &splitter{parts: max(1, parallel.Workers())}
	s.maxes = make([]float32, s.parts)
	s.run = s.part
	return s
}

func (s *splitter) part(k int) {
	s.body(k, k*s.n/s.parts, (k+1)*s.n/s.parts)
}

// do runs body(k, lo, hi) over parts of [0, n) and returns how many parts
// it used (their index k runs from 0).
func (s *splitter) do(n int, body func(k, lo, hi int)) int {
	if n < splitMin || s.parts == 1 {
		body(0, 0, n)
		return 1
	}
	s.n, s.body = n, body
	s.group.For(s.parts, s.run)
	return s.parts
}

// maxOf combines the partial maxima of the first parts parts, NaN if any
// is NaN (as fp8.Amax).
func (s *splitter) maxOf(parts int) float32 {
	var m float32
	for _, v := range s.maxes[:parts] {
		if v != v {
			return v
		}
		m = max(m, v)
	}
	return m
}

// fp16Table maps every FP16 bit pattern to its float32 value (exact:
// float32 holds every FP16 value). 256 KiB, built on first use.
var fp16Table = sync16()

func sync16() *[1 << 16]float32 {
	var t [1 << 16]float32
	for b := range t {
		t[b] = float16.Frombits(uint16(b)).Float32()
	}
	return &t
}

// toFP16 is float16.Fromfloat32(x).Bits() (round to nearest even, ±inf
// on overflow, subnormals exact) without its branches for finite
// values; NaNs go to x448/float16 so their payloads match it too.
// Checked against x448/float16 for every float32 (see the test).
func toFP16(x float32) uint16 {
	const (
		f32Inf     = 255 << 23
		f16Max     = (127 + 16) << 23 // 2^16: at or above, the result is inf
		minNormal  = 113 << 23        // 2^-14, FP16's smallest normal
		denormBias = ((127 - 15) + (23 - 10) + 1) << 23
	)
	u := math.Float32bits(x)
	sign := uint16(u>>16) & 0x8000
	u &^= 1 << 31
	switch {
	case u > f32Inf:
		return float16.Fromfloat32(x).Bits()
	case u >= f16Max:
		return sign | 0x7c00
	case u < minNormal:
		// Adding 0.5 (in the right binade) lets the float32 adder round
		// the subnormal mantissa to nearest even.
		f := math.Float32frombits(u) + math.Float32frombits(denormBias)
		return sign | uint16(math.Float32bits(f)-denormBias)
	}
	odd := (u >> 13) & 1
	u = u - (127-15)<<23 + 0xfff + odd // rebias the exponent, round to nearest even
	return sign | uint16(u>>13)
}
