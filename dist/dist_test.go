package dist

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// onRanks runs f on every rank of an in-process group and returns the
// ranks' errors.
func onRanks(t *testing.T, n int, f func(c Communicator) error) []error {
	errs := make([]error, n)
	require.NoError(t, RunLocal(n, func(c Communicator) error {
		errs[c.Rank()] = f(c)
		return nil
	}))
	return errs
}

func TestCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, total := range []int{0, 2, 7, 10} { // uneven and empty shards
			counts := Split(total, n)
			offs := Offsets(counts)
			full := make([]float32, total)
			for i := range full {
				full[i] = float32(i) + 0.5
			}
			errs := onRanks(t, n, func(c Communicator) error {
				r := c.Rank()
				// All-gather of shards rebuilds the tensor.
				shard := full[offs[r] : offs[r]+counts[r]]
				got := make([]float32, total)
				if err := c.AllGatherF32(got, shard, counts); err != nil {
					return err
				}
				require.Equal(t, full, got)
				codes := make([]uint8, counts[r])
				for i := range codes {
					codes[i] = uint8(offs[r] + i)
				}
				gotU8 := make([]uint8, total)
				if err := c.AllGatherU8(gotU8, codes, counts); err != nil {
					return err
				}
				for i, v := range gotU8 {
					require.Equal(t, uint8(i), v)
				}
				// Reduce-scatter of rank-scaled copies.
				src := make([]float32, total)
				for i := range src {
					src[i] = full[i] * float32(r+1)
				}
				part := make([]float32, counts[r])
				if err := c.ReduceScatterF32(part, src, counts, Sum); err != nil {
					return err
				}
				tri := float32(n * (n + 1) / 2)
				for i, v := range part {
					require.Equal(t, full[offs[r]+i]*tri, v)
				}
				// All-reduce max and sum, broadcast.
				buf := []float32{float32(r), -float32(r)}
				if err := c.AllReduceF32(buf, Max); err != nil {
					return err
				}
				require.Equal(t, []float32{float32(n - 1), 0}, buf)
				s := []float32{1}
				if err := c.AllReduceF32(s, Sum); err != nil {
					return err
				}
				require.Equal(t, float32(n), s[0])
				b := []float32{float32(r), float32(r)}
				if err := c.BroadcastF32(b, n-1); err != nil {
					return err
				}
				require.Equal(t, []float32{float32(n - 1), float32(n - 1)}, b)
				st := c.Stats()
				require.Equal(t, int64(4*total+total), st.AllGatherBytes, "gathered bytes: 4 per float32, 1 per FP8 code")
				require.Equal(t, 2, st.AllGatherCalls)
				require.Equal(t, 2, st.AllReduceCalls)
				// Bytes adds every collective's: 5 all-gathered per
				// value, 4 reduce-scattered, 12 all-reduced, 8 broadcast.
				require.Equal(t, int64(5*total+4*total+12+8), st.Bytes())
				return nil
			})
			for _, err := range errs {
				require.NoError(t, err)
			}
		}
	}
}

// A rank with wrong arguments fails the collective everywhere, without
// leaving the others waiting.
func TestMismatchFailsEveryRank(t *testing.T) {
	errs := onRanks(t, 3, func(c Communicator) error {
		n := 2
		if c.Rank() == 1 {
			n = 3
		}
		dst := make([]float32, 6)
		return c.AllGatherF32(dst, make([]float32, n), []int{2, 2, 2})
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.Contains(t, err.Error(), "rank 1")
	}
	errs = onRanks(t, 2, func(c Communicator) error {
		return c.AllReduceF32(make([]float32, 2+c.Rank()), Sum)
	})
	for _, err := range errs {
		require.Error(t, err)
	}
}

func TestSumIsInRankOrderAndAllocatesNothing(t *testing.T) {
	// 1e8 + 1 − 1e8 in rank order is 0 in float32; a different order
	// would give 1.
	vals := []float32{1e8, 1, -1e8}
	onRanks(t, 3, func(c Communicator) error {
		buf := []float32{vals[c.Rank()]}
		require.NoError(t, c.AllReduceF32(buf, Sum))
		require.Equal(t, float32(0), buf[0])
		return nil
	})
	cs, _ := NewLocal(1)
	buf := make([]float32, 8)
	dst := make([]float32, 8)
	c := cs[0]
	counts := []int{8}
	require.NoError(t, c.AllReduceF32(buf, Sum))
	require.Zero(t, testing.AllocsPerRun(20, func() {
		_ = c.AllReduceF32(buf, Sum)
		_ = c.AllGatherF32(dst, buf, counts)
		_ = c.ReduceScatterF32(dst, buf, counts, Sum)
	}))
}

func TestSplit(t *testing.T) {
	require.Equal(t, []int{3, 2, 2}, Split(7, 3))
	require.Equal(t, []int{1, 1, 0, 0}, Split(2, 4))
	require.Equal(t, []int{0, 3, 5}, Offsets([]int{3, 2, 2}))
	_, err := NewLocal(0)
	require.Error(t, err)
}

// TestRunLocal runs a function on every in-process rank and reports the
// lowest failing rank's error, naming it.
func TestRunLocal(t *testing.T) {
	seen := make([]bool, 3)
	require.NoError(t, RunLocal(3, func(c Communicator) error {
		seen[c.Rank()] = c.Size() == 3
		return nil
	}))
	require.Equal(t, []bool{true, true, true}, seen)
	err := RunLocal(3, func(c Communicator) error {
		if c.Rank() > 0 {
			return fmt.Errorf("boom %d", c.Rank())
		}
		return nil
	})
	require.EqualError(t, err, "rank 1: boom 1")
	require.Error(t, RunLocal(0, func(Communicator) error { return nil }))
}
