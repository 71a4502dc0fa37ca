package graph

import (
	"math/rand/v2"
	"testing"
)

// placeBuffers by hand: buffers alive at the same time never share
// bytes; a buffer whose lifetime meets none of a placed one's reuses its
// bytes; the largest go first, so a small buffer living across two
// large ones goes beside them, not between.
func TestPlaceBuffersByHand(t *testing.T) {
	a := &buffer{size: 128, start: 0, end: 1}
	b := &buffer{size: 64, start: 1, end: 2}
	c := &buffer{size: 128, start: 2, end: 3}
	if size := placeBuffers([]*buffer{a, b, c}); size != 192 {
		t.Fatalf("arena %d, want 192", size)
	}
	if a.off != 0 || c.off != 0 || b.off != 128 {
		t.Fatalf("offsets a %d b %d c %d, want 0, 128, 0", a.off, b.off, c.off)
	}
	// A gap between two live buffers is used when it is large enough.
	x := &buffer{size: 64, start: 0, end: 9}
	y := &buffer{size: 256, start: 0, end: 0}
	z := &buffer{size: 64, start: 0, end: 9}
	w := &buffer{size: 192, start: 5, end: 9} // fits where y was
	if size := placeBuffers([]*buffer{x, y, z, w}); size != 384 {
		t.Fatalf("arena %d, want 384 (y, then x and z after it; w in y's bytes)", size)
	}
	if y.off != 0 || w.off != 0 || x.off != 256 || z.off != 320 {
		t.Fatalf("offsets x %d y %d z %d w %d", x.off, y.off, z.off, w.off)
	}
	if placeBuffers(nil) != 0 {
		t.Fatal("no buffers: an empty arena")
	}
}

// Random lifetimes: buffers whose lifetimes meet never overlap, offsets
// stay aligned, the arena holds them all and is never smaller than the
// peak of the live bytes.
func TestPlaceBuffersRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		var bufs []*buffer
		for i := 0; i < 1+rng.IntN(40); i++ {
			start := rng.IntN(50)
			bufs = append(bufs, &buffer{size: align * (rng.IntN(8)), start: start, end: start + rng.IntN(20)})
		}
		size := placeBuffers(bufs)
		peak := 0
		for pos := 0; pos < 70; pos++ {
			live := 0
			for _, b := range bufs {
				if b.start <= pos && pos <= b.end {
					live += b.size
				}
			}
			peak = max(peak, live)
		}
		if size < peak {
			t.Fatalf("arena %d below the live peak %d", size, peak)
		}
		for i, b := range bufs {
			if b.off%align != 0 || b.off < 0 || b.off+b.size > size {
				t.Fatalf("buffer %+v outside the arena of %d or misaligned", b, size)
			}
			for _, q := range bufs[i+1:] {
				meet := q.start <= b.end && b.start <= q.end
				if meet && b.size > 0 && q.size > 0 && b.off < q.off+q.size && q.off < b.off+b.size {
					t.Fatalf("live together and overlapping: %+v, %+v", b, q)
				}
			}
		}
	}
}
