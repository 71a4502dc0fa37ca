package hf

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/x448/float16"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/stfile"
)

// Format names how ExportLlama and ExportGPT write a model's linear weights.
type Format string

// The formats ExportLlama and ExportGPT write and LoadLlama and LoadGPT read.
const (
	// Float32 writes every tensor as F32 (SaveLlama's layout; the zero
	// value of Export.Format means it too).
	Float32 Format = "f32"
	// BFloat16 writes every tensor as BF16, rounded to nearest even.
	BFloat16 Format = "bf16"
	// FP8Block is Hugging Face's fine-grained FP8 (quant_method "fp8",
	// the DeepSeek-V3 / Qwen3-FP8 layout): E4M3 weights quantized in
	// 128×128 tiles by Float8BlockScaling (power-of-two scales unless
	// Export.FP32Scales) and an F32 <module>.weight_scale_inv
	// [⌈out/128⌉ ⌈in/128⌉], each tile's decode scale.
	FP8Block Format = "fp8-block"
	// FP8Tensor is compressed-tensors' float-quantized layout with one
	// scale per weight (strategy "tensor"): E4M3 weights by tensorwise
	// current scaling and an F32 <module>.weight_scale [1], the decode
	// scale 1/scale.
	FP8Tensor Format = "fp8-tensor"
	// FP8Channel is compressed-tensors' float-quantized layout with one
	// scale per output channel (strategy "channel"): E4M3 weights by
	// torchao's rowwise cast (power-of-two scales, one per row along the
	// input) and an F32 <module>.weight_scale [out 1].
	FP8Channel Format = "fp8-channel"
	// MXFP8 is NVIDIA ModelOpt's MXFP8 layout (quant_algo "MXFP8"):
	// E4M3 weights in blocks of 32 along the input with E8M0 scales
	// (Transformer Engine's rounding up), <module>.weight_scale U8 [out
	// ⌈in/32⌉], the biased exponents.
	MXFP8 Format = "mxfp8"
	// NVFP4 is NVIDIA ModelOpt's NVFP4 layout (quant_algo "NVFP4"):
	// <module>.weight U8 [out ⌈in/2⌉], two E2M1 codes a byte (the even
	// element in the low nibble), <module>.weight_scale F8_E4M3 [out
	// ⌈in/16⌉] and <module>.weight_scale_2 F32 [], the tensor's decode
	// scale; the codes are the NVFP4 recipe's weight cast (16×16 tiles,
	// whose scale each of its 16 rows repeats).
	NVFP4 Format = "nvfp4"
)

// Formats lists the formats, in the order the docs give them.
var Formats = []Format{Float32, BFloat16, FP8Block, FP8Tensor, FP8Channel, MXFP8, NVFP4}

// FormatError is ParseFormat's refusal of a name that is no Format.
type FormatError struct{ Name string }

// Error names the formats there are.
func (e *FormatError) Error() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return fmt.Sprintf("format %q: want one of %s", e.Name, strings.Join(names, ", "))
}

// ParseFormat returns the format named s (as the constants spell it,
// case-insensitive; "" is Float32). An unknown name is a *FormatError
// (errors.As), also matching ErrCheckpoint.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Float32, nil
	}
	for _, f := range Formats {
		if strings.EqualFold(s, string(f)) {
			return f, nil
		}
	}
	return "", fmt.Errorf("hf: %w: %w", ErrCheckpoint, &FormatError{s})
}

// quantized reports whether f writes linear weights in a low-precision
// layout with scales.
func (f Format) quantized() bool { return f != "" && f != Float32 && f != BFloat16 }

// Export says how ExportLlama and ExportGPT write a model. The zero value writes
// float32, as SaveLlama.
type Export struct {
	// Format is the layout of the linear weights (Float32 when empty).
	Format Format
	// Keep lists modules (Hugging Face names without ".weight", such as
	// "model.layers.0.mlp.down_proj") whose weights stay in high
	// precision; they are named in the config's list of modules not
	// converted. The LM head, embeddings and norms always stay.
	Keep []string
	// Layers, when not nil, names the linear layers to quantize by the
	// names the FP8 compiler gives them (as FP8 layer states and
	// passes.Report name them: the layers an FP8 run trained in FP8; a
	// Llama's q, k and v weights belong to self_attn.qkv_proj, its gate
	// and up weights to mlp.gate_up_proj, any other weight to its
	// parameter's name less ".weight"); the other linear layers stay in
	// high precision and are listed as not converted. An empty list, or
	// a name that is no linear layer of the model, is an error.
	Layers []string
	// BF16 writes the high-precision tensors as BF16 (rounded to nearest
	// even) instead of F32.
	BF16 bool
	// FP32Scales keeps FP8Block's tile scales in float32 (DeepSeek's
	// checkpoints) instead of rounding them down to powers of two
	// (Transformer Engine's default).
	FP32Scales bool
	// StackedExperts writes a Mixture of Experts' experts as
	// transformers 5 stores them, two tensors per layer
	// (mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj
	// [E, H, I], in high precision), instead of one tensor per expert
	// (which transformers 4, vLLM and the FP8 formats read).
	StackedExperts bool
	// ShardBytes, if positive, splits the weights into
	// model-0000k-of-0000n.safetensors files of at most about this many
	// bytes each (a tensor larger than it gets a file of its own) with
	// the model.safetensors.index.json that names them.
	ShardBytes int64
}

// check refuses options that do not apply.
func (e Export) check() error {
	if _, err := ParseFormat(string(e.Format)); err != nil {
		return err
	}
	if e.FP32Scales && e.Format != FP8Block {
		return fmt.Errorf("hf: %w: FP32Scales applies to %s only, not %s", ErrCheckpoint, FP8Block, e.Format)
	}
	if e.ShardBytes < 0 {
		return fmt.Errorf("hf: %w: ShardBytes %d is negative", ErrCheckpoint, e.ShardBytes)
	}
	return nil
}

// key names the codes a format computes, for reusing imported codes.
func (e Export) key() string {
	if e.Format == NVFP4 {
		return codesKey(e.Format, [2]int{}, "U8")
	}
	return codesKey(e.Format, [2]int{fp8.Float8BlockSize, fp8.Float8BlockSize}, "F8_E4M3")
}

// codesKey names a quantized layout: the format, its tile for
// fp8-block, and the weight's dtype.
func codesKey(f Format, block [2]int, weightDType string) string {
	if f == FP8Block {
		return fmt.Sprintf("%s %dx%d %s", f, block[0], block[1], weightDType)
	}
	return string(f) + " " + weightDType
}

// hfCodesKey is the store's state key under which LoadLlama and LoadGPT keep the codes
// it read for a parameter.
func hfCodesKey(param string) string { return "nn.hf.codes/" + param }

// hfCodes are a quantized weight's tensors as a checkpoint held them:
// written again, unchanged, when the weight still equals their
// dequantization bit for bit, so import then export gives the same bytes.
type hfCodes struct {
	key     string
	tensors []stfile.Tensor // names relative to the module ("weight", "weight_scale_inv", …)
}

// hfScheme is how a checkpoint's linear weights are quantized, from its
// quantization_config.
type hfScheme struct {
	format  Format
	block   [2]int     // fp8-block (or compressed-tensors' "block")
	elem    fp8.Format // fp8 formats: the config's element format (E4M3 unless said)
	elemSet bool       // the config names the element format
	ignore  []string
	method  string
}

// readHFScheme reads config.json's quantization_config (or ModelOpt's
// hf_quant_config.json): nil when the checkpoint is not quantized.
func readHFScheme(dir string) (*hfScheme, error) {
	raw, path, err := readJSONFile(dir, ConfigFile)
	if err != nil {
		return nil, err
	}
	q, ok := raw["quantization_config"]
	if !ok || string(q) == "null" {
		mo, mpath, err := readJSONFile(dir, hfQuantConfigFile)
		if err != nil || mo == nil {
			return nil, err
		}
		q, ok = mo["quantization"]
		if !ok {
			return nil, hfErr(mpath, "key \"quantization\" is missing")
		}
		path = mpath
		var m map[string]json.RawMessage
		if err := json.Unmarshal(q, &m); err != nil {
			return nil, hfErr(path, "key \"quantization\": not a JSON object")
		}
		m["quant_method"] = json.RawMessage(`"modelopt"`)
		q, _ = json.Marshal(m)
	}
	var qc map[string]json.RawMessage
	if err := json.Unmarshal(q, &qc); err != nil {
		return nil, hfErr(path, "key \"quantization_config\": not a JSON object")
	}
	where := path + ": quantization_config"
	var method string
	if err := decodeHFKeys(where, qc, []hfKey{{"quant_method", &method, true}}); err != nil {
		return nil, err
	}
	s := &hfScheme{method: method, elem: fp8.E4M3}
	switch strings.ToLower(method) {
	case "fp8":
		var fmtName, act string
		var block []int
		var skip []string
		if err := decodeHFKeys(where, qc, []hfKey{{"fmt", &fmtName, false}, {"activation_scheme", &act, false},
			{"weight_block_size", &block, false}, {"modules_to_not_convert", &skip, false}}); err != nil {
			return nil, err
		}
		if err := s.setElem(where, "fmt", fmtName); err != nil {
			return nil, err
		}
		if act != "" && act != "dynamic" && act != "static" {
			return nil, hfErr(where, "key \"activation_scheme\": %q, want \"dynamic\" or \"static\"", act)
		}
		s.format, s.ignore = FP8Block, skip
		if block == nil { // AutoFP8's per-tensor layout: weight_scale, a scalar
			s.format = FP8Tensor
		} else if err := s.setBlock(where, "weight_block_size", block); err != nil {
			return nil, err
		}
	case "compressed-tensors":
		if err := s.readCompressedTensors(where, qc); err != nil {
			return nil, err
		}
	case "modelopt":
		var algo string
		var group int
		var skip []string
		if err := decodeHFKeys(where, qc, []hfKey{{"quant_algo", &algo, true}, {"group_size", &group, false},
			{"exclude_modules", &skip, false}}); err != nil {
			return nil, err
		}
		switch strings.ToUpper(algo) {
		case "NVFP4":
			s.format = NVFP4
			if group != 0 && group != fp8.NVFP4Block {
				return nil, hfErr(where, "key \"group_size\": %d, want %d for NVFP4", group, fp8.NVFP4Block)
			}
		case "MXFP8":
			s.format = MXFP8
			if group != 0 && group != fp8.BlockSize {
				return nil, hfErr(where, "key \"group_size\": %d, want %d for MXFP8", group, fp8.BlockSize)
			}
		default:
			return nil, hfErr(where, "key \"quant_algo\": %q is not supported (NVFP4 or MXFP8)", algo)
		}
		s.ignore = skip
	default:
		return nil, hfErr(where, "key \"quant_method\": %q is not supported (fp8, compressed-tensors or modelopt)", method)
	}
	return s, nil
}

func (s *hfScheme) setElem(where, key, name string) error {
	switch strings.ToLower(name) {
	case "":
	case "e4m3", "float8_e4m3fn":
		s.elemSet = true
	case "e5m2", "float8_e5m2":
		s.elem, s.elemSet = fp8.E5M2, true
	default:
		return hfErr(where, "key %q: %q, want \"e4m3\" or \"e5m2\"", key, name)
	}
	return nil
}

func (s *hfScheme) setBlock(where, key string, block []int) error {
	if len(block) != 2 || block[0] < 1 || block[1] < 1 || block[0] > 1<<20 || block[1] > 1<<20 {
		return hfErr(where, "key %q: %v, want two positive sizes such as [128, 128]", key, block)
	}
	s.block = [2]int{block[0], block[1]}
	return nil
}

// readCompressedTensors reads compressed-tensors' float-quantized FP8
// scheme: one config group of 8-bit float weights, strategy tensor,
// channel or block.
func (s *hfScheme) readCompressedTensors(where string, qc map[string]json.RawMessage) error {
	var format string
	var groups map[string]json.RawMessage
	if err := decodeHFKeys(where, qc, []hfKey{{"format", &format, false}, {"config_groups", &groups, true},
		{"ignore", &s.ignore, false}}); err != nil {
		return err
	}
	if format != "float-quantized" {
		return hfErr(where, "key \"format\": %q is not supported (float-quantized)", format)
	}
	if len(groups) != 1 {
		return hfErr(where, "key \"config_groups\": %d groups; one group of FP8 weights is supported", len(groups))
	}
	for name, g := range groups {
		gw := where + ".config_groups." + name
		var gm map[string]json.RawMessage
		if err := json.Unmarshal(g, &gm); err != nil {
			return hfErr(gw, "not a JSON object")
		}
		var w map[string]json.RawMessage
		if err := decodeHFKeys(gw, gm, []hfKey{{"weights", &w, true}}); err != nil {
			return err
		}
		ww := gw + ".weights"
		var bitsN int
		var typ, strategy string
		var block []int
		if err := decodeHFKeys(ww, w, []hfKey{{"num_bits", &bitsN, true}, {"type", &typ, true}, {"strategy", &strategy, true},
			{"block_structure", &block, false}}); err != nil {
			return err
		}
		if bitsN != 8 || typ != "float" {
			return hfErr(ww, "num_bits %d, type %q: only 8-bit float weights are read", bitsN, typ)
		}
		switch strategy {
		case "tensor":
			s.format = FP8Tensor
		case "channel":
			s.format = FP8Channel
		case "block":
			if err := s.setBlock(ww, "block_structure", block); err != nil {
				return err
			}
			s.format = FP8Block
		default:
			return hfErr(ww, "key \"strategy\": %q is not supported (tensor, channel or block)", strategy)
		}
	}
	return nil
}

// hfQuantConfigFile is ModelOpt's description of a quantized checkpoint.
const hfQuantConfigFile = "hf_quant_config.json"

// dequantize reads module's quantized weight from fs into float32 ([rows
// cols], the stored orientation) and returns the tensors it used.
func (s *hfScheme) dequantize(fs *hfFiles, module string, rows, cols int) ([]float32, []stfile.Tensor, error) {
	w, wpath, _ := fs.get(module + ".weight")
	need := func(suffix, dtype string, shapes ...[]int) (stfile.Tensor, error) {
		name := module + "." + suffix
		t, p, ok := fs.get(name)
		if !ok {
			return t, hfErr(wpath, "tensor %q is %s but its scale %q is missing", w.Name, w.DType, name)
		}
		if t.DType != dtype {
			return t, hfErr(p, "tensor %q is %s, want %s", name, t.DType, dtype)
		}
		for _, sh := range shapes {
			if shapeIs(t.Shape, sh) {
				return t, nil
			}
		}
		return t, hfErr(p, "tensor %q has shape %v, want %v", name, t.Shape, shapes[0])
	}
	out := make([]float32, rows*cols)
	var used []stfile.Tensor
	switch s.format {
	case FP8Block, FP8Tensor, FP8Channel, MXFP8:
		f, err := s.fp8Weight(w, wpath, rows, cols)
		if err != nil {
			return nil, nil, err
		}
		tab := f.DecodeTable()
		var sc stfile.Tensor
		switch s.format {
		case FP8Block:
			bm, bn := s.block[0], s.block[1]
			sr, scn := (rows+bm-1)/bm, (cols+bn-1)/bn
			name := "weight_scale_inv"
			if s.method == "compressed-tensors" {
				name = "weight_scale"
			}
			if sc, err = need(name, "F32", []int{sr, scn}); err != nil {
				return nil, nil, err
			}
			inv, err := finiteScales(fs, sc)
			if err != nil {
				return nil, nil, err
			}
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					out[r*cols+j] = tab[w.Data[r*cols+j]] * inv[(r/bm)*scn+j/bn]
				}
			}
		case FP8Tensor:
			if sc, err = need("weight_scale", "F32", []int{1}, []int{}); err != nil {
				return nil, nil, err
			}
			v, err := finiteScales(fs, sc)
			if err != nil {
				return nil, nil, err
			}
			for i, q := range w.Data {
				out[i] = tab[q] * v[0]
			}
		case FP8Channel:
			if sc, err = need("weight_scale", "F32", []int{rows, 1}, []int{rows}); err != nil {
				return nil, nil, err
			}
			v, err := finiteScales(fs, sc)
			if err != nil {
				return nil, nil, err
			}
			for i, q := range w.Data {
				out[i] = tab[q] * v[i/cols]
			}
		case MXFP8:
			nb := (cols + fp8.BlockSize - 1) / fp8.BlockSize
			if sc, err = need("weight_scale", "U8", []int{rows, nb}); err != nil {
				sc2, err2 := need("weight_scale", "F8_E8M0", []int{rows, nb})
				if err2 != nil {
					return nil, nil, err
				}
				sc = sc2
			}
			for i, e := range sc.Data {
				if fp8.E8M0(e) == fp8.E8M0NaN {
					return nil, nil, hfErr(fs.where[sc.Name], "tensor %q: scale %d is the NaN code 0xFF", sc.Name, i)
				}
			}
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					out[r*cols+j] = tab[w.Data[r*cols+j]] * fp8.E8M0(sc.Data[r*nb+j/fp8.BlockSize]).Float32()
				}
			}
		}
		used = []stfile.Tensor{w, sc}
	case NVFP4:
		if w.DType != "U8" || !shapeIs(w.Shape, []int{rows, (cols + 1) / 2}) {
			return nil, nil, hfErr(wpath, "tensor %q is %s %v; NVFP4 wants U8 [%d %d] (two E2M1 codes a byte)", w.Name, w.DType, w.Shape, rows, (cols+1)/2)
		}
		nb := (cols + fp8.NVFP4Block - 1) / fp8.NVFP4Block
		bs, err := need("weight_scale", "F8_E4M3", []int{rows, nb})
		if err != nil {
			return nil, nil, err
		}
		for i, c := range bs.Data {
			if fp8.E4M3.IsNaN(c) {
				return nil, nil, hfErr(fs.where[bs.Name], "tensor %q: block scale %d is the NaN code", bs.Name, i)
			}
		}
		g, err := need("weight_scale_2", "F32", []int{}, []int{1})
		if err != nil {
			return nil, nil, err
		}
		gv, err := finiteScales(fs, g)
		if err != nil {
			return nil, nil, err
		}
		half := (cols + 1) / 2
		for r := 0; r < rows; r++ {
			for j := 0; j < cols; j++ {
				code := w.Data[r*half+j/2] >> (4 * (j & 1)) & 0xF
				out[r*cols+j] = fp8.E2M1Decode(code) * fp8.E4M3.Decode(bs.Data[r*nb+j/fp8.NVFP4Block]) * gv[0]
			}
		}
		used = []stfile.Tensor{w, bs, g}
	default:
		return nil, nil, hfErr(wpath, "tensor %q: no quantized format to read it with", w.Name)
	}
	return out, used, nil
}

// fp8Weight checks an FP8 weight's dtype and shape against the scheme.
func (s *hfScheme) fp8Weight(w stfile.Tensor, path string, rows, cols int) (fp8.Format, error) {
	var f fp8.Format
	switch w.DType {
	case "F8_E4M3":
		f = fp8.E4M3
	case "F8_E5M2":
		f = fp8.E5M2
	default:
		return f, hfErr(path, "tensor %q is %s; the checkpoint's %s weights are F8_E4M3 or F8_E5M2", w.Name, w.DType, s.format)
	}
	if s.elemSet && f != s.elem {
		return f, hfErr(path, "tensor %q is %s but quantization_config says %v", w.Name, w.DType, s.elem)
	}
	if !shapeIs(w.Shape, []int{rows, cols}) {
		return f, hfErr(path, "tensor %q has shape %v, the model wants %v", w.Name, w.Shape, []int{rows, cols})
	}
	return f, nil
}

// finiteScales decodes an F32 scale tensor, refusing NaN, infinite or
// negative scales by index.
func finiteScales(fs *hfFiles, t stfile.Tensor) ([]float32, error) {
	v := make([]float32, len(t.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		if x := float64(v[i]); math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil, hfErr(fs.where[t.Name], "tensor %q: scale %d is %v, want a finite number ≥ 0", t.Name, i, v[i])
		}
	}
	return v, nil
}

func shapeIs(got, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func isFP8DType(d string) bool { return d == "F8_E4M3" || d == "F8_E5M2" }

// quantizeHF casts a [rows cols] weight (stored orientation) in format
// e.Format and returns the module's tensors, named relative to it.
func quantizeHF(e Export, x []float32, rows, cols int) ([]stfile.Tensor, error) {
	codes := make([]uint8, len(x))
	switch e.Format {
	case FP8Block:
		c := fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 2, Format: fp8.E4M3, FP32Scales: e.FP32Scales}
		sr, sc := fp8.Float8BlockScaleShape(rows, cols, 2)
		inv := make([]float32, sr*sc)
		if err := fp8.QuantizeFloat8Block(codes, inv, x, rows, cols, c); err != nil {
			return nil, err
		}
		return []stfile.Tensor{fp8Tensor("weight", codes, rows, cols), f32Tensor("weight_scale_inv", inv, sr, sc)}, nil
	case FP8Tensor:
		scale := fp8.CurrentScale(fp8.Amax(x), fp8.E4M3, false)
		if _, err := fp8.Quantize(codes, x, fp8.E4M3, scale); err != nil {
			return nil, err
		}
		return []stfile.Tensor{fp8Tensor("weight", codes, rows, cols), f32Tensor("weight_scale", []float32{1 / scale}, 1)}, nil
	case FP8Channel:
		scales := make([]float32, rows)
		if err := fp8.QuantizeAxiswise(codes, scales, nil, x, rows, cols, 1, fp8.E4M3, true); err != nil {
			return nil, err
		}
		for i, s := range scales {
			scales[i] = 1 / s // a power of two: exact
		}
		return []stfile.Tensor{fp8Tensor("weight", codes, rows, cols), f32Tensor("weight_scale", scales, rows, 1)}, nil
	case MXFP8:
		scales := make([]fp8.E8M0, fp8.MXScaleCount(rows, cols, 1))
		if _, err := fp8.QuantizeMX(codes, scales, x, rows, cols, 1, fp8.E4M3, fp8.ExpRoundUp); err != nil {
			return nil, err
		}
		sb := make([]byte, len(scales))
		for i, s := range scales {
			sb[i] = uint8(s)
		}
		return []stfile.Tensor{fp8Tensor("weight", codes, rows, cols),
			{Name: "weight_scale", DType: "U8", Shape: []int{rows, (cols + fp8.BlockSize - 1) / fp8.BlockSize}, Data: sb}}, nil
	case NVFP4:
		q, err := fp8.QuantizeNVFP4(x, rows, cols, fp8.Quantizer{Kind: fp8.NVFP4Blocks, BlockDim: 2})
		if err != nil {
			return nil, err
		}
		_, nb := fp8.NVFP4ScaleShape(rows, cols, true)
		bs := make([]byte, rows*nb)
		for r := 0; r < rows; r++ {
			copy(bs[r*nb:(r+1)*nb], q.BlockScales[(r/fp8.NVFP4Block)*nb:])
		}
		return []stfile.Tensor{{Name: "weight", DType: "U8", Shape: []int{rows, (cols + 1) / 2}, Data: q.Codes},
			{Name: "weight_scale", DType: "F8_E4M3", Shape: []int{rows, nb}, Data: bs},
			f32Tensor("weight_scale_2", []float32{q.SDec})}, nil
	}
	return nil, fmt.Errorf("hf: %w: format %q does not quantize", ErrCheckpoint, e.Format)
}

func fp8Tensor(name string, codes []uint8, rows, cols int) stfile.Tensor {
	return stfile.Tensor{Name: name, DType: "F8_E4M3", Shape: []int{rows, cols}, Data: codes}
}

func f32Tensor(name string, v []float32, shape ...int) stfile.Tensor {
	if shape == nil {
		shape = []int{}
	}
	return stfile.Tensor{Name: name, DType: "F32", Shape: shape, Data: f32Bytes(v)}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// bf16Bytes rounds v to bfloat16, nearest even (NaN kept a quiet NaN).
func bf16Bytes(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		var h uint16
		if x != x {
			h = uint16(u>>16) | 0x40
		} else {
			h = uint16((u + 0x7FFF + (u >> 16 & 1)) >> 16)
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// hfFloat32Of converts a high-precision tensor's data to float32: F32 as
// it is, BF16 and F16 exactly.
func hfFloat32Of(t stfile.Tensor) ([]float32, error) {
	raw := t.Data
	switch t.DType {
	case "F32":
		out := make([]float32, len(raw)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	case "BF16":
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
		return out, nil
	case "F16":
		out := make([]float32, len(raw)/2)
		for i := range out {
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32()
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %s is not supported here (F32, BF16 or F16)", t.DType)
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// keepCodes records a quantized weight's imported tensors in the store.
func keepCodes(store *graph.Store, param string, s *hfScheme, module string, used []stfile.Tensor) {
	rel := make([]stfile.Tensor, len(used))
	for i, t := range used {
		t.Name = strings.TrimPrefix(t.Name, module+".")
		t.Data = append([]byte(nil), t.Data...)
		rel[i] = t
	}
	if s.format == FP8Block {
		rel[1].Name = "weight_scale_inv" // compressed-tensors' block scales, as FP8Block names them
	}
	store.SetState(hfCodesKey(param), &hfCodes{key: codesKey(s.format, s.block, used[0].DType), tensors: rel})
}
