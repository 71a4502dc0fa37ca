package train

import (
	"testing"

	"github.com/octetml/octet/data"
)

// TestAccuracyCounts: the largest logit wins (the first of equal ones),
// IgnoreLabel positions are not counted.
func TestAccuracyCounts(t *testing.T) {
	logits := []float32{0, 2, 1, 5, 5, 0, 1, 1, 1, 3, 0, 0}
	labels := []int32{1, 0, 0, data.IgnoreLabel}
	c, n, err := accuracy(logits, labels)
	if err != nil || c != 3 || n != 3 {
		t.Fatalf("%d of %d (%v), want 3 of 3", c, n, err)
	}
	c, n, _ = accuracy(logits[:9], []int32{2, 1, 2})
	if c != 0 || n != 3 {
		t.Fatalf("%d of %d, want 0 of 3", c, n)
	}
	if _, _, err := accuracy(logits[:5], labels[:2]); err == nil {
		t.Fatal("5 logits for 2 labels accepted")
	}
}
