//go:build !mpi

package dist

import "fmt"

// NewMPI needs a build with -tags mpi (and OpenMPI installed); without
// it, it returns an error saying so.
func NewMPI(size int) (Communicator, error) {
	return nil, fmt.Errorf("dist: this binary was built without MPI; build with -tags mpi (needs libopenmpi-dev) and launch with mpirun")
}

// FinalizeMPI does nothing without MPI.
func FinalizeMPI() error { return nil }

// MPIAvailable reports whether this build has the MPI backend.
func MPIAvailable() bool { return false }
