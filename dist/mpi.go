//go:build mpi

package dist

/*
#cgo pkg-config: ompi-c
#include <mpi.h>
#include <stdlib.h>

// Communicators by index: 0 is MPI_COMM_WORLD, the rest made by
// octet_split.
#define OCTET_MAX_COMMS 256
static MPI_Comm octet_comms[OCTET_MAX_COMMS];
static int octet_ncomms = 0;

static int octet_init(void) {
	int inited = 0, provided = 0;
	MPI_Initialized(&inited);
	if (!inited) {
		int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
		if (rc != MPI_SUCCESS) return rc;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	octet_comms[0] = MPI_COMM_WORLD;
	if (octet_ncomms == 0) octet_ncomms = 1;
	return MPI_SUCCESS;
}
static int octet_split(int c, int color, int key, int *out) {
	if (octet_ncomms >= OCTET_MAX_COMMS) return MPI_ERR_OTHER;
	MPI_Comm nc;
	int rc = MPI_Comm_split(octet_comms[c], color, key, &nc);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
	octet_comms[octet_ncomms] = nc;
	*out = octet_ncomms++;
	return MPI_SUCCESS;
}
static int octet_rank(int c, int *r) { return MPI_Comm_rank(octet_comms[c], r); }
static int octet_size(int c, int *s) { return MPI_Comm_size(octet_comms[c], s); }
static int octet_finalize(void) {
	int i = 0, f = 0;
	MPI_Initialized(&i);
	MPI_Finalized(&f);
	return (!i || f) ? MPI_SUCCESS : MPI_Finalize();
}

static MPI_Datatype octet_type(int elem) { return elem == 4 ? MPI_FLOAT : MPI_BYTE; }

static int octet_iallgatherv(int c, void *src, int n, void *dst, int *counts, int *displs, int elem, MPI_Request *req) {
	return MPI_Iallgatherv(src, n, octet_type(elem), dst, counts, displs, octet_type(elem), octet_comms[c], req);
}
static int octet_ialltoallv(int c, void *src, int *scounts, int *sdispls, void *dst, int *rcounts, int *rdispls, MPI_Request *req) {
	return MPI_Ialltoallv(src, scounts, sdispls, MPI_FLOAT, dst, rcounts, rdispls, MPI_FLOAT, octet_comms[c], req);
}
static int octet_ialltoallv_elem(int c, void *src, int *scounts, int *sdispls, void *dst, int *rcounts, int *rdispls, int elem, MPI_Request *req) {
	return MPI_Ialltoallv(src, scounts, sdispls, octet_type(elem), dst, rcounts, rdispls, octet_type(elem), octet_comms[c], req);
}
static int octet_ialltoall_int(int c, int *src, int *dst, MPI_Request *req) {
	return MPI_Ialltoall(src, 1, MPI_INT, dst, 1, MPI_INT, octet_comms[c], req);
}
static int octet_iallreduce_max_int(int c, int *buf, MPI_Request *req) {
	return MPI_Iallreduce(MPI_IN_PLACE, buf, 1, MPI_INT, MPI_MAX, octet_comms[c], req);
}
static int octet_ibcast(int c, void *buf, int n, int root, MPI_Request *req) {
	return MPI_Ibcast(buf, n, MPI_FLOAT, root, octet_comms[c], req);
}
static int octet_test(MPI_Request *req, int *done) { return MPI_Test(req, done, MPI_STATUS_IGNORE); }
static void octet_error_string(int code, char *buf) { int len = 0; MPI_Error_string(code, buf, &len); }
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// DefaultMPITimeout bounds how long a collective waits for the other
// ranks before it fails (a rank that died, or ranks calling different
// collectives); OCTET_MPI_TIMEOUT (a Go duration, e.g. "30s") overrides it.
const DefaultMPITimeout = 60 * time.Second

// mpiComm is a rank of MPI_COMM_WORLD, or of a group split from it.
type mpiComm struct {
	mu      *sync.Mutex // MPI_THREAD_SERIALIZED: one call at a time, shared by a world's groups
	c       C.int       // the communicator's index (octet_comms)
	rank    int
	size    int
	timeout time.Duration
	stats   Stats
	f32     []float32
	req     C.MPI_Request
	done    C.int // MPI_Test's flag (a field: a local would escape per call)
	// a2a holds the all-to-all's counts and displacements in C memory
	// (allocated once: MPI reads them until the collective completes):
	// send counts, send displacements, receive counts, receive
	// displacements, the counts received from each rank, one flag.
	a2a []C.int
	pin runtime.Pinner
}

// mpiMu serialises every MPI call of the process (MPI_THREAD_SERIALIZED).
var mpiMu sync.Mutex

var mpiOnce struct {
	sync.Once
	err error
}

func mpiError(op string, rank int, code C.int) error {
	buf := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING))
	defer C.free(unsafe.Pointer(buf))
	C.octet_error_string(code, buf)
	return fmt.Errorf("dist: mpi %s on rank %d: %s", op, rank, C.GoString(buf))
}

// NewMPI initialises MPI (once per process) and returns this process's
// rank of MPI_COMM_WORLD. If size > 0 the world must have that many ranks.
// Call FinalizeMPI before the process exits.
func NewMPI(size int) (Communicator, error) {
	mpiOnce.Do(func() {
		// MPI_THREAD_SERIALIZED: any thread may call MPI, one at a time
		// (every call below holds the communicator's mutex).
		if rc := C.octet_init(); rc != C.MPI_SUCCESS {
			mpiOnce.err = mpiError("init", -1, rc)
		}
	})
	if mpiOnce.err != nil {
		return nil, mpiOnce.err
	}
	c := &mpiComm{timeout: DefaultMPITimeout, mu: &mpiMu}
	var r, s C.int
	if rc := C.octet_rank(0, &r); rc != C.MPI_SUCCESS {
		return nil, mpiError("rank", -1, rc)
	}
	if rc := C.octet_size(0, &s); rc != C.MPI_SUCCESS {
		return nil, mpiError("size", int(r), rc)
	}
	c.rank, c.size = int(r), int(s)
	if v := os.Getenv("OCTET_MPI_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("dist: OCTET_MPI_TIMEOUT=%q is not a positive duration", v)
		}
		c.timeout = d
	}
	if size > 0 && size != c.size {
		return nil, fmt.Errorf("dist: rank %d: the program wants %d ranks but MPI started %d (check mpirun -np)", c.rank, size, c.size)
	}
	return c, nil
}

// FinalizeMPI shuts MPI down; no collective may follow.
func FinalizeMPI() error {
	if rc := C.octet_finalize(); rc != C.MPI_SUCCESS {
		return mpiError("finalize", -1, rc)
	}
	return nil
}

// MPIAvailable reports whether this build has the MPI backend.
func MPIAvailable() bool { return true }

func (c *mpiComm) Rank() int    { return c.rank }
func (c *mpiComm) Size() int    { return c.size }
func (c *mpiComm) Stats() Stats { return c.stats }
func (c *mpiComm) ResetStats()  { c.stats = Stats{} }

// wait polls a non-blocking collective until it completes or the timeout
// passes.
func (c *mpiComm) wait(op string) error {
	deadline := time.Now().Add(c.timeout)
	for spins := 0; ; spins++ {
		if rc := C.octet_test(&c.req, &c.done); rc != C.MPI_SUCCESS {
			return mpiError(op, c.rank, rc)
		}
		if c.done != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dist: mpi %s on rank %d: no answer from the other ranks within %v (a rank died, or the ranks run different collectives)", op, c.rank, c.timeout)
		}
		if spins > 1000 {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

func cInts(v []int) []C.int {
	out := make([]C.int, len(v))
	for i, x := range v {
		out[i] = C.int(x)
	}
	return out
}

func (c *mpiComm) gather(dst, src unsafe.Pointer, n int, counts []int, elem int) error {
	total, err := checkCounts("all-gather", counts, c.size)
	if err != nil {
		return err
	}
	if n != counts[c.rank] {
		return fmt.Errorf("dist: all-gather on rank %d: src %d, want %d", c.rank, n, counts[c.rank])
	}
	cc, dd := cInts(counts), cInts(Offsets(counts))
	// MPI keeps these pointers until the collective completes: pin them.
	var pin runtime.Pinner
	for _, p := range []unsafe.Pointer{unsafe.Pointer(&cc[0]), unsafe.Pointer(&dd[0]), dst, src} {
		pin.Pin(p)
	}
	defer pin.Unpin()
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := C.octet_iallgatherv(c.c, src, C.int(n), dst, &cc[0], &dd[0], C.int(elem), &c.req); rc != C.MPI_SUCCESS {
		return mpiError("all-gather", c.rank, rc)
	}
	err = c.wait("all-gather")
	c.stats.AllGatherCalls++
	c.stats.AllGatherBytes += int64(total * elem)
	return err
}

var zero [1]float32

func ptrF32(s []float32) unsafe.Pointer {
	if len(s) == 0 {
		return unsafe.Pointer(&zero[0])
	}
	return unsafe.Pointer(&s[0])
}

func ptrU8(s []uint8) unsafe.Pointer {
	if len(s) == 0 {
		return unsafe.Pointer(&zero[0])
	}
	return unsafe.Pointer(&s[0])
}

func (c *mpiComm) AllGatherF32(dst, src []float32, counts []int) error {
	if total, _ := checkCounts("all-gather", counts, c.size); len(dst) < total {
		return fmt.Errorf("dist: all-gather on rank %d: dst %d, want %d", c.rank, len(dst), total)
	}
	return c.gather(ptrF32(dst), ptrF32(src), len(src), counts, 4)
}

func (c *mpiComm) AllGatherU8(dst, src []uint8, counts []int) error {
	if total, _ := checkCounts("all-gather", counts, c.size); len(dst) < total {
		return fmt.Errorf("dist: all-gather on rank %d: dst %d, want %d", c.rank, len(dst), total)
	}
	return c.gather(ptrU8(dst), ptrU8(src), len(src), counts, 1)
}

// ReduceScatterF32 sends each rank its segment of every rank's src
// (all-to-all) and adds the segments in rank order, as the in-process
// backend does, so the two agree to the bit.
func (c *mpiComm) ReduceScatterF32(dst, src []float32, counts []int, op ReduceOp) error {
	total, err := checkCounts("reduce-scatter", counts, c.size)
	if err != nil {
		return err
	}
	n := counts[c.rank]
	if len(src) != total || len(dst) < n {
		return fmt.Errorf("dist: reduce-scatter on rank %d: src %d (want %d), dst %d (want %d)", c.rank, len(src), total, len(dst), n)
	}
	if cap(c.f32) < n*c.size {
		c.f32 = make([]float32, n*c.size)
	}
	recv := c.f32[:n*c.size]
	rc, rd := make([]int, c.size), make([]int, c.size)
	for r := range rc {
		rc[r], rd[r] = n, r*n
	}
	sc, sd := cInts(counts), cInts(Offsets(counts))
	rcc, rdd := cInts(rc), cInts(rd)
	var pin runtime.Pinner
	for _, p := range []unsafe.Pointer{unsafe.Pointer(&sc[0]), unsafe.Pointer(&sd[0]), unsafe.Pointer(&rcc[0]), unsafe.Pointer(&rdd[0]), ptrF32(src), ptrF32(recv)} {
		pin.Pin(p)
	}
	defer pin.Unpin()
	c.mu.Lock()
	if code := C.octet_ialltoallv(c.c, ptrF32(src), &sc[0], &sd[0], ptrF32(recv), &rcc[0], &rdd[0], &c.req); code != C.MPI_SUCCESS {
		c.mu.Unlock()
		return mpiError("reduce-scatter", c.rank, code)
	}
	err = c.wait("reduce-scatter")
	c.mu.Unlock()
	c.stats.ReduceScatterCalls++
	c.stats.ReduceScatterBytes += int64(4 * total)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		acc := recv[i]
		for r := 1; r < c.size; r++ {
			acc = reduce(op, acc, recv[r*n+i])
		}
		dst[i] = acc
	}
	return nil
}

// AllReduceF32 gathers every rank's buffer and reduces in rank order.
func (c *mpiComm) AllReduceF32(buf []float32, op ReduceOp) error {
	n := len(buf)
	all := make([]float32, n*c.size)
	counts := make([]int, c.size)
	for r := range counts {
		counts[r] = n
	}
	saved := c.stats
	if err := c.gather(ptrF32(all), ptrF32(buf), n, counts, 4); err != nil {
		return fmt.Errorf("dist: all-reduce: %w", err)
	}
	c.stats = saved
	for i := 0; i < n; i++ {
		acc := all[i]
		for r := 1; r < c.size; r++ {
			acc = reduce(op, acc, all[r*n+i])
		}
		buf[i] = acc
	}
	c.stats.AllReduceCalls++
	c.stats.AllReduceBytes += int64(4 * n)
	return nil
}

func (c *mpiComm) BroadcastF32(buf []float32, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("dist: broadcast from rank %d of %d", root, c.size)
	}
	var pin runtime.Pinner
	pin.Pin(ptrF32(buf))
	defer pin.Unpin()
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc := C.octet_ibcast(c.c, ptrF32(buf), C.int(len(buf)), C.int(root), &c.req); rc != C.MPI_SUCCESS {
		return mpiError("broadcast", c.rank, rc)
	}
	err := c.wait("broadcast")
	c.stats.BroadcastCalls++
	c.stats.BroadcastBytes += int64(4 * len(buf))
	return err
}

// allToAll runs MPI_Ialltoallv after checking, on every rank, that each
// rank sends what its receiver expects: the send counts are exchanged
// first (MPI_Ialltoall), and a mismatch found by any rank fails the
// collective on all of them (MPI_Iallreduce of a flag).
func (c *mpiComm) allToAll(dst, src unsafe.Pointer, nsrc, ndst int, send, recv []int, elem int) error {
	sent, err := checkAllToAll(c.rank, c.size, nsrc, ndst, send, recv, elem)
	if err != nil {
		return err
	}
	n := c.size
	if c.a2a == nil {
		c.a2a = unsafe.Slice((*C.int)(C.malloc(C.size_t(6*n+1)*C.size_t(unsafe.Sizeof(C.int(0))))), 6*n+1)
	}
	sc, sd, rc, rd, got, flag := c.a2a[:n], c.a2a[n:2*n], c.a2a[2*n:3*n], c.a2a[3*n:4*n], c.a2a[4*n:5*n], c.a2a[6*n:]
	so, ro := 0, 0
	for r := 0; r < n; r++ {
		sc[r], sd[r], rc[r], rd[r] = C.int(send[r]), C.int(so), C.int(recv[r]), C.int(ro)
		so += send[r]
		ro += recv[r]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := C.octet_ialltoall_int(c.c, &sc[0], &got[0], &c.req); code != C.MPI_SUCCESS {
		return mpiError("all-to-all", c.rank, code)
	}
	if err := c.wait("all-to-all"); err != nil {
		return err
	}
	bad := -1
	for r := 0; r < n; r++ {
		if int(got[r]) != recv[r] {
			bad = r
			break
		}
	}
	flag[0] = C.int(bad + 1)
	if code := C.octet_iallreduce_max_int(c.c, &flag[0], &c.req); code != C.MPI_SUCCESS {
		return mpiError("all-to-all", c.rank, code)
	}
	if err := c.wait("all-to-all"); err != nil {
		return err
	}
	switch {
	case bad >= 0:
		return fmt.Errorf("dist: all-to-all: rank %d sends %d values to rank %d, which expects %d", bad, int(got[bad]), c.rank, recv[bad])
	case flag[0] != 0:
		return fmt.Errorf("dist: all-to-all on rank %d: rank %d's counts do not match what it is sent (see its error)", c.rank, int(flag[0])-1)
	}
	c.pin.Pin(src)
	c.pin.Pin(dst)
	defer c.pin.Unpin()
	if code := C.octet_ialltoallv_elem(c.c, src, &sc[0], &sd[0], dst, &rc[0], &rd[0], C.int(elem), &c.req); code != C.MPI_SUCCESS {
		return mpiError("all-to-all", c.rank, code)
	}
	err = c.wait("all-to-all")
	c.stats.AllToAllCalls++
	c.stats.AllToAllBytes += sent
	return err
}

func (c *mpiComm) AllToAllF32(dst, src []float32, send, recv []int) error {
	return c.allToAll(ptrF32(dst), ptrF32(src), len(src), len(dst), send, recv, 4)
}

func (c *mpiComm) AllToAllU8(dst, src []uint8, send, recv []int) error {
	return c.allToAll(ptrU8(dst), ptrU8(src), len(src), len(dst), send, recv, 1)
}

// split is Split for an MPI rank: MPI_Comm_split of its communicator.
func (c *mpiComm) split(color, key int) (Communicator, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var idx, r, s C.int
	if rc := C.octet_split(c.c, C.int(color), C.int(key), &idx); rc != C.MPI_SUCCESS {
		return nil, mpiError("split", c.rank, rc)
	}
	if rc := C.octet_rank(idx, &r); rc != C.MPI_SUCCESS {
		return nil, mpiError("rank", c.rank, rc)
	}
	if rc := C.octet_size(idx, &s); rc != C.MPI_SUCCESS {
		return nil, mpiError("size", c.rank, rc)
	}
	return &mpiComm{mu: c.mu, c: idx, rank: int(r), size: int(s), timeout: c.timeout}, nil
}
