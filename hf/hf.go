package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/nn"
)

// ErrCheckpoint is the error every problem with a Hugging Face directory matches
// (errors.Is): a missing or malformed config.json or model.safetensors,
// a key with a bad or unsupported value, a tensor missing, extra, of the
// wrong shape or of an unsupported dtype. The message names the file and
// the key or tensor.
var ErrCheckpoint = errors.New("Hugging Face checkpoint")

// The files of the layout.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
)

// hfTensor maps one tensor of the layout to a parameter, or to a slice
// of one (an expert's weight in a stacked parameter): transposed for
// GPT-2's Conv1D weights, which are stored [in out].
type hfTensor struct {
	name      string
	param     *graph.Node
	off       int         // the slice's first element in the parameter
	shape     graph.Shape // the slice's shape; nil: the whole parameter
	transpose bool
	linear    bool   // a linear layer's weight: quantized by the exports' FP8 formats
	layer     string // the FP8 layer the weight belongs to, when not its parameter's name less ".weight" (fused q/k/v, gate/up)
}

// sliceShape is the shape of the part of its parameter t maps.
func (t hfTensor) sliceShape() graph.Shape {
	if t.shape != nil {
		return t.shape
	}
	return t.param.Shape()
}

// codesName is the name under which a load keeps t's quantized codes.
func (t hfTensor) codesName() string {
	if t.shape != nil {
		return t.param.Name() + "@" + t.name
	}
	return t.param.Name()
}

func hfErr(file, format string, args ...any) error {
	return fmt.Errorf("hf: %w: %s: %s", ErrCheckpoint, file, fmt.Sprintf(format, args...))
}

// readHFConfig reads dir/config.json into a map of raw values.
func readHFConfig(dir string) (map[string]json.RawMessage, string, error) {
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("hf: %w: %w", ErrCheckpoint, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, path, hfErr(path, "not a JSON object: %v", err)
	}
	return raw, path, nil
}

// hfKeys reads the named keys of a config into the pointers, refusing a
// missing required key or a value of the wrong type, naming the key.
type hfKey struct {
	key      string
	dst      any
	required bool
}

func decodeHFKeys(path string, raw map[string]json.RawMessage, keys []hfKey) error {
	for _, k := range keys {
		v, ok := raw[k.key]
		if !ok || string(v) == "null" {
			if k.required {
				return hfErr(path, "key %q is missing", k.key)
			}
			continue
		}
		if err := json.Unmarshal(v, k.dst); err != nil {
			return hfErr(path, "key %q: %s is not a %s", k.key, v, hfKind(k.dst))
		}
	}
	return nil
}

func hfKind(dst any) string {
	switch dst.(type) {
	case *int:
		return "whole number"
	case *float64:
		return "number"
	case *bool:
		return "boolean"
	case *string:
		return "string"
	}
	return "value of the expected type"
}

// Model is a model built from a Hugging Face config.json: its
// model_type, the nn model, and the functions that load its tensors
// from a directory and export them to one.
type Model struct {
	// Type is config.json's model_type: "gpt2" or one of DecoderTypes.
	Type string
	// Net is the model: *nn.Llama or *nn.GPT.
	Net any
	// Load sets the model's parameters in store from dir (LoadLlama,
	// LoadGPT).
	Load func(dir string, store *graph.Store) error
	// Export writes the model to dir (ExportLlama, ExportGPT).
	Export func(dir string, store *graph.Store, e Export) error
}

// modelTypes builds each model_type Octet reads (one file each).
var modelTypes = map[string]func(dir string, b *nn.Builder) (*Model, error){
	"gpt2": newGPTModel,
}

func init() {
	for t := range decoderTypes {
		modelTypes[t] = newLlamaModel
	}
}

// NewModel reads dir's config.json (dir may also name the config.json
// itself) and builds with b the model its model_type names, with the
// configuration's checks of ReadLlamaConfig or ReadGPTConfig.
func NewModel(dir string, b *nn.Builder) (*Model, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		if filepath.Base(dir) != ConfigFile {
			return nil, fmt.Errorf("hf: %w: %s: want a directory holding %s, or that file", ErrCheckpoint, dir, ConfigFile)
		}
		dir = filepath.Dir(dir)
	}
	raw, path, err := readHFConfig(dir)
	if err != nil {
		return nil, err
	}
	var modelType string
	if err := decodeHFKeys(path, raw, []hfKey{{"model_type", &modelType, true}}); err != nil {
		return nil, err
	}
	build, ok := modelTypes[modelType]
	if !ok {
		return nil, hfErr(path, "key \"model_type\": %q, want \"gpt2\" or one of %s", modelType, quotedTypes())
	}
	return build(dir, b)
}
