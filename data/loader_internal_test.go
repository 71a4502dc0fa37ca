package data

import (
	"testing"

	"github.com/octetml/octet/graph"
)

// TestNoReplayInOrder: a loader read in order shuffles each epoch once
// and draws each batch once; it replays the generator only after a jump.
func TestNoReplayInOrder(t *testing.T) {
	ds, err := NewTensors(Column{Field: Field{Name: "x", DType: graph.Int32}, I32: make([]int32, 30)})
	if err != nil {
		t.Fatal(err)
	}
	for _, repl := range []bool{false, true} {
		l, err := NewLoader(ds, Config{BatchSize: 10, Shuffle: true, Replacement: repl, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 7 {
			if _, err := l.Next(); err != nil {
				t.Fatal(err)
			}
			if repl && l.drawn != i+1 {
				t.Fatalf("after batch %d: %d batches drawn", i, l.drawn)
			}
			if !repl && l.permEpoch != i/3 {
				t.Fatalf("after batch %d: order of epoch %d", i, l.permEpoch)
			}
		}
	}
}
