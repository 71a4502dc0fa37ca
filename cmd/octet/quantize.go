package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/nlpodyssey/safetensors"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/internal/atomicfile"
)

// quantizeFlags are octet quantize's settings.
type quantizeFlags struct {
	recipe, format string
	blockDim       int
	fp32Scales     bool
	eps            float64
	twoD, rht, sr  bool
	seed           uint64
	set            map[string]bool
	f              fp8.Format
}

// recipeFlags lists the flags each recipe reads (the others are refused
// with it).
var recipeFlags = map[string][]string{
	"fp8-block": {"block-dim", "format", "fp32-scales", "eps"},
	"nvfp4":     {"2d", "rht", "sr", "seed"},
	"mxfp8":     {"format"},
	"current":   {"format"},
}

// quantizeCmd is octet quantize.
func quantizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("octet quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var q quantizeFlags
	fs.StringVar(&q.recipe, "recipe", "fp8-block", "fp8-block (Float8BlockScaling), nvfp4, mxfp8 or current (tensorwise current scaling)")
	fs.StringVar(&q.format, "format", "E4M3", "FP8 format: E4M3 or E5M2 (fp8-block, mxfp8, current)")
	fs.IntVar(&q.blockDim, "block-dim", 1, "fp8-block: 1 (1×128 blocks along each row) or 2 (128×128 tiles)")
	fs.BoolVar(&q.fp32Scales, "fp32-scales", false, "fp8-block: keep float32 scales (otherwise powers of two)")
	fs.Float64Var(&q.eps, "eps", 0, "fp8-block: amax floor")
	fs.BoolVar(&q.twoD, "2d", false, "nvfp4: 16×16 tiles (otherwise 1×16 blocks)")
	fs.BoolVar(&q.rht, "rht", false, "nvfp4: the 16-point random Hadamard transform along each row first")
	fs.BoolVar(&q.sr, "sr", false, "nvfp4: stochastic rounding (seeded by -seed and the tensor's name)")
	fs.Uint64Var(&q.seed, "seed", 0, "nvfp4 -sr: the generator's seed")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	q.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { q.set[f.Name] = true })
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("quantize wants IN.safetensors OUT.safetensors, got %d argument(s)", fs.NArg())}
	}
	if err := q.check(); err != nil {
		return err
	}
	in, out := fs.Arg(0), fs.Arg(1)
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	st, err := safetensors.Deserialize(data)
	if err != nil {
		return fmt.Errorf("%s: not a valid safetensors file: %v", in, err)
	}
	names := st.Names()
	sort.Strings(names)
	views := map[string]safetensors.TensorView{}
	done := 0
	fmt.Fprintf(stdout, "%s → %s, recipe %s\n", in, out, q.describe())
	fmt.Fprintf(stdout, "%-40s %-12s %12s %12s %12s %12s  %s\n", "tensor", "shape", "mse", "underflows%", "scale_min", "scale_max", "note")
	for _, name := range names {
		t, _ := st.Tensor(name)
		sh := t.Shape()
		switch {
		case t.DType() != safetensors.F32:
			fmt.Fprintf(stdout, "%-40s %-12s  skipped: %v, not F32\n", name, shapeString(sh), t.DType())
			continue
		case len(sh) != 2:
			fmt.Fprintf(stdout, "%-40s %-12s  skipped: rank %d, not a matrix\n", name, shapeString(sh), len(sh))
			continue
		case sh[0] == 0 || sh[1] == 0:
			fmt.Fprintf(stdout, "%-40s %-12s  skipped: empty\n", name, shapeString(sh))
			continue
		}
		rows, cols := int(sh[0]), int(sh[1])
		x := make([]float32, rows*cols)
		raw := t.Data()
		nonFinite := 0
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if math.IsNaN(float64(x[i])) || math.IsInf(float64(x[i]), 0) {
				nonFinite++
			}
		}
		r, err := q.quantize(name, x, rows, cols)
		if err != nil {
			return fmt.Errorf("%s: tensor %q: %w", in, name, err)
		}
		for _, o := range r.outputs {
			v, err := safetensors.NewTensorView(o.dtype, o.shape, o.data)
			if err != nil {
				return fmt.Errorf("tensor %q: %w", name+o.suffix, err)
			}
			views[name+o.suffix] = v
		}
		mse, under, lost := stats(x, r.dequant, r.zeroCodes)
		note := ""
		if nonFinite > 0 {
			note = fmt.Sprintf("%d non-finite value(s) cast as the recipe casts them; mse over the finite ones", nonFinite)
		}
		if lost > 0 {
			note += fmt.Sprintf(", less %d that decode to NaN (their block's scale is NaN)", lost)
		}
		fmt.Fprintf(stdout, "%-40s %-12s %12.6g %12.4f %12.4g %12.4g  %s\n", name, shapeString(sh), mse, under, r.scaleMin, r.scaleMax, note)
		done++
	}
	if done == 0 {
		return fmt.Errorf("%s: no float32 matrix (F32, rank 2) to quantize", in)
	}
	buf, err := safetensors.Serialize(views, map[string]string{"octet.quantize": q.describe()})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(out, func(w io.Writer) error { _, err := w.Write(buf); return err }); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d tensor(s) quantized → %s\n", done, out)
	return nil
}

func shapeString(sh []uint64) string {
	parts := make([]string, len(sh))
	for i, d := range sh {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// check refuses a recipe it does not know, flags the recipe does not
// read, and bad values, naming the flag.
func (q *quantizeFlags) check() error {
	reads, ok := recipeFlags[q.recipe]
	if !ok {
		return usageError{fmt.Sprintf("-recipe %q: want fp8-block, nvfp4, mxfp8 or current", q.recipe)}
	}
	for name := range q.set {
		if name == "recipe" {
			continue
		}
		found := false
		for _, r := range reads {
			found = found || r == name
		}
		if !found {
			return usageError{fmt.Sprintf("-%s does not apply to -recipe %s (it reads %s)", name, q.recipe, "-"+strings.Join(reads, ", -"))}
		}
	}
	switch strings.ToUpper(q.format) {
	case "E4M3":
		q.f = fp8.E4M3
	case "E5M2":
		q.f = fp8.E5M2
	default:
		return usageError{fmt.Sprintf("-format %q: want E4M3 or E5M2", q.format)}
	}
	if q.blockDim != 1 && q.blockDim != 2 {
		return usageError{fmt.Sprintf("-block-dim %d: want 1 or 2", q.blockDim)}
	}
	if !(q.eps >= 0) || math.IsInf(q.eps, 0) || q.eps > math.MaxFloat32 {
		return usageError{fmt.Sprintf("-eps %v: want a finite number ≥ 0", q.eps)}
	}
	if q.set["seed"] && !q.sr {
		return usageError{"-seed seeds stochastic rounding: give -sr too"}
	}
	return nil
}

// describe names the recipe and its settings.
func (q *quantizeFlags) describe() string {
	switch q.recipe {
	case "fp8-block":
		scales := "power-of-two"
		if q.fp32Scales {
			scales = "float32"
		}
		return fmt.Sprintf("fp8-block %dD %v, %s scales, eps %g", q.blockDim, q.f, scales, q.eps)
	case "nvfp4":
		return fmt.Sprintf("nvfp4 2d=%v rht=%v sr=%v seed=%d", q.twoD, q.rht, q.sr, q.seed)
	}
	return fmt.Sprintf("%s %v", q.recipe, q.f)
}

// output is one tensor the quantized file holds for an input tensor.
type output struct {
	suffix string
	dtype  safetensors.DType
	shape  []uint64
	data   []byte
}

// quantized is one tensor's cast: its outputs, its dequantized values,
// how many elements got the zero code (underflows, Transformer Engine's
// definition), and the range of its decode scales.
type quantized struct {
	outputs            []output
	dequant            []float32
	zeroCodes          int
	scaleMin, scaleMax float32
}

func f32Data(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// scaleRange returns the smallest and largest scale of v, NaN scales
// left out (NaN when all are).
func scaleRange(v []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	for _, s := range v {
		if s == s {
			lo, hi = min(lo, s), max(hi, s)
		}
	}
	if lo > hi { // every scale NaN
		return float32(math.NaN()), float32(math.NaN())
	}
	return lo, hi
}

func countZero(codes []uint8) int {
	n := 0
	for _, c := range codes {
		if c == 0 {
			n++
		}
	}
	return n
}

// quantize casts one rows × cols tensor.
func (q *quantizeFlags) quantize(name string, x []float32, rows, cols int) (*quantized, error) {
	r := &quantized{dequant: make([]float32, len(x))}
	u := func(v ...int) []uint64 {
		o := make([]uint64, len(v))
		for i, d := range v {
			o[i] = uint64(d)
		}
		return o
	}
	switch q.recipe {
	case "fp8-block":
		c := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: q.blockDim, Format: q.f, FP32Scales: q.fp32Scales, Eps: float32(q.eps)}
		sr, sc := fp8.Float8BlockScaleShape(rows, cols, q.blockDim)
		codes, inv := make([]uint8, len(x)), make([]float32, sr*sc)
		if err := fp8.QuantizeFloat8Block(codes, inv, x, rows, cols, c); err != nil {
			return nil, err
		}
		_ = fp8.DequantizeFloat8Block(r.dequant, codes, inv, rows, cols, c)
		r.outputs = []output{{".data", safetensors.U8, u(rows, cols), codes}, {".scale_inv", safetensors.F32, u(sr, sc), f32Data(inv)}}
		r.zeroCodes = countZero(codes)
		r.scaleMin, r.scaleMax = scaleRange(inv)
	case "nvfp4":
		c := fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 1, RHT: q.rht, Stochastic: q.sr, Seed: q.seed ^ fnv64(name)}
		if q.twoD {
			c.BlockDim = 2
		}
		t, err := fp8.QuantizeNVFP4(x, rows, cols, c)
		if err != nil {
			return nil, err
		}
		_ = t.Dequantize(r.dequant)
		sr, sc := fp8.NVFP4ScaleShape(rows, cols, q.twoD)
		r.outputs = []output{{".data", safetensors.U8, u(rows, (cols+1)/2), t.Codes}, {".block_scale", safetensors.U8, u(sr, sc), t.BlockScales},
			{".amax", safetensors.F32, u(1), f32Data([]float32{t.Amax})}}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				if t.Code(i, j) == 0 {
					r.zeroCodes++
				}
			}
		}
		dec := make([]float32, len(t.BlockScales))
		for i, s := range t.BlockScales {
			dec[i] = fp8.E4M3.Decode(s) * t.SDec
		}
		r.scaleMin, r.scaleMax = scaleRange(dec)
		if q.rht {
			// The codes encode the transformed tensor: compare with it.
			y := append([]float32(nil), x...)
			_ = fp8.RHT16(y)
			copy(x, y)
		}
	case "mxfp8":
		codes, scales := make([]uint8, len(x)), make([]fp8.E8M0, fp8.MXScaleCount(rows, cols, 1))
		if _, err := fp8.QuantizeMX(codes, scales, x, rows, cols, 1, q.f, fp8.ExpRoundUp); err != nil {
			return nil, err
		}
		_ = fp8.DequantizeMX(r.dequant, codes, scales, rows, cols, 1, q.f)
		sb := make([]byte, len(scales))
		dec := make([]float32, len(scales))
		for i, s := range scales {
			sb[i], dec[i] = uint8(s), s.Float32()
		}
		r.outputs = []output{{".data", safetensors.U8, u(rows, cols), codes}, {".scale", safetensors.U8, u(rows, (cols+31)/32), sb}}
		r.zeroCodes = countZero(codes)
		r.scaleMin, r.scaleMax = scaleRange(dec)
	case "current":
		scale := fp8.CurrentScale(fp8.Amax(x), q.f, false)
		codes := make([]uint8, len(x))
		if _, err := fp8.Quantize(codes, x, q.f, scale); err != nil {
			return nil, err
		}
		_ = fp8.Dequantize(r.dequant, codes, q.f, 1/scale)
		r.outputs = []output{{".data", safetensors.U8, u(rows, cols), codes}, {".scale_inv", safetensors.F32, u(1), f32Data([]float32{1 / scale})}}
		r.zeroCodes = countZero(codes)
		r.scaleMin, r.scaleMax = 1/scale, 1/scale
	}
	return r, nil
}

// fnv64 hashes a tensor's name into the stochastic rounding's key, so
// each tensor draws its own numbers.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// stats returns the mean squared error of the dequantized values over
// the finite inputs whose dequantized value is not NaN, underflows%
// (zero codes over all elements), and how many finite inputs decode to
// NaN (MXFP8 gives a block holding a NaN a NaN scale).
func stats(x, dq []float32, zeroCodes int) (mse, under float64, lost int) {
	n := 0
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			continue
		}
		if dq[i] != dq[i] {
			lost++
			continue
		}
		d := float64(dq[i]) - float64(v)
		mse += float64(d * d)
		n++
	}
	if n > 0 {
		mse /= float64(n)
	}
	return mse, 100 * float64(zeroCodes) / float64(len(x)), lost
}

// inspectCmd is octet inspect.
func inspectCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("octet inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Sprintf("inspect wants FILE.safetensors, got %d argument(s)", fs.NArg())}
	}
	path := fs.Arg(0)
	info, err := checkpoint.Inspect(path)
	if err != nil {
		return err
	}
	kind := "safetensors file"
	if info.Checkpoint {
		kind = "Octet checkpoint, step " + info.Step
	}
	check := "no checksums to verify"
	if info.Verified {
		check = "every tensor's CRC-32C verified"
	}
	fmt.Fprintf(stdout, "%s: %s, %d tensor(s); %s\n", path, kind, len(info.Tensors), check)
	keys := make([]string, 0, len(info.Meta))
	for k := range info.Meta {
		if k != "octet.crc32c" && k != "octet.fp8" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %s: %s\n", k, info.Meta[k])
	}
	if info.FP8 != "" && info.FP8 != "{}" {
		fmt.Fprintf(stdout, "  FP8 state: %s\n", info.FP8)
	}
	for _, t := range info.Tensors {
		sh := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			sh[i] = uint64(d)
		}
		fmt.Fprintf(stdout, "  %-50s %-4s %s\n", t.Name, t.DType, shapeString(sh))
	}
	return nil
}
