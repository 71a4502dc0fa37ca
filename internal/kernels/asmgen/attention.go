package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The kernels of the fused attention (kernels/attention.go): a row GEMM
// that reads A by broadcasts at any strides, so that transposed tiles
// cost nothing, and the softmax row passes.

// rowGemmKernel emits C[mr × n] = alpha·A·B, or C = alpha·A·B + S with S
// rows at add, ldadd apart (S = C itself, or a bias row repeated with
// ldadd = 0; one fused multiply-add per element), for n ≤ 16·nv: A[r][p] is read by broadcast at a + r·rsA + p·csA (elements),
// B's rows are ldb apart and contiguous, and the last vector of every row
// of B and C is masked by mask (masked-off lanes are neither read nor
// written). Its Go twin is rowGemmGo.
func rowGemmKernel(name string, mr, nv int) {
	TEXT(name, NOSPLIT, "func(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, mask uint16, add *float32, ldadd int, alpha float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes C[%d×n] (+)= alpha·A·B for n ≤ %d, A read by broadcasts at any strides; its Go twin is rowGemmGo (attention.go) (AVX-512F).", name, mr, 16*nv))
	k, cs, b, ldb, rs := rowKernelArgs("k")
	maskK1()
	rows := rowPointers(mr, rs)
	acc := func(r, j int) VecPhysical { return zmm(r*nv + j) }
	breg := func(j int) VecPhysical { return zmm(mr*nv + j) }
	areg := func(r int) VecPhysical { return zmm(mr*nv + nv + r%2) }
	for r := 0; r < mr; r++ {
		for j := 0; j < nv; j++ {
			VPXORD(acc(r, j), acc(r, j), acc(r, j))
		}
	}
	TESTQ(k, k)
	JZ(LabelRef(name + "_store"))
	Label(name + "_loop")
	for j := 0; j < nv-1; j++ {
		VMOVUPS(Mem{Base: b, Disp: 64 * j}, breg(j))
	}
	VMOVUPS_Z(Mem{Base: b, Disp: 64 * (nv - 1)}, K1, breg(nv-1))
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
				VMOVUPS(Mem{Base: cc, Disp: 64 * j}, old)
			} else {
				VMOVUPS_Z(Mem{Base: cc, Disp: 64 * j}, K1, old)
			}
			VFMADD231PS(alpha, acc(r, j), old)
			VMOVAPS(old, acc(r, j))
		}
		if r+1 < mr {
			ADDQ(ldadd, cc)
		}
	}
	Label(name + "_write")
	for r := 0; r < mr; r++ {
		for j := 0; j < nv-1; j++ {
			VMOVUPS(acc(r, j), Mem{Base: c, Disp: 64 * j})
		}
		VMOVUPS(acc(r, nv-1), K1, Mem{Base: c, Disp: 64 * (nv - 1)})
		if r+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// expRegs holds the constants of kernels.fastExp broadcast into vector
// registers.
type expRegs struct {
	one, lim, negLim, log2e, ln2hi, ln2lo, p0, p1, p2, p3, p4, p5, zp5, znp5, b127 VecPhysical
}

// constRegs broadcasts 32-bit constants into vector registers from next
// on.
type constRegs struct{ next int }

func (c *constRegs) reg(v uint32) VecPhysical {
	z := zmm(c.next)
	c.next++
	r := GP32()
	MOVL(U32(v), r)
	VPBROADCASTD(r, z)
	return z
}

// newExpRegs broadcasts fastExp's constants into registers from next on
// and returns the first register after them.
func newExpRegs(next int) (expRegs, int) {
	c := &constRegs{next}
	k := newExpRegsFrom(c)
	return k, c.next
}

// newExpRegsFrom broadcasts fastExp's constants with c.
func newExpRegsFrom(c *constRegs) expRegs {
	reg := c.reg
	return expRegs{
		one: reg(f32(1)), lim: reg(f32(87)), negLim: reg(f32(-87)), log2e: reg(f32(1.4426950408889634)),
		ln2hi: reg(f32(0.693145751953125)), ln2lo: reg(f32(1.428606765330187e-06)),
		p0: reg(f32(1.0 / 5040)), p1: reg(f32(1.0 / 720)), p2: reg(f32(1.0 / 120)), p3: reg(f32(1.0 / 24)),
		p4: reg(f32(1.0 / 6)), p5: reg(f32(1.0 / 2)), zp5: reg(f32(0.5)), znp5: reg(f32(-0.5)), b127: reg(127),
	}
}

// fastExp emits e = fastExp(e) (kernels.fastExp: the same operations in
// the same order, no fused multiply-add), using t, tmp, tmp2, r and nn as
// scratch; tmp is left holding the biased exponent bits.
func fastExp(k expRegs, e, t, tmp, tmp2, r, nn VecPhysical) {
	// The clamp keeps a NaN (VMINPS and VMAXPS return their second
	// source, here x, when either is NaN), as Go's min and max do.
	VMINPS(e, k.lim, e)
	VMAXPS(e, k.negLim, e)
	VMULPS(k.log2e, e, t) // t = x·log2e
	// n = trunc(t+0.5), or trunc(t−0.5) where t < −0.5
	VADDPS(k.zp5, t, tmp)
	VCVTTPS2DQ(tmp, tmp)
	VSUBPS(k.zp5, t, tmp2)
	VCVTTPS2DQ(tmp2, tmp2)
	VCMPPS(U8(1), k.znp5, t, K2) // t < −0.5
	VPBLENDMD(tmp2, tmp, K2, tmp)
	VCVTDQ2PS(tmp, nn)
	// r = (x − n·ln2hi) − n·ln2lo
	VMULPS(k.ln2hi, nn, r)
	VSUBPS(r, e, r)
	VMULPS(k.ln2lo, nn, tmp2)
	VSUBPS(tmp2, r, r)
	// p = 1 + r·(1 + r·(1/2 + r·(1/6 + r·(1/24 + r·(1/120 + r·(1/720 + r/5040))))))
	VMULPS(k.p0, r, e)
	VADDPS(k.p1, e, e)
	for _, c := range []VecPhysical{k.p2, k.p3, k.p4, k.p5, k.one} {
		VMULPS(e, r, e)
		VADDPS(c, e, e)
	}
	VMULPS(e, r, e)
	VADDPS(k.one, e, e)
	// ·2^n
	VPADDD(k.b127, tmp, tmp)
	VPSLLD(U8(23), tmp, tmp)
	VMULPS(tmp, e, e)
}

// expSum emits y = fastExp(x·scale − shift) over 16·blocks values and a
// masked last vector (mask: its valid lanes), keeping 16 lane sums of y
// that it stores to out. Its Go twin is expSumGo.
func expSum() {
	name := "expSumAVX512"
	TEXT(name, NOSPLIT, "func(y, x *float32, blocks int, mask uint16, scale, shift float32) float32")
	Pragma("noescape")
	Doc(name + " writes y = fastExp(x·scale − shift) over 16·blocks values and a masked last vector and returns their sum, in 16 lanes added pairwise; its Go twin is expSumGo (attention.go) (AVX-512F).")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	k, _ := newExpRegs(10)
	scale, shift, sum := Z26, Z27, Z28
	broadcastParams(scale, "scale", shift, "shift")
	VPXORD(sum, sum, sum)
	e, t, tmp, tmp2, r, nn := Z0, Z1, Z2, Z3, Z4, Z5
	rowLoop(name, n, func(masked bool) {
		load(Mem{Base: x}, masked, e)
		VMULPS(scale, e, e)
		VSUBPS(shift, e, e)
		fastExp(k, e, t, tmp, tmp2, r, nn)
		store(e, masked, Mem{Base: y})
		if masked {
			VADDPS(e, sum, K1, sum)
			return
		}
		VADDPS(e, sum, sum)
		ADDQ(U32(64), x)
		ADDQ(U32(64), y)
	})
	VMOVAPS(sum, Z0)
	reduceLanes(false)
	Store(X0, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// reduceLanes emits the pairwise reduction of Z0's 16 lanes into X0's
// first: lanes i and i+8, then i and i+4, i+2, i+1 (kernels.sumLanes'
// order), added or (withMax) compared.
func reduceLanes(withMax bool) {
	op, last := VADDPS, VADDSS
	if withMax {
		op, last = VMAXPS, VMAXSS
	}
	VEXTRACTF64X4(U8(1), Z0, Y1)
	op(Y1, Y0, Y0)
	VEXTRACTF128(U8(1), Y0, X1)
	op(X1, X0, X0)
	VMOVHLPS(X0, X0, X1)
	op(X1, X0, X0)
	VMOVSHDUP(X0, X1)
	last(X1, X0, X0)
}

// rowMax emits the 16 lane maxima of 16·blocks values and a masked last
// vector (masked-off lanes keep −∞), stored to out. Its Go twin is
// rowMaxGo.
func rowMax() {
	name := "rowMaxAVX512"
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, mask uint16) float32")
	Pragma("noescape")
	Doc(name + " returns the largest of 16·blocks values and a masked last vector; its Go twin is rowMaxGo (attention.go) (AVX-512F).")
	x := Load(Param("x"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	acc := Z0
	r := GP32()
	MOVL(U32(0xFF800000), r) // −∞
	VPBROADCASTD(r, acc)
	loop(name, n, func() {
		VMAXPS(Mem{Base: x}, acc, acc)
		ADDQ(U32(64), x)
	})
	VMAXPS(Mem{Base: x}, acc, K1, acc)
	reduceLanes(true)
	Store(X0, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// softmaxGradRow emits ds = (p·(dp − d))·scale over 16·blocks values
// and a masked last vector. Its Go twin is softmaxGradRowGo.
func softmaxGradRow() {
	name := "softmaxGradRowAVX512"
	TEXT(name, NOSPLIT, "func(ds, p, dp *float32, blocks int, mask uint16, d, scale float32)")
	Pragma("noescape")
	Doc(name + " writes ds = (p·(dp − d))·scale over 16·blocks values and a masked last vector; its Go twin is softmaxGradRowGo (attention.go) (AVX-512F).")
	ds := Load(Param("ds"), GP64())
	p := Load(Param("p"), GP64())
	dp := Load(Param("dp"), GP64())
	n := Load(Param("blocks"), GP64())
	maskK1()
	d, scale := Z10, Z11
	broadcastParams(d, "d", scale, "scale")
	rowLoop(name, n, func(masked bool) {
		load(Mem{Base: dp}, masked, Z0)
		load(Mem{Base: p}, masked, Z1)
		VSUBPS(d, Z0, Z0)
		VMULPS(Z1, Z0, Z0)
		VMULPS(scale, Z0, Z0)
		store(Z0, masked, Mem{Base: ds})
		for _, r := range []Register{ds, p, dp} {
			ADDQ(U32(64), r)
		}
	})
	VZEROUPPER()
	RET()
}

// rowGemmRows is the row count of the row-GEMM kernel with nv vectors a
// row: as many accumulators as leave room for B and two broadcasts,
// and at most 8 rows (one general register each).
func rowGemmRows(nv int) int { return min(8, 24/nv) }

// rowKernelArgs loads a row kernel's depth (the parameter kname), A's
// column stride csA and B with its row stride ldb (both in bytes), and
// rsA in bytes for rowPointers.
func rowKernelArgs(kname string) (k, cs, b, ldb, rs Register) {
	k = Load(Param(kname), GP64())
	rs = Load(Param("rsA"), GP64())
	SHLQ(U8(2), rs)
	cs = Load(Param("csA"), GP64())
	SHLQ(U8(2), cs)
	b = Load(Param("b"), GP64())
	ldb = Load(Param("ldb"), GP64())
	SHLQ(U8(2), ldb)
	return k, cs, b, ldb, rs
}

// rowPointers loads the parameter a and returns mr registers pointing at
// its rows, rs bytes apart.
func rowPointers(mr int, rs Register) []Register {
	rows := make([]Register, mr)
	rows[0] = Load(Param("a"), GP64())
	for r := 1; r < mr; r++ {
		rows[r] = GP64()
		MOVQ(rows[r-1], rows[r])
		ADDQ(rs, rows[r])
	}
	return rows
}

// paramAddr returns the stack address of a scalar parameter, for
// instructions that read it straight into any vector register.
func paramAddr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// maskK1 loads the kernel's mask parameter (the valid lanes of its last
// vector) into K1.
func maskK1() {
	m := Load(Param("mask"), GP32())
	KMOVW(m, K1)
}

// broadcastParams broadcasts scalar float32 parameters into vector
// registers: pairs of register and parameter name.
func broadcastParams(pairs ...any) {
	for i := 0; i < len(pairs); i += 2 {
		VBROADCASTSS(paramAddr(pairs[i+1].(string)), pairs[i].(VecPhysical))
	}
}
