//go:build !purego

package kernels

import "math"

// The NEON element kernels (asm_arm64.s, written by neongen): each runs
// the whole blocks of its input and leaves the rest to its Go twin,
// which continues in the same lanes, so the bits are the twin's.

//go:noescape
func neonExpSum(y, x *float32, n int, scale, shift float32, lanes *[16]float32)

//go:noescape
func neonRowMax(x *float32, n int, lanes *[16]float32)

//go:noescape
func neonSoftmaxGradRow(ds, p, dp *float32, n int, d, scale float32)

//go:noescape
func neonGELU(y, x *float32, n int)

func expSumVector(y, x []float32, scale, shift float32) (float32, bool) {
	n := len(x) &^ 15
	if !hasNEON || n == 0 {
		return 0, false
	}
	_ = y[len(x)-1]
	var lanes [16]float32
	neonExpSum(&y[0], &x[0], n, scale, shift, &lanes)
	expSumGo(y[n:len(x)], x[n:], scale, shift, &lanes) // n is a multiple of 16: the lanes continue
	return sumLanes(&lanes), true
}

func rowMaxVector(x []float32) (float32, bool) {
	n := len(x) &^ 15
	if !hasNEON || n == 0 {
		return 0, false
	}
	var lanes [16]float32
	for i := range lanes {
		lanes[i] = float32(math.Inf(-1))
	}
	neonRowMax(&x[0], n, &lanes)
	for i, v := range x[n:] {
		if v > lanes[i%16] {
			lanes[i%16] = v
		}
	}
	return maxLanes(&lanes), true
}

func softmaxGradRowVector(ds, p, dp []float32, d, scale float32) bool {
	n := len(p) &^ 3
	if !hasNEON || n == 0 {
		return false
	}
	_, _ = ds[len(p)-1], dp[len(p)-1]
	neonSoftmaxGradRow(&ds[0], &p[0], &dp[0], n, d, scale)
	softmaxGradRowGo(ds[n:len(p)], p[n:], dp[n:len(p)], d, scale)
	return true
}

func geluVector(y, x []float32) int {
	n := len(x) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_ = y[len(x)-1]
	neonGELU(&y[0], &x[0], n)
	return n
}

//go:noescape
func neonAdd(dst, x, y *float32, n int)

//go:noescape
func neonReLUGrad(dx, x, dy *float32, n int)

//go:noescape
func neonGELUGrad(dx, x, dy *float32, n int)

//go:noescape
func neonAdam(w, grad, m, v *float32, n int, c *AdamConsts)

//go:noescape
func neonSub(dst, x, y *float32, n int)

//go:noescape
func neonMul(dst, x, y *float32, n int)

//go:noescape
func neonDiv(dst, x, y *float32, n int)

//go:noescape
func neonAddScalar(dst, x *float32, n int, c float32)

//go:noescape
func neonSubScalar(dst, x *float32, n int, c float32)

//go:noescape
func neonMulScalar(dst, x *float32, n int, c float32)

//go:noescape
func neonDivScalar(dst, x *float32, n int, c float32)

// The NEON binary kernels by operation (OpSub … OpDiv) and the scalar
// ones (OpAdd … OpDiv).
var (
	neonBinary = [4]func(dst, x, y *float32, n int){nil, neonSub, neonMul, neonDiv}
	neonScalar = [4]func(dst, x *float32, n int, c float32){neonAddScalar, neonSubScalar, neonMulScalar, neonDivScalar}
)

// binaryVector does the whole vectors of Binary (op OpSub … OpDiv) and
// returns how many values it did.
func binaryVector(op int, dst, x, y []float32) int {
	n := len(dst) &^ 3
	if !hasNEON || n == 0 || op <= OpAdd || op > OpDiv {
		return 0
	}
	neonBinary[op](&dst[0], &x[0], &y[0], n)
	return n
}

// binaryScalarVector does the whole vectors of BinaryScalar.
func binaryScalarVector(op int, dst, x []float32, c float32) int {
	n := len(dst) &^ 3
	if !hasNEON || n == 0 || op < OpAdd || op > OpDiv {
		return 0
	}
	neonScalar[op](&dst[0], &x[0], n, c)
	return n
}

//go:noescape
func neonWidenBF16(v *float32, h *uint16, n int)

//go:noescape
func neonDecodeFP16(dst *float32, src *uint16, n int, scale float32)

//go:noescape
func neonSqrt(y, x *float32, n int)

//go:noescape
func neonNeg(y, x *float32, n int)

// unaryVector is the whole vectors of Sqrt or Neg.
func unaryVector(kind int, y, x []float32) int {
	n := len(y) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	[2]func(y, x *float32, n int){neonSqrt, neonNeg}[kind](&y[0], &x[0], n)
	return n
}

// widenBF16Vector is WidenBF16's whole vectors.
func widenBF16Vector(v []float32, h []uint16) int {
	n := len(h) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	neonWidenBF16(&v[0], &h[0], n)
	return n
}

// decodeFP16Vector is DecodeFP16's whole vectors.
func decodeFP16Vector(dst []float32, src []uint16, scale float32) int {
	n := len(src) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	neonDecodeFP16(&dst[0], &src[0], n, scale)
	return n
}

func addVector(dst, x, y []float32) bool {
	n := len(dst) &^ 3
	if !hasNEON || n == 0 {
		return false
	}
	x, y = x[:len(dst)], y[:len(dst)]
	neonAdd(&dst[0], &x[0], &y[0], n)
	addGo(dst[n:], x[n:], y[n:])
	return true
}

func reluGradVector(dx, x, dy []float32) int {
	n := len(x) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_, _ = dx[len(x)-1], dy[len(x)-1]
	neonReLUGrad(&dx[0], &x[0], &dy[0], n)
	return n
}

func geluGradVector(dx, x, dy []float32) int {
	n := len(x) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_, _ = dx[len(x)-1], dy[len(x)-1]
	neonGELUGrad(&dx[0], &x[0], &dy[0], n)
	return n
}

func adamVector(w, g, m, v []float32, c *AdamConsts) int {
	n := len(w) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_, _, _ = g[len(w)-1], m[len(w)-1], v[len(w)-1]
	neonAdam(&w[0], &g[0], &m[0], &v[0], n, c)
	return n
}

//go:noescape
func neonQuantizeE4M3(dst *uint8, src *float32, n int, scale float32, amax *[4]uint32)

//go:noescape
func neonQuantizeE5M2(dst *uint8, src *float32, n int, scale float32, amax *[4]uint32)

// quantizeFP8Vector casts src's whole blocks of 16 (format 0 E4M3, 1
// E5M2) as quantizeFP8Go does and returns how many, with their max |x|
// bits.
func quantizeFP8Vector(format int, dst []uint8, src []float32, scale float32) (done int, amaxBits uint32) {
	n := len(src) &^ 15
	if !hasNEON || n == 0 || format < 0 || format > 1 {
		return 0, 0
	}
	_ = dst[n-1]
	var lanes [4]uint32
	if format == 0 {
		neonQuantizeE4M3(&dst[0], &src[0], n, scale, &lanes)
	} else {
		neonQuantizeE5M2(&dst[0], &src[0], n, scale, &lanes)
	}
	return n, max(lanes[0], lanes[1], lanes[2], lanes[3])
}

//go:noescape
func neonQuantizeLanesE4M3(dst *uint8, src *float32, scales *float32, n int, amax *[4]uint32)

//go:noescape
func neonQuantizeLanesE5M2(dst *uint8, src *float32, scales *float32, n int, amax *[4]uint32)

// quantizeFP8LanesVector is quantizeFP8Vector with one scale per value.
func quantizeFP8LanesVector(format int, dst []uint8, src, scales []float32) (done int, amaxBits uint32) {
	n := len(src) &^ 15
	if !hasNEON || n == 0 || format < 0 || format > 1 {
		return 0, 0
	}
	_, _ = dst[n-1], scales[n-1]
	var lanes [4]uint32
	if format == 0 {
		neonQuantizeLanesE4M3(&dst[0], &src[0], &scales[0], n, &lanes)
	} else {
		neonQuantizeLanesE5M2(&dst[0], &src[0], &scales[0], n, &lanes)
	}
	return n, max(lanes[0], lanes[1], lanes[2], lanes[3])
}

// quantizeFP8ColsVector casts the whole strips of 16 columns of a band
// (see QuantizeFP8Cols) row by row with the per-lane kernel and returns
// how many columns it did.
func quantizeFP8ColsVector(format int, dst []uint8, ldd int, src []float32, ld int, scales []float32, rows, n int) int {
	w := n &^ 15
	if !hasNEON || w == 0 || rows == 0 || format < 0 || format > 1 {
		return 0
	}
	_, _, _ = dst[(rows-1)*ldd+w-1], src[(rows-1)*ld+w-1], scales[w-1]
	var lanes [4]uint32
	for r := 0; r < rows; r++ {
		if format == 0 {
			neonQuantizeLanesE4M3(&dst[r*ldd], &src[r*ld], &scales[0], w, &lanes)
		} else {
			neonQuantizeLanesE5M2(&dst[r*ldd], &src[r*ld], &scales[0], w, &lanes)
		}
	}
	return w
}

//go:noescape
func neonAmaxColsBand(acc *uint32, src *float32, strips int, rows int, ld int, seen *[4]uint32)

// amaxColsBandVector does AmaxColsBand for the whole strips of 16
// columns and returns how many columns it did and the largest |x| bits
// seen.
func amaxColsBandVector(acc []uint32, src []float32, ld, rows, n int) (done int, seen uint32) {
	strips := n / 16
	if !hasNEON || strips == 0 || rows == 0 {
		return 0, 0
	}
	_, _ = acc[16*strips-1], src[(rows-1)*ld+16*strips-1]
	var lanes [4]uint32
	neonAmaxColsBand(&acc[0], &src[0], strips, rows, 4*ld, &lanes)
	return 16 * strips, max(lanes[0], lanes[1], lanes[2], lanes[3])
}

//go:noescape
func neonAmax(src *float32, n int, out *[4]uint32)

//go:noescape
func neonReLU(y, x *float32, n int)

//go:noescape
func neonSigmoid(y, x *float32, n int)

//go:noescape
func neonSigmoidGrad(dx, y, dy *float32, n int)

//go:noescape
func neonSiLU(y, x *float32, n int)

//go:noescape
func neonSiLUGrad(dx, x, dy *float32, n int)

//go:noescape
func neonSwiGLU(y, a, b *float32, n int)

//go:noescape
func neonSwiGLUGrad(da, db, a, b, dy *float32, n int)

func amaxBitsVector(src []float32) (done int, bits uint32) {
	n := len(src) &^ 15
	if !hasNEON || n == 0 {
		return 0, 0
	}
	var lanes [4]uint32
	neonAmax(&src[0], n, &lanes)
	return n, max(lanes[0], lanes[1], lanes[2], lanes[3])
}

func reluVector(y, x []float32) bool {
	if !hasNEON {
		return false
	}
	n := len(y) &^ 3
	x = x[:len(y)]
	if n > 0 {
		neonReLU(&y[0], &x[0], n)
	}
	reluGo(y[n:], x[n:])
	return true
}

// sigmoidVector runs kernel kind of the sigmoid family (see the amd64
// version) over the longest multiple of 4 of x and returns how many
// values it did.
func sigmoidVector(kind int, out, x, y, z, w []float32) int {
	n := len(x) &^ 3
	if !hasNEON || n == 0 {
		return 0
	}
	_, _ = out[n-1], x[n-1]
	switch kind {
	case sigSigmoid:
		neonSigmoid(&out[0], &x[0], n)
	case sigSiLU:
		neonSiLU(&out[0], &x[0], n)
	case sigSigmoidGrad:
		_ = y[n-1]
		neonSigmoidGrad(&out[0], &x[0], &y[0], n)
	case sigSiLUGrad:
		_ = y[n-1]
		neonSiLUGrad(&out[0], &x[0], &y[0], n)
	case sigSwiGLU:
		_ = y[n-1]
		neonSwiGLU(&out[0], &x[0], &y[0], n)
	case sigSwiGLUGrad:
		_, _, _ = y[n-1], z[n-1], w[n-1]
		neonSwiGLUGrad(&out[0], &w[0], &x[0], &y[0], &z[0], n)
	}
	return n
}

//go:noescape
func neonDecodeE4M3(dst *float32, src *uint8, n int, scale float32)

//go:noescape
func neonDecodeE5M2(dst *float32, src *uint8, n int, scale float32)

// decodeFP8Vector decodes the longest multiple of 8 of src from format
// (0: E4M3, 1: E5M2) to float32 times scale, as decodeFP8Go does, and
// returns how many it did.
func decodeFP8Vector(format int, dst []float32, src []uint8, scale float32) int {
	n := len(src) &^ 7
	if !hasNEON || n == 0 || len(dst) < len(src) {
		return 0
	}
	if format == 0 {
		neonDecodeE4M3(&dst[0], &src[0], n, scale)
	} else {
		neonDecodeE5M2(&dst[0], &src[0], n, scale)
	}
	return n
}
