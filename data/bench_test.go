package data_test

import (
	"testing"
	"time"

	"github.com/octetml/octet/data"
)

// slow is a dataset whose Fill takes 1 ms per batch (a disk or a decoder).
type slow struct{ *data.Tensors }

func (s slow) Fill(b *data.Batch, idx []int) error {
	time.Sleep(time.Millisecond)
	return s.Tensors.Fill(b, idx)
}

// step stands for a training step of about 2 ms.
func step() {
	end := time.Now().Add(2 * time.Millisecond)
	for time.Now().Before(end) {
	}
}

// BenchmarkPrefetch times a 2 ms step fed by an instant dataset and by one
// that takes 1 ms per batch, with and without prefetch: prefetching hides
// the 1 ms.
func BenchmarkPrefetch(b *testing.B) {
	for _, c := range []struct {
		name     string
		slow     bool
		prefetch int
	}{{"instant", false, 0}, {"slow", true, 0}, {"slow-prefetch2", true, 2}} {
		b.Run(c.name, func(b *testing.B) {
			var ds data.Dataset = ids(b, 4096)
			if c.slow {
				ds = slow{ids(b, 4096)}
			}
			l, err := data.NewLoader(ds, data.Config{BatchSize: 64, Shuffle: true, Seed: 1, Prefetch: c.prefetch})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Next(); err != nil {
					b.Fatal(err)
				}
				step()
			}
		})
	}
}
