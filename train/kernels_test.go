package train

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestKernelNote checks the note bf16 and FP8 runs get on CPUs without a
// bf16 dot-product unit, and that the progress hook prints it once.
func TestKernelNote(t *testing.T) {
	slow := KernelInfo{Family: "AVX2+FMA", GEMM: "avx2 6x16", GEMMBF16: "avx2 bf16 6x16"}
	fast := KernelInfo{Family: "AVX-512", GEMM: "avx512 8x48", GEMMBF16: "avx512bf16 12x32", LowPrecisionFaster: true}
	if got := slow.String(); got != "AVX2+FMA kernels (GEMM avx2 6x16, bf16 avx2 bf16 6x16)" {
		t.Fatalf("String() = %q", got)
	}
	for _, p := range []string{"fp8", "bf16"} {
		if n := slow.Note(p); !strings.Contains(n, p+" GEMMs take about as long as float32") || !strings.Contains(n, "AVX2+FMA") {
			t.Fatalf("Note(%q) = %q", p, n)
		}
		if n := fast.Note(p); n != "" {
			t.Fatalf("with AVX512_BF16, Note(%q) = %q", p, n)
		}
	}
	if n := slow.Note("fp32"); n != "" {
		t.Fatalf("Note(fp32) = %q", n)
	}
	// The hook prints Kernels().Note once at the start.
	var out bytes.Buffer
	h := Progress(&out, ProgressOptions{Every: 1e9})
	if err := h.OnStart(&Status{Precision: "fp8", Total: 3}); err != nil {
		t.Fatal(err)
	}
	want := ""
	if n := Kernels().Note("fp8"); n != "" {
		want = "fp8 note: " + n + "\n"
	}
	if out.String() != want {
		t.Fatalf("progress start printed %q, want %q", out.String(), want)
	}
}

// Kernels says which kernels run here and whether bf16 and FP8 pay on
// this CPU (the output depends on the machine, so it is not checked).
func ExampleKernels() {
	k := Kernels()
	fmt.Println(k) // e.g. "AVX2+FMA kernels (GEMM avx2 6x16, bf16 avx2 bf16 6x16)"
	if note := k.Note("fp8"); note != "" {
		fmt.Println(note)
	}
}
