package main

import (
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The kernels of NVFP4's cast (Transformer Engine's NVFP4BlockScaling):
// the random Hadamard transform, the amax of each block of 16, the
// blocks' E4M3 scales and element scales, and the E2M1 cast of each
// block with its scale, nearest even or stochastic, written two codes a
// byte.

// rht16Data defines the random Hadamard transform's constants: the 16
// columns of the Hadamard matrix, column k holding (−1)^popcount(j&k)
// for lanes j as float32 ±1, then the sign vector s as sign-bit masks.
func rht16Data() {
	rhtMem = GLOBL("rht16Consts", RODATA|NOPTR)
	for k := 0; k < 16; k++ {
		for j := 0; j < 16; j++ {
			v := float32(1)
			if popcount4(j&k)%2 == 1 {
				v = -1
			}
			DATA(64*k+4*j, U32(math.Float32bits(v)))
		}
	}
	for k := 0; k < 16; k++ {
		var m uint32
		if 0xD7E8>>k&1 != 0 {
			m = 0x80000000
		}
		DATA(64*16+4*k, U32(m))
	}
}

var rhtMem Mem

func popcount4(v int) int { return v&1 + v>>1&1 + v>>2&1 + v>>3&1 }

// rhtPrefixSums emits the transform's sums y_j = Σ_k ±v_k after +0 + v_0
// is in acc(0): term k (term(k), a register or memory) added to or
// subtracted from the partial sums in k order, the patterns sharing
// their prefixes (see nvfp4Cols): after terms 0…k, pattern p's partial
// sum is in acc(p) for p below the power of two above k.
func rhtPrefixSums(acc func(int) VecPhysical, term func(int) Op) {
	addTerm := func(dst, src VecPhysical, p, k int) {
		if popcount4(p&k)%2 == 1 {
			VSUBPS(term(k), src, dst)
		} else {
			VADDPS(term(k), src, dst)
		}
	}
	d := 1
	for k := 1; k < 16; k++ {
		if k == d { // the patterns double: new ones first
			for p := d; p < 2*d; p++ {
				addTerm(acc(p), acc(p-d), p, k)
			}
			for p := 0; p < d; p++ {
				addTerm(acc(p), acc(p), p, k)
			}
			d *= 2
			continue
		}
		for p := 0; p < d; p++ {
			addTerm(acc(p), acc(p), p, k)
		}
	}
}

// rhtGroups is how many groups of 16 the transform's main loop
// interleaves: each group's sum is a chain of 16 dependent additions, so
// one group at a time waits on the adder's latency.
const rhtGroups = 8

// rht16 emits Transformer Engine's 16-point random Hadamard transform in
// place over 16·groups values: each group rounded to bf16 (nearest even,
// NaN kept), signed by s, then y_j = Σ_k H[j][k]·v_k accumulated in k
// order (an FMA with ±1 is the exact add or subtract, one rounding as
// the sequential sum), times 0.25, rounded to bf16. Eight groups run
// side by side, then the rest one at a time; each group's arithmetic is
// the same either way.
func rht16() {
	TEXT("rht16AVX512", NOSPLIT, "func(x *float32, groups int)")
	Pragma("noescape")
	Doc("rht16AVX512 applies the 16-point random Hadamard transform to 16·groups values in place; its Go twin is rht16Go (fp8cast.go) (AVX-512F).")
	x := Load(Param("x"), GP64())
	n := Load(Param("groups"), GP64())
	tab := GP64()
	LEAQ(rhtMem, tab)
	local := AllocLocal(64 * rhtGroups)
	zAbs, zInf, zRound, zOne, zMask, zQuarter, zSigns := Z20, Z21, Z22, Z23, Z24, Z25, Z26
	bcast(0x7FFFFFFF, zAbs)
	bcast(0x7F800000, zInf)
	bcast(0x7FFF, zRound)
	bcast(1, zOne)
	bcast(0xFFFF0000, zMask)
	bcast(math.Float32bits(0.25), zQuarter)
	VMOVDQU32(Mem{Base: tab, Disp: 64 * 16}, zSigns)
	// toBF16 rounds z to bf16 in place (NaN lanes kept), with t scratch.
	toBF16 := func(z, t VecPhysical) {
		VPSRLD(U8(16), z, t)
		VPANDD(zOne, t, t)
		VPADDD(zRound, t, t)
		VPADDD(z, t, t)
		VPANDD(zMask, t, t)
		VPANDD(zAbs, z, Z31)
		VPCMPUD(U8(6), zInf, Z31, K1) // K1: NaN
		VPBLENDMD(z, t, K1, z)
	}
	// body transforms g groups at x: their signed bf16 inputs go to the
	// frame, whose lanes the FMAs broadcast.
	body := func(g int) {
		h, t := Z16, Z17
		for i := 0; i < g; i++ {
			v := zmm(i)
			VMOVUPS(Mem{Base: x, Disp: 64 * i}, v)
			toBF16(v, t)
			VPXORD(zSigns, v, v)
			VMOVUPS(v, local.Offset(64*i))
			VPXORD(v, v, v)
		}
		for k := 0; k < 16; k++ {
			VMOVUPS(Mem{Base: tab, Disp: 64 * k}, h)
			for i := 0; i < g; i++ {
				VFMADD231PS_BCST(local.Offset(64*i+4*k), h, zmm(i))
			}
		}
		for i := 0; i < g; i++ {
			v := zmm(i)
			VMULPS(zQuarter, v, v)
			toBF16(v, t)
			VMOVUPS(v, Mem{Base: x, Disp: 64 * i})
		}
		ADDQ(U32(64*g), x)
	}
	wide := GP64()
	MOVQ(n, wide)
	SHRQ(U8(3), wide)
	ANDQ(U32(rhtGroups-1), n)
	loop("rht16x8", wide, func() { body(rhtGroups) })
	loop("rht16", n, func() { body(1) })
	VZEROUPPER()
	RET()
}

// amax16Data defines the permute that puts amax16's sixteen reduced
// maxima in block order: block j = 4t+L sits in dword 4L+t.
func amax16Data() {
	amax16Mem = GLOBL("amax16Perm", RODATA|NOPTR)
	for j := 0; j < 16; j++ {
		t, l := j/4, j%4
		DATA(4*j, U32(uint32(4*l+t)))
	}
}

var amax16Mem Mem

// amax16 emits the max |x| bits of each block of 16 values (an NVFP4
// block) over 16·blocks values, a NaN counting as 0 (fmaxf's rule).
func amax16() {
	TEXT("amax16AVX512", NOSPLIT, "func(src *float32, blocks int, out *uint32)")
	Pragma("noescape")
	Doc("amax16AVX512 stores the max |x| bits of each block of 16 values, NaN left out; its Go twin is amax16Go (fp8cast.go) (AVX-512F).")
	src := Load(Param("src"), GP64())
	n := Load(Param("blocks"), GP64())
	out := Load(Param("out"), GP64())
	zAbs, zInf, zIdx := Z20, Z21, Z26
	bcast(0x7FFFFFFF, zAbs)
	bcast(0x7F800000, zInf)
	// Sixteen blocks at a time: their |x| (NaN lanes zeroed), then the
	// sixteen horizontal maxima as one transposing reduction — halves of
	// register pairs, then quarters, pairs of lanes and lanes — whose
	// result (block 4t+L in dword 4L+t) one permute puts in order.
	{
		t := GP64()
		LEAQ(amax16Mem, t)
		VMOVDQU32(Mem{Base: t}, zIdx)
	}
	g := GP64()
	MOVQ(n, g)
	SHRQ(U8(4), g)
	ANDQ(U8(15), n)
	loop("amax16x16", g, func() {
		v := make([]VecPhysical, 16)
		for i := range v {
			v[i] = zmm(i)
			VPANDD(Mem{Base: src, Disp: 64 * i}, zAbs, v[i])
			VPCMPUD(U8(6), zInf, v[i], K1) // K1: NaN
			VPXORD(v[i], v[i], K1, v[i])
		}
		lo, hi := Z27, Z28
		w := []VecPhysical{Z16, Z17, Z18, Z19, Z22, Z23, Z24, Z25}
		for i := range w {
			VSHUFI64X2(U8(0x44), v[2*i+1], v[2*i], lo)
			VSHUFI64X2(U8(0xEE), v[2*i+1], v[2*i], hi)
			VPMAXUD(hi, lo, w[i])
		}
		x := v[:4]
		for k := range x {
			VSHUFI64X2(U8(0x88), w[2*k+1], w[2*k], lo)
			VSHUFI64X2(U8(0xDD), w[2*k+1], w[2*k], hi)
			VPMAXUD(hi, lo, x[k])
		}
		y := v[4:6]
		for m := range y {
			VPUNPCKLQDQ(x[2*m+1], x[2*m], lo)
			VPUNPCKHQDQ(x[2*m+1], x[2*m], hi)
			VPMAXUD(hi, lo, y[m])
		}
		VSHUFPS(U8(0x88), y[1], y[0], lo)
		VSHUFPS(U8(0xDD), y[1], y[0], hi)
		VPMAXUD(hi, lo, lo)
		VPERMD(lo, zIdx, lo)
		VMOVDQU32(lo, Mem{Base: out})
		ADDQ(U32(1024), src)
		ADDQ(U32(64), out)
	})
	loop("amax16", n, func() {
		VPANDD(Mem{Base: src}, zAbs, Z0)
		VPCMPUD(U8(6), zInf, Z0, K1) // K1: NaN
		VPXORD(Z0, Z0, K1, Z0)
		storeMaxUD(Mem{Base: out})
		ADDQ(U32(64), src)
		ADDQ(U32(4), out)
	})
	VZEROUPPER()
	RET()
}

// nvfp4Scales emits the scales of 16·groups NVFP4 blocks from their
// amaxes (float32 bits, sign clear, no NaN): sf = E4M3(min(amax·m,
// FLT_MAX)) — saturating, nearest even, quantizeE4M3AVX512's rounding —
// stored a byte each, and the element scale es = min(1/(decode(sf)·sdec),
// FLT_MAX) (1/0 is +inf, so a zero sf gives FLT_MAX).
func nvfp4Scales() {
	TEXT("nvfp4ScalesAVX512", NOSPLIT, "func(amax *uint32, sf *uint8, es *float32, groups int, m float32, sdec float32)")
	Pragma("noescape")
	Doc("nvfp4ScalesAVX512 computes the E4M3 block scales and element scales of 16·groups NVFP4 blocks from their amaxes; its Go twin is nvfp4ScalesGo (fp8cast.go) (AVX-512F).")
	am := Load(Param("amax"), GP64())
	sf := Load(Param("sf"), GP64())
	es := Load(Param("es"), GP64())
	n := Load(Param("groups"), GP64())
	zM, zSdec, zFltMax, zOne, zSubScale, zRebias, zEight := Z16, Z17, Z18, Z19, Z20, Z21, Z28
	VBROADCASTSS(NewParamAddr("m", 32), zM)
	VBROADCASTSS(NewParamAddr("sdec", 36), zSdec)
	bcast(math.Float32bits(math.MaxFloat32), zFltMax)
	bcast(math.Float32bits(1), zOne)
	bcast(math.Float32bits(0x1p-9), zSubScale)
	bcast(120<<23, zRebias)
	bcast(8, zEight)
	r := newRoundRegs(20, 0x3C800000, 14, 120<<3, 0x7E, Z22, Z23, Z24, Z25, Z27, Z29)
	loop("nvfp4sc", n, func() {
		t, c, u, sub, d, q := Z0, Z1, Z2, Z3, Z4, Z5
		VMULPS(Mem{Base: am}, zM, t)
		VMINPS(zFltMax, t, t)
		r.round(t, c, u, sub)
		VPMOVDB(c, Mem{Base: sf})
		// decode(sf): (c<<20) + (120<<23) from code 8 up, c·2^−9 below.
		VPSLLD(U8(20), c, d)
		VPADDD(zRebias, d, d)
		VCVTDQ2PS(c, sub)
		VMULPS(zSubScale, sub, sub)
		VPCMPUD(U8(1), zEight, c, K2) // K2: c < 8, a subnormal
		VPBLENDMD(sub, d, K2, d)
		VMULPS(zSdec, d, d)
		VDIVPS(d, zOne, q)
		VMINPS(zFltMax, q, q)
		VMOVUPS(q, Mem{Base: es})
		ADDQ(U32(64), am)
		ADDQ(U32(16), sf)
		ADDQ(U32(64), es)
	})
	VZEROUPPER()
	RET()
}

// e2m1Tables defines the stochastic rounding's lane offsets 0…15 of
// the byte counter.
func e2m1Tables() {
	e2m1Mem = GLOBL("e2m1Tables", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(uint32(i)))
	}
}

var e2m1Mem Mem

// e2m1Blocks emits NVFP4's element cast: each block of 16 values times
// its block's scale (es, one per block) to E2M1 codes, written two per
// byte (the even element in the low nibble).
//
// Nearest (stochastic false): quantizeFP8Go's rounding with E2M1's
// constants (22 = 23 − 1 mantissa bit; smallest normal 1.0; subnormals
// on the magic constant 2^22, whose ulp is 0.5; rebias 126 << 1),
// saturating at ±6, a NaN giving +6, the sign in bit 3.
//
// Stochastic: one draw fmix32(key ^ n·0x9E3779B1) (murmur3's finaliser)
// per stored byte, n = base + the byte's position; its low 16 bits u
// round the even element, its high 16 bits the odd one. A value is
// raised from the code at or below |v| when u·2^−16 is below the
// fraction of the gap |v| lies above it (integer arithmetic on its bits,
// below); saturating at ±6, a NaN giving +6, the sign in bit 3.
//
// With bf16 the source values are bf16 bits (16-bit lanes), each read as
// the float32 of its high half.
func e2m1Blocks(stochastic, bf16 bool) {
	name := "e2m1BlocksAVX512"
	sig := "func(dst *uint8, src *float32, es *float32, blocks int)"
	twin := "e2m1BlocksGo"
	if stochastic {
		name, sig, twin = "e2m1StochasticAVX512", "func(dst *uint8, src *float32, es *float32, blocks int, key uint32, base uint32)", "e2m1StochasticGo"
	}
	what := "values"
	if bf16 {
		name = strings.Replace(name, "AVX512", "BF16AVX512", 1)
		sig = strings.Replace(sig, "src *float32", "src *uint16", 1)
		twin += " (each block widened to float32)"
		what = "bf16 values"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " casts 16·blocks " + what + " times their block's scale to E2M1 codes, two per byte; its Go twin is " + twin + " (fp8cast.go) (AVX-512F).")
	// Bytes of source a block takes, and the load of block i's values
	// times the scale s into y.
	blockBytes := 64
	if bf16 {
		blockBytes = 32
	}
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	es := Load(Param("es"), GP64())
	n := Load(Param("blocks"), GP64())
	scaled := func(i int, s, y VecPhysical) {
		if !bf16 {
			VMULPS(Mem{Base: src, Disp: 64 * i}, s, y)
			return
		}
		VPMOVZXWD(Mem{Base: src, Disp: 32 * i}, y)
		VPSLLD(U8(16), y, y)
		VMULPS(y, s, y)
	}
	zAbs, zInf, zSeven, zSign8 := Z16, Z17, Z21, Z22
	bcast(0x7FFFFFFF, zAbs)
	bcast(0x7F800000, zInf)
	bcast(7, zSeven)
	bcast(8, zSign8)
	// store ORs the sign of v (bit 3) into the codes c where v is not a
	// NaN (a its magnitude; a NaN's code is 7 already, +6) and stores
	// the 16 codes at dst+8·i, two a byte: the codes pair up within
	// each quadword (the odd one shifted down to bits 4–7), whose low
	// bytes are stored.
	store := func(i int, v, a, c, t VecPhysical, k Op) {
		VPSRLD(U8(28), v, t)
		VPCMPUD(U8(2), zInf, a, k)            // k: not a NaN
		VPTERNLOGD(U8(0xF8), zSign8, t, k, c) // c |= t & 8 (the sign) there
		VPSRLQ(U8(28), c, t)
		VPORQ(t, c, c)
		VPMOVQB(c, Mem{Base: dst, Disp: 8 * i})
	}
	if !stochastic {
		r := newRoundRegs(22, 0x3F800000, 22, 126<<1, 7, Z23, Z24, Z25, Z26, Z28, Z29)
		// block casts the 16 values at src+64·i with the scale at es+4·i
		// and stores their 8 bytes at dst+8·i. The rounding saturates a
		// NaN to 7 (its magnitude bits are above +inf's), so only the
		// sign is left to store.
		block := func(i int, y, ya, t, sub, c, s VecPhysical, k Op) {
			VBROADCASTSS(Mem{Base: es, Disp: 4 * i}, s)
			scaled(i, s, y)
			VPANDD(zAbs, y, ya)
			r.round(ya, c, t, sub)
			store(i, y, ya, c, t, k)
		}
		pairs := GP64()
		MOVQ(n, pairs)
		SHRQ(U8(1), pairs)
		loop("e2m1rn", pairs, func() {
			block(0, Z0, Z1, Z2, Z3, Z4, Z5, K2)
			block(1, Z10, Z11, Z12, Z13, Z14, Z15, K3)
			ADDQ(U32(16), dst)
			ADDQ(U32(2*blockBytes), src)
			ADDQ(U32(8), es)
		})
		TESTQ(U32(1), n)
		JZ(LabelRef("e2m1rn_end"))
		block(0, Z0, Z1, Z2, Z3, Z4, Z5, K2)
		Label("e2m1rn_end")
		VZEROUPPER()
		RET()
		return
	}
	tab := GP64()
	LEAQ(e2m1Mem, tab)
	// zCtr holds n·0x9E3779B1 of each lane's byte counter n (lane l of
	// an iteration: base + 16·iteration + l): the product steps by
	// 16·0x9E3779B1 (mod 2^32) from one iteration to the next, an add
	// instead of a multiply.
	zOne, zRebias, zTwo23, zLow22, zM1, zM2, zKey, zCtr, zStep := Z18, Z19, Z20, Z23, Z24, Z25, Z26, Z27, Z28
	bcast(0x3F800000, zOne)
	bcast(0x3F000000, zRebias)
	bcast(0x4B000000, zTwo23) // 2^23
	bcast(0x3FFFFF, zLow22)
	bcast(0x85EBCA6B, zM1)
	bcast(0xC2B2AE35, zM2)
	bcast(uint32(16*0x9E3779B1&0xFFFFFFFF), zStep)
	kr, br := Load(Param("key"), GP32()), Load(Param("base"), GP32())
	VPBROADCASTD(kr, zKey)
	VPBROADCASTD(br, zCtr)
	VPADDD(Mem{Base: tab}, zCtr, zCtr)
	zPhi := Z29
	bcast(0x9E3779B1, zPhi)
	VPMULLD(zPhi, zCtr, zCtr)
	// draws hashes the sixteen byte counters of the next two blocks into
	// h (murmur3's finaliser) and steps the counters.
	draws := func(h, t VecPhysical) {
		VPXORD(zKey, zCtr, h)
		VPSRLD(U8(16), h, t)
		VPXORD(t, h, h)
		VPMULLD(zM1, h, h)
		VPSRLD(U8(13), h, t)
		VPXORD(t, h, h)
		VPMULLD(zM2, h, h)
		VPSRLD(U8(16), h, t)
		VPXORD(t, h, h)
		VPADDD(zStep, zCtr, zCtr)
	}
	// block rounds block i (its 16 values at src+blockBytes·i, its scale
	// at es+4·i) with the draws' 16-bit words in u (one a lane, shifted
	// up by 6 here) and stores its 8 bytes at dst+8·i. With t the value's
	// magnitude bits less 0x3F000000 from 1.0 up (the codes' step is then
	// 2^22 and code 2 is 1.0) and ceil(|v|·2^23) below 1 (step 2^22 again,
	// a step of 0.5), (t + 2^22 − 1 − u·2^6) >> 22 is the code at or
	// below |v| plus one exactly when the fraction of the gap above it,
	// times 2^22, exceeds u·2^6: up with probability the fraction, to
	// 2^−16. Codes above 7 (|v| ≥ 6, infinities, NaN) saturate to 7.
	block := func(i int, u, v, a, t, c, s VecPhysical) {
		VBROADCASTSS(Mem{Base: es, Disp: 4 * i}, s)
		scaled(i, s, v) // v = x·scale
		VPANDD(zAbs, v, a)
		VPSUBD(zRebias, a, t)
		VPCMPUD(U8(1), zOne, a, K1) // K1: |v| < 1
		VMULPS(zTwo23, a, K1, t)
		VCVTPS2DQ_RU_SAE(t, K1, t)
		VPSLLD(U8(6), u, u)
		VPADDD(zLow22, t, t)
		VPSUBD(u, t, t)
		VPSRLD(U8(22), t, c)
		VPMINUD(zSeven, c, c)
		store(i, v, a, c, t, K4)
	}
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(1), pairs)
	// Block 0 of a pair takes the draws' low 256 bits (bytes 0–7: word
	// 2k the even element of byte k, word 2k+1 the odd one), block 1
	// the high 256 bits.
	loop("e2m1sr", pairs, func() {
		draws(Z0, Z1)
		VEXTRACTI64X4(U8(1), Z0, Y1)
		VPMOVZXWD(Y0, Z2)
		VPMOVZXWD(Y1, Z3)
		block(0, Z2, Z4, Z5, Z6, Z7, Z8)
		block(1, Z3, Z10, Z11, Z12, Z13, Z14)
		ADDQ(U32(16), dst)
		ADDQ(U32(2*blockBytes), src)
		ADDQ(U32(8), es)
	})
	TESTQ(U32(1), n)
	JZ(LabelRef("e2m1sr_end"))
	draws(Z0, Z1)
	VPMOVZXWD(Y0, Z2)
	block(0, Z2, Z4, Z5, Z6, Z7, Z8)
	Label("e2m1sr_end")
	VZEROUPPER()
	RET()
}

// wordOutputs emits nvfp4Cols's output stage with cvt: the 16 sums acc(j)
// (times 0.25 already) as bf16 values, two rows a register, their
// column amaxes (NaN left out) into the frame's slot 16, and the 16×16
// transpose of the words stored a source column a stored row, dst's rows
// ds bytes apart, then a jump to the amax scatter. A group with a
// denormal sum falls through to the exact rounding that follows.
func wordOutputs(name string, acc func(int) VecPhysical, m VecPhysical, cm func(int) Mem, local Mem, dst, ds Register) {
	KXORW(K5, K5, K5)
	for j := 0; j < 16; j++ {
		VFPCLASSPSZ(U8(0x20), acc(j), K6) // K6: a denormal
		KORW(K6, K5, K5)
	}
	KORTESTW(K5, K5)
	JNZ(LabelRef(name + "_exact"))
	// Register 8+p: row 2p in words 0–15, row 2p+1 in words 16–31 (a
	// NaN made quiet, as the exact path does).
	p8 := func(p int) VecPhysical { return zmm(8 + p) }
	for p := 0; p < 8; p++ {
		vcvtne2ps2bf16(p8(p), acc(2*p+1), acc(2*p))
	}
	// Column amaxes over the 16 rows: the even rows' in words 0–15, the
	// odd rows' in 16–31, then folded; a NaN (above +inf's bits) left out.
	inf16 := Z27
	VPBROADCASTD(cm(colsInf16), inf16)
	VPXORD(m, m, m)
	for p := 0; p < 8; p++ {
		VPANDD_BCST(cm(colsAbs16), p8(p), Z26)
		VPCMPUW(U8(2), inf16, Z26, K4) // K4: |w| ≤ +inf
		VPMAXUW(Z26, m, K4, m)
	}
	VEXTRACTI64X4(U8(1), m, Y26)
	VPMAXUW(Y26, m.AsY(), m.AsY())
	VPMOVZXWD(m.AsY(), m)
	VPSLLD(U8(16), m, m)
	VMOVDQU32(m, local.Offset(64*16))
	// The transpose, three stages of VPERMI2W: Z8–Z15 → Z0–Z7 → Z8–Z15
	// → Z0–Z7 (see wordTransposeIndices).
	regs := [2]func(int) VecPhysical{func(i int) VecPhysical { return zmm(8 + i) }, func(i int) VecPhysical { return zmm(i) }}
	for s := 0; s < 3; s++ {
		in, out := regs[s%2], regs[(s+1)%2]
		bit := 1 << s
		for o := 0; o < 8; o++ {
			k := 2*s + o>>s&1
			VMOVDQU64(cm(colsPerm+64*k), out(o))
			VPERMI2W(in(o|bit), in(o&^bit), out(o))
		}
	}
	// Register q: column 2q (stored row 2q) in words 0–15, column 2q+1
	// in 16–31.
	d := GP64()
	MOVQ(dst, d)
	for l := 0; l < 16; l++ {
		q := zmm(l / 2)
		if l%2 == 0 {
			VMOVDQU(q.AsY(), Mem{Base: d})
		} else {
			VEXTRACTI64X4(U8(1), q, Mem{Base: d})
		}
		if l < 15 {
			ADDQ(ds, d)
		}
	}
	JMP(LabelRef(name + "_scatter"))
	Label(name + "_exact")
}

// nvfp4ColsData defines the constants of nvfp4Cols: single lanes to
// broadcast (offsets colsAbs…colsSign), then the lane indices 0…15.
func nvfp4ColsData() {
	colsMem = GLOBL("nvfp4ColsConsts", RODATA|NOPTR)
	for i, v := range []uint32{0x7FFFFFFF, 0x7F800000, 0x7FFF, 1, 0xFFFF0000, math.Float32bits(0.25), 0x80000000, 0x00400000} {
		DATA(4*i, U32(v))
	}
	for i := 0; i < 16; i++ {
		DATA(64+4*i, U32(uint32(i)))
	}
	DATA(colsAbs16, U32(0x7FFF7FFF))
	DATA(colsInf16, U32(0x7F807F80))
	// The word transpose's VPERMI2W indices, two a stage.
	for s, idx := range wordTransposeIndices() {
		for w, v := range idx {
			DATA(colsPerm+64*s+2*w, U16(v))
		}
	}
}

var colsMem Mem

// Offsets of nvfp4ColsConsts' single lanes.
const (
	colsAbs = 4 * iota
	colsInf
	colsRound
	colsOne
	colsMask
	colsQuarter
	colsSign
	colsQuiet
	colsIota  = 64
	colsAbs16 = 128 // 0x7FFF: a bf16 magnitude, two a lane
	colsInf16 = 132 // +inf's bf16 bits, two a lane
	colsPerm  = 192 // wordTransposeIndices, 64 bytes each
)

// wordTransposeIndices returns the VPERMI2W indices of a 16×16
// transpose of 16-bit values held two rows a register (register p: row
// 2p in words 0–15, row 2p+1 in words 16–31) into two columns a
// register (register q: column 2q in words 0–15, column 2q+1 in 16–31).
// Write an element's row r and column c in bits: the registers start
// as r3 r2 r1 (the register's bits) over r0 c3 c2 c1 c0 (the word's),
// and each of three stages swaps one register bit for a word bit
// between two registers — r1 for c1, r2 for c2, r3 for c3 — each output
// register a VPERMI2W of the pair that differs in that bit; the last
// stage also orders the words c0 r3 r2 r1 r0. A stage's two indices
// serve the pair's outputs whose new bit is 0 and 1.
func wordTransposeIndices() [6][32]uint16 {
	// layout[s] maps (register, word) to (r, c) after stage s.
	layout := [4]func(reg, w int) (r, c int){
		func(reg, w int) (int, int) { return 2*reg | w>>4, w & 15 },
		func(reg, w int) (int, int) {
			return reg&6<<1 | w&2 | w>>4, w&12 | reg&1<<1 | w&1
		},
		func(reg, w int) (int, int) {
			return reg&4<<1 | w&6 | w>>4, w&8 | reg&3<<1 | w&1
		},
		func(reg, w int) (int, int) { return w & 15, 2*reg | w>>4 },
	}
	var out [6][32]uint16
	var seen [6]bool
	for s := 1; s <= 3; s++ {
		bit := 1 << (s - 1)
		for reg := 0; reg < 8; reg++ {
			var idx [32]uint16
			for w := 0; w < 32; w++ {
				r, c := layout[s](reg, w)
				found := false
				for _, t := range []int{0, 1} {
					src := reg&^bit | t*bit
					for v := 0; v < 32; v++ {
						if rr, cc := layout[s-1](src, v); rr == r && cc == c {
							idx[w], found = uint16(t<<5|v), true
						}
					}
				}
				if !found {
					panic("wordTransposeIndices: an element is lost")
				}
			}
			k := 2*(s-1) + reg>>(s-1)&1
			if !seen[k] {
				out[k], seen[k] = idx, true
			} else if out[k] != idx {
				panic("wordTransposeIndices: outputs disagree")
			}
		}
	}
	return out
}

// nvfp4Cols emits the first pass of a column-wise NVFP4 cast over a
// strip of 16 source columns: for each group of 16 source rows, the
// 16×16 values (lanes the columns), with rht Transformer Engine's random
// Hadamard transform along the rows — each value rounded to bf16 (NaN
// kept) and signed by s_k, y_j = Σ_k ±v_k added in k order from +0 in
// float32 (rht16Go's arithmetic, lane by lane), times 0.25, rounded to
// bf16 — are stored transposed (stored row l = source column l), and
// each lane's amax over the group (NaN left out: amax16's rule) is
// scattered to its stored row's block amax. It replaces a transpose, the
// transform and the block amaxes: three passes over the tensor in one.
// The transformed values are bf16 values, so rht stores their bf16 bits
// (a NaN made quiet first, so that it stays one): half the bytes, for
// the cast's pass to read back.
//
// With cvt (rht only; AVX512_BF16) the outputs round with VCVTNE2PS2BF16,
// two registers into one, and the transpose moves 16-bit values: a
// third of the instructions. That conversion flushes a denormal to zero,
// so a group with a denormal output takes the exact rounding instead.
func nvfp4Cols(rht, cvt bool) {
	name, twin := "nvfp4ColsAVX512", "Transpose and Amax16"
	if rht {
		name, twin = "nvfp4ColsRHTAVX512", "nvfp4ColsRHTGo"
	}
	if cvt {
		name = "nvfp4ColsRHTBF16AVX512"
	}
	// Not NOSPLIT: the frame (1,152 bytes) is over the limit.
	dstType := "*float32"
	if rht {
		dstType = "*uint16"
	}
	TEXT(name, 0, "func(dst "+dstType+", src *float32, bam *uint32, groups int, srcStride int, dstStride int, nb int32)")
	Pragma("noescape")
	Doc(name + " writes 16 source columns of 16·groups rows transposed" + map[bool]string{true: ", randomly Hadamard-transformed along the rows (as bf16 bits, a NaN quiet),", false: ""}[rht] + " with the amax of each block of 16; its Go twin is " + twin + " (fp8cast.go) " + map[bool]string{false: "(AVX-512F).", true: "(AVX-512F, AVX512BW, AVX512_BF16)."}[cvt])
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	bam := Load(Param("bam"), GP64())
	n := Load(Param("groups"), GP64())
	ss := Load(Param("srcStride"), GP64())
	ds := Load(Param("dstStride"), GP64())
	c := GP64()
	LEAQ(colsMem, c)
	cm := func(off int) Mem { return Mem{Base: c, Disp: off} }
	// frame: 16 transposable vectors, the amaxes, the scatter indices.
	local := AllocLocal(64 * 18)
	nbr := Load(Param("nb"), GP32())
	VPBROADCASTD(nbr, Z0)
	VPMULLD(cm(colsIota), Z0, Z0)
	VMOVDQU32(Z0, local.Offset(64*17))
	// toBF16 rounds z to bf16 in place, NaN lanes kept (t scratch).
	toBF16 := func(z, t VecPhysical) {
		VPSRLD(U8(16), z, t)
		VPANDD_BCST(cm(colsOne), t, t)
		VPADDD(z, t, t)
		VPADDD_BCST(cm(colsRound), t, t)
		VFPCLASSPSZ(U8(0x81), z, K2) // K2: NaN (quiet or signalling)
		KNOTW(K2, K3)
		VPANDD_BCST(cm(colsMask), t, K3, z)
	}
	// amax folds |z| into m, NaN lanes left out (t scratch).
	m := Z25
	amax := func(z, t VecPhysical) {
		VPANDD_BCST(cm(colsAbs), z, t)
		VPCMPUD_BCST(U8(2), cm(colsInf), t, K4) // K4: |z| ≤ inf
		VPMAXUD(t, m, K4, m)
	}
	// With the transform the pass has work enough to hide a prefetch of
	// the group after next (32 rows on): rows a stride apart, each in a
	// page of its own, which the hardware does not fetch ahead. From
	// memory it measured 10-30% faster; the plain pass measured slower
	// from cache with it.
	var pfOff Register
	if rht {
		pfOff = GP64()
		MOVQ(ss, pfOff)
		SHLQ(U8(5), pfOff)
	}
	loop(name, n, func() {
		p := GP64()
		MOVQ(src, p)
		for k := 0; k < 16; k++ {
			VMOVUPS(Mem{Base: p}, zmm(k))
			if rht {
				PREFETCHT0(Mem{Base: p, Index: pfOff, Scale: 1})
			}
			if k < 15 {
				ADDQ(ss, p)
			}
		}
		VPXORD(m, m, m)
		if !rht {
			for k := 0; k < 16; k++ {
				amax(zmm(k), Z26)
			}
		} else {
			for k := 0; k < 16; k++ {
				toBF16(zmm(k), Z26)
				if 0xD7E8>>k&1 != 0 {
					VPXORD_BCST(cm(colsSign), zmm(k), zmm(k))
				}
			}
			// The sums share their prefixes: after terms 0…k, y_j's
			// partial sum depends only on j mod d (d the power of two
			// above k), so d partial sums are carried, not 16 — the
			// same additions in the same order, 171 of them instead
			// of 256. Pattern p's sum is in Z16+p, and p ≥ 8 in
			// Z(p−8), once v_0…v_7 are no longer needed.
			acc := func(p int) VecPhysical {
				if p < 8 {
					return zmm(16 + p)
				}
				return zmm(p - 8)
			}
			zero := Z24
			VPXORD(zero, zero, zero)
			VADDPS(Z0, zero, acc(0)) // +0 + v_0
			rhtPrefixSums(acc, func(k int) Op { return zmm(k) })
			if cvt {
				for j := 0; j < 16; j++ {
					VMULPS_BCST(cm(colsQuarter), acc(j), acc(j))
				}
				wordOutputs(name, acc, m, cm, local, dst, ds)
			}
			for j := 0; j < 16; j++ {
				if !cvt {
					VMULPS_BCST(cm(colsQuarter), acc(j), acc(j))
				}
				toBF16(acc(j), Z26)
				amax(acc(j), Z26)
				// A NaN quiet, so that its high half, stored, is one.
				VPORD_BCST(cm(colsQuiet), acc(j), K2, acc(j))
				VMOVUPS(acc(j), local.Offset(64*j))
			}
			for j := 0; j < 16; j++ {
				VMOVUPS(local.Offset(64*j), zmm(j))
			}
		}
		VMOVDQU32(m, local.Offset(64*16))
		out := transpose16Regs()
		d := GP64()
		MOVQ(dst, d)
		for l := 0; l < 16; l++ {
			if rht { // the high halves: bf16 bits
				VPSRLD(U8(16), out[l], out[l])
				VPMOVDW(out[l], Mem{Base: d})
			} else {
				VMOVUPS(out[l], Mem{Base: d})
			}
			if l < 15 {
				ADDQ(ds, d)
			}
		}
		if cvt {
			Label(name + "_scatter")
		}
		VMOVDQU32(local.Offset(64*16), Z0)
		VMOVDQU32(local.Offset(64*17), Z1)
		KXNORW(K1, K1, K1)
		VPSCATTERDD(Z0, K1, Mem{Base: bam, Index: Z1, Scale: 4})
		// Next group: 16 source rows down, 16 stored values along.
		MOVQ(ss, p)
		SHLQ(U8(4), p)
		ADDQ(p, src)
		if rht {
			ADDQ(U32(32), dst)
		} else {
			ADDQ(U32(64), dst)
		}
		ADDQ(U32(4), bam)
	})
	VZEROUPPER()
	RET()
}
