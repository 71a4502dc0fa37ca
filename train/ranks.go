package train

import (
	"strconv"
	"strings"

	"github.com/octetml/octet/dist"
)

// Ranks is the value of a parallelism flag (-dp, -fsdp): a number of
// in-process ranks, or "mpi": this process is one rank of an MPI job
// (mpirun -np N, a build with -tags mpi). The zero value is unset: one
// process.
type Ranks struct {
	// N is the number of in-process ranks (0 with MPI or unset).
	N int
	// MPI makes the process one rank of MPI_COMM_WORLD.
	MPI bool
	// given is the flag's text when Set was called (CommandFlags.Check
	// refuses one that is neither a rank count nor mpi).
	given *string
}

// Set reads "N" or "mpi"; it implements flag.Value. A value that is
// neither is kept for CommandFlags.Check to refuse, naming the flag, with
// the command's other problems.
func (r *Ranks) Set(s string) error {
	*r = Ranks{given: &s}
	if strings.EqualFold(strings.TrimSpace(s), "mpi") {
		r.MPI = true
	} else if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 1 {
		r.N = n
	}
	return nil
}

// String returns the flag's value as Set reads it ("" when unset).
func (r *Ranks) String() string {
	switch {
	case r == nil:
		return ""
	case r.MPI:
		return "mpi"
	case r.N > 0:
		return strconv.Itoa(r.N)
	case r.given != nil:
		return *r.given
	}
	return ""
}

// IsSet reports whether the flag asks for parallelism.
func (r Ranks) IsSet() bool { return r.MPI || r.N > 0 }

// check refuses a value given that is neither a rank count nor mpi.
func (r Ranks) check(ch *Checks, name string) {
	if r.given == nil || r.IsSet() {
		return
	}
	if n, err := strconv.Atoi(strings.TrimSpace(*r.given)); err == nil {
		ch.Fail("-%s %d: want at least 1 rank (leave -%s out for one process)", name, n, name)
	} else {
		ch.Fail("-%s %q: want a number of ranks or mpi", name, *r.given)
	}
}

// registerParallel adds -dp and -fsdp (Parallel) and -ep (ExpertParallel).
func (f *CommandFlags) registerParallel(fsFlag func(v *Ranks, name, usage string)) {
	if f.ExpertParallel {
		fsFlag(&f.EP, "ep", "shard the experts of the Mixture-of-Experts layers over N in-process ranks, or \"mpi\": one rank per process under mpirun (build with -tags mpi); every rank runs the whole batch through the other layers and its experts on the tokens routed to them, so the losses equal one process's bit for bit")
	}
	if !f.Parallel {
		return
	}
	fsFlag(&f.DP, "dp", "train data-parallel over N in-process replicas, or \"mpi\": one replica per process under mpirun (build with -tags mpi); every rank holds the whole model, gradients are averaged")
	fsFlag(&f.FSDP, "fsdp", "train sharded (FSDP: each rank holds a shard of every parameter and of the optimizer state; float8 all-gather with -recipe ao) over N in-process ranks, or \"mpi\": one rank per process under mpirun (build with -tags mpi)")
}

// checkParallel refuses -dp with -fsdp, -ep mpi with either, and mpi in
// a build without MPI.
func (f *CommandFlags) checkParallel(ch *Checks) {
	if f.DP.IsSet() && f.FSDP.IsSet() {
		ch.Fail("-dp %s and -fsdp %s: choose one", f.DP.String(), f.FSDP.String())
	}
	if f.EP.MPI && (f.DP.IsSet() || f.FSDP.IsSet()) {
		ch.Fail("-ep mpi makes every process one expert-parallel group; for groups inside data parallelism give -ep N with -dp mpi or -fsdp mpi")
	}
	for _, p := range []struct {
		name string
		r    Ranks
	}{{"dp", f.DP}, {"fsdp", f.FSDP}, {"ep", f.EP}} {
		p.r.check(ch, p.name)
		if p.r.MPI && !dist.MPIAvailable() {
			ch.Fail("-%s mpi: this program was built without MPI; build it with -tags mpi (OpenMPI's libopenmpi-dev) and start it under mpirun", p.name)
		}
	}
}

// Connect joins the MPI job when -dp or -fsdp is "mpi" (Comm is then this
// process's rank) and returns the function that leaves it, to call
// before the process exits; without MPI it does nothing.
func (f *CommandFlags) Connect() (finish func() error, err error) {
	if !f.DP.MPI && !f.FSDP.MPI && !f.EP.MPI {
		return func() error { return nil }, nil
	}
	comm, err := dist.NewMPI(0)
	if err != nil {
		return nil, err
	}
	f.Comm = comm
	return dist.FinalizeMPI, nil
}

// World returns the number of ranks the flags train on (1: one process).
func (f *CommandFlags) World() int {
	switch {
	case f.Comm != nil:
		return f.Comm.Size()
	case f.EP.N > 0:
		return f.EP.N * max(1, f.DP.N, f.FSDP.N)
	case f.DP.N > 0:
		return f.DP.N
	case f.FSDP.N > 0:
		return f.FSDP.N
	}
	return 1
}

// Rank0 reports whether this process is rank 0 (or the only process):
// the one that reports.
func (f *CommandFlags) Rank0() bool { return f.Comm == nil || f.Comm.Rank() == 0 }

// applyParallel sets the trainer's ranks from the flags.
func (f *CommandFlags) applyParallel(cfg *Config) {
	cfg.DP, cfg.FSDP, cfg.EP = f.DP.N, f.FSDP.N, f.EP.N
	if f.Comm != nil {
		cfg.Comm, cfg.DP, cfg.FSDP, cfg.EP = f.Comm, 0, 0, 0
		switch {
		case f.FSDP.MPI:
			cfg.FSDP = -1
			cfg.EP = f.EP.N // with -ep N: groups of N, sharded across them
		case f.EP.MPI:
			cfg.EP = -1
		case f.DP.MPI && f.EP.N > 0:
			cfg.EP = f.EP.N // groups of N in the MPI world, data-parallel across them
		}
	}
}
