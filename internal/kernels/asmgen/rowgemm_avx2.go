package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// rowGemmAVX2Rows is the row count of the AVX2 row-GEMM kernel with nv
// vectors (8 lanes each) a row: the accumulators, nv registers for B,
// one for the broadcast A value and one for the lane mask fill the 16
// vector registers; at most 8 rows (one general register each).
func rowGemmAVX2Rows(nv int) int { return min(8, (16-nv-2)/nv) }

// rowGemmKernelAVX2 emits the AVX2+FMA form of rowGemmKernel: C[mr × n]
// = alpha·A·B, or alpha·A·B + S, for n ≤ 8·nv, with the same fused
// multiply-adds in the same order per element (the results equal
// rowGemmGo's and the AVX-512 kernels' bit for bit). With masked, mask
// points at eight int32 lane masks (all ones for a valid lane) that
// select the lanes of the last vector of every row of B, S and C; lanes
// masked off are neither read nor written. Without, mask is not read.
func rowGemmKernelAVX2(name string, mr, nv int, masked bool) {
	TEXT(name, NOSPLIT, "func(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, mask *int32, add *float32, ldadd int, alpha float32)")
	Pragma("noescape")
	kind := "all lanes"
	if masked {
		kind = "the last vector of each row masked"
	}
	Doc(fmt.Sprintf("%s computes C[%d×n] (+)= alpha·A·B for n ≤ %d (%s), A read by broadcasts at any strides; its Go twin is rowGemmGo (attention.go) (AVX2, FMA).", name, mr, 8*nv, kind))
	k, cs, b, ldb, rs := rowKernelArgs("k")
	rows := rowPointers(mr, rs)
	acc := func(r, j int) VecPhysical { return ymm(r*nv + j) }
	breg := func(j int) VecPhysical { return ymm(mr*nv + j) }
	nb := 1
	if !masked && mr*nv+nv+2 <= 16 {
		nb = 2
	}
	areg := func(r int) VecPhysical { return ymm(mr*nv + nv + r%nb) }
	var mreg VecPhysical
	if masked {
		mreg = ymm(15)
		if mr*nv+nv+nb > 15 {
			panic(name + ": no register left for the mask")
		}
		m := Load(Param("mask"), GP64())
		VMOVDQU(Mem{Base: m}, mreg)
	}
	// loadLast loads the last vector of a row (masked lanes read as 0).
	loadLast := func(m Mem, dst VecPhysical) {
		if masked {
			VMASKMOVPS(m, mreg, dst)
		} else {
			VMOVUPS(m, dst)
		}
	}
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VXORPS(acc(r, j), acc(r, j), acc(r, j))
		}
	}
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	for j := 0; j < nv-1; j++ {
		VMOVUPS(Mem{Base: b, Disp: 32 * j}, breg(j))
	}
	loadLast(Mem{Base: b, Disp: 32 * (nv - 1)}, breg(nv-1))
	for r := 0; r < mr; r++ {
		VBROADCASTSS(Mem{Base: rows[r]}, areg(r))
		for j := 0; j < nv; j++ {
			VFMADD231PS(areg(r), breg(j), acc(r, j))
		}
		ADDQ(cs, rows[r])
	}
	ADDQ(ldb, b)
	DECQ(k)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_store")
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	alpha := areg(0)
	VBROADCASTSS(paramAddr("alpha"), alpha)
	add := Load(Param("add"), GP64())
	TESTQ(add, add)
	JNZ(LabelRef(name + "_add"))
	// C = alpha·A·B
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VMULPS(alpha, acc(r, j), acc(r, j))
		}
	}
	JMP(LabelRef(name + "_write"))
	// C = alpha·A·B + S: S + alpha·(the finished products), rounded once.
	Label(name + "_add")
	cc := add
	ldadd := Load(Param("ldadd"), GP64())
	SHLQ(U8(2), ldadd)
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			old := breg(j)
			if j < nv-1 {
				VMOVUPS(Mem{Base: cc, Disp: 32 * j}, old)
			} else {
				loadLast(Mem{Base: cc, Disp: 32 * j}, old)
			}
			VFMADD231PS(alpha, acc(r, j), old)
			VMOVAPS(old, acc(r, j))
		}
		if r+1 < mr {
			ADDQ(ldadd, cc)
		}
	}
	Label(name + "_write")
	writeRowsAVX2(mr, nv, acc, c, ldc, masked, mreg)
}

// writeRowsAVX2 stores mr rows of nv accumulators to C (rows ldc bytes
// apart), the last vector of each row through mreg's lane masks when
// masked, and returns.
func writeRowsAVX2(mr, nv int, acc func(r, j int) VecPhysical, c, ldc Register, masked bool, mreg VecPhysical) {
	for r := 0; r < mr; r++ {
		for j := 0; j < nv-1; j++ {
			VMOVUPS(acc(r, j), Mem{Base: c, Disp: 32 * j})
		}
		if masked {
			VMASKMOVPS(acc(r, nv-1), mreg, Mem{Base: c, Disp: 32 * (nv - 1)})
		} else {
			VMOVUPS(acc(r, nv-1), Mem{Base: c, Disp: 32 * (nv - 1)})
		}
		if r+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// rowGemmKernelsAVX2 emits the AVX2 row kernels: two vectors (16
// columns) a row unmasked for whole blocks, and one or two vectors with
// the last masked for the columns left over.
func rowGemmKernelsAVX2() {
	for mr := 1; mr <= rowGemmAVX2Rows(2); mr++ {
		rowGemmKernelAVX2(fmt.Sprintf("rowGemm%dx2AVX2", mr), mr, 2, false)
	}
	for nv := 1; nv <= 2; nv++ {
		for mr := 1; mr <= rowGemmAVX2Rows(nv); mr++ {
			rowGemmKernelAVX2(fmt.Sprintf("rowGemm%dx%dmAVX2", mr, nv), mr, nv, true)
		}
	}
}
