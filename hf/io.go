package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/atomicfile"
	"github.com/octetml/octet/internal/stfile"
)

// IndexFile names the shards of a sharded checkpoint: {"metadata":
// {"total_size": bytes}, "weight_map": {tensor: file}}.
const IndexFile = "model.safetensors.index.json"

// hfFiles are a Hugging Face directory's tensors, from model.safetensors
// or from the shards its index names.
type hfFiles struct {
	dir     string
	tensors map[string]stfile.Tensor
	where   map[string]string // tensor → the file holding it
}

func (fs *hfFiles) get(name string) (stfile.Tensor, string, bool) {
	t, ok := fs.tensors[name]
	return t, fs.where[name], ok
}

// readJSONFile reads dir/name as a JSON object; nil (no error) when the
// file does not exist.
func readJSONFile(dir, name string) (map[string]json.RawMessage, string, error) {
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, nil
	} else if err != nil {
		return nil, path, fmt.Errorf("hf: %w: %w", ErrCheckpoint, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, path, hfErr(path, "not a JSON object: %v", err)
	}
	return raw, path, nil
}

// openHF reads dir's weights: model.safetensors if it exists (as
// transformers prefers it), else every shard model.safetensors.index.json
// names, checking that the index and the shards agree.
func openHF(dir string) (*hfFiles, error) {
	out := &hfFiles{dir: dir, tensors: map[string]stfile.Tensor{}, where: map[string]string{}}
	single := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(single); err == nil {
		f, err := stfile.Read(single)
		if err != nil {
			return nil, fmt.Errorf("hf: %w: %w", ErrCheckpoint, err)
		}
		for n, t := range f.Tensors {
			out.tensors[n], out.where[n] = t, single
		}
		return out, nil
	}
	raw, ipath, err := readJSONFile(dir, IndexFile)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, hfErr(dir, "neither %s nor %s: no weights", WeightsFile, IndexFile)
	}
	var wm map[string]string
	if err := decodeHFKeys(ipath, raw, []hfKey{{"weight_map", &wm, true}}); err != nil {
		return nil, err
	}
	if len(wm) == 0 {
		return nil, hfErr(ipath, "key \"weight_map\" is empty")
	}
	byFile := map[string][]string{}
	for name, file := range wm {
		if file == "" || file != filepath.Base(file) || file == "." || file == ".." || strings.ContainsAny(file, `/\`) {
			return nil, hfErr(ipath, "tensor %q: shard %q is not a file name in the directory", name, file)
		}
		byFile[file] = append(byFile[file], name)
	}
	files := make([]string, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, file := range files {
		path := filepath.Join(dir, file)
		f, err := stfile.Read(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, hfErr(ipath, "shard %q (holding %q) is missing", file, byFile[file][0])
		} else if err != nil {
			return nil, fmt.Errorf("hf: %w: %w", ErrCheckpoint, err)
		}
		for _, name := range f.Names() {
			if wm[name] != file {
				return nil, hfErr(path, "tensor %q is not in %s under this shard", name, IndexFile)
			}
			out.tensors[name], out.where[name] = f.Tensors[name], path
		}
		for _, name := range byFile[file] {
			if _, ok := f.Tensors[name]; !ok {
				return nil, hfErr(path, "tensor %q, which %s puts here, is missing", name, IndexFile)
			}
		}
	}
	return out, nil
}

// loadHFFrom checks every tensor ts wants — dequantizing quantized linear
// weights with their scales as the directory's quantization_config says
// — and only then stores them; skip names tensors of the files that
// belong to no parameter and are not an error.
func loadHFFrom(fs *hfFiles, store *graph.Store, ts []hfTensor, skip func(string) bool) error {
	scheme, err := readHFScheme(fs.dir)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, t := range ts {
		used[t.name] = true
	}
	values := make([][]float32, len(ts))
	type kept struct {
		param, module string
		tensors       []stfile.Tensor
	}
	var codes []kept
	for i, t := range ts {
		v, path, ok := fs.get(t.name)
		if !ok {
			return hfErr(fs.dir, "tensor %q is missing", t.name)
		}
		want := t.sliceShape()
		if t.transpose {
			want = graph.Shape{want[1], want[0]}
		}
		var data []float32
		if t.linear && len(want) == 2 && (isFP8DType(v.DType) || scheme != nil && scheme.format == NVFP4 && v.DType == "U8") {
			if scheme == nil {
				return hfErr(path, "tensor %q is %s but %s has no quantization_config", t.name, v.DType, ConfigFile)
			}
			module := strings.TrimSuffix(t.name, ".weight")
			var ten []stfile.Tensor
			if data, ten, err = scheme.dequantize(fs, module, want[0], want[1]); err != nil {
				return err
			}
			for _, u := range ten {
				used[u.Name] = true
			}
			codes = append(codes, kept{t.codesName(), module, ten})
		} else {
			if !shapeIs(v.Shape, want) {
				return hfErr(path, "tensor %q has shape %v, the model wants %v", t.name, v.Shape, want)
			}
			if data, err = hfFloat32Of(v); err != nil {
				return hfErr(path, "tensor %q: %v", t.name, err)
			}
		}
		for j, x := range data {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return hfErr(path, "tensor %q element %d is %v: a checkpoint's weights must be finite", t.name, j, x)
			}
		}
		if t.transpose {
			data = transpose(data, want[0], want[1])
		}
		values[i] = data
	}
	names := make([]string, 0, len(fs.tensors))
	for n := range fs.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		static := scheme != nil && (strings.HasSuffix(name, ".input_scale") || strings.HasSuffix(name, ".activation_scale"))
		if !used[name] && !static && (skip == nil || !skip(name)) {
			return hfErr(fs.where[name], "tensor %q is not a parameter of the model", name)
		}
	}
	// Slices of one parameter fill one buffer; every parameter is
	// covered whole (the layouts are built so).
	whole := map[*graph.Node][]float32{}
	var order []*graph.Node
	for i, t := range ts {
		if t.shape == nil {
			whole[t.param] = values[i]
			order = append(order, t.param)
			continue
		}
		buf, ok := whole[t.param]
		if !ok {
			buf = make([]float32, t.param.Shape().Numel())
			whole[t.param] = buf
			order = append(order, t.param)
		}
		copy(buf[t.off:], values[i])
	}
	for _, p := range order {
		if err := store.SetFloat32(p.Name(), whole[p], p.Shape()...); err != nil {
			return err
		}
	}
	for _, t := range ts {
		store.SetState(hfCodesKey(t.codesName()), nil)
	}
	for _, k := range codes {
		keepCodes(store, k.param, scheme, k.module, k.tensors)
	}
	return nil
}

// fp8Layer is the name the FP8 compiler gives the layer of t's weight.
func (t hfTensor) fp8Layer() string {
	if t.layer != "" {
		return t.layer
	}
	return strings.TrimSuffix(t.param.Name(), ".weight")
}

// transpose returns the [c r] transpose of a row-major [r c] matrix.
func transpose(v []float32, r, c int) []float32 {
	tr := make([]float32, len(v))
	for a := 0; a < r; a++ {
		for b := 0; b < c; b++ {
			tr[b*r+a] = v[a*c+b]
		}
	}
	return tr
}

// exportHF writes config.json (cfg's fields, then extra's keys, then the
// format's quantization_config) and the weights of ts in e's format.
func exportHF(dir string, store *graph.Store, cfg any, extra map[string]any, ts []hfTensor, e Export) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.Format == "" {
		e.Format = Float32
	}
	keep := map[string]bool{"lm_head": true}
	linears := map[string]bool{}
	example := ""
	for _, t := range ts {
		if t.linear {
			linears[strings.TrimSuffix(t.name, ".weight")] = true
			if example == "" {
				example = strings.TrimSuffix(t.name, ".weight")
			}
		}
	}
	for _, k := range e.Keep {
		if !linears[k] {
			return fmt.Errorf("hf: %w: Keep names %q, which is not a linear layer of the model (such as %q)", ErrCheckpoint, k, example)
		}
		keep[k] = true
	}
	if e.Layers != nil && e.Format.quantized() {
		if len(e.Layers) == 0 {
			return fmt.Errorf("hf: %w: Layers is empty: no layer to quantize in %s (leave it nil to quantize every linear layer)", ErrCheckpoint, e.Format)
		}
		layerOf := map[string]bool{}
		for _, t := range ts {
			if t.linear {
				layerOf[t.fp8Layer()] = true
			}
		}
		fp8Layers := map[string]bool{}
		for _, l := range e.Layers {
			if !layerOf[l] {
				return fmt.Errorf("hf: %w: Layers names %q, which is no linear layer of the model", ErrCheckpoint, l)
			}
			fp8Layers[l] = true
		}
		for _, t := range ts {
			if t.linear && !fp8Layers[t.fp8Layer()] {
				keep[strings.TrimSuffix(t.name, ".weight")] = true
			}
		}
	}
	// The tensors, checked before anything is written.
	var out []stfile.Tensor
	hp := "F32"
	if e.BF16 || e.Format == BFloat16 {
		hp = "BF16"
	}
	for _, t := range ts {
		vals := store.Float32(t.param.Name())
		if vals == nil {
			return fmt.Errorf("hf: save: parameter %q has no value in the store", t.param.Name())
		}
		sh := []int(t.sliceShape())
		vals = vals[t.off : t.off+t.sliceShape().Numel()]
		if t.transpose {
			vals, sh = transpose(vals, sh[0], sh[1]), []int{sh[1], sh[0]}
		}
		module := strings.TrimSuffix(t.name, ".weight")
		if e.Format.quantized() && t.linear && !keep[module] {
			for i, x := range vals {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return fmt.Errorf("hf: %w: parameter %q (%s) element %d is %v: a weight that is not finite cannot be exported", ErrCheckpoint, t.param.Name(), t.name, i, x)
				}
			}
			q, err := reusedCodes(store, t.codesName(), e, vals, sh)
			if err != nil {
				return err
			}
			if q == nil {
				if q, err = quantizeHF(e, vals, sh[0], sh[1]); err != nil {
					return fmt.Errorf("hf: save: %s: %w", t.name, err)
				}
			}
			for _, x := range q {
				x.Name = module + "." + x.Name
				out = append(out, x)
			}
			continue
		}
		data := f32Bytes(vals)
		if hp == "BF16" {
			data = bf16Bytes(vals)
		}
		out = append(out, stfile.Tensor{Name: t.name, DType: hp, Shape: sh, Data: data})
	}
	// config.json
	fields := map[string]any{}
	if cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return err
		}
	}
	for k, v := range extra {
		fields[k] = v
	}
	fields["torch_dtype"] = map[string]string{"F32": "float32", "BF16": "bfloat16"}[hp]
	var kept []string
	for k := range keep {
		kept = append(kept, k)
	}
	sort.Strings(kept)
	qc, modelopt := quantizationConfig(e, kept)
	if qc != nil {
		fields["quantization_config"] = qc
	}
	conf, err := json.MarshalIndent(fields, "", "  ")
	if err != nil {
		return err
	}
	files, err := shardFiles(out, e.ShardBytes)
	if err != nil {
		return fmt.Errorf("hf: save: %w", err)
	}
	if modelopt != nil {
		mo, err := json.MarshalIndent(modelopt, "", "  ")
		if err != nil {
			return err
		}
		files = append(files, hfFile{hfQuantConfigFile, append(mo, '\n')})
	}
	files = append(files, hfFile{ConfigFile, append(conf, '\n')})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hf: save: %w", err)
	}
	stale := staleHFFiles(dir, files)
	for _, f := range files {
		data := f.data
		if err := atomicfile.Write(filepath.Join(dir, f.name), func(w io.Writer) error {
			_, err := io.Copy(w, bytes.NewReader(data))
			return err
		}); err != nil {
			return fmt.Errorf("hf: save: %w", err)
		}
	}
	for _, f := range stale {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hf: save: %w", err)
		}
	}
	return nil
}

// reusedCodes returns the codes a load kept for param when they are in
// e's format and still dequantize to vals bit for bit; nil otherwise.
func reusedCodes(store *graph.Store, param string, e Export, vals []float32, sh []int) ([]stfile.Tensor, error) {
	rec, ok := store.State(hfCodesKey(param)).(*hfCodes)
	if !ok || rec == nil || rec.key != e.key() {
		return nil, nil
	}
	fs := &hfFiles{tensors: map[string]stfile.Tensor{}, where: map[string]string{}}
	for _, t := range rec.tensors {
		t.Name = "m." + t.Name
		fs.tensors[t.Name], fs.where[t.Name] = t, "the imported codes"
	}
	s := &hfScheme{format: e.Format, block: [2]int{128, 128}, method: "fp8"}
	deq, _, err := s.dequantize(fs, "m", sh[0], sh[1])
	if err != nil || !sameBits(deq, vals) {
		return nil, nil
	}
	return append([]stfile.Tensor(nil), rec.tensors...), nil
}

// quantizationConfig returns config.json's quantization_config for e
// (nil for the high-precision formats) and, for ModelOpt's formats, the
// hf_quant_config.json it also writes.
func quantizationConfig(e Export, kept []string) (qc, modelopt map[string]any) {
	switch e.Format {
	case FP8Block:
		return map[string]any{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
			"weight_block_size": []int{128, 128}, "modules_to_not_convert": kept}, nil
	case FP8Tensor, FP8Channel:
		strategy := "tensor"
		if e.Format == FP8Channel {
			strategy = "channel"
		}
		quant := func(strategy string, dynamic bool) map[string]any {
			return map[string]any{"num_bits": 8, "type": "float", "symmetric": true, "strategy": strategy, "dynamic": dynamic,
				"group_size": nil, "block_structure": nil, "actorder": nil, "observer": map[bool]any{false: "minmax", true: nil}[dynamic], "observer_kwargs": map[string]any{}}
		}
		return map[string]any{"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
			"config_groups": map[string]any{"group_0": map[string]any{"targets": []string{"Linear"}, "weights": quant(strategy, false),
				"input_activations": quant("token", true), "output_activations": nil, "format": "float-quantized"}},
			"ignore": kept, "kv_cache_scheme": nil, "global_compression_ratio": nil, "sparsity_config": map[string]any{}}, nil
	case MXFP8, NVFP4:
		algo, group := "MXFP8", 32
		if e.Format == NVFP4 {
			algo, group = "NVFP4", 16
		}
		q := map[string]any{"quant_algo": algo, "group_size": group, "kv_cache_quant_algo": nil, "exclude_modules": kept}
		qc := map[string]any{"quant_method": "modelopt"}
		for k, v := range q {
			qc[k] = v
		}
		return qc, map[string]any{"producer": map[string]any{"name": "octet"}, "quantization": q}
	}
	return nil, nil
}

// hfFile is one file of an export.
type hfFile struct {
	name string
	data []byte
}

// shardFiles lays the tensors out in model.safetensors, or, with
// shardBytes > 0, in shards of about that size and their index.
func shardFiles(ts []stfile.Tensor, shardBytes int64) ([]hfFile, error) {
	meta := map[string]string{"format": "pt"}
	if shardBytes <= 0 {
		b, err := stfile.Encode(ts, meta)
		if err != nil {
			return nil, err
		}
		return []hfFile{{WeightsFile, b}}, nil
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var groups [][]stfile.Tensor
	var size, total int64
	for _, t := range ts {
		n := int64(len(t.Data))
		if len(groups) == 0 || size > 0 && size+n > shardBytes {
			groups = append(groups, nil)
			size = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], t)
		size += n
		total += n
	}
	var files []hfFile
	wm := map[string]string{}
	for i, g := range groups {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(groups))
		b, err := stfile.Encode(g, meta)
		if err != nil {
			return nil, err
		}
		files = append(files, hfFile{name, b})
		for _, t := range g {
			wm[t.Name] = name
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": wm}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(files, hfFile{IndexFile, append(idx, '\n')}), nil
}

// staleHFFiles lists the weight files of an earlier export in dir that
// the new files do not replace (model.safetensors for a sharded export,
// the old index and its shards for a single file, ModelOpt's
// hf_quant_config.json for other formats), removed after the new files
// are written so a reader never mixes the two.
func staleHFFiles(dir string, files []hfFile) []string {
	writing := map[string]bool{}
	for _, f := range files {
		writing[f.name] = true
	}
	var stale []string
	for _, f := range []string{WeightsFile, IndexFile, hfQuantConfigFile} {
		if !writing[f] {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				stale = append(stale, f)
			}
		}
	}
	if raw, _, err := readJSONFile(dir, IndexFile); err == nil && raw != nil {
		var wm map[string]string
		if json.Unmarshal(raw["weight_map"], &wm) == nil {
			seen := map[string]bool{}
			for _, f := range wm {
				if !seen[f] && !writing[f] && f == filepath.Base(f) && strings.HasSuffix(f, ".safetensors") {
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						stale = append(stale, f)
					}
				}
				seen[f] = true
			}
		}
	}
	sort.Strings(stale)
	return stale
}
