// Package stfile reads and writes safetensors files with every dtype the
// format names, FP8 ones included (F8_E4M3, F8_E5M2, F8_E8M0), which the
// safetensors Go module the rest of Octet uses does not know.
//
// A file is an 8-byte little-endian header length, a JSON header mapping
// each tensor name to its dtype, shape and [begin, end) byte offsets into
// the data that follows (and "__metadata__" to string pairs), then the
// data. Parse checks everything a hostile or truncated file could get
// wrong — the header length, the JSON, unknown dtypes, negative or
// overflowing shapes, byte counts that disagree with the shape, offsets
// outside the data, overlaps and holes — and names the tensor. Encode
// writes tensors sorted by name, the header padded with spaces to a
// multiple of 8, so the same tensors always give the same bytes.
package stfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"os"
	"sort"
	"strconv"
	"strings"
)

// MaxHeader is the largest header Parse accepts (100 MB, as the
// reference implementation).
const MaxHeader = 100 << 20

// Sizes of the dtypes in bytes (F4 and the 6-bit formats are refused:
// they do not fill whole bytes).
var sizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// Size returns the size in bytes of one element of dtype, and whether
// the dtype is known.
func Size(dtype string) (int, bool) {
	s, ok := sizes[dtype]
	return s, ok
}

// Tensor is one tensor of a file: its name, dtype (as the format spells
// it: "F32", "BF16", "F8_E4M3", …), shape and little-endian data.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// Elems returns the product of the shape (1 for a scalar).
func (t Tensor) Elems() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed safetensors file.
type File struct {
	Path     string
	Tensors  map[string]Tensor
	Metadata map[string]string
}

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Read reads and parses the file at path.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// tensorEntry checks that a header entry has a tensor's keys (dtype,
// shape, data_offsets) and no others, naming what it has instead: a
// corrupted header (a damaged "__metadata__" name, say) shows up here.
func tensorEntry(v json.RawMessage) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(v, &keys); err != nil {
		return fmt.Errorf("not a tensor (a tensor is an object with dtype, shape and data_offsets): %v", err)
	}
	var got, missing []string
	for k := range keys {
		got = append(got, k)
	}
	sort.Strings(got)
	for _, k := range []string{"dtype", "shape", "data_offsets"} {
		if _, ok := keys[k]; !ok {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		switch k {
		case "dtype", "shape", "data_offsets":
		default:
			return fmt.Errorf("not a tensor: it has key %q (keys %s; a tensor has dtype, shape and data_offsets): the header is corrupted or not safetensors", k, strings.Join(got, ", "))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not a tensor: no %s (keys %s): the header is corrupted or not safetensors", strings.Join(missing, ", "), strings.Join(got, ", "))
	}
	return nil
}

// Parse parses a whole file's bytes; path is used in errors only. The
// tensors' Data alias data.
func Parse(path string, data []byte) (*File, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: not a valid safetensors file: %s", path, fmt.Sprintf(format, args...))
	}
	if len(data) < 8 {
		return nil, bad("%d bytes, shorter than the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeader {
		return nil, bad("header length %d exceeds %d", n, MaxHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, bad("header length %d runs past the end of the file (%d bytes): truncated?", n, len(data))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &raw); err != nil {
		return nil, bad("header is not a JSON object: %v", err)
	}
	body := data[8+n:]
	f := &File{Path: path, Tensors: map[string]Tensor{}, Metadata: map[string]string{}}
	type span struct {
		begin, end int64
		name       string
	}
	var spans []span
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names) // the first bad entry by name, the same on every run
	for _, name := range names {
		v := raw[name]
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &f.Metadata); err != nil {
				return nil, bad("__metadata__ is not a map of strings: %v", err)
			}
			continue
		}
		if err := tensorEntry(v); err != nil {
			return nil, bad("entry %q: %v", name, err)
		}
		var e headerEntry
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, bad("tensor %q: %v", name, err)
		}
		size, ok := sizes[e.DType]
		if !ok {
			return nil, bad("tensor %q: dtype %q is not supported", name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return nil, bad("tensor %q: data_offsets %v, want [begin end]", name, e.DataOffsets)
		}
		elems := uint64(1)
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, bad("tensor %q: shape %v has a bad dimension", name, e.Shape)
			}
			hi, lo := bits.Mul64(elems, uint64(d))
			if hi != 0 || lo > math.MaxInt64/8 {
				return nil, bad("tensor %q: shape %v overflows", name, e.Shape)
			}
			elems, shape[i] = lo, int(d)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end > int64(len(body)) {
			return nil, bad("tensor %q: data_offsets [%d %d] outside the %d data bytes: truncated?", name, b, end, len(body))
		}
		if uint64(end-b) != elems*uint64(size) {
			return nil, bad("tensor %q: %d bytes for shape %v of %s (want %d)", name, end-b, e.Shape, e.DType, elems*uint64(size))
		}
		f.Tensors[name] = Tensor{Name: name, DType: e.DType, Shape: shape, Data: body[b:end:end]}
		spans = append(spans, span{b, end, name})
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var at int64
	for _, s := range spans {
		switch {
		case s.begin < at:
			return nil, bad("tensor %q overlaps another at byte %d", s.name, s.begin)
		case s.begin > at:
			return nil, bad("bytes %d to %d belong to no tensor", at, s.begin)
		}
		at = s.end
	}
	if at != int64(len(body)) {
		return nil, bad("bytes %d to %d belong to no tensor", at, len(body))
	}
	return f, nil
}

// Encode returns the bytes of a file holding ts (sorted by name, laid out
// in that order) and meta. A tensor whose data length disagrees with its
// dtype and shape, an unknown dtype or a repeated name is an error.
func Encode(ts []Tensor, meta map[string]string) ([]byte, error) {
	ts = append([]Tensor(nil), ts...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var h bytes.Buffer
	h.WriteByte('{')
	if len(meta) > 0 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeJSON(&h, k)
			h.WriteByte(':')
			writeJSON(&h, meta[k])
		}
		h.WriteByte('}')
	}
	var off int64
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return nil, fmt.Errorf("stfile: tensor %q given twice", t.Name)
		}
		if t.Name == "__metadata__" || t.Name == "" {
			return nil, fmt.Errorf("stfile: %q is not a tensor name", t.Name)
		}
		size, ok := sizes[t.DType]
		if !ok {
			return nil, fmt.Errorf("stfile: tensor %q: dtype %q is not supported", t.Name, t.DType)
		}
		if len(t.Data) != t.Elems()*size {
			return nil, fmt.Errorf("stfile: tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		if h.Len() > 1 {
			h.WriteByte(',')
		}
		writeJSON(&h, t.Name)
		h.WriteString(`:{"dtype":`)
		writeJSON(&h, t.DType)
		h.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteByte(',')
		off += int64(len(t.Data))
		h.WriteString(strconv.FormatInt(off, 10))
		h.WriteString("]}")
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	out := make([]byte, 8, 8+h.Len()+int(off))
	binary.LittleEndian.PutUint64(out, uint64(h.Len()))
	out = append(out, h.Bytes()...)
	for _, t := range ts {
		out = append(out, t.Data...)
	}
	return out, nil
}

func writeJSON(b *bytes.Buffer, s string) {
	v, _ := json.Marshal(s)
	b.Write(v)
}
