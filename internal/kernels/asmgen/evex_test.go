package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEVEXEncoding assembles every register combination of the two
// AVX512_BF16 instructions with GNU as and compares the machine code with
// the generator's encoder. It needs binutils (as, objcopy); CI installs
// them.
func TestEVEXEncoding(t *testing.T) {
	var src strings.Builder
	var want []byte
	for _, ins := range []struct {
		mnemonic string
		opcode   byte
		pp       byte
	}{{"vdpbf16ps", 0x52, ppF3}, {"vcvtne2ps2bf16", 0x72, ppF2}} {
		for dst := 0; dst < 32; dst++ {
			for s1 := 0; s1 < 32; s1++ {
				for s2 := 0; s2 < 32; s2++ {
					// AT&T order: src2, src1, dst.
					fmt.Fprintf(&src, "%s %%zmm%d, %%zmm%d, %%zmm%d\n", ins.mnemonic, s2, s1, dst)
					want = append(want, evex512(ins.opcode, ins.pp, dst, s1, s2)...)
				}
			}
		}
	}
	got := assemble(t, src.String())
	if !bytes.Equal(got, want) {
		for i := 0; i < min(len(got), len(want)); i += 6 {
			if !bytes.Equal(got[i:i+6], want[i:i+6]) {
				line := strings.Split(src.String(), "\n")[i/6]
				t.Fatalf("%s: as gives % x, encoder % x", line, got[i:i+6], want[i:i+6])
			}
		}
		t.Fatalf("as gave %d bytes, encoder %d", len(got), len(want))
	}
}

// TestAMXEncoding assembles the AMX instructions the generator emits,
// over the registers and displacements it may use, with GNU as and
// compares the machine code with the generator's encoder.
func TestAMXEncoding(t *testing.T) {
	gp := []string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
	var src strings.Builder
	var want []byte
	add := func(line string, code []byte) {
		src.WriteString(line + "\n")
		want = append(want, code...)
	}
	add("tilerelease", tilerelease())
	for base := 0; base < 16; base++ {
		// A displacement that needs 32 bits, so that as encodes it as
		// the generator always does.
		add(fmt.Sprintf("ldtilecfg 0x12345678(%%%s)", gp[base]), ldtilecfg(base, 0x12345678))
	}
	for tm := 0; tm < 8; tm++ {
		add(fmt.Sprintf("tilezero %%tmm%d", tm), tilezero(tm))
		for a := 0; a < 8; a++ {
			for b := 0; b < 8; b++ {
				if a == tm || b == tm || a == b {
					continue // the three tiles must differ
				}
				add(fmt.Sprintf("tdpbf16ps %%tmm%d, %%tmm%d, %%tmm%d", b, a, tm), tdpbf16ps(tm, a, b))
			}
		}
		for base := 0; base < 16; base++ {
			for index := 0; index < 16; index++ {
				if index == 4 {
					continue
				}
				for _, disp := range []int32{0x12345678, -0x12345678} {
					add(fmt.Sprintf("tileloadd %d(%%%s,%%%s,1), %%tmm%d", disp, gp[base], gp[index], tm), tileloadd(tm, base, index, disp))
					add(fmt.Sprintf("tilestored %%tmm%d, %d(%%%s,%%%s,1)", tm, disp, gp[base], gp[index]), tilestored(tm, base, index, disp))
				}
			}
		}
	}
	got := assemble(t, src.String())
	if !bytes.Equal(got, want) {
		for i := 0; i < min(len(got), len(want)); i++ {
			if got[i] != want[i] {
				t.Fatalf("first difference at byte %d (of %d): as % x, encoder % x", i, len(want), got[max(0, i-6):min(len(got), i+8)], want[max(0, i-6):min(len(want), i+8)])
			}
		}
		t.Fatalf("as gave %d bytes, encoder %d", len(got), len(want))
	}
}

// assemble assembles src with GNU as and returns the machine code of its
// .text section; it skips the test when binutils are missing.
func assemble(t *testing.T, src string) []byte {
	t.Helper()
	asm, err := exec.LookPath("as")
	if err != nil {
		t.Skip("GNU as not found (install binutils)")
	}
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("objcopy not found (install binutils)")
	}
	dir := t.TempDir()
	s, o, bin := filepath.Join(dir, "x.s"), filepath.Join(dir, "x.o"), filepath.Join(dir, "x.bin")
	if err := os.WriteFile(s, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(asm, "--64", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(objcopy, "-O", "binary", "--only-section=.text", o, bin).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	got, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
