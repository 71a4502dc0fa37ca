package kernels

import (
	"math"

	"github.com/x448/float16"
)

// EncodeFP16 stores x·scale of every x in src as FP16 bits in dst (at
// least as long as src), rounding to nearest even: the vector kernel the
// longest multiple of 16 it can, encodeFP16Go (its twin) the rest. The
// bits equal x448/float16's for every input (NaN payloads included on
// the scalar path; see the tests).
func EncodeFP16(dst []uint16, src []float32, scale float32) {
	dst = dst[:len(src)]
	done := encodeFP16Vector(dst, src, scale)
	encodeFP16Go(dst[done:], src[done:], scale)
}

// encodeFP16Go is the loop the vector kernel replaces.
func encodeFP16Go(dst []uint16, src []float32, scale float32) {
	for i, v := range src {
		dst[i] = ToFP16(v * scale)
	}
}

// ToFP16 is float16.Fromfloat32(x).Bits() (round to nearest even, ±inf
// on overflow, subnormals exact) without its branches for finite values;
// NaNs go to x448/float16 so their payloads match it too. Checked against
// x448/float16 for every float32 (see the test).
func ToFP16(x float32) uint16 {
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

// fp16Table maps every FP16 bit pattern to its float32 value (exact:
// float32 holds every FP16 value). 256 KiB.
var fp16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for b := range t {
		t[b] = float16.Frombits(uint16(b)).Float32()
	}
	return &t
}()

// DecodeFP16 writes the value of every FP16 pattern in src times scale to
// dst (at least as long as src).
func DecodeFP16(dst []float32, src []uint16, scale float32) {
	dst = dst[:len(src)]
	for i := decodeFP16Vector(dst, src, scale); i < len(src); i++ {
		dst[i] = fp16Table[src[i]] * scale
	}
}
