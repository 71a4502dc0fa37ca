//go:build mpi

package dist

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMPICollectives runs under mpirun (see .ci/run):
//
//	go test -c -tags mpi -o /tmp/dist_mpi.test ./dist
//	mpirun --allow-run-as-root --oversubscribe -np 3 /tmp/dist_mpi.test -test.run MPI
//
// Each rank checks the MPI results against what the in-process backend
// computes for the same inputs, to the bit.
func TestMPICollectives(t *testing.T) {
	if os.Getenv("OMPI_COMM_WORLD_SIZE") == "" {
		t.Skip("not launched by mpirun")
	}
	c, err := NewMPI(0)
	if err != nil {
		t.Fatal(err)
	}
	n, r := c.Size(), c.Rank()
	for _, total := range []int{0, 5, 1000} {
		counts := Split(total, n)
		offs := Offsets(counts)
		full := make([]float32, total)
		for i := range full {
			full[i] = float32(i)*0.37 + 1e7*float32(i%3)
		}
		dst := make([]float32, total)
		if err := c.AllGatherF32(dst, full[offs[r]:offs[r]+counts[r]], counts); err != nil {
			t.Fatal(err)
		}
		for i := range full {
			if dst[i] != full[i] {
				t.Fatalf("all-gather [%d] = %v, want %v", i, dst[i], full[i])
			}
		}
		src := make([]float32, total)
		for i := range src {
			src[i] = full[i] * float32(r+1) / 3
		}
		part := make([]float32, counts[r])
		if err := c.ReduceScatterF32(part, src, counts, Sum); err != nil {
			t.Fatal(err)
		}
		for i := range part { // rank-order sum, as the in-process backend adds
			var want float32
			for k := 0; k < n; k++ {
				want += full[offs[r]+i] * float32(k+1) / 3
			}
			if part[i] != want {
				t.Fatalf("reduce-scatter [%d] = %v, want %v", i, part[i], want)
			}
		}
	}
	buf := []float32{float32(r), -float32(r)}
	if err := c.AllReduceF32(buf, Max); err != nil || buf[0] != float32(n-1) || buf[1] != 0 {
		t.Fatalf("all-reduce max = %v, %v", buf, err)
	}
	b := []float32{float32(r)}
	if err := c.BroadcastF32(b, n-1); err != nil || b[0] != float32(n-1) {
		t.Fatalf("broadcast = %v, %v", b, err)
	}
	if err := checkAllToAllOn(c); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := checkSubgroups(c); err != nil {
			t.Fatal(err)
		}
	}
	// The all-to-all allocates nothing per call (its counts live in C
	// memory, kept from the first call).
	src, dst := make([]float32, 4*n), make([]float32, 4*n)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 4
	}
	if a := testing.AllocsPerRun(10, func() {
		if err := c.AllToAllF32(dst, src, counts, counts); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("all-to-all: %v allocations per call", a)
	}
	// Counts that do not pair up fail on every rank.
	bad := append([]int(nil), counts...)
	if r == 1 {
		bad[0] = 3
	}
	if err := c.AllToAllF32(dst, src, bad, counts); n > 1 && (err == nil || !strings.Contains(err.Error(), "rank 1")) {
		t.Fatalf("mismatched all-to-all: %v", err)
	}
	if _, err := NewMPI(n + 1); err == nil {
		t.Fatal("a mismatched world size was accepted")
	}
}

// TestMain finalises MPI after the tests, as MPI requires of every rank.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := FinalizeMPI(); err != nil {
		println(err.Error())
		code = 1
	}
	os.Exit(code)
}

// TestMPIStalledRank shows that a rank that stops answering makes the
// others fail with a clear error after OCTET_MPI_TIMEOUT instead of
// hanging. It ends the processes itself (a stalled job cannot finalise),
// so it runs only when asked (.ci/run checks its output):
//
//	OCTET_MPI_STALL_TEST=1 OCTET_MPI_TIMEOUT=2s mpirun -np 3 /tmp/dist_mpi.test -test.run Stalled
func TestMPIStalledRank(t *testing.T) {
	if os.Getenv("OCTET_MPI_STALL_TEST") != "1" {
		t.Skip("set OCTET_MPI_STALL_TEST=1 and launch with mpirun")
	}
	c, err := NewMPI(0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() == c.Size()-1 {
		time.Sleep(2*c.(*mpiComm).timeout + time.Second) // stalls, then dies
		os.Exit(0)
	}
	start := time.Now()
	err = c.AllReduceF32([]float32{1}, Sum)
	fmt.Printf("rank %d: after %v: %v\n", c.Rank(), time.Since(start).Round(100*time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "no answer from the other ranks") {
		os.Exit(1)
	}
	os.Exit(0)
}
