package kernels

// Operand is a GEMM input as stored: float32 values, or FP8 codes that
// the packing routines decode to float32 on the fly (so an FP8 GEMM reads
// one byte per element and runs the same micro-kernel as float32).
//
// A code c of the element at (i, p) of op(X) — i the row of op(A) or the
// column of op(B), p the position along k — decodes to
// Table[c]·Outer[i]·Block[i·Blocks + p/32], each factor present only when
// its slice is set. A tensorwise scale is folded into Table by the caller.
type Operand struct {
	F32 []float32
	// E2M1, when set, holds NVFP4 codes (RunBF16 only), decoded to bf16
	// as the packs read them: rows of E2M1Cols elements (the stored
	// operand's row stride), ⌈E2M1Cols/2⌉ bytes each, two codes a byte
	// with the even element in the low nibble. Element (r, c) is its
	// code's value times E2M1Factors[f·⌈E2M1Cols/16⌉ + c/16] — f = r, or
	// r/16 with E2M1Tiles (16×16 tiles) — each product exactly a bf16
	// value (an E2M1 value times an E4M3 block scale).
	E2M1        []uint8
	E2M1Factors []float32
	E2M1Cols    int
	E2M1Tiles   bool
	Codes       []uint8
	Table       *[256]float32
	// Cast and Scale, when Cast is set, describe Table (Table[c] =
	// Cast.Decode[c]·Scale) so that runs of codes can be decoded with the
	// vector kernel instead of table lookups.
	Cast  *FP8Cast
	Scale float32
	// Outer holds one factor per row of op(A) or column of op(B).
	Outer []float32
	// Block holds one factor per 32 values along k for each row of op(A)
	// or column of op(B); Blocks is the number of blocks per row (⌈k/32⌉).
	Block  []float32
	Blocks int
	// Exp, when set, holds power-of-two factors of FP8 codes as exponent
	// shifts (each ≤ 0, keeping the values normal): element (i, p) of
	// op(X) is Table[c]·2^Exp[i·ExpBlocks + p/run], run being ExpRun,
	// or ExpBlock (Float8BlockScaling's 128) when ExpRun is 0. Only
	// RunBF16 reads them, with a bf16 kernel (HasBF16): they are applied
	// to the converted bf16 values, exactly, on its direct and blocked
	// paths.
	Exp       []int8
	ExpBlocks int
	// ExpRun is the number of values along k that share an Exp entry:
	// 0 for ExpBlock, or an even divisor of ExpBlock (MXFP8's 32).
	ExpRun int
	// bf16Tab holds the bf16 bits of Table[0:128], set by RunBF16 on its
	// own copy of the operand when the table allows the vector packs
	// (every value a bf16 value, Table[c|0x80] = −Table[c]).
	bf16Tab *[128]uint16
}

// expRun returns the number of values along k that share an Exp entry.
func (o *Operand) expRun() int {
	if o.ExpRun == 0 {
		return ExpBlock
	}
	return o.ExpRun
}

// isFP8 reports whether the operand holds FP8 codes.
func (o *Operand) isFP8() bool { return o.Codes != nil }

// factor returns the scale of element (i, p) of op(X).
func (o *Operand) factor(i, p int) float32 {
	f := float32(1)
	if o.Outer != nil {
		f = o.Outer[i]
	}
	if o.Block != nil {
		f *= o.Block[i*o.Blocks+p/32]
	}
	return f
}

// decodeRun decodes kb codes read at src[0], src[step], … (the values
// (i, pc) … (i, pc+kb−1) of op(X)) into dst[0], dst[stride], …, applying
// the element's factors, which are constant over runs of 32 along k.
func (o *Operand) decodeRun(dst []float32, stride int, src []uint8, step, i, pc, kb int) {
	t := o.Table
	if o.Block == nil {
		f := float32(1)
		if o.Outer != nil {
			f = o.Outer[i]
		}
		if f == 1 {
			for p := 0; p < kb; p++ {
				dst[p*stride] = t[src[p*step]]
			}
			return
		}
		for p := 0; p < kb; p++ {
			dst[p*stride] = t[src[p*step]] * f
		}
		return
	}
	for p0 := 0; p0 < kb; {
		end := min(kb, p0+32-(pc+p0)%32)
		f := o.factor(i, pc+p0)
		for p := p0; p < end; p++ {
			dst[p*stride] = t[src[p*step]] * f
		}
		p0 = end
	}
}

// packA8 is packA for FP8 codes: it decodes op(A)[ic:ic+mb, pc:pc+kb]
// into mr-row slivers.
func packA8(dst []float32, mr int, trans bool, a *Operand, lda, ic, pc, mb, kb int) {
	for s := 0; s < mb; s += mr {
		d := dst[s*kb : s*kb+mr*kb]
		rows := min(mr, mb-s)
		for r := 0; r < mr; r++ {
			if r >= rows {
				for p := 0; p < kb; p++ {
					d[p*mr+r] = 0
				}
				continue
			}
			i := ic + s + r
			if !trans {
				a.decodeRun(d[r:], mr, a.Codes[i*lda+pc:], 1, i, pc, kb)
			} else {
				a.decodeRun(d[r:], mr, a.Codes[pc*lda+i:], lda, i, pc, kb)
			}
		}
	}
}

// packB8 is packB for FP8 codes: it decodes op(B)[pc:pc+kb, jc:jc+nb]
// into nr-column slivers.
func packB8(dst []float32, nr int, trans bool, b *Operand, ldb, pc, jc, kb, nb int) {
	t := b.Table
	for s := 0; s < nb; s += nr {
		d := dst[s*kb : s*kb+nr*kb]
		cols := min(nr, nb-s)
		if !trans && cols == nr && b.Block == nil {
			// Rows of B are contiguous: decode nr codes per step of k.
			for p := 0; p < kb; p++ {
				o := (pc+p)*ldb + jc + s
				src, dp := b.Codes[o:o+nr], d[p*nr:p*nr+nr]
				if b.Outer == nil && b.Cast != nil {
					DecodeFP8(b.Cast, dp, src, b.Scale)
				} else if b.Outer == nil {
					for c, q := range src {
						dp[c] = t[q]
					}
				} else {
					f := b.Outer[jc+s : jc+s+nr]
					for c, q := range src {
						dp[c] = t[q] * f[c]
					}
				}
			}
			continue
		}
		for cc := 0; cc < nr; cc++ {
			if cc >= cols {
				for p := 0; p < kb; p++ {
					d[p*nr+cc] = 0
				}
				continue
			}
			j := jc + s + cc
			if trans {
				b.decodeRun(d[cc:], nr, b.Codes[j*ldb+pc:], 1, j, pc, kb)
			} else {
				b.decodeRun(d[cc:], nr, b.Codes[pc*ldb+j:], ldb, j, pc, kb)
			}
		}
	}
}
