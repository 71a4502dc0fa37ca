package checkpoint

import (
	"encoding/binary"

	"github.com/nlpodyssey/safetensors"

	"github.com/octetml/octet/internal/stfile"
)

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name  string
	DType string
	Shape []int
}

// Info is what Inspect reads of a safetensors file: its tensors (sorted
// by name), its metadata, whether it is an Octet checkpoint (and then its
// step, and its FP8 layers' state as the JSON the file records), and
// whether its per-tensor checksums were verified (files without them:
// not verified).
type Info struct {
	Tensors    []TensorInfo
	Meta       map[string]string
	Checkpoint bool
	Step       string
	FP8        string
	Verified   bool
}

// Inspect opens path — any safetensors file — and checks it without
// loading it into a model: the header, that the tensors cover the data
// exactly (truncation or trailing bytes are errors naming the offset),
// and each tensor's CRC-32C when the file carries them (an Octet
// checkpoint does). Errors match ErrCorrupt and name the file.
func Inspect(path string) (info *Info, err error) {
	defer func() {
		if r := recover(); r != nil {
			info, err = nil, corruptErr(path, "corrupt file: %v", r)
		}
	}()
	buf, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if len(buf) < 8 {
		return nil, corruptErr(path, "%d bytes, too short for a header length at offset 0", len(buf))
	}
	if n := binary.LittleEndian.Uint64(buf); n > uint64(len(buf)-8) {
		return nil, corruptErr(path, "header length %d at offset 0 runs past the end of the file (%d bytes)", n, len(buf))
	}
	if err := checkExtent(path, buf); err != nil {
		return nil, err
	}
	// Any safetensors file: FP8 dtypes (F8_E4M3, F8_E5M2, F8_E8M0) too.
	f, err := stfile.Parse(path, buf)
	if err != nil {
		return nil, corruptErr(path, "%w", err)
	}
	meta := f.Metadata
	if _, ok := meta[crcKey]; ok { // an Octet checkpoint: verify its checksums
		st, err := safetensors.Deserialize(buf)
		if err != nil {
			return nil, corruptErr(path, "%w", err)
		}
		if err := verifySums(path, st, meta); err != nil {
			return nil, err
		}
	}
	info = &Info{Meta: meta, Checkpoint: meta["octet.format"] == Format, Step: meta["octet.step"], FP8: meta["octet.fp8"]}
	_, info.Verified = meta[crcKey]
	for _, name := range f.Names() {
		t := f.Tensors[name]
		info.Tensors = append(info.Tensors, TensorInfo{Name: name, DType: t.DType, Shape: append([]int{}, t.Shape...)})
	}
	return info, nil
}
