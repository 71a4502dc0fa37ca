package ops

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/octetml/octet/dist"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/kernels"
)

// ExpertParallel shards the experts of Mixture-of-Experts layers over the
// ranks of Comm (expert parallelism). Every rank of the group runs the
// same batch through the layers around the experts, the same bits on
// each; inside an MoE layer rank r dispatches the tokens
// dist.Split(tokens, size)[r] gives it (a contiguous range) to the
// ranks that hold their experts — rank r holds the experts
// dist.Split(experts, size)[r] gives it, a contiguous range — by an
// all-to-all, each expert runs on the rows it received in the order of
// the tokens, the rows go back by the reverse all-to-all, each rank
// combines its tokens, and an all-gather gives every rank every token's
// output. Each expert thus sees the rows one process gives it, in the
// same order: the group's results equal one process's bit for bit.
type ExpertParallel struct {
	Comm dist.Communicator
	// Dispatch is how the tokens' rows travel to the experts' ranks:
	// float32 (the zero value: exact, one process's bits), bf16, or FP8
	// (E4M3 codes with a float32 scale per 1×128 tile of a row, as
	// DeepSeek-V3 dispatches). With bf16 or FP8 every other exchange of
	// the group (the combine, the gathers, the gradients) travels in
	// bf16; every row is rounded the same whichever rank holds it, so the
	// results still do not depend on the number of ranks.
	Dispatch WireFormat
}

// WireFormat is the format rows travel in between expert-parallel ranks.
type WireFormat uint8

const (
	// WireFloat32 sends float32: exact.
	WireFloat32 WireFormat = iota
	// WireBF16 rounds to bfloat16 (to nearest even): 2 bytes a value.
	WireBF16
	// WireFP8 casts to E4M3 with a float32 scale per 1×128 tile
	// (Float8BlockScaling's cast, fp32 scales): about 1 byte a value.
	WireFP8
)

// String returns "fp32", "bf16" or "fp8".
func (f WireFormat) String() string {
	switch f {
	case WireBF16:
		return "bf16"
	case WireFP8:
		return "fp8"
	}
	return "fp32"
}

// ParseWireFormat reads "fp32" (or "" or "float32"), "bf16" or "fp8".
func ParseWireFormat(s string) (WireFormat, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "fp32", "float32":
		return WireFloat32, nil
	case "bf16", "bfloat16":
		return WireBF16, nil
	case "fp8", "e4m3":
		return WireFP8, nil
	}
	return 0, fmt.Errorf("expert dispatch format %q: want fp32, bf16 or fp8", s)
}

// wire returns the format of an exchange: the dispatch's for the
// forward dispatch, bf16 for the rest when the dispatch is narrowed.
func (ep *ExpertParallel) wire(dispatch bool) WireFormat {
	switch {
	case dispatch:
		return ep.Dispatch
	case ep.Dispatch != WireFloat32:
		return WireBF16
	}
	return WireFloat32
}

// wireQuantizer is the FP8 wire format's cast: Float8BlockScaling's
// 1×128 tiles of a row, E4M3, float32 scales (fp8's block cast, the one
// the block-scaled GEMMs use).
var wireQuantizer = fp8.Quantizer{Kind: fp8.Float8Blocks, Format: fp8.E4M3, BlockDim: 1, FP32Scales: true}

// rowBytes is how many bytes a row of h values takes in format f: FP8
// sends a row's codes, then its tiles' scale_inv.
func (f WireFormat) rowBytes(h int) int {
	switch f {
	case WireBF16:
		return 2 * h
	case WireFP8:
		return h + 4*((h+fp8.Float8BlockSize-1)/fp8.Float8BlockSize)
	}
	return 4 * h
}

// wireCodec encodes rows of h values in a narrowed wire format (bf16 or
// FP8) and back, with the FP8 cast's scratch sized once for up to rows
// rows.
type wireCodec struct {
	f     WireFormat
	h, rb int
	codes []uint8
	inv   []float32
	work  []float32 // the block cast's scratch
}

func newWireCodec(f WireFormat, h, rows int) *wireCodec {
	c := &wireCodec{f: f, h: h, rb: f.rowBytes(h)}
	if f == WireFP8 {
		c.codes = make([]uint8, rows*h)
		c.inv = make([]float32, rows*((h+fp8.Float8BlockSize-1)/fp8.Float8BlockSize))
		c.work = make([]float32, max(h, 32))
	}
	return c
}

// encode writes src's rows into dst.
func (c *wireCodec) encode(dst []byte, src []float32) error {
	h, rows := c.h, len(src)/max(c.h, 1)
	if c.f == WireBF16 {
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], kernels.BF16FromFloat32(v))
		}
		return nil
	}
	tiles := (c.rb - h) / 4
	codes, inv := c.codes[:rows*h], c.inv[:rows*tiles]
	if _, err := fp8.QuantizeFloat8BlockAxis(codes, inv, src, rows, h, 1, wireQuantizer, c.work); err != nil {
		return err
	}
	for r := range rows {
		out := dst[r*c.rb : (r+1)*c.rb]
		copy(out, codes[r*h:(r+1)*h])
		for t, v := range inv[r*tiles : (r+1)*tiles] {
			binary.LittleEndian.PutUint32(out[h+4*t:], math.Float32bits(v))
		}
	}
	return nil
}

// decode is encode's reverse, into dst's rows.
func (c *wireCodec) decode(dst []float32, src []byte) error {
	h, rows := c.h, len(dst)/max(c.h, 1)
	if c.f == WireBF16 {
		for i := range dst {
			dst[i] = kernels.BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return nil
	}
	tiles := (c.rb - h) / 4
	codes, inv := c.codes[:rows*h], c.inv[:rows*tiles]
	for r := range rows {
		in := src[r*c.rb : (r+1)*c.rb]
		copy(codes[r*h:(r+1)*h], in)
		for t := range tiles {
			inv[r*tiles+t] = math.Float32frombits(binary.LittleEndian.Uint32(in[h+4*t:]))
		}
	}
	return fp8.DequantizeFloat8Block(dst, codes, inv, rows, h, wireQuantizer)
}

// valid reports whether the group has a communicator.
func (ep *ExpertParallel) valid() bool { return ep != nil && ep.Comm != nil }

// span returns this rank's contiguous share [first, first+n) of total
// items split over the group.
func (ep *ExpertParallel) span(total int) (first, n int) {
	counts := dist.Split(total, ep.Comm.Size())
	r := ep.Comm.Rank()
	return dist.Offsets(counts)[r], counts[r]
}

// LocalExperts returns the experts this rank holds: [first, first+n).
func (ep *ExpertParallel) LocalExperts(experts int) (first, n int) { return ep.span(experts) }

// LocalTokens returns the tokens this rank dispatches: [first, first+n).
func (ep *ExpertParallel) LocalTokens(tokens int) (first, n int) { return ep.span(tokens) }

func (ep *ExpertParallel) attrs() string {
	if !ep.valid() {
		return "no group"
	}
	return fmt.Sprintf("rank=%d/%d", ep.Comm.Rank(), ep.Comm.Size())
}

// epRowsOp takes this rank's rows of a [tokens, width] tensor (gather
// false: EPSlice) or gathers every rank's rows into the whole tensor
// (gather true: EPGather). Each is the other's gradient: the layers
// around the experts run the same on every rank, so a gradient with
// respect to the whole tensor is the same on every rank, and this
// rank's rows of it are its rows' gradient.
type epRowsOp struct {
	ep     *ExpertParallel
	gather bool
	tokens int // rows of the whole tensor
}

func (o epRowsOp) Type() string { return o.Kind().String() }
func (o epRowsOp) Kind() graph.Kind {
	if o.gather {
		return KindEPGather
	}
	return KindEPSlice
}
func (o epRowsOp) Attrs() string { return o.ep.attrs() }

func (o epRowsOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if !o.ep.valid() {
		return nil, graph.Invalid, fmt.Errorf("%q: no expert-parallel group", in[0].Name())
	}
	x := in[0]
	s := x.Shape()
	if s.Rank() != 2 || (x.DType() != graph.Float32 && (o.gather || x.DType() != graph.Int32)) {
		return nil, graph.Invalid, fmt.Errorf("%q is %v %v, want a [rows width] matrix (float32, or int32 to slice)", x.Name(), x.DType(), s)
	}
	if o.tokens < o.ep.Comm.Size() {
		return nil, graph.Invalid, fmt.Errorf("%q: %d tokens leave some of the %d expert-parallel ranks none", x.Name(), o.tokens, o.ep.Comm.Size())
	}
	_, n := o.ep.LocalTokens(o.tokens)
	if o.gather {
		if s[0] != n {
			return nil, graph.Invalid, fmt.Errorf("%q has %d rows, rank %d holds %d of the %d", x.Name(), s[0], o.ep.Comm.Rank(), n, o.tokens)
		}
		return graph.Shape{o.tokens, s[1]}, graph.Float32, nil
	}
	if s[0] != o.tokens {
		return nil, graph.Invalid, fmt.Errorf("%q has %d rows, want %d", x.Name(), s[0], o.tokens)
	}
	return graph.Shape{n, s[1]}, x.DType(), nil
}

func (o epRowsOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	width := b.In[0].Shape[1]
	first, _ := o.ep.LocalTokens(o.tokens)
	if !o.gather {
		in, out := b.In[0], b.Out
		return func() error {
			if out.I32 != nil {
				copy(out.I32, in.I32[first*width:])
			} else {
				copy(out.F32, in.F32[first*width:])
			}
			return nil
		}, nil
	}
	counts := dist.Split(o.tokens, o.ep.Comm.Size()) // rows, then values or bytes
	f := o.ep.wire(false)
	rb := f.rowBytes(width)
	for i := range counts {
		if f == WireFloat32 {
			counts[i] *= width
		} else {
			counts[i] *= rb
		}
	}
	src, dst := b.In[0].F32, b.Out.F32
	if f == WireFloat32 {
		return func() error { return o.ep.Comm.AllGatherF32(dst, src, counts) }, nil
	}
	// Every rank's rows, its own included, are what the wire carries,
	// so that the ranks hold the same values.
	codec := newWireCodec(f, width, o.tokens)
	sb, rbuf := make([]byte, len(src)/max(width, 1)*rb), make([]byte, o.tokens*rb)
	return func() error {
		if err := codec.encode(sb, src); err != nil {
			return err
		}
		if err := o.ep.Comm.AllGatherU8(rbuf, sb, counts); err != nil {
			return err
		}
		return codec.decode(dst, rbuf)
	}, nil
}

func (o epRowsOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	if n.Input(0).DType() != graph.Float32 {
		return []*graph.Node{nil}
	}
	return []*graph.Node{apply(epRowsOp{ep: o.ep, gather: !o.gather, tokens: o.tokens}, n.Name()+".grad", dy)}
}

// EPSlice returns this rank's tokens of x [tokens, width] (float32 or
// int32): the rows ep.LocalTokens gives it. Its gradient gathers every
// rank's rows' gradients (EPGather).
func EPSlice(x *graph.Node, ep *ExpertParallel) *graph.Node {
	tokens := 0
	if x != nil && x.Shape().Rank() == 2 {
		tokens = x.Shape()[0]
	}
	return apply(epRowsOp{ep: ep, tokens: tokens}, scopedName(x, "ep_slice"), x)
}

// EPGather returns the whole [tokens, width] tensor from every rank's
// rows x (EPSlice's); its gradient is this rank's rows of the gradient.
func EPGather(x *graph.Node, tokens int, ep *ExpertParallel) *graph.Node {
	return apply(epRowsOp{ep: ep, gather: true, tokens: tokens}, scopedName(x, "ep_gather"), x)
}

// epPlanOp gathers every rank's expert counts: int32 [ranks, experts].
type epPlanOp struct{ ep *ExpertParallel }

func (epPlanOp) Type() string     { return KindEPPlan.String() }
func (epPlanOp) Kind() graph.Kind { return KindEPPlan }
func (o epPlanOp) Attrs() string  { return o.ep.attrs() }

func (o epPlanOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if !o.ep.valid() {
		return nil, graph.Invalid, fmt.Errorf("%q: no expert-parallel group", in[0].Name())
	}
	c := in[0]
	if c.DType() != graph.Int32 || c.Shape().Rank() != 1 {
		return nil, graph.Invalid, fmt.Errorf("expert counts %q are %v %v, want int32 [experts]", c.Name(), c.DType(), c.Shape())
	}
	if e, p := c.Shape()[0], o.ep.Comm.Size(); e < p {
		return nil, graph.Invalid, fmt.Errorf("%d experts cannot be shared by %d expert-parallel ranks (%q)", e, p, c.Name())
	}
	return graph.Shape{o.ep.Comm.Size(), c.Shape()[0]}, graph.Int32, nil
}

func (o epPlanOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	in, out := b.In[0].I32, b.Out.I32
	e, p := len(in), o.ep.Comm.Size()
	src, dst := make([]float32, e), make([]float32, e*p)
	counts := make([]int, p)
	for i := range counts {
		counts[i] = e
	}
	return func() error {
		for i, c := range in {
			src[i] = float32(c) // exact: a count is below 2^24
		}
		if err := o.ep.Comm.AllGatherF32(dst, src, counts); err != nil {
			return err
		}
		for i, v := range dst {
			out[i] = int32(v)
		}
		return nil
	}, nil
}

// EPPlan gathers every rank's ExpertCounts of its tokens: int32 [ranks,
// experts], row q the rows rank q sends each expert. The all-to-alls and
// EPLocalCounts read their sizes from it.
func EPPlan(counts *graph.Node, ep *ExpertParallel) *graph.Node {
	return apply(epPlanOp{ep}, scopedName(counts, "ep_plan"), counts)
}

// epLocalCountsOp sums the plan's rows for this rank's experts.
type epLocalCountsOp struct{ ep *ExpertParallel }

func (epLocalCountsOp) Type() string     { return KindEPLocalCounts.String() }
func (epLocalCountsOp) Kind() graph.Kind { return KindEPLocalCounts }
func (o epLocalCountsOp) Attrs() string  { return o.ep.attrs() }

func checkPlan(plan *graph.Node, ep *ExpertParallel) error {
	if !ep.valid() {
		return fmt.Errorf("%q: no expert-parallel group", plan.Name())
	}
	s := plan.Shape()
	if plan.DType() != graph.Int32 || s.Rank() != 2 || s[0] != ep.Comm.Size() {
		return fmt.Errorf("plan %q is %v %v, want int32 [%d experts] (EPPlan)", plan.Name(), plan.DType(), s, ep.Comm.Size())
	}
	return nil
}

func (o epLocalCountsOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 1); err != nil {
		return nil, graph.Invalid, err
	}
	if err := checkPlan(in[0], o.ep); err != nil {
		return nil, graph.Invalid, err
	}
	_, n := o.ep.LocalExperts(in[0].Shape()[1])
	return graph.Shape{n}, graph.Int32, nil
}

func (o epLocalCountsOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	plan, out := b.In[0].I32, b.Out.I32
	e := b.In[0].Shape[1]
	first, _ := o.ep.LocalExperts(e)
	return func() error {
		clear(out)
		for q := 0; q < o.ep.Comm.Size(); q++ {
			for i := range out {
				out[i] += plan[q*e+first+i]
			}
		}
		return nil
	}, nil
}

// EPLocalCounts returns the rows each of this rank's experts receives
// from all ranks (int32 [local experts]), the groups of EPToOwners's
// rows. A grouped GEMM whose group sizes come from it takes rows past
// the groups as the receive buffer's padding: it leaves them out.
func EPLocalCounts(plan *graph.Node, ep *ExpertParallel) *graph.Node {
	return apply(epLocalCountsOp{ep}, scopedName(plan, "local_counts"), plan)
}

// epExchangeOp moves expert rows between the ranks: toOwners sends this
// rank's rows (in expert order, EPSlice's tokens through Dispatch) to
// the ranks that hold their experts, and lays out what it receives by
// expert, then by sending rank (whose tokens come in token order), then
// zero padding up to capacity rows; fromOwners is the reverse.
type epExchangeOp struct {
	ep       *ExpertParallel
	toOwners bool
	rows     int  // the output's rows
	dispatch bool // the forward dispatch (its wire format is ep.Dispatch)
}

func (o epExchangeOp) Type() string { return o.Kind().String() }
func (o epExchangeOp) Kind() graph.Kind {
	if o.toOwners {
		return KindEPToOwners
	}
	return KindEPFromOwners
}
func (o epExchangeOp) Attrs() string {
	return fmt.Sprintf("%s,rows=%d,wire=%v", o.ep.attrs(), o.rows, o.ep.wire(o.dispatch))
}

func (o epExchangeOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	if err := wantInputs(in, 2); err != nil {
		return nil, graph.Invalid, err
	}
	x, plan := in[0], in[1]
	if err := checkPlan(plan, o.ep); err != nil {
		return nil, graph.Invalid, err
	}
	if x.DType() != graph.Float32 || x.Shape().Rank() != 2 {
		return nil, graph.Invalid, fmt.Errorf("rows %q are %v %v, want float32 [rows width]", x.Name(), x.DType(), x.Shape())
	}
	if o.rows < 0 {
		return nil, graph.Invalid, fmt.Errorf("%d output rows", o.rows)
	}
	return graph.Shape{o.rows, x.Shape()[1]}, graph.Float32, nil
}

// exchange is the bound state of an exchange: the group's sizes and the
// counts (in values) of its all-to-all, computed from the plan each step.
type exchange struct {
	ep                *ExpertParallel
	p, me, experts, h int
	firsts, ns        []int // every rank's experts
	send, recv        []int // values to and from each rank, toOwners' direction
	scratch           []float32
	// With a narrowed wire format: the bytes of a row, the byte counts
	// and the encoded rows sent and received.
	f              WireFormat
	rb             int
	codec          *wireCodec
	sendB, recvB   []int
	sbytes, rbytes []byte
}

func newExchange(ep *ExpertParallel, f WireFormat, experts, h, capRows, inRows int) *exchange {
	p := ep.Comm.Size()
	x := &exchange{ep: ep, p: p, me: ep.Comm.Rank(), experts: experts, h: h, ns: dist.Split(experts, p),
		send: make([]int, p), recv: make([]int, p), scratch: make([]float32, capRows*h), f: f}
	x.firsts = dist.Offsets(x.ns)
	if f != WireFloat32 {
		x.rb = f.rowBytes(h)
		x.codec = newWireCodec(f, h, max(capRows, inRows))
		x.sendB, x.recvB = make([]int, p), make([]int, p)
		x.sbytes, x.rbytes = make([]byte, max(capRows, inRows)*x.rb), make([]byte, max(capRows, inRows)*x.rb)
	}
	return x
}

// allToAll sends src's rows (send[q] values to rank q) and receives
// recv[r] values from rank r into dst, in the exchange's wire format.
func (x *exchange) allToAll(dst, src []float32, send, recv []int) error {
	if x.f == WireFloat32 {
		return x.ep.Comm.AllToAllF32(dst, src, send, recv)
	}
	ns, nr := 0, 0
	for q := range send {
		x.sendB[q], x.recvB[q] = send[q]/x.h*x.rb, recv[q]/x.h*x.rb
		ns += send[q]
		nr += recv[q]
	}
	if err := x.codec.encode(x.sbytes[:ns/x.h*x.rb], src[:ns]); err != nil {
		return err
	}
	if err := x.ep.Comm.AllToAllU8(x.rbytes, x.sbytes[:ns/x.h*x.rb], x.sendB, x.recvB); err != nil {
		return err
	}
	return x.codec.decode(dst[:nr], x.rbytes[:nr/x.h*x.rb])
}

// counts fills send and recv from plan [p, experts] and returns the rows
// this rank receives in all.
func (x *exchange) counts(plan []int32) int {
	total := 0
	for q := 0; q < x.p; q++ {
		s, r := 0, 0
		for e := x.firsts[q]; e < x.firsts[q]+x.ns[q]; e++ {
			s += int(plan[x.me*x.experts+e])
		}
		for e := x.firsts[x.me]; e < x.firsts[x.me]+x.ns[x.me]; e++ {
			r += int(plan[q*x.experts+e])
		}
		x.send[q], x.recv[q] = s*x.h, r*x.h
		total += r
	}
	return total
}

// permute copies rows between the by-sender layout (rank q's rows for
// this rank's experts, each expert's in turn, q after q) and the
// by-expert layout (expert after expert, each expert's rows from rank 0,
// 1, …): toExpert says which way.
func (x *exchange) permute(dst, src []float32, plan []int32, toExpert bool) {
	first, n := x.firsts[x.me], x.ns[x.me]
	byExpert := 0
	for e := first; e < first+n; e++ {
		for q := 0; q < x.p; q++ {
			// Rank q's rows of expert e start, in the by-sender layout,
			// after all rows of ranks before q and q's rows of the
			// experts before e.
			bySender := 0
			for r := 0; r < q; r++ {
				bySender += x.recv[r] / x.h
			}
			for f := first; f < e; f++ {
				bySender += int(plan[q*x.experts+f])
			}
			c := int(plan[q*x.experts+e]) * x.h
			if toExpert {
				copy(dst[byExpert*x.h:byExpert*x.h+c], src[bySender*x.h:])
			} else {
				copy(dst[bySender*x.h:bySender*x.h+c], src[byExpert*x.h:])
			}
			byExpert += c / x.h
		}
	}
}

func (o epExchangeOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	in, plan, out := b.In[0].F32, b.In[1].I32, b.Out.F32
	h := b.In[0].Shape[1]
	capRows := b.In[0].Shape[0]
	if o.toOwners {
		capRows = o.rows
	}
	x := newExchange(o.ep, o.ep.wire(o.dispatch), b.In[1].Shape[1], h, capRows, b.In[0].Shape[0])
	if o.toOwners {
		return func() error {
			total := x.counts(plan)
			if total > o.rows {
				return fmt.Errorf("ep: rank %d receives %d rows, its buffer holds %d", x.me, total, o.rows)
			}
			if err := x.allToAll(x.scratch, in, x.send, x.recv); err != nil {
				return err
			}
			x.permute(out, x.scratch, plan, true)
			clear(out[total*h:])
			return nil
		}, nil
	}
	return func() error {
		total := x.counts(plan)
		if total > len(in)/max(h, 1) {
			return fmt.Errorf("ep: rank %d holds %d rows, its input %d", x.me, total, len(in)/max(h, 1))
		}
		x.permute(x.scratch, in, plan, false)
		return x.allToAll(out, x.scratch[:total*h], x.recv, x.send)
	}, nil
}

func (o epExchangeOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	rows := n.Input(0).Shape()[0]
	return []*graph.Node{apply(epExchangeOp{ep: o.ep, toOwners: !o.toOwners, rows: rows}, n.Name()+".grad", dy, n.Input(1)), nil}
}

// EPToOwners sends this rank's rows xs (its tokens' Dispatch, in expert
// order) to the ranks holding their experts, by the plan (EPPlan), and
// returns what this rank receives: capacity rows, its experts' rows
// expert by expert (EPLocalCounts' groups), each expert's from rank 0,
// 1, … in turn (so in the order of the tokens), then zeros. The rows
// travel in ep.Dispatch's format. Its gradient is EPFromOwners of the
// output's gradient.
func EPToOwners(xs, plan *graph.Node, capacity int, ep *ExpertParallel) *graph.Node {
	return apply(epExchangeOp{ep: ep, toOwners: true, rows: capacity, dispatch: true}, scopedName(xs, "ep_to_owners"), xs, plan)
}

// EPFromOwners is EPToOwners's reverse: this rank's experts' rows ys
// (laid out as EPToOwners returns them) go back to the ranks whose
// tokens they are, and the result is this rank's rows [rows, width] in
// expert order, as Dispatch laid them out.
func EPFromOwners(ys, plan *graph.Node, rows int, ep *ExpertParallel) *graph.Node {
	return apply(epExchangeOp{ep: ep, rows: rows}, scopedName(ys, "ep_from_owners"), ys, plan)
}

// epDispatchOp is Dispatch of this rank's tokens: x [T, H] and idx
// [T, K] in, this rank's tokens' rows in expert order out.
type epDispatchOp struct {
	ep      *ExpertParallel
	experts int
}

func (epDispatchOp) Type() string     { return KindEPDispatch.String() }
func (epDispatchOp) Kind() graph.Kind { return KindEPDispatch }
func (o epDispatchOp) Attrs() string  { return fmt.Sprintf("%s,experts=%d", o.ep.attrs(), o.experts) }

func (o epDispatchOp) Infer(in []*graph.Node) (graph.Shape, graph.DType, error) {
	s, dt, err := dispatchOp{o.experts}.Infer(in)
	if err != nil {
		return nil, graph.Invalid, err
	}
	if !o.ep.valid() {
		return nil, graph.Invalid, fmt.Errorf("%q: no expert-parallel group", in[0].Name())
	}
	tokens, k := in[1].Shape()[0], in[1].Shape()[1]
	if tokens < o.ep.Comm.Size() {
		return nil, graph.Invalid, fmt.Errorf("%q: %d tokens leave some of the %d expert-parallel ranks none", in[0].Name(), tokens, o.ep.Comm.Size())
	}
	_, n := o.ep.LocalTokens(tokens)
	return graph.Shape{n * k, s[1]}, dt, nil
}

func (o epDispatchOp) Bind(b *graph.Binding) (graph.Kernel, error) {
	tokens, k := b.In[1].Shape[0], b.In[1].Shape[1]
	first, n := o.ep.LocalTokens(tokens)
	r := &routeState{experts: o.experts, k: k, counts: make([]int32, o.experts), pos: make([]int32, n*k), nx: make([]int32, o.experts), name: b.Node.Input(1).Name()}
	x, idx, out := b.In[0].F32, b.In[1].I32[first*k:(first+n)*k], b.Out.F32
	h := b.In[0].Shape[1]
	return func() error {
		if err := r.plan(idx); err != nil {
			return err
		}
		for i, p := range r.pos {
			t := first + i/r.k
			copy(out[int(p)*h:int(p)*h+h], x[t*h:t*h+h])
		}
		return nil
	}, nil
}

// Grad adds each of this rank's tokens' K rows back (DispatchGrad) and
// gathers every rank's tokens.
func (o epDispatchOp) Grad(n, dy *graph.Node, need []bool) []*graph.Node {
	idx := n.Input(1)
	dx := apply(dispatchGradOp{o.experts}, n.Name()+".dx", dy, EPSlice(idx, o.ep))
	return []*graph.Node{EPGather(dx, idx.Shape()[0], o.ep), nil}
}

// EPDispatch is Dispatch of this rank's tokens (ExpertParallel.LocalTokens)
// of x [T, H] with the choices idx [T, K]: [local tokens·K, H] in expert
// order. It reads x and idx where Dispatch does, so a graph's other
// readers of x see their gradients added in the order one process adds
// them; its gradient gathers every rank's tokens' rows.
func EPDispatch(x, idx *graph.Node, experts int, ep *ExpertParallel) *graph.Node {
	return apply(epDispatchOp{ep: ep, experts: experts}, scopedName(x, "ep_dispatch"), x, idx)
}
