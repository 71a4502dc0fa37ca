package kernels

// microKernelRef is the reference every micro-kernel is checked against,
// and the loop the assembly kernels replace: C[mr×nr] += alpha·A·B from
// packed slivers, or with overwrite C = alpha·A·B (C not read). Each
// element sums its k products in order with fused multiply-adds from
// zero, then C = fma(sum, alpha, C), or sum·alpha with overwrite: the
// assembly kernels' bits on every architecture.
func microKernelRef(mr, nr, k int, a, b, c []float32, ldc int, alpha float32, overwrite bool) {
	for r := 0; r < mr; r++ {
		for j := 0; j < nr; j++ {
			var s float32
			for p := 0; p < k; p++ {
				s = fma32(a[p*mr+r], b[p*nr+j], s)
			}
			if overwrite {
				c[r*ldc+j] = alpha * s
				continue
			}
			c[r*ldc+j] = fma32(s, alpha, c[r*ldc+j])
		}
	}
}

// goKernel4x4 is the portable micro-kernel: a 4×4 tile held in sixteen
// scalar accumulators, microKernelRef's bits.
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
		c00 = fma32(a0, b0, c00)
		c01 = fma32(a0, b1, c01)
		c02 = fma32(a0, b2, c02)
		c03 = fma32(a0, b3, c03)
		c10 = fma32(a1, b0, c10)
		c11 = fma32(a1, b1, c11)
		c12 = fma32(a1, b2, c12)
		c13 = fma32(a1, b3, c13)
		c20 = fma32(a2, b0, c20)
		c21 = fma32(a2, b1, c21)
		c22 = fma32(a2, b2, c22)
		c23 = fma32(a2, b3, c23)
		c30 = fma32(a3, b0, c30)
		c31 = fma32(a3, b1, c31)
		c32 = fma32(a3, b2, c32)
		c33 = fma32(a3, b3, c33)
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
	row[0] = fma32(s0, alpha, row[0])
	row[1] = fma32(s1, alpha, row[1])
	row[2] = fma32(s2, alpha, row[2])
	row[3] = fma32(s3, alpha, row[3])
}

var goKernel = microKernel{name: "go 4x4", mr: 4, nr: 4, run: goKernel4x4}
