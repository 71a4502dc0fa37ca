package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEncodingsMatchGNUAs assembles the instructions written as WORDs
// with GNU as for aarch64 (binutils-aarch64-linux-gnu; skipped when it is
// missing) and compares the bytes.
func TestEncodingsMatchGNUAs(t *testing.T) {
	as, err := exec.LookPath("aarch64-linux-gnu-as")
	if err != nil {
		t.Skip("aarch64-linux-gnu-as not installed")
	}
	objcopy, err := exec.LookPath("aarch64-linux-gnu-objcopy")
	if err != nil {
		t.Skip("aarch64-linux-gnu-objcopy not installed")
	}
	var src strings.Builder
	var want []uint32
	for _, c := range [][3]int{{0, 0, 28}, {15, 15, 28}, {7, 3, 31}, {31, 30, 29}} {
		fmt.Fprintf(&src, "fmul v%d.4s, v%d.4s, v%d.4s\n", c[0], c[1], c[2])
		want = append(want, fmul(c[0], c[1], c[2]))
	}
	for _, c := range [][4]int{{0, 24, 27, 0}, {5, 25, 27, 1}, {23, 26, 28, 2}, {11, 31, 31, 3}, {31, 0, 16, 3}} {
		fmt.Fprintf(&src, "fmla v%d.4s, v%d.4s, v%d.s[%d]\n", c[0], c[1], c[2], c[3])
		want = append(want, fmlaElem(c[0], c[1], c[2], c[3]))
	}
	for _, op := range []struct {
		name string
		f    func(d, n, m int) uint32
		arr  string
	}{{"fadd", fadd, "4s"}, {"fsub", fsub, "4s"}, {"fdiv", fdiv, "4s"}, {"fmax", fmax, "4s"}, {"fmin", fmin, "4s"},
		{"fcmgt", fcmgt, "4s"}, {"bit", bit, "16b"}, {"umax", umax, "4s"}, {"umin", umin, "4s"}, {"cmhi", cmhi, "4s"}} {
		for _, c := range [][3]int{{0, 1, 2}, {31, 17, 4}, {5, 30, 29}} {
			fmt.Fprintf(&src, "%s v%d.%s, v%d.%s, v%d.%s\n", op.name, c[0], op.arr, c[1], op.arr, c[2], op.arr)
			want = append(want, op.f(c[0], c[1], c[2]))
		}
	}
	for _, op := range []struct {
		name string
		f    func(d, n int) uint32
	}{{"fcvtzs", fcvtzs}, {"scvtf", scvtf}, {"fsqrt", fsqrt}, {"fneg", fneg}} {
		for _, c := range [][2]int{{0, 1}, {31, 17}, {6, 6}} {
			fmt.Fprintf(&src, "%s v%d.4s, v%d.4s\n", op.name, c[0], c[1])
			want = append(want, op.f(c[0], c[1]))
		}
	}
	for _, op := range []struct {
		name, d, n string
		f          func(d, n int) uint32
	}{{"xtn", "4h", "4s", xtn4h}, {"xtn2", "8h", "4s", xtn28h}, {"xtn", "8b", "8h", xtn8b}, {"xtn2", "16b", "8h", xtn216b}, {"fcvtl", "4s", "4h", fcvtl4s}} {
		for _, c := range [][2]int{{0, 1}, {31, 17}, {6, 6}} {
			fmt.Fprintf(&src, "%s v%d.%s, v%d.%s\n", op.name, c[0], op.d, c[1], op.n)
			want = append(want, op.f(c[0], c[1]))
		}
	}
	for _, c := range [][2]int{{0, 1}, {31, 17}, {6, 6}} {
		fmt.Fprintf(&src, "shll v%d.4s, v%d.4h, #16\n", c[0], c[1])
		want = append(want, shll4s(c[0], c[1]))
	}
	dir := t.TempDir()
	s, o, bin := filepath.Join(dir, "x.s"), filepath.Join(dir, "x.o"), filepath.Join(dir, "x.bin")
	if err := os.WriteFile(s, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, s, "-o", o).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(objcopy, "-O", "binary", "-j", ".text", o, bin).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	got, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4*len(want) {
		t.Fatalf("%d bytes, want %d", len(got), 4*len(want))
	}
	lines := strings.Split(strings.TrimSpace(src.String()), "\n")
	for i, w := range want {
		if g := binary.LittleEndian.Uint32(got[4*i:]); g != w {
			t.Errorf("%s: GNU as %#08x, ours %#08x", lines[i], g, w)
		}
	}
}
