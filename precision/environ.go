package precision

import (
	"fmt"
	"slices"
	"strings"

	"github.com/octetml/octet/internal/kernels"
)

// OtherEnvVars are the OCTET_ variables Octet reads besides the precision
// settings (EnvVars): the kernels' choice, the MPI backend's time-out, and
// those that switch on some of Octet's own tests.
var OtherEnvVars = []string{
	kernels.KernelEnv,      // OCTET_GEMM_KERNEL
	"OCTET_MPI_TIMEOUT",    // dist, with -tags mpi
	"OCTET_MPI_STALL_TEST", // tests
	"OCTET_EXHAUSTIVE",
	"OCTET_BROWSER_TEST",
	"OCTET_LEAK",
	"OCTET_TRAIN_KILL_DIR",
	"OCTET_CLITEST_ARGS",
	"OCTET_TEST_EXEC_WRAPPER", // the examples' tests under qemu
}

// accelFP8Prefix begins the FP8 variables of Accelerate's launcher.
const accelFP8Prefix = "ACCELERATE_FP8_"

// checkEnviron refuses an OCTET_ variable Octet does not read, naming the
// nearest one it does (a misspelt OCTET_FP8_MARGN would otherwise be
// dropped), and warns of an ACCELERATE_FP8_ variable it does not read
// (Accelerate's launcher sets variables Octet has no use for).
func checkEnviron(environ []string) (warnings []string, err error) {
	var octet, accel []string
	for _, v := range EnvVars() {
		if strings.HasPrefix(v, "OCTET_") {
			octet = append(octet, v)
		} else if strings.HasPrefix(v, accelFP8Prefix) {
			accel = append(accel, v)
		}
	}
	octet = append(octet, OtherEnvVars...)
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "OCTET_") && !slices.Contains(octet, name):
			unknown = append(unknown, fmt.Sprintf("environment variable %s is not one Octet reads (did you mean %s?)", name, nearest(name, octet)))
		case strings.HasPrefix(name, accelFP8Prefix) && !slices.Contains(accel, name):
			warnings = append(warnings, fmt.Sprintf("environment variable %s is not one Octet reads; it is ignored (did you mean %s?)", name, nearest(name, accel)))
		}
	}
	slices.Sort(unknown)
	slices.Sort(warnings)
	if len(unknown) > 0 {
		return warnings, precisionErrorf("%s", strings.Join(unknown, "; "))
	}
	return warnings, nil
}

// nearest returns the name of names closest to s in edit distance.
func nearest(s string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(s, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
