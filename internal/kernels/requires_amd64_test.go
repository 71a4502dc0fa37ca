package kernels

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestAVX2KernelsNeedNoAVX512: no kernel named for AVX2 uses an AVX-512
// instruction (avo lists what each function requires). The AVX2 kernels
// run on CPUs without AVX-512 (Zen 3), where such an instruction is
// SIGILL; on the AVX-512 machines the other tests often run on, it would
// pass unseen (splitPairsAVX2 once broadcast a general register, an
// AVX-512 form).
func TestAVX2KernelsNeedNoAVX512(t *testing.T) {
	f, err := os.Open("asm_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fn, checked := "", 0
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "// func "); ok {
			fn, _, _ = strings.Cut(name, "(")
			continue
		}
		req, ok := strings.CutPrefix(line, "// Requires: ")
		if !ok || !strings.Contains(fn, "AVX2") {
			continue
		}
		checked++
		if strings.Contains(req, "AVX512") {
			t.Errorf("%s requires %s: an AVX2 kernel must not use AVX-512 instructions", fn, req)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d AVX2 kernels found in asm_amd64.s", checked)
	}
}
