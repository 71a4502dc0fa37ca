//go:build !purego

package kernels

//go:generate sh -c "cd neongen && go run . -out ../asm_arm64.s"

// hasNEON: every arm64 CPU has Advanced SIMD, so the NEON kernels run
// everywhere; tests switch it off to run the Go twins.
var hasNEON = true

//go:noescape
func neonKernel8x12(k int, a, b, c *float32, ldc int, alpha float32, overwrite bool)

// neonKernel is the blocked GEMM's NEON micro-kernel: an 8×12 tile in
// 24 vector accumulators, microKernelRef's bits.
var neonKernel = microKernel{name: "neon 8x12", mr: 8, nr: 12, run: neon8x12}

func neon8x12(k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
	_ = c[7*ldc+11]
	if k == 0 {
		neonKernel8x12(0, nil, nil, &c[0], ldc, alpha, overwrite)
		return
	}
	_, _ = a[8*k-1], b[12*k-1]
	neonKernel8x12(k, &a[0], &b[0], &c[0], ldc, alpha, overwrite)
}

//go:noescape
func neonBF16Kernel8x8(k int, a, b *uint32, c *float32, ldc int, alpha, alphaLo float32, overwrite bool)

// neonBF16Kernel is the bf16-pair micro-kernel on NEON: FMLAs in
// VDPBF16PS's order with its denormal handling, bf16KernelRef's bits
// (arm64's own BFDOT rounds otherwise, so it is not used).
var neonBF16Kernel = bf16Kernel{name: "neon bf16 8x8", mr: 8, nr: 8, run: neonBF16x8}

func neonBF16x8(k int, a, b []uint32, c []float32, ldc int, alpha, alphaLo float32, overwrite bool) {
	_ = c[7*ldc+7]
	if k == 0 {
		neonBF16Kernel8x8(0, nil, nil, &c[0], ldc, alpha, alphaLo, overwrite)
		return
	}
	_, _ = a[8*k-1], b[8*k-1]
	neonBF16Kernel8x8(k, &a[0], &b[0], &c[0], ldc, alpha, alphaLo, overwrite)
}

// availableBF16Kernels: the NEON kernel, then the Go twins.
func availableBF16Kernels() []bf16Kernel {
	return []bf16Kernel{neonBF16Kernel, goBF16Kernel, goAMXKernel}
}

// availableKernels: NEON first (every arm64 CPU has it), then the Go
// twin.
func availableKernels() []microKernel { return []microKernel{neonKernel, goKernel} }

//go:noescape
func neonRows4x16(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, add *float32, ldadd int, alpha float32)

//go:noescape
func neonRow1x16(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, add *float32, ldadd int, alpha float32)

// rowGemmVector runs rowGemm's whole blocks of 16 columns on the NEON
// kernels (4 rows at a time, then single rows) and the remaining
// columns on rowGemmGo: every element is computed alike, so the split
// does not change a bit. rowGemm has checked the operands' extents.
func rowGemmVector(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int, add []float32, ldadd int, alpha float32) bool {
	n16 := n &^ 15
	if !hasNEON || n16 == 0 {
		return false
	}
	addAt := func(i, j int) *float32 {
		if add == nil {
			return nil
		}
		return &add[i*ldadd+j]
	}
	i := 0
	for ; i+4 <= m; i += 4 {
		for j := 0; j < n16; j += 16 {
			neonRows4x16(k, &a[i*rsA], rsA, csA, &b[j], ldb, &c[i*ldc+j], ldc, addAt(i, j), ldadd, alpha)
		}
	}
	for ; i < m; i++ {
		for j := 0; j < n16; j += 16 {
			neonRow1x16(k, &a[i*rsA], rsA, csA, &b[j], ldb, &c[i*ldc+j], ldc, addAt(i, j), ldadd, alpha)
		}
	}
	if n16 < n {
		var rest []float32
		if add != nil {
			rest = add[n16:]
		}
		rowGemmGo(m, n-n16, k, alpha, a, rsA, csA, b[n16:], ldb, c[n16:], ldc, rest, ldadd)
	}
	return true
}
