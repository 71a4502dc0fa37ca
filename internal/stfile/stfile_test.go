package stfile

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
)

func sample() []Tensor {
	return []Tensor{
		{Name: "w", DType: "F8_E4M3", Shape: []int{2, 3}, Data: []byte{1, 2, 3, 4, 5, 6}},
		{Name: "s", DType: "F32", Shape: []int{1}, Data: []byte{0, 0, 128, 63}},
		{Name: "g", DType: "F32", Shape: []int{}, Data: []byte{0, 0, 0, 64}},
		{Name: "e", DType: "U8", Shape: []int{0, 4}, Data: nil},
	}
}

func TestRoundTripAndDeterminism(t *testing.T) {
	b, err := Encode(sample(), map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	rev := sample()
	rev[0], rev[3] = rev[3], rev[0]
	b2, err := Encode(rev, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatal("the order of the tensors given changed the bytes")
	}
	if binary.LittleEndian.Uint64(b)%8 != 0 {
		t.Fatal("header not padded to 8 bytes")
	}
	f, err := Parse("x", b)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range sample() {
		got := f.Tensors[want.Name]
		if got.DType != want.DType || len(got.Shape) != len(want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("%s: got %+v want %+v", want.Name, got, want)
		}
	}
	if f.Metadata["format"] != "pt" {
		t.Fatal("metadata lost")
	}
}

// TestSafetensorsModuleAgrees: the safetensors module reads what Encode
// writes (dtypes it knows) and Parse reads what it writes.
func TestSafetensorsModuleAgrees(t *testing.T) {
	ts := []Tensor{{Name: "a", DType: "F32", Shape: []int{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Name: "b", DType: "BF16", Shape: []int{1, 1}, Data: []byte{9, 10}}}
	b, err := Encode(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Deserialize(b)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := st.Tensor("b")
	if v.DType() != safetensors.BF16 || !bytes.Equal(v.Data(), []byte{9, 10}) {
		t.Fatal("safetensors module reads another tensor")
	}
	va, _ := safetensors.NewTensorView(safetensors.F32, []uint64{1, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	vb, _ := safetensors.NewTensorView(safetensors.U8, []uint64{3}, []byte{1, 2, 3})
	out, err := safetensors.Serialize(map[string]safetensors.TensorView{"a": va, "b": vb}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("m", out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Tensors["b"].Data, []byte{1, 2, 3}) || f.Metadata["k"] != "v" {
		t.Fatal("Parse reads another tensor")
	}
}

func header(h string, body int) []byte {
	b := make([]byte, 8, 8+len(h)+body)
	binary.LittleEndian.PutUint64(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, make([]byte, body)...)
}

func TestHostileFiles(t *testing.T) {
	good, _ := Encode(sample(), nil)
	cases := []struct {
		name string
		data []byte
		says string
	}{
		{"empty", nil, "shorter than the 8-byte"},
		{"truncated header", good[:20], "runs past the end"},
		{"truncated data", good[:len(good)-1], "outside the"},
		{"header one byte too long", func() []byte { b := make([]byte, 20); binary.LittleEndian.PutUint64(b, 13); return b }(), "runs past the end"},
		{"huge header", func() []byte { b := make([]byte, 16); binary.LittleEndian.PutUint64(b, 1<<40); return b }(), "exceeds"},
		{"not json", header("{oops", 0), "not a JSON object"},
		{"unknown dtype", header(`{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}`, 1), `dtype "F7"`},
		{"negative dim", header(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, 1), "bad dimension"},
		{"overflow", header(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, 4), "overflows"},
		{"wrong bytes", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), "4 bytes for shape"},
		{"overlap", header(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, 3), "overlaps"},
		{"hole", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), "belong to no tensor"},
		{"tail", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 2), "belong to no tensor"},
		{"extra field", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}`, 1), `entry "a": not a tensor: it has key "x"`},
		{"damaged metadata name", header(`{"__metadata#_":{"format":"pt"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), `entry "__metadata#_": not a tensor: it has key "format"`},
		{"missing shape", header(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, 1), `entry "a": not a tensor: no shape`},
		{"entry not an object", header(`{"a":[1,2]}`, 1), `entry "a": not a tensor`},
		{"offsets", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}}`, 1), "data_offsets"},
		{"metadata", header(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
	}
	for _, c := range cases {
		_, err := Parse("f.safetensors", c.data)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "f.safetensors") {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.says)
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	for _, ts := range [][]Tensor{
		{{Name: "a", DType: "F32", Shape: []int{2}, Data: []byte{1}}},
		{{Name: "a", DType: "Q8", Shape: []int{1}, Data: []byte{1}}},
		{{Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}},
		{{Name: "__metadata__", DType: "U8", Shape: []int{1}, Data: []byte{1}}},
	} {
		if _, err := Encode(ts, nil); err == nil {
			t.Errorf("%+v: encoded", ts)
		}
	}
}

// TestLayout: the header lists no metadata when there is none, the
// tensors are laid out in name order, and a file of no tensors (the
// header reaching the end exactly) parses.
func TestLayout(t *testing.T) {
	b, err := Encode([]Tensor{{Name: "b", DType: "U8", Shape: []int{1}, Data: []byte{2}}, {Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("__metadata__")) {
		t.Fatal("empty metadata written")
	}
	if !bytes.HasSuffix(b, []byte{1, 2}) {
		t.Fatalf("data not in name order: % x", b[len(b)-2:])
	}
	empty, err := Encode(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("empty", empty)
	if err != nil || len(f.Tensors) != 0 {
		t.Fatalf("empty file: %v %v", f, err)
	}
	if _, err := Parse("zero", make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("8 zero bytes: %v", err)
	}
	off := header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"F32","shape":[2],"data_offsets":[1,5]}}`, 5)
	if _, err := Parse("f", off); err == nil || !strings.Contains(err.Error(), "4 bytes for shape [2] of F32 (want 8)") {
		t.Fatalf("byte count at an offset: %v", err)
	}
}
