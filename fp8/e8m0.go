package fp8

import (
	"fmt"
	"math"
)

// E8M0 is the MXFP8 block scale: an unsigned power of two 2^(code−127),
// code 0 standing for 2^−127 and 0xFF for NaN.
type E8M0 uint8

// E8M0NaN is the NaN scale.
const E8M0NaN E8M0 = 0xFF

// E8M0FromExp returns the scale 2^e, clamping e to [−127, 127].
func E8M0FromExp(e int) E8M0 { return E8M0(min(max(e, -127), 127) + 127) }

// Exp returns e for the scale 2^e.
func (s E8M0) Exp() int { return int(s) - 127 }

// Float32 returns the scale's value (NaN for 0xFF; 2^−127 is a float32
// subnormal and exact).
func (s E8M0) Float32() float32 {
	if s == E8M0NaN {
		return float32(math.NaN())
	}
	return float32(math.Ldexp(1, s.Exp()))
}

// String formats the scale as "2^e".
func (s E8M0) String() string {
	if s == E8M0NaN {
		return "NaN"
	}
	return fmt.Sprintf("2^%d", s.Exp())
}

// ExpRule chooses an MXFP8 block's shared exponent from its amax.
type ExpRule uint8

const (
	// ExpRoundUp is Transformer Engine's rule, e = ⌈log2(amax / max)⌉:
	// the block never overflows and its scaled maximum lies in
	// (max/2, max].
	ExpRoundUp ExpRule = iota
	// ExpOCPFloor is the OCP MX specification's rule,
	// e = ⌊log2(amax)⌋ − emax of the element format (8 for E4M3, 15 for
	// E5M2); the scaled block may exceed max and saturates.
	ExpOCPFloor
)

// String names the rule.
func (r ExpRule) String() string {
	if r == ExpOCPFloor {
		return "ocp_floor"
	}
	return "round_up"
}

// BlockScale returns the E8M0 scale of a block with the given amax: an
// amax of 0 gives code 0 (2^-127), a non-finite amax gives NaN.
func BlockScale(amax float32, f Format, rule ExpRule) E8M0 {
	// A normal amax (the usual case) in integers: amax = m·2^ea with m
	// in [1, 2), and both formats' max is 1.75·2^emax (448 = 1.75·2^8,
	// 57344 = 1.75·2^15), so ⌈log2(amax/max)⌉ is ea − emax, plus one when
	// m > 1.75 (mantissa bits above 0x600000); ⌊log2(amax)⌋ is ea. The
	// float64 form below gives the same (the tests hold the two equal).
	if b := math.Float32bits(amax); b >= 1<<23 && b < 0x7F800000 && (f == E4M3 || f == E5M2) { // positive, normal
		return blockScaleNormal(b, mxEmax(f), rule != ExpOCPFloor)
	}
	return blockScaleSlow(amax, f, rule)
}

// mxEmax returns emax with the format's largest value 1.75·2^emax (E4M3
// 448, E5M2 57344).
func mxEmax(f Format) int {
	if f == E5M2 {
		return 15
	}
	return 8
}

// blockScaleNormal is BlockScale of a positive normal amax with bits b:
// the exponent of amax less emax, plus one rounding up (ceil) when the
// mantissa is above 1.75's.
func blockScaleNormal(b uint32, emax int, ceil bool) E8M0 {
	e := int(b>>23) - 127 - emax
	if ceil && b&(1<<23-1) > 0x600000 {
		e++
	}
	return E8M0FromExp(e)
}

// blockScaleSlow is BlockScale in float64, for every amax (the fast path
// takes the normal ones).
func blockScaleSlow(amax float32, f Format, rule ExpRule) E8M0 {
	a := float64(amax)
	switch {
	case math.IsNaN(a) || math.IsInf(a, 0):
		return E8M0NaN
	case a == 0:
		// An all-zero block: code 0 (2^-127), as Transformer Engine's
		// float_to_e8m0 and torchao give; its elements are all zero.
		return 0
	}
	if rule == ExpOCPFloor {
		_, e := math.Frexp(a) // a = frac·2^e, frac in [0.5, 1)
		emax := formats[f].bias
		if f == E4M3 {
			emax = 8 // 448 = 1.75·2^8
		}
		return E8M0FromExp(e - 1 - emax)
	}
	// ⌈log2(r)⌉ for r = amax/max: r is a power of two exactly when frac is
	// 0.5; the float64 quotient of a float32 by max cannot round onto a
	// power of two otherwise.
	frac, e := math.Frexp(a / float64(formats[f].max))
	if frac == 0.5 {
		e--
	}
	return E8M0FromExp(e)
}
