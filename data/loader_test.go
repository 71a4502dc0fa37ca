package data_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/octetml/octet/data"
	"github.com/stretchr/testify/require"
)

// ids is a dataset whose example i has x = [i, -i] and label i mod 5.
func ids(t testing.TB, n int) *data.Tensors {
	x := make([]float32, 2*n)
	y := make([]int32, n)
	for i := 0; i < n; i++ {
		x[2*i], x[2*i+1] = float32(i), -float32(i)
		y[i] = int32(i % 5)
	}
	ds, err := data.NewTensors(data.Float32Column("x", x, 2), data.LabelColumn("label", y, 5))
	require.NoError(t, err)
	return ds
}

// seen lists the example ids of a batch's real rows, checking the
// padding.
func seen(t testing.TB, b *data.Batch) []int {
	x, y := b.Float32("x"), b.Int32("label")
	var out []int
	for r := 0; r < b.Size(); r++ {
		if r < b.Rows {
			require.Equal(t, float32(1), b.Mask[r])
			id := int(x[2*r])
			require.Equal(t, -float32(id), x[2*r+1])
			require.Equal(t, int32(id%5), y[r])
			out = append(out, id)
			continue
		}
		require.Zero(t, b.Mask[r])
		require.Zero(t, x[2*r])
		require.Equal(t, int32(data.IgnoreLabel), y[r])
	}
	return out
}

// TestEveryExampleOncePerEpochAcrossRanks: the ranks' batches of one epoch
// cover every example exactly once, in 1, 2, 3 and 7 ranks, with a padded
// or a dropped last batch, with and without prefetch; the ranks agree on
// the global order.
func TestEveryExampleOncePerEpochAcrossRanks(t *testing.T) {
	const n, batch = 103, 16
	for _, world := range []int{1, 2, 3, 7} {
		for _, dropLast := range []bool{false, true} {
			for _, prefetch := range []int{0, 2} {
				name := fmt.Sprintf("world%d/drop%v/prefetch%d", world, dropLast, prefetch)
				ds := ids(t, n)
				loaders := make([]*data.Loader, world)
				for r := range loaders {
					l, err := data.NewLoader(ds, data.Config{BatchSize: batch, Shuffle: true, Seed: 7, DropLast: dropLast, Rank: r, World: world, Prefetch: prefetch})
					require.NoError(t, err, name)
					loaders[r] = l
					defer l.Close()
				}
				perEpoch := loaders[0].BatchesPerEpoch()
				want := (n + batch - 1) / batch
				if dropLast {
					want = n / batch
				}
				require.Equal(t, want, perEpoch, name)
				var orders [][]int
				for epoch := 0; epoch < 3; epoch++ {
					count := map[int]int{}
					var order []int
					for i := 0; i < perEpoch; i++ {
						for r, l := range loaders {
							b, err := l.Next()
							require.NoError(t, err, name)
							require.Equal(t, epoch, b.Epoch, name)
							require.Equal(t, i, b.Index, name)
							lo, hi := data.Shard(batch, world, r)
							require.Equal(t, hi-lo, b.Size(), name)
							for _, id := range seen(t, b) {
								count[id]++
								order = append(order, id)
							}
						}
					}
					total := n
					if dropLast {
						total = n / batch * batch
					}
					require.Len(t, count, total, "%s epoch %d", name, epoch)
					for id, c := range count {
						require.Equal(t, 1, c, "%s epoch %d: example %d seen %d times", name, epoch, id, c)
					}
					orders = append(orders, order)
				}
				require.NotEqual(t, orders[0], orders[1], "%s: a new order every epoch", name)
			}
		}
	}
}

// TestShardsFollowOneGlobalOrder: the ranks' rows put together are the
// batches one process draws.
func TestShardsFollowOneGlobalOrder(t *testing.T) {
	ds := ids(t, 50)
	one, err := data.NewLoader(ds, data.Config{BatchSize: 12, Shuffle: true, Seed: 3})
	require.NoError(t, err)
	var ranks []*data.Loader
	for r := 0; r < 3; r++ {
		l, err := data.NewLoader(ds, data.Config{BatchSize: 12, Shuffle: true, Seed: 3, Rank: r, World: 3})
		require.NoError(t, err)
		ranks = append(ranks, l)
	}
	for i := 0; i < 10; i++ {
		b, err := one.Next()
		require.NoError(t, err)
		want := seen(t, b)
		var got []int
		for _, l := range ranks {
			rb, err := l.Next()
			require.NoError(t, err)
			got = append(got, seen(t, rb)...)
		}
		require.Equal(t, want, got)
	}
}

// TestLoaderResumesMidEpoch: a loader restored from another's state after
// k batches returns the same batches from there on, with and without
// prefetch, through MarshalBinary as a checkpoint keeps it.
func TestLoaderResumesMidEpoch(t *testing.T) {
	ds := ids(t, 45)
	for _, prefetch := range []int{0, 3} {
		cfg := data.Config{BatchSize: 8, Shuffle: true, Seed: 11, Prefetch: prefetch}
		a, err := data.NewLoader(ds, cfg)
		require.NoError(t, err)
		for i := 0; i < 9; i++ { // into the second epoch (6 batches each)
			_, err := a.Next()
			require.NoError(t, err)
		}
		saved, err := a.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, data.State{Epoch: 1, Index: 3}, a.State())
		b, err := data.NewLoader(ds, cfg)
		require.NoError(t, err)
		_, err = b.Next() // a used loader is moved too
		require.NoError(t, err)
		require.NoError(t, b.UnmarshalBinary(saved))
		for i := 0; i < 10; i++ {
			x, err := a.Next()
			require.NoError(t, err)
			want := seen(t, x)
			y, err := b.Next()
			require.NoError(t, err)
			require.Equal(t, want, seen(t, y), "prefetch %d, batch %d after resume", prefetch, i)
		}
		a.Close()
		b.Close()
	}
}

// TestLoaderStateRefusesAnotherLoader names the setting that differs.
func TestLoaderStateRefusesAnotherLoader(t *testing.T) {
	a, err := data.NewLoader(ids(t, 40), data.Config{BatchSize: 8, Shuffle: true, Seed: 1})
	require.NoError(t, err)
	saved, _ := a.MarshalBinary()
	for _, c := range []struct {
		n    int
		cfg  data.Config
		want string
	}{
		{41, data.Config{BatchSize: 8, Shuffle: true, Seed: 1}, "examples 40"},
		{40, data.Config{BatchSize: 4, Shuffle: true, Seed: 1}, "batch size 8"},
		{40, data.Config{BatchSize: 8, Shuffle: true, Seed: 2}, "seed 1"},
		{40, data.Config{BatchSize: 8, Seed: 1}, "shuffle 1"},
	} {
		b, err := data.NewLoader(ids(t, c.n), c.cfg)
		require.NoError(t, err)
		err = b.UnmarshalBinary(saved)
		require.ErrorIs(t, err, data.ErrState)
		require.ErrorContains(t, err, c.want)
	}
	require.ErrorIs(t, a.UnmarshalBinary(saved[:10]), data.ErrState)
	require.ErrorIs(t, a.Restore(data.State{Index: 5}), data.ErrState)
}

// A position saved by one rank count restores into another: the ranks'
// rows after it, put together, are the global batches a single loader
// draws after the same position.
func TestLoaderStateMovesBetweenRankCounts(t *testing.T) {
	cfg := data.Config{BatchSize: 6, Shuffle: true, Seed: 3}
	one, err := data.NewLoader(ids(t, 40), cfg)
	require.NoError(t, err)
	for i := 0; i < 9; i++ { // into the second epoch
		_, err := one.Next()
		require.NoError(t, err)
	}
	saved, _ := one.MarshalBinary()
	var want [][]float32
	for i := 0; i < 4; i++ {
		b, err := one.Next()
		require.NoError(t, err)
		want = append(want, append([]float32(nil), b.Float32At(0)...))
	}
	require.Len(t, want[0], 12) // 6 rows of two values
	for _, world := range []int{2, 4} {
		var ranks []*data.Loader
		for r := 0; r < world; r++ {
			c := cfg
			c.Rank, c.World = r, world
			l, err := data.NewLoader(ids(t, 40), c)
			require.NoError(t, err)
			require.NoError(t, l.UnmarshalBinary(saved))
			ranks = append(ranks, l)
		}
		for i := range want {
			var got []float32
			for _, l := range ranks {
				b, err := l.Next()
				require.NoError(t, err)
				got = append(got, b.Float32At(0)...)
			}
			require.Equal(t, want[i], got, "%d ranks, batch %d after the position", world, i)
		}
	}
}

// TestLoaderRefusesBadConfig before any batch.
func TestLoaderRefusesBadConfig(t *testing.T) {
	ds := ids(t, 10)
	for cfg, want := range map[data.Config]string{
		{}:                                "batch size 0",
		{BatchSize: 2, World: 3}:          "leaves ranks",
		{BatchSize: 4, Rank: 2, World: 2}: "rank 2 of 2",
		{BatchSize: 20, DropLast: true}:   "no full batch",
		{BatchSize: 2, Prefetch: -1}:      "prefetch -1",
	} {
		_, err := data.NewLoader(ds, cfg)
		require.ErrorContains(t, err, want)
	}
	_, err := data.NewLoader(nil, data.Config{BatchSize: 1})
	require.Error(t, err)
}

// failing is a dataset whose Fill fails from example bad on.
type failing struct {
	*data.Tensors
	bad int
}

func (f failing) Fill(b *data.Batch, idx []int) error {
	for _, i := range idx {
		if i >= f.bad {
			return errors.New("disk on fire")
		}
	}
	return f.Tensors.Fill(b, idx)
}

func TestFillErrorsReachTheCaller(t *testing.T) {
	for _, prefetch := range []int{0, 2} {
		l, err := data.NewLoader(failing{ids(t, 20), 12}, data.Config{BatchSize: 4, Prefetch: prefetch})
		require.NoError(t, err)
		for i := 0; i < 3; i++ {
			_, err := l.Next()
			require.NoError(t, err)
		}
		_, err = l.Next()
		require.ErrorContains(t, err, "batch 3 of epoch 0: disk on fire")
		l.Close()
		_, err = l.Next()
		require.ErrorContains(t, err, "after Close")
	}
}

// TestLoaderAllocatesNothing per batch after the first epoch.
func TestLoaderAllocatesNothing(t *testing.T) {
	for _, prefetch := range []int{0, 2} {
		l, err := data.NewLoader(ids(t, 100), data.Config{BatchSize: 16, Shuffle: true, Seed: 1, Prefetch: prefetch, Rank: 1, World: 3})
		require.NoError(t, err)
		for i := 0; i < l.BatchesPerEpoch(); i++ {
			_, err := l.Next()
			require.NoError(t, err)
		}
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := l.Next(); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "prefetch %d", prefetch)
		l.Close()
	}
}

func TestTensorsRefuseBadColumns(t *testing.T) {
	_, err := data.NewTensors(data.Float32Column("x", make([]float32, 7), 2))
	require.ErrorContains(t, err, "not whole examples")
	_, err = data.NewTensors(data.Float32Column("x", make([]float32, 8), 2), data.LabelColumn("y", make([]int32, 3), 2))
	require.ErrorContains(t, err, "has 3 examples")
	_, err = data.NewTensors(data.LabelColumn("y", []int32{0, 2}, 2))
	require.ErrorContains(t, err, "label 2 of example 1")
	_, err = data.NewTensors(data.Float32Column("x", nil, 2), data.Float32Column("x", nil, 2))
	require.ErrorContains(t, err, "repeated")
	_, err = data.NewTensors()
	require.ErrorContains(t, err, "no fields")
}

// TestReplacementDrawsUniformly: with Replacement every row is one draw
// of the generator (Seed, Stream), in order; the ranks take their rows of
// the same draws; a resumed loader replays to its position.
func TestReplacementDrawsUniformly(t *testing.T) {
	ds := ids(t, 37)
	cfg := data.Config{BatchSize: 5, Seed: 8, Stream: 77, Replacement: true}
	l, err := data.NewLoader(ds, cfg)
	require.NoError(t, err)
	require.Equal(t, 7, l.BatchesPerEpoch())
	rng := rand.New(rand.NewPCG(8, 77))
	var all [][]int
	for i := 0; i < 20; i++ {
		b, err := l.Next()
		require.NoError(t, err)
		require.Equal(t, 5, b.Rows)
		got := seen(t, b)
		for _, id := range got {
			require.Equal(t, rng.IntN(37), id)
		}
		all = append(all, got)
	}
	r1 := cfg
	r1.Rank, r1.World = 1, 2
	lr, err := data.NewLoader(ds, r1)
	require.NoError(t, err)
	saved, _ := l.MarshalBinary()
	for i := 0; i < 20; i++ {
		b, err := lr.Next()
		require.NoError(t, err)
		require.Equal(t, all[i][3:], seen(t, b))
	}
	more, err := l.Next()
	require.NoError(t, err)
	want := seen(t, more)
	l2, err := data.NewLoader(ds, cfg)
	require.NoError(t, err)
	require.NoError(t, l2.UnmarshalBinary(saved))
	b, err := l2.Next()
	require.NoError(t, err)
	require.Equal(t, want, seen(t, b))
}
