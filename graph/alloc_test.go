package graph

import (
	"math/rand/v2"
	"testing"
)

// The arena allocator: offsets aligned to 16 elements, best fit among
// the holes (the smallest that fits), an exact fit removing its hole,
// growth absorbing a hole at the end, and freed neighbours coalescing on
// both sides.
func TestAllocatorByHand(t *testing.T) {
	var a allocator
	want := func(got, off int) {
		t.Helper()
		if got != off {
			t.Fatalf("offset %d, want %d (holes %v, size %d)", got, off, a.holes, a.size)
		}
	}
	holes := func(w ...span) {
		t.Helper()
		if len(a.holes) != len(w) {
			t.Fatalf("holes %v, want %v", a.holes, w)
		}
		for i := range w {
			if a.holes[i] != w[i] {
				t.Fatalf("holes %v, want %v", a.holes, w)
			}
		}
	}
	want(a.alloc(1), 0)   // [0,16)
	want(a.alloc(17), 16) // [16,48)
	want(a.alloc(16), 48) // [48,64)
	want(a.alloc(40), 64) // [64,112)
	if a.size != 112 {
		t.Fatalf("size %d, want 112", a.size)
	}
	a.free(16, 17)
	a.free(64, 40) // the end: a hole the next growth absorbs
	holes(span{16, 32}, span{64, 48})
	want(a.alloc(30), 16) // best fit: the 32-hole, exactly: removed
	holes(span{64, 48})
	want(a.alloc(60), 64) // grows from the hole at the end
	if a.size != 128 {
		t.Fatalf("size %d, want 128", a.size)
	}
	holes()
	a.free(0, 16)
	a.free(48, 16)
	a.free(16, 32) // joins both neighbours
	holes(span{0, 64})
	want(a.alloc(16), 0) // splits the hole from its start
	holes(span{16, 48})
	a.free(64, 64) // joins the hole before it
	holes(span{16, 112})
	want(a.alloc(48), 16)
	holes(span{64, 64})
	want(a.alloc(64), 64)
	holes()
	a.free(16, 48)
	a.free(0, 16) // joins the hole after it
	holes(span{0, 64})
	if a.size != 128 {
		t.Fatalf("size %d, want 128", a.size)
	}
}

// Best fit: the smallest hole that fits, not the first.
func TestAllocatorBestFit(t *testing.T) {
	a := allocator{holes: []span{{0, 64}, {80, 16}, {112, 32}}, size: 144}
	if off := a.alloc(16); off != 80 {
		t.Fatalf("offset %d, want 80", off)
	}
	if off := a.alloc(20); off != 112 {
		t.Fatalf("offset %d, want 112", off)
	}
	if off := a.alloc(16); off != 0 {
		t.Fatalf("offset %d, want 0", off)
	}
	if len(a.holes) != 1 || a.holes[0] != (span{16, 48}) || a.size != 144 {
		t.Fatalf("holes %v size %d", a.holes, a.size)
	}
	// Of two equal holes, the first.
	b := allocator{holes: []span{{0, 16}, {32, 16}}, size: 64}
	if off := b.alloc(16); off != 0 {
		t.Fatalf("offset %d, want 0 (the first of equal holes)", off)
	}
	if off := a.alloc(64); off != 144 || a.size != 208 {
		t.Fatalf("offset %d size %d: a request larger than every hole grows the arena", off, a.size)
	}
}

// Random allocation and free sequences never hand out overlapping or
// out-of-arena spans, keep the holes sorted, disjoint and coalesced, and
// never leave the arena larger than the peak of live aligned sizes would
// need when there is no fragmentation to speak of.
func TestAllocatorRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		var a allocator
		live := map[int]int{} // off → aligned size
		for step := 0; step < 60; step++ {
			if len(live) > 0 && rng.IntN(3) == 0 {
				for off, n := range live {
					a.free(off, n)
					delete(live, off)
					break
				}
			} else {
				n := 1 + rng.IntN(100)
				off := a.alloc(n)
				n = (n + align - 1) / align * align
				if off%align != 0 || off < 0 || off+n > a.size {
					t.Fatalf("alloc %d at %d outside the arena of %d", n, off, a.size)
				}
				for o, m := range live {
					if off < o+m && o < off+n {
						t.Fatalf("alloc [%d,%d) overlaps [%d,%d)", off, off+n, o, o+m)
					}
				}
				live[off] = n
			}
			for i, h := range a.holes {
				if h.n <= 0 || h.off < 0 || h.off+h.n > a.size {
					t.Fatalf("bad hole %v in arena %d", h, a.size)
				}
				if i > 0 && a.holes[i-1].off+a.holes[i-1].n >= h.off {
					t.Fatalf("holes not sorted, disjoint and coalesced: %v", a.holes)
				}
				for o, m := range live {
					if h.off < o+m && o < h.off+h.n {
						t.Fatalf("hole %v overlaps live [%d,%d)", h, o, o+m)
					}
				}
			}
			used := 0
			for _, m := range live {
				used += m
			}
			free := 0
			for _, h := range a.holes {
				free += h.n
			}
			if used+free != a.size {
				t.Fatalf("live %d + holes %d != arena %d", used, free, a.size)
			}
		}
	}
}
