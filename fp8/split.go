package fp8

import (
	"sync"

	"github.com/octetml/octet/internal/kernels"
	"github.com/octetml/octet/internal/parallel"
)

// splitMin is the length from which Quantize, Dequantize and Amax split
// a slice over the workers: below it the hand-off costs more than the
// second core saves (a cast of 64Ki values takes some 20 µs).
const splitMin = 1 << 16

// splitter runs one of those loops over the workers: each part writes
// its own share of dst and records its own max|x|, so the codes and the
// amax are the one-part loop's, bit for bit (a max does not depend on
// the order it is taken in). A splitter serves one call at a time; the
// free list hands each concurrent call its own.
type splitter struct {
	sh   *parallel.Shares
	amax []uint32
	body func(k, parts int)

	// The call's arguments.
	cast     *kernels.FP8Cast
	dst      []uint8
	src      []float32
	codes    []uint8
	decoded  []float32
	scale    float32
	decoding bool
	amaxOnly bool
}

var (
	splitMu        sync.Mutex
	freeSplitters  []*splitter
	splitPartCount = max(1, parallel.Workers()) // tests force more parts
)

// getSplitter takes a splitter off the free list, or makes one.
func getSplitter() *splitter {
	splitMu.Lock()
	defer splitMu.Unlock()
	if n := len(freeSplitters); n > 0 {
		s := freeSplitters[n-1]
		freeSplitters = freeSplitters[:n-1]
		return s
	}
	s := &splitter{sh: parallel.NewShares(splitMin), amax: make([]uint32, splitPartCount)}
	s.sh.SetParts(splitPartCount)
	s.body = s.part
	return s
}

// part runs share k of parts.
func (s *splitter) part(k, parts int) {
	switch {
	case s.decoding:
		lo, hi := parallel.Share(len(s.codes), k, parts)
		kernels.DecodeFP8(s.cast, s.decoded[lo:hi], s.codes[lo:hi], s.scale)
	case s.amaxOnly:
		lo, hi := parallel.Share(len(s.src), k, parts)
		s.amax[k] = kernels.AmaxBits(s.src[lo:hi])
	default:
		lo, hi := parallel.Share(len(s.src), k, parts)
		s.amax[k] = kernels.QuantizeFP8(s.cast, s.dst[lo:hi], s.src[lo:hi], s.scale)
	}
}

// run runs the loop the splitter's arguments describe over n elements
// and returns the largest amax bits its parts recorded.
func (s *splitter) run(n int) uint32 {
	clear(s.amax)
	s.sh.Run(n, s.body)
	m := uint32(0)
	for _, a := range s.amax {
		m = max(m, a)
	}
	*s = splitter{sh: s.sh, amax: s.amax, body: s.body} // drop the caller's slices
	splitMu.Lock()
	freeSplitters = append(freeSplitters, s)
	splitMu.Unlock()
	return m
}

// quantizeSplit is kernels.QuantizeFP8 over the workers.
func quantizeSplit(c *kernels.FP8Cast, dst []uint8, src []float32, scale float32) uint32 {
	if len(src) < splitMin {
		return kernels.QuantizeFP8(c, dst, src, scale)
	}
	s := getSplitter()
	s.cast, s.dst, s.src, s.scale = c, dst, src, scale
	return s.run(len(src))
}

// decodeSplit is kernels.DecodeFP8 over the workers.
func decodeSplit(c *kernels.FP8Cast, dst []float32, src []uint8, scaleInv float32) {
	if len(src) < splitMin {
		kernels.DecodeFP8(c, dst, src, scaleInv)
		return
	}
	s := getSplitter()
	s.cast, s.decoded, s.codes, s.scale, s.decoding = c, dst, src, scaleInv, true
	s.run(len(src))
}

// amaxSplit is kernels.AmaxBits over the workers.
func amaxSplit(src []float32) uint32 {
	if len(src) < splitMin {
		return kernels.AmaxBits(src)
	}
	s := getSplitter()
	s.src, s.amaxOnly = src, true
	return s.run(len(src))
}
