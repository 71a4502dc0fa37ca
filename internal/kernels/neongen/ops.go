package main

// Encodings of the NEON instructions Go's assembler lacks, on 4 float32
// lanes (.4S) or 16 bytes (.16B); encode_test.go checks each against GNU
// as.

func rrr(base uint32, d, n, m int) uint32 { return base | uint32(m)<<16 | uint32(n)<<5 | uint32(d) }
func rr(base uint32, d, n int) uint32     { return base | uint32(n)<<5 | uint32(d) }

func fadd(d, n, m int) uint32  { return rrr(0x4E20D400, d, n, m) } // FADD Vd.4S, Vn.4S, Vm.4S
func fsub(d, n, m int) uint32  { return rrr(0x4EA0D400, d, n, m) } // FSUB Vd.4S, Vn.4S, Vm.4S
func fdiv(d, n, m int) uint32  { return rrr(0x6E20FC00, d, n, m) } // FDIV Vd.4S, Vn.4S, Vm.4S
func fmax(d, n, m int) uint32  { return rrr(0x4E20F400, d, n, m) } // FMAX Vd.4S, Vn.4S, Vm.4S
func fmin(d, n, m int) uint32  { return rrr(0x4EA0F400, d, n, m) } // FMIN Vd.4S, Vn.4S, Vm.4S
func fcmgt(d, n, m int) uint32 { return rrr(0x6EA0E400, d, n, m) } // FCMGT Vd.4S, Vn.4S, Vm.4S (Vn > Vm)
func bit(d, n, m int) uint32   { return rrr(0x6EA01C00, d, n, m) } // BIT Vd.16B, Vn.16B, Vm.16B (Vn into Vd where Vm)
func fcvtzs(d, n int) uint32   { return rr(0x4EA1B800, d, n) }     // FCVTZS Vd.4S, Vn.4S
func scvtf(d, n int) uint32    { return rr(0x4E21D800, d, n) }     // SCVTF Vd.4S, Vn.4S

func fsqrt(d, n int) uint32 { return rr(0x6EA1F800, d, n) } // FSQRT Vd.4S, Vn.4S
func fneg(d, n int) uint32  { return rr(0x6EA0F800, d, n) } // FNEG Vd.4S, Vn.4S

func umax(d, n, m int) uint32 { return rrr(0x6EA06400, d, n, m) } // UMAX Vd.4S, Vn.4S, Vm.4S
func umin(d, n, m int) uint32 { return rrr(0x6EA06C00, d, n, m) } // UMIN Vd.4S, Vn.4S, Vm.4S
func cmhi(d, n, m int) uint32 { return rrr(0x6EA03400, d, n, m) } // CMHI Vd.4S, Vn.4S, Vm.4S (Vn > Vm unsigned)
func xtn4h(d, n int) uint32   { return rr(0x0E612800, d, n) }     // XTN Vd.4H, Vn.4S
func xtn28h(d, n int) uint32  { return rr(0x4E612800, d, n) }     // XTN2 Vd.8H, Vn.4S
func xtn8b(d, n int) uint32   { return rr(0x0E212800, d, n) }     // XTN Vd.8B, Vn.8H
func xtn216b(d, n int) uint32 { return rr(0x4E212800, d, n) }     // XTN2 Vd.16B, Vn.8H
func shll4s(d, n int) uint32  { return rr(0x2E613800, d, n) }     // SHLL Vd.4S, Vn.4H, #16
func fcvtl4s(d, n int) uint32 { return rr(0x0E217800, d, n) }     // FCVTL Vd.4S, Vn.4H
