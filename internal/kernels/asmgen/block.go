package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Float8BlockScaling's fused casts: each block's amax, its scale and
// scale_inv (kernels.BlockScale's float32 arithmetic), then the block's
// codes with that scale, so that a block is read from memory once and
// no scale is computed in scalar code. A block holding a NaN stops the
// kernel (its amax leaves the NaN out, which the scalar path does); the
// caller finishes from there.

// blockFormat is what the fused casts need of an FP8 format: its largest
// finite value and quantize's rounding constants.
type blockFormat struct {
	suffix       string
	max          uint32 // float32 bits of the largest finite value
	shift        int
	minNorm      uint32
	magicExp     int
	off, maxCode uint32
}

var blockFormats = []blockFormat{
	{"E4M3", f32(448), 20, 0x3C800000, 14, 120 << 3, 0x7E},
	{"E5M2", f32(57344), 21, 0x38800000, 7, 112 << 2, 0x7B},
}

// blockRegs are the constants of a fused block cast.
type blockRegs struct {
	abs, inf, sign              VecPhysical
	eps, mask, max, one, fltMax VecPhysical
	r                           roundRegs
}

// newBlockRegs broadcasts a format's constants and the kernel's eps and
// mask parameters (at byte offsets epsOff and epsOff+4).
func newBlockRegs(f blockFormat, epsOff int) blockRegs {
	b := blockRegs{abs: Z21, inf: Z30, sign: Z31, eps: Z14, mask: Z15, max: Z16, one: Z17, fltMax: Z18}
	bcast(0x7FFFFFFF, b.abs)
	bcast(0x7F800000, b.inf)
	bcast(0x80, b.sign)
	b.r = newRoundRegs(f.shift, f.minNorm, f.magicExp, f.off, f.maxCode, Z22, Z23, Z24, Z25, Z27, Z29)
	VBROADCASTSS(NewParamAddr("eps", epsOff), b.eps)
	VBROADCASTSS(NewParamAddr("mask", epsOff+4), b.mask) // the bits, broadcast
	bcast(f.max, b.max)
	bcast(f32(1), b.one)
	bcast(0x7F7FFFFF, b.fltMax)
	return b
}

// scales turns amax bits a (NaN-free; clobbered) into scale s and
// scale_inv inv, lane by lane, as BlockScale does: the amax floored at
// eps; scale 1 for an amax of 0 or +inf, else max/amax with an infinite
// quotient made FLT_MAX; the mask applied (0xFF800000 rounds down to a
// power of two); scale_inv = 1/scale. K1 and K2 are clobbered.
func (b blockRegs) scales(a, s, inv VecPhysical) {
	VMAXPS(a, b.eps, a)     // eps > a ? eps : a
	VPTESTNMD(b.abs, a, K1) // K1: a is zero
	VPCMPEQD(b.inf, a, K2)  // K2: a is +inf
	KORW(K2, K1, K1)        // K1: scale 1
	VDIVPS(a, b.max, s)     // s = max / a
	VPCMPEQD(b.inf, s, K2)  // K2: the quotient overflowed
	VPBLENDMD(b.fltMax, s, K2, s)
	VPBLENDMD(b.one, s, K1, s)
	VPANDD(b.mask, s, s)
	VDIVPS(s, b.one, inv)
}

// cast16 writes the codes of the 16 values at src times scale to dst,
// quantizeFP8Go's rounding (Z1-Z5 and K1 clobbered). The values hold no
// NaN — the kernels cast only blocks whose amax says so — so the NaN
// code is never needed: a finite value times a finite scale rounds and
// saturates, an infinite one saturates.
func (b blockRegs) cast16(src, dst Mem, scale VecPhysical) {
	ya, y, sub, t, c := Z1, Z2, Z3, Z4, Z5
	VMULPS(src, scale, y)
	VPANDD(b.abs, y, ya)
	b.r.round(ya, c, t, sub)
	VPSRLD(U8(24), y, t)
	VPTERNLOGD(U8(0xF8), b.sign, t, c) // c |= t & 0x80 (the sign)
	VPMOVDB(c, dst)
}

// hmaxBroadcast sets every lane of z to the largest of its 16 unsigned
// lanes (zy, zx its lower halves; ty, tx scratch of one register).
func hmaxBroadcast(z, zy, ty, zx, tx VecPhysical) {
	hmaxUD(z, zy, ty, zx, tx)
	VPBROADCASTD(zx, z)
}

// blockTiles emits the fused cast of tiles side by side along a band:
// each tile rows × 16·strips values (rows ld bytes apart, codes ldd
// apart), the next tile ts bytes on in src and tds bytes on in dst (the
// next along the row, or the one below), one scale per tile. A 1×128
// row block is a tile of one row and 8 strips; a 128×128 tile one of
// 128 rows. Tiles go in groups of up to group (≤ 16): the
// group's amaxes, then their scales as one vector (so that small tiles
// do not each wait for a division chain), then the group's codes. res[0]
// is the number of tiles cast (it stops before a group holding a NaN),
// res[1] the largest amax bits among them.
func blockTiles(f blockFormat) {
	name := "blockTiles" + f.suffix + "AVX512"
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, inv *float32, tiles int, rows int, strips int, ld int, ldd int, ts int, tds int, group int, eps float32, mask uint32, res *[2]uint32)")
	Pragma("noescape")
	Doc(name + " casts tiles of rows × 16·strips values to " + f.suffix + ", each with the scale of its own amax, and stores each scale_inv; its Go twin is blockTilesGo (fp8cast.go) (AVX-512F, BMI2).")
	local := AllocLocal(128) // the group's amaxes, then its scales
	zTot := Z13
	dst, src, inv, n, b := blockPrologue(f, "tiles", 88, zTot)
	bail, top, done := name+"_bail", name+"_group", name+"_end"
	Label(top)
	TESTQ(n, n)
	JZ(LabelRef(done))
	g := GP64()
	MOVQ(NewParamAddr("group", 80), g)
	CMPQ(n, g)
	CMOVQLT(n, g) // g = min(group, n)
	VPXORD(Z7, Z7, Z7)
	VMOVDQU32(Z7, local)
	// Phase A: each tile's amax into its slot.
	{
		t, sp, slot := GP64(), GP64(), GP64()
		MOVQ(g, t)
		MOVQ(src, sp)
		LEAQ(local, slot)
		loop(name+"_amaxtile", t, func() {
			VPXORD(Z6, Z6, Z6)
			tileRows(name+"_amax", sp, nil, func(q, _ Register) {
				VPANDD(Mem{Base: q}, b.abs, Z7)
				VPMAXUD(Z7, Z6, Z6)
			})
			hmaxBroadcast(Z6, Y6, Y7, X6, X7)
			VMOVSS(X6, Mem{Base: slot})
			ADDQ(U32(4), slot)
			ADDQ(NewParamAddr("ts", 64), sp)
		})
	}
	// Phase B: the group's scales.
	VMOVDQU32(local, Z6)
	VPCMPUD(U8(6), b.inf, Z6, K1) // a NaN in a tile
	KORTESTW(K1, K1)
	JNZ(LabelRef(bail))
	VPMAXUD(Z6, zTot, zTot)
	b.scales(Z6, Z8, Z9)
	{
		ones, m := GP32(), GP32()
		MOVL(U32(0xFFFF), ones)
		BZHIL(g.As32(), ones, m)
		KMOVW(m, K3)
	}
	VMOVUPS(Z9, K3, Mem{Base: inv})
	VMOVUPS(Z8, local.Offset(64))
	// Phase C: each tile's codes.
	{
		t, slot := GP64(), GP64()
		MOVQ(g, t)
		LEAQ(local.Offset(64), slot)
		loop(name+"_casttile", t, func() {
			VBROADCASTSS(Mem{Base: slot}, Z10)
			ADDQ(U32(4), slot)
			tileRows(name+"_cast", src, dst, func(q, e Register) {
				b.cast16(Mem{Base: q}, Mem{Base: e}, Z10)
			})
			ADDQ(NewParamAddr("tds", 72), dst)
			ADDQ(NewParamAddr("ts", 64), src)
		})
	}
	LEAQ(Mem{Base: inv, Index: g, Scale: 4}, inv)
	SUBQ(g, n)
	JMP(LabelRef(top))
	Label(done)
	Label(bail)
	blockResult(n, zTot, NewParamAddr("tiles", 24), NewParamAddr("res", 96))
}

// blockPrologue loads a fused block kernel's dst, src and inv pointers
// and its count (the parameter named count), broadcasts its constants
// (eps at byte offset epsOff) and zeroes the running amax zTot.
func blockPrologue(f blockFormat, count string, epsOff int, zTot VecPhysical) (dst, src, inv, n Register, b blockRegs) {
	dst = Load(Param("dst"), GP64())
	src = Load(Param("src"), GP64())
	inv = Load(Param("inv"), GP64())
	n = Load(Param(count), GP64())
	b = newBlockRegs(f, epsOff)
	VPXORD(zTot, zTot, zTot)
	return dst, src, inv, n, b
}

// tileRows emits a walk over one tile of blockTiles or blockTilesSeq
// (whose rows, strips, ld and ldd parameters sit at the same offsets):
// body gets the address of each 16 values (q) and, when d0 is not nil,
// of their 16 codes (e), row by row from p0 and d0.
func tileRows(label string, p0, d0 Register, body func(q, e Register)) {
	p, k := GP64(), GP64()
	MOVQ(p0, p)
	var d Register
	if d0 != nil {
		d = GP64()
		MOVQ(d0, d)
	}
	MOVQ(NewParamAddr("rows", 32), k)
	loop(label, k, func() {
		q, j := GP64(), GP64()
		MOVQ(p, q)
		var e Register
		if d0 != nil {
			e = GP64()
			MOVQ(d, e)
		}
		MOVQ(NewParamAddr("strips", 40), j)
		loop(label+"row", j, func() {
			body(q, e)
			ADDQ(U32(64), q)
			if d0 != nil {
				ADDQ(U32(16), e)
			}
		})
		ADDQ(NewParamAddr("ld", 48), p)
		if d0 != nil {
			ADDQ(NewParamAddr("ldd", 56), d)
		}
	})
}

// blockResult stores the count done (total − n left) and zTot's
// largest lane to res.
func blockResult(n Register, zTot VecPhysical, total, resAddr Mem) {
	t, r := GP64(), GP64()
	MOVQ(total, t)
	SUBQ(n, t)
	MOVQ(resAddr, r)
	MOVL(t.As32(), Mem{Base: r})
	hmaxBroadcast(zTot, Y13, Y7, X13, X7)
	VMOVSS(X13, Mem{Base: r, Disp: 4})
	VZEROUPPER()
	RET()
}

// blockCols emits the fused column-wise cast of a band: strips of 16
// columns of rows values each (rows ld bytes apart, codes ldd apart),
// one scale per column (Float8BlockScaling's 1-D blocks down a column),
// the 16 scale_invs of a strip stored together. res as blockTiles.
func blockCols(f blockFormat) {
	name := "blockCols" + f.suffix + "AVX512"
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, inv *float32, strips int, rows int, ld int, ldd int, eps float32, mask uint32, res *[2]uint32)")
	Pragma("noescape")
	Doc(name + " casts a band of rows × 16·strips values to " + f.suffix + ", each column with the scale of its own amax, and stores each scale_inv; its Go twin is blockColsGo (fp8cast.go) (AVX-512F).")
	zTot := Z13
	dst, src, inv, n, b := blockPrologue(f, "strips", 56, zTot)
	bail := name + "_bail"
	// The first strip's column amaxes; each later strip's are folded
	// into the cast of the one before it (its row r read beside row r
	// of the strip being cast), so that no amax pass waits on its own.
	{
		p, k := GP64(), GP64()
		MOVQ(src, p)
		MOVQ(NewParamAddr("rows", 32), k)
		VPXORD(Z6, Z6, Z6)
		TESTQ(n, n)
		JZ(LabelRef(bail))
		loop(name+"_amax", k, func() {
			VPANDD(Mem{Base: p}, b.abs, Z7)
			VPMAXUD(Z7, Z6, Z6)
			PREFETCHT0(Mem{Base: p, Disp: 64}) // the next strip
			ADDQ(NewParamAddr("ld", 40), p)
		})
	}
	loop(name, n, func() {
		VPCMPUD(U8(6), b.inf, Z6, K1) // a NaN in a column
		KORTESTW(K1, K1)
		JNZ(LabelRef(bail))
		VPMAXUD(Z6, zTot, zTot)
		b.scales(Z6, Z8, Z9)
		VMOVUPS(Z9, Mem{Base: inv})
		ADDQ(U32(64), inv)
		p, d, k := GP64(), GP64(), GP64()
		MOVQ(src, p)
		MOVQ(dst, d)
		MOVQ(NewParamAddr("rows", 32), k)
		VPXORD(Z6, Z6, Z6)
		CMPQ(n, U8(1))
		JE(LabelRef(name + "_last"))
		loop(name+"_castnext", k, func() {
			b.cast16(Mem{Base: p}, Mem{Base: d}, Z8)
			VPANDD(Mem{Base: p, Disp: 64}, b.abs, Z7)
			VPMAXUD(Z7, Z6, Z6)
			// The strip after next: its rows are a stride apart, often
			// a page or more, where the hardware does not prefetch.
			PREFETCHT0(Mem{Base: p, Disp: 128})
			ADDQ(NewParamAddr("ld", 40), p)
			ADDQ(NewParamAddr("ldd", 48), d)
		})
		JMP(LabelRef(name + "_next"))
		Label(name + "_last")
		loop(name+"_cast", k, func() {
			b.cast16(Mem{Base: p}, Mem{Base: d}, Z8)
			ADDQ(NewParamAddr("ld", 40), p)
			ADDQ(NewParamAddr("ldd", 48), d)
		})
		Label(name + "_next")
		ADDQ(U32(64), src)
		ADDQ(U32(16), dst)
	})
	Label(bail)
	blockResult(n, zTot, NewParamAddr("strips", 24), NewParamAddr("res", 64))
}

// blockTilesSeq emits blockTiles for large tiles taken one at a time
// (group 1), each tile's amax folded into the cast of the tile before
// it (its row r read beside row r of the tile being cast), so that no
// amax pass waits on its own, and the tile after that prefetched. Same
// parameters and results as blockTiles, without group.
func blockTilesSeq(f blockFormat) {
	name := "blockTilesSeq" + f.suffix + "AVX512"
	TEXT(name, NOSPLIT, "func(dst *uint8, src *float32, inv *float32, tiles int, rows int, strips int, ld int, ldd int, ts int, tds int, eps float32, mask uint32, res *[2]uint32)")
	Pragma("noescape")
	Doc(name + " casts tiles of rows × 16·strips values to " + f.suffix + " one by one, each with the scale of its own amax, and stores each scale_inv; its Go twin is blockTilesGo (fp8cast.go) (AVX-512F).")
	zTot := Z13
	dst, src, inv, n, b := blockPrologue(f, "tiles", 80, zTot)
	tsR := Load(Param("ts"), GP64())
	bail := name + "_bail"
	// The first tile's amax.
	VPXORD(Z6, Z6, Z6)
	TESTQ(n, n)
	JZ(LabelRef(bail))
	tileRows(name+"_amax", src, nil, func(q, _ Register) {
		VPANDD(Mem{Base: q}, b.abs, Z7)
		VPMAXUD(Z7, Z6, Z6)
	})
	loop(name, n, func() {
		hmaxBroadcast(Z6, Y6, Y7, X6, X7)
		VPCMPUD(U8(6), b.inf, Z6, K1) // a NaN in the tile
		KORTESTW(K1, K1)
		JNZ(LabelRef(bail))
		VPMAXUD(Z6, zTot, zTot)
		b.scales(Z6, Z8, Z9)
		VMOVSS(X9, Mem{Base: inv})
		ADDQ(U32(4), inv)
		VPXORD(Z6, Z6, Z6)
		for _, next := range []bool{true, false} {
			lbl := name + "_cast"
			if next {
				lbl = name + "_castnext"
				CMPQ(n, U8(1))
				JE(LabelRef(name + "_last"))
			} else {
				Label(name + "_last")
			}
			tileRows(lbl, src, dst, func(q, e Register) {
				b.cast16(Mem{Base: q}, Mem{Base: e}, Z8)
				if next {
					VPANDD(Mem{Base: q, Index: tsR, Scale: 1}, b.abs, Z7)
					VPMAXUD(Z7, Z6, Z6)
					// The tile after next: its rows are a stride apart,
					// each in a page of its own, where the hardware does
					// not prefetch ahead.
					PREFETCHT0(Mem{Base: q, Index: tsR, Scale: 2})
				}
			})
			if next {
				JMP(LabelRef(name + "_next"))
			}
		}
		Label(name + "_next")
		ADDQ(tsR, src)
		ADDQ(NewParamAddr("tds", 72), dst)
	})
	Label(bail)
	blockResult(n, zTot, NewParamAddr("tiles", 24), NewParamAddr("res", 88))
}
