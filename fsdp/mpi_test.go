//go:build mpi

package fsdp

import (
	"math"
	"os"
	"testing"

	"github.com/octetml/octet/dist"
)

// TestMPIMatchesInProcess runs under mpirun with 2 or 3 processes (see
// .ci/run): every process trains its rank over MPI and also simulates the
// same N ranks in process; losses and collective byte counts agree to the
// bit, in float32 and in FP8 with float8 all-gather.
func TestMPIMatchesInProcess(t *testing.T) {
	if os.Getenv("OMPI_COMM_WORLD_SIZE") == "" {
		t.Skip("not launched by mpirun")
	}
	comm, err := dist.NewMPI(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fp  bool
		cfg Config
	}{{false, Config{}}, {true, Config{Float8AllGather: true}}, {true, Config{Float8AllGather: true, Precompute: true}}} {
		got, err := trainRank(t, comm, 6, c.fp, c.cfg)
		if err != nil {
			t.Fatalf("rank %d: %v", comm.Rank(), err)
		}
		want := sharded(t, comm.Size(), 6, c.fp, c.cfg)
		for s := range want.losses {
			if math.Float64bits(got.losses[s]) != math.Float64bits(want.losses[s]) {
				t.Fatalf("fp8=%v %+v step %d: MPI loss %v, in-process %v", c.fp, c.cfg, s, got.losses[s], want.losses[s])
			}
			g, w := got.stats[s], want.stats[s]
			if g.AllGatherBytes != w.AllGatherBytes || g.ReduceScatterBytes != w.ReduceScatterBytes || g.AllReduceCalls != w.AllReduceCalls {
				t.Fatalf("fp8=%v step %d: MPI stats %+v, in-process %+v", c.fp, s, g, w)
			}
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := dist.FinalizeMPI(); err != nil {
		println(err.Error())
		code = 1
	}
	os.Exit(code)
}
