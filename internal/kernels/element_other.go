//go:build !amd64 || purego

package kernels

// QuantizeFP8 has no vector path on this build: it does nothing and the
// caller's scalar loop casts everything.
func QuantizeFP8(format int, dst []uint8, src []float32, scale float32) (done int, amaxBits uint32) {
	return 0, 0
}

func adamVector(w, g, m, v []float32, c *AdamConsts) int { return 0 }

// DecodeFP8 has no vector path on this build.
func DecodeFP8(format int, dst []float32, src []uint8, scale float32) int { return 0 }

// The activations have no vector path on this build.
func geluVector(y, x []float32) int          { return 0 }
func geluGradVector(dx, x, dy []float32) int { return 0 }
func reluGradVector(dx, x, dy []float32) int { return 0 }

// AmaxBits has no vector path on this build.
func AmaxBits(src []float32) (done int, bits uint32) { return 0, 0 }

// EncodeFP16 has no vector path on this build.
func EncodeFP16(dst []uint16, src []float32, scale float32) int { return 0 }
