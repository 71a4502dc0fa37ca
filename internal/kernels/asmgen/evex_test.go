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
	asm, err := exec.LookPath("as")
	if err != nil {
		t.Skip("GNU as not found (install binutils)")
	}
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("objcopy not found (install binutils)")
	}
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
	dir := t.TempDir()
	s, o, bin := filepath.Join(dir, "x.s"), filepath.Join(dir, "x.o"), filepath.Join(dir, "x.bin")
	if err := os.WriteFile(s, []byte(src.String()), 0o644); err != nil {
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
