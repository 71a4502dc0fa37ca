package kernels

import (
	"math"
	"testing"
)

// TestDecodeFP8MatchesTables decodes every code of both formats with the
// vector kernel and compares with an independent scalar decode.
func TestDecodeFP8MatchesTables(t *testing.T) {
	for format := 0; format < 2; format++ {
		src := make([]uint8, 256+16)
		for i := range src {
			src[i] = uint8(i)
		}
		for _, scale := range []float32{1, 0.25, 3} {
			dst := make([]float32, len(src))
			n := DecodeFP8(format, dst, src, scale)
			if n == 0 {
				t.Skip("no vector decode on this CPU/build")
			}
			for i := 0; i < n; i++ {
				want := fp8Ref(format, src[i]) * float64(scale)
				got := float64(dst[i])
				if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && got != want) {
					t.Fatalf("format %d code %#02x scale %v: %v, want %v", format, src[i], scale, got, want)
				}
			}
		}
	}
}

// fp8Ref decodes an FP8 code (format 0: E4M3, 1: E5M2) from its bit
// fields, independently of the tables and kernels.
func fp8Ref(format int, c uint8) float64 {
	mbits, bias := 3, 7
	if format == 1 {
		mbits, bias = 2, 15
	}
	sign := 1.0
	if c&0x80 != 0 {
		sign = -1
	}
	mag := int(c & 0x7F)
	e, m := mag>>mbits, mag&(1<<mbits-1)
	switch {
	case format == 0 && mag == 0x7F, format == 1 && mag > 0x7C:
		return math.NaN()
	case format == 1 && mag == 0x7C:
		return math.Inf(int(sign))
	case e == 0:
		return sign * float64(m) * math.Ldexp(1, 1-bias-mbits)
	}
	return sign * (1 + float64(m)/float64(int(1)<<mbits)) * math.Ldexp(1, e-bias)
}
