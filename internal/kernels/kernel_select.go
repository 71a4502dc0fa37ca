package kernels

import (
	"os"
	"strings"
)

// KernelEnv names the environment variable that forces a micro-kernel
// ("avx512 12x32", "avx512 8x48", "avx2 6x16" or "go 4x4"; spaces may be
// written as underscores).
const KernelEnv = "OCTET_GEMM_KERNEL"

// chooseKernel picks the micro-kernel: the one KernelEnv names, or else
// the first candidate (availableKernels lists them by measured speed on
// the development machine, fastest first).
func chooseKernel(cands []microKernel) microKernel {
	if want := strings.ReplaceAll(os.Getenv(KernelEnv), "_", " "); want != "" {
		for _, k := range cands {
			if k.name == want {
				return k
			}
		}
	}
	return cands[0]
}
