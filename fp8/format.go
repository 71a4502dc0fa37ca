package fp8

import (
	"fmt"
	"math"

	"github.com/octetml/octet/internal/kernels"
)

// Format is an 8-bit floating-point format.
type Format uint8

// The two OCP FP8 formats.
const (
	// E4M3 is OCP E4M3 ("e4m3fn"): bias 7, max ±448, no infinities, NaN
	// only at S.1111.111.
	E4M3 Format = iota
	// E5M2 is OCP E5M2: bias 15, max ±57344, ±inf at S.11111.00, NaN at
	// S.11111.{01,10,11}.
	E5M2
)

type formatInfo struct {
	name    string
	mbits   uint
	bias    int
	maxCode uint8 // largest finite magnitude code
	nanCode uint8 // the NaN this package writes (sign added)
	infCode uint8 // 0 when the format has no infinity
	max     float32

	// cast holds the rounding cast's constants and the decode table,
	// shared with the vector kernels; set by init.
	cast *kernels.FP8Cast
}

var formats = [...]formatInfo{
	E4M3: {name: "E4M3", mbits: 3, bias: 7, maxCode: 0x7E, nanCode: 0x7F, max: 448},
	E5M2: {name: "E5M2", mbits: 2, bias: 15, maxCode: 0x7B, nanCode: 0x7E, infCode: 0x7C, max: 57344},
}

func init() {
	for f := range formats {
		fi := &formats[f]
		fi.cast = kernels.NewFP8Cast(f, int(fi.mbits), fi.bias, fi.maxCode, fi.nanCode, Format(f).decodeSlow)
	}
}

// decodeTable returns the exact float32 value of every code of f.
func decodeTable(f Format) *[256]float32 { return &formats[f].cast.Decode }

// decodeSlow evaluates the format's definition for one code.
func (f Format) decodeSlow(b uint8) float32 {
	fi := &formats[f]
	sign := float64(1)
	if b&0x80 != 0 {
		sign = -1
	}
	mag := b & 0x7F
	if f.IsNaN(b) {
		return float32(math.NaN())
	}
	if fi.infCode != 0 && mag == fi.infCode {
		return float32(math.Inf(int(sign)))
	}
	e := int(mag >> fi.mbits)
	m := float64(mag & (1<<fi.mbits - 1))
	scale := float64(uint(1) << fi.mbits)
	if e == 0 {
		return float32(sign * m / scale * math.Ldexp(1, 1-fi.bias))
	}
	return float32(sign * (1 + m/scale) * math.Ldexp(1, e-fi.bias))
}

// String returns "E4M3" or "E5M2".
func (f Format) String() string {
	if int(f) < len(formats) {
		return formats[f].name
	}
	return fmt.Sprintf("Format(%d)", f)
}

// Max returns the largest finite value: 448 for E4M3, 57344 for E5M2.
func (f Format) Max() float32 { return formats[f].max }

// MinNormal returns the smallest positive normal value.
func (f Format) MinNormal() float32 { return float32(math.Ldexp(1, 1-formats[f].bias)) }

// MinSubnormal returns the smallest positive value.
func (f Format) MinSubnormal() float32 {
	return float32(math.Ldexp(1, 1-formats[f].bias-int(formats[f].mbits)))
}

// IsNaN reports whether b encodes NaN.
func (f Format) IsNaN(b uint8) bool {
	mag := b & 0x7F
	if f == E4M3 {
		return mag == 0x7F
	}
	return mag > 0x7C
}

// Decode returns the exact float32 value of code b.
func (f Format) Decode(b uint8) float32 { return formats[f].cast.Decode[b] }

// DecodeTable returns the 256-entry decode table of the format.
func (f Format) DecodeTable() *[256]float32 { return decodeTable(f) }

// Encode rounds x to the nearest FP8 value, ties to even, saturating:
// finite values beyond the format's range and ±inf become ±max, NaN stays
// NaN, the sign of zero is kept and subnormals are exact.
func (f Format) Encode(x float32) uint8 { return f.encode(x, true) }

// EncodeNoSat rounds like Encode but does not saturate (OCP NONSAT, a
// plain PyTorch cast): overflow and ±inf become NaN in E4M3 and ±inf in
// E5M2.
func (f Format) EncodeNoSat(x float32) uint8 { return f.encode(x, false) }

func (f Format) encode(x float32, sat bool) uint8 {
	fi := &formats[f]
	bits := math.Float32bits(x)
	sign := uint8(bits>>24) & 0x80
	abs := bits & 0x7FFFFFFF
	if abs > 0x7F800000 { // NaN
		return sign | fi.nanCode
	}
	c := fi.cast.EncodeAbs(abs)
	if c <= uint32(fi.maxCode) {
		return sign | uint8(c)
	}
	switch {
	case sat:
		return sign | fi.maxCode
	case fi.infCode != 0:
		return sign | fi.infCode
	default:
		return sign | fi.nanCode
	}
}

// MaxMargin is the largest delayed-scaling margin that keeps a tensor's
// amax representable: with margin m the amax casts to max/2^m, which must
// not fall below the smallest subnormal (17 for E4M3, 31 for E5M2).
func (f Format) MaxMargin() int {
	_, e := math.Frexp(float64(f.Max()) / float64(f.MinSubnormal()))
	return e - 1
}
