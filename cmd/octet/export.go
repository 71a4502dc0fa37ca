package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/hf"
	"github.com/octetml/octet/internal/stfile"
	"github.com/octetml/octet/nn"
)

// hfModel is a model octet export can write (a Llama or a GPT-2) and
// the builder it was built with.
type hfModel struct {
	*hf.Model
	builder *nn.Builder
}

// modelFromConfig builds the model a Hugging Face config.json describes
// (model_type llama or gpt2). path is a directory or a config.json.
func modelFromConfig(path string) (*hfModel, error) {
	b := nn.NewBuilder(graph.New())
	m, err := hf.NewModel(path, b)
	if err != nil {
		return nil, err
	}
	return &hfModel{m, b}, nil
}

// exportCmd is octet export.
func exportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("octet export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var format, keep, config string
	var e hf.Export
	var shardMB float64
	fs.StringVar(&format, "format", string(hf.FP8Block), "layout of the linear weights: fp8-block, fp8-tensor, fp8-channel, mxfp8, nvfp4, bf16 or f32")
	fs.StringVar(&keep, "keep", "", "comma-separated linear layers (Hugging Face names, such as model.layers.0.mlp.down_proj) kept in high precision")
	fs.BoolVar(&e.BF16, "bf16", false, "write the high-precision tensors (embeddings, norms, head, kept layers) as BF16 instead of F32")
	fs.BoolVar(&e.FP32Scales, "fp32-scales", false, "fp8-block: float32 tile scales (DeepSeek's) instead of powers of two")
	fs.Float64Var(&shardMB, "shard-mb", 0, "split the weights into shards of about this many MB with model.safetensors.index.json (0: one file)")
	fs.StringVar(&config, "config", "", "with an Octet checkpoint IN: the Hugging Face directory (or its config.json) describing the model")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("export wants IN OUT_DIR (IN a Hugging Face directory or an Octet checkpoint), got %d argument(s)", fs.NArg())}
	}
	f, err := hf.ParseFormat(format)
	if fe := (*hf.FormatError)(nil); errors.As(err, &fe) {
		return usageError{"-" + fe.Error()}
	} else if err != nil {
		return err
	}
	e.Format = f
	if e.FP32Scales && f != hf.FP8Block {
		return usageError{fmt.Sprintf("-fp32-scales applies to -format fp8-block, not %s", f)}
	}
	if !(shardMB >= 0) || math.IsInf(shardMB, 0) || shardMB > 1<<40 {
		return usageError{fmt.Sprintf("-shard-mb %v: want a number ≥ 0", shardMB)}
	}
	e.ShardBytes = int64(shardMB * (1 << 20))
	if shardMB > 0 && e.ShardBytes == 0 {
		e.ShardBytes = 1
	}
	if keep != "" {
		for _, k := range strings.Split(keep, ",") {
			if k = strings.TrimSpace(k); k != "" {
				e.Keep = append(e.Keep, k)
			}
		}
	}
	in, out := fs.Arg(0), fs.Arg(1)
	fi, err := os.Stat(in)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(out); err == nil && !fi.IsDir() {
		return usageError{fmt.Sprintf("OUT_DIR %s is a file", out)}
	}
	var m *hfModel
	store := graph.NewStore()
	source := "Hugging Face directory"
	if fi.IsDir() {
		if config != "" {
			return usageError{"-config is for an Octet checkpoint IN; a Hugging Face directory has its own config.json"}
		}
		if m, err = modelFromConfig(in); err != nil {
			return err
		}
		if err := m.Load(in, store); err != nil {
			return err
		}
		config = in
	} else {
		if config == "" {
			return usageError{"IN is a file: an Octet checkpoint wants -config naming the Hugging Face directory (or config.json) that describes its model"}
		}
		if m, err = modelFromConfig(config); err != nil {
			return fmt.Errorf("-config: %w", err)
		}
		layers, err := loadCheckpointParams(in, m.builder, store)
		if err != nil {
			return err
		}
		source = "Octet checkpoint"
		if layers != nil {
			e.Layers = layers
			source += fmt.Sprintf(" (%d layers trained in FP8: those are quantized)", len(layers))
		}
	}
	if err := copyTokenizerFiles(config, out); err != nil {
		return err
	}
	if err := m.Export(out, store, e); err != nil {
		return err
	}
	return summarise(stdout, in, out, source, m.Type, e)
}

// loadCheckpointParams reads the model's parameters from an Octet
// checkpoint (checksums verified, each parameter present, float32 of
// the model's shape and finite) into store, and returns the layers the
// checkpoint holds FP8 scaling state for (nil if none).
func loadCheckpointParams(path string, b *nn.Builder, store *graph.Store) ([]string, error) {
	info, err := checkpoint.Inspect(path)
	if err != nil {
		return nil, err
	}
	if !info.Checkpoint {
		return nil, fmt.Errorf("%s: not an Octet checkpoint (no %q metadata); for a Hugging Face model give its directory", path, "octet.format")
	}
	f, err := stfile.Read(path)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, p := range b.Params() {
		want["param/"+p.Name()] = true
		t, ok := f.Tensors["param/"+p.Name()]
		if !ok {
			return nil, fmt.Errorf("%s: parameter %q of the model (-config) is missing: another model's checkpoint?", path, p.Name())
		}
		if t.DType != "F32" || !graph.Shape(t.Shape).Equal(p.Shape()) {
			return nil, fmt.Errorf("%s: parameter %q is %s %v, the model wants F32 %v", path, p.Name(), t.DType, t.Shape, p.Shape())
		}
		v := make([]float32, len(t.Data)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
		if err := store.SetFloat32(p.Name(), v, p.Shape()...); err != nil {
			return nil, err
		}
	}
	for _, name := range f.Names() {
		if strings.HasPrefix(name, "param/") && !want[name] {
			return nil, fmt.Errorf("%s: parameter %q is not in the model -config describes", path, strings.TrimPrefix(name, "param/"))
		}
	}
	if info.FP8 == "" || info.FP8 == "{}" {
		return nil, nil
	}
	var layers map[string]json.RawMessage
	if err := json.Unmarshal([]byte(info.FP8), &layers); err != nil {
		return nil, fmt.Errorf("%s: FP8 state metadata: %v", path, err)
	}
	names := make([]string, 0, len(layers))
	for l := range layers {
		names = append(names, l)
	}
	sort.Strings(names)
	return names, nil
}

// copyTokenizerFiles copies the tokenizer and generation files of a
// Hugging Face directory to out, so the export loads with them.
func copyTokenizerFiles(from, out string) error {
	if fi, err := os.Stat(from); err == nil && !fi.IsDir() {
		from = filepath.Dir(from)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model", "generation_config.json", "vocab.json", "merges.txt"} {
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			continue
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// summarise prints what the export wrote.
func summarise(w io.Writer, in, out, source, kind string, e hf.Export) error {
	entries, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	var total int64
	var quantized, kept []string
	for _, en := range entries {
		if !strings.HasSuffix(en.Name(), ".safetensors") {
			continue
		}
		fi, err := en.Info()
		if err != nil {
			return err
		}
		total += fi.Size()
		f, err := stfile.Read(filepath.Join(out, en.Name()))
		if err != nil {
			return err
		}
		for _, name := range f.Names() {
			if strings.HasSuffix(name, ".weight_scale") || strings.HasSuffix(name, ".weight_scale_inv") {
				quantized = append(quantized, strings.TrimSuffix(strings.TrimSuffix(name, "_inv"), ".weight_scale"))
			}
		}
	}
	conf, err := os.ReadFile(filepath.Join(out, hf.ConfigFile))
	if err != nil {
		return err
	}
	var c struct {
		Q map[string]any `json:"quantization_config"`
	}
	_ = json.Unmarshal(conf, &c)
	for _, key := range []string{"modules_to_not_convert", "ignore", "exclude_modules"} {
		if l, ok := c.Q[key].([]any); ok {
			for _, x := range l {
				kept = append(kept, fmt.Sprint(x))
			}
		}
	}
	fmt.Fprintf(w, "%s (%s, %s) → %s: %s\n", in, source, kind, out, e.Format)
	if len(quantized) == 0 {
		fmt.Fprintf(w, "every tensor in high precision; %.2f MB of weights\n", float64(total)/(1<<20))
		return nil
	}
	fmt.Fprintf(w, "%d linear weight(s) quantized; kept in high precision: %s; %.2f MB of weights\n",
		len(quantized), strings.Join(kept, ", "), float64(total)/(1<<20))
	return nil
}
