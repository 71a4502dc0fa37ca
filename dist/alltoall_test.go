package dist

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// allToAllCases are count matrices for n ranks: counts[r][q] values go
// from rank r to rank q (uneven, zero, a rank that receives nothing, one
// that sends nothing, everything to one rank).
func allToAllCases(n int) [][][]int {
	mk := func(f func(r, q int) int) [][]int {
		m := make([][]int, n)
		for r := range m {
			m[r] = make([]int, n)
			for q := range m[r] {
				m[r][q] = f(r, q)
			}
		}
		return m
	}
	return [][][]int{
		mk(func(r, q int) int { return (r*7 + q*3) % 4 }),
		mk(func(r, q int) int { return 0 }),
		mk(func(r, q int) int {
			if q == n-1 {
				return 0 // the last rank receives nothing
			}
			return r + q + 1
		}),
		mk(func(r, q int) int {
			if q == 0 {
				return 5 + r // everything to rank 0
			}
			return 0
		}),
	}
}

// checkAllToAllOn runs every case on one rank's communicator and checks
// what it received, in float32 and bytes.
func checkAllToAllOn(c Communicator) error {
	n, r := c.Size(), c.Rank()
	for k, m := range allToAllCases(n) {
		send, recv := make([]int, n), make([]int, n)
		var src []float32
		for q := 0; q < n; q++ {
			send[q], recv[q] = m[r][q], m[q][r]
			for i := 0; i < m[r][q]; i++ {
				src = append(src, float32(1000*r+100*q+i)+0.5)
			}
		}
		var want []float32
		for q := 0; q < n; q++ {
			for i := 0; i < m[q][r]; i++ {
				want = append(want, float32(1000*q+100*r+i)+0.5)
			}
		}
		dst := make([]float32, len(want)+2) // room to spare is fine
		dst[len(want)], dst[len(want)+1] = -7, -7
		if err := c.AllToAllF32(dst, src, send, recv); err != nil {
			return fmt.Errorf("case %d: %w", k, err)
		}
		for i, w := range want {
			if dst[i] != w {
				return fmt.Errorf("case %d rank %d: dst[%d] = %v, want %v", k, r, i, dst[i], w)
			}
		}
		if dst[len(want)] != -7 || dst[len(want)+1] != -7 {
			return fmt.Errorf("case %d rank %d: wrote past what it received", k, r)
		}
		src8, dst8 := make([]uint8, len(src)), make([]uint8, len(want))
		for i, v := range src {
			src8[i] = uint8(int(v) % 251)
		}
		if err := c.AllToAllU8(dst8, src8, send, recv); err != nil {
			return fmt.Errorf("case %d bytes: %w", k, err)
		}
		for i, w := range want {
			if dst8[i] != uint8(int(w)%251) {
				return fmt.Errorf("case %d rank %d: bytes dst[%d] = %v, want %v", k, r, i, dst8[i], uint8(int(w)%251))
			}
		}
	}
	return nil
}

// AllToAll with uneven and empty counts, on 1 to 4 ranks: every rank gets
// every other rank's part for it, in rank order, and the byte counter
// counts what it sent to the others.
func TestAllToAll(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		errs := onRanks(t, n, func(c Communicator) error {
			if err := checkAllToAllOn(c); err != nil {
				return err
			}
			var bytes int64
			for _, m := range allToAllCases(n) {
				for q, v := range m[c.Rank()] {
					if q != c.Rank() {
						bytes += 5 * int64(v) // 4 as float32, 1 as bytes
					}
				}
			}
			st := c.Stats()
			require.Equal(t, 2*len(allToAllCases(n)), st.AllToAllCalls)
			require.Equal(t, bytes, st.AllToAllBytes)
			require.Equal(t, bytes, st.Bytes())
			return nil
		})
		for r, err := range errs {
			require.NoError(t, err, "%d ranks, rank %d", n, r)
		}
	}
}

// Counts that do not pair up (rank 1 sends rank 0 three values, rank 0
// expects two) fail on every rank, naming both; bad arguments fail too.
func TestAllToAllMismatch(t *testing.T) {
	errs := onRanks(t, 3, func(c Communicator) error {
		send, recv := []int{2, 2, 2}, []int{2, 2, 2}
		if c.Rank() == 1 {
			send[0] = 3
		}
		return c.AllToAllF32(make([]float32, 6), make([]float32, 7), send, recv)
	})
	for r, err := range errs {
		require.ErrorContains(t, err, "rank 1 sends 3 values to rank 0, which expects 2", "rank %d", r)
	}
	errs = onRanks(t, 2, func(c Communicator) error {
		send := []int{1, 1}
		if c.Rank() == 0 {
			send = []int{1, -1}
		}
		return c.AllToAllF32(make([]float32, 2), make([]float32, 2), send, []int{1, 1})
	})
	for _, err := range errs {
		require.ErrorContains(t, err, "rank 1's counts are -1")
	}
	errs = onRanks(t, 2, func(c Communicator) error {
		return c.AllToAllF32(make([]float32, 1), make([]float32, 2), []int{1, 1}, []int{1, 1})
	})
	for _, err := range errs {
		require.ErrorContains(t, err, "dst 1 (want 2)")
	}
}

// An all-to-all allocates nothing.
func TestAllToAllAllocatesNothing(t *testing.T) {
	cs, _ := NewLocal(1)
	c := cs[0]
	src, dst := make([]float32, 8), make([]float32, 8)
	s8, d8 := make([]uint8, 8), make([]uint8, 8)
	counts := []int{8}
	require.Zero(t, testing.AllocsPerRun(20, func() {
		_ = c.AllToAllF32(dst, src, counts, counts)
		_ = c.AllToAllU8(d8, s8, counts, counts)
	}))
}

// checkSubgroups splits c's ranks two ways (consecutive blocks of three,
// and the ranks at the same place in each block) and checks each group's
// ranks, sizes and collectives.
func checkSubgroups(c Communicator) error {
	n, r := c.Size(), c.Rank()
	block, err := Subgroup(c, r/3, r)
	if err != nil {
		return err
	}
	across, err := Subgroup(c, r%3, -r) // keys reversed: the last rank first
	if err != nil {
		return err
	}
	if want := min(3, n-r/3*3); block.Size() != want || block.Rank() != r%3 {
		return fmt.Errorf("rank %d: block group rank %d of %d, want %d of %d", r, block.Rank(), block.Size(), r%3, want)
	}
	members := (n - r%3 + 2) / 3
	if across.Size() != members || across.Rank() != members-1-r/3 {
		return fmt.Errorf("rank %d: across group rank %d of %d, want %d of %d", r, across.Rank(), across.Size(), members-1-r/3, members)
	}
	buf := []float32{float32(r)}
	if err := block.AllReduceF32(buf, Sum); err != nil {
		return err
	}
	var want float32
	for q := r / 3 * 3; q < min(n, r/3*3+3); q++ {
		want += float32(q)
	}
	if buf[0] != want {
		return fmt.Errorf("rank %d: block sum %v, want %v", r, buf[0], want)
	}
	buf[0] = float32(r)
	if err := across.AllReduceF32(buf, Max); err != nil {
		return err
	}
	if last := (n-1-r%3)/3*3 + r%3; buf[0] != float32(last) {
		return fmt.Errorf("rank %d: across max %v, want %d", r, buf[0], last)
	}
	return nil
}

// Subgroup makes MPI_Comm_split's groups of in-process ranks, twice in a
// row, with collectives of their own.
func TestSubgroups(t *testing.T) {
	for _, n := range []int{1, 3, 5, 6} {
		errs := onRanks(t, n, func(c Communicator) error {
			for range 2 {
				if err := checkSubgroups(c); err != nil {
					return err
				}
			}
			return nil
		})
		for r, err := range errs {
			require.NoError(t, err, "%d ranks, rank %d", n, r)
		}
	}
}
