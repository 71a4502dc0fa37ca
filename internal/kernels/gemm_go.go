package kernels

// microKernelRef is the reference every micro-kernel is checked against,
// and the loop the assembly kernels replace: C[mr×nr] += alpha·A·B from
// packed slivers, or with overwrite C = alpha·A·B (C not read).
func microKernelRef(mr, nr, k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
	for r := 0; r < mr; r++ {
		for j := 0; j < nr; j++ {
			var s float32
			for p := 0; p < k; p++ {
				s += a[p*mr+r] * b[p*nr+j]
			}
			if overwrite {
				c[r*ldc+j] = alpha * s
				continue
			}
			c[r*ldc+j] += alpha * s
		}
	}
}

// goKernel4x4 is the portable micro-kernel: a 4×4 tile held in sixteen
// scalar accumulators.
func goKernel4x4(k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	a = a[:k*4]
	b = b[:k*4]
	for p := 0; p < k; p++ {
		ap := a[p*4 : p*4+4 : p*4+4]
		bp := b[p*4 : p*4+4 : p*4+4]
		a0, a1, a2, a3 := ap[0], ap[1], ap[2], ap[3]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	store4(c[0:4:4], alpha, overwrite, c00, c01, c02, c03)
	store4(c[ldc:ldc+4:ldc+4], alpha, overwrite, c10, c11, c12, c13)
	store4(c[2*ldc:2*ldc+4:2*ldc+4], alpha, overwrite, c20, c21, c22, c23)
	store4(c[3*ldc:3*ldc+4:3*ldc+4], alpha, overwrite, c30, c31, c32, c33)
}

// store4 stores one row of the 4×4 tile: row += alpha·s, or row =
// alpha·s with overwrite.
func store4(row []float32, alpha float32, overwrite bool, s0, s1, s2, s3 float32) {
	row = row[:4:4]
	if overwrite {
		row[0], row[1], row[2], row[3] = alpha*s0, alpha*s1, alpha*s2, alpha*s3
		return
	}
	row[0] += alpha * s0
	row[1] += alpha * s1
	row[2] += alpha * s2
	row[3] += alpha * s3
}

var goKernel = microKernel{name: "go 4x4", mr: 4, nr: 4, run: goKernel4x4}
