package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"
	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/checkpoint"
	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
)

func f32View(t *testing.T, shape []uint64, v []float32) safetensors.TensorView {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	tv, err := safetensors.NewTensorView(safetensors.F32, shape, b)
	require.NoError(t, err)
	return tv
}

// writeInput writes a checkpoint-like file: two float32 matrices (one
// with NaN and Inf), a vector, a rank-3 tensor, an int tensor and an
// empty matrix.
func writeInput(t *testing.T, path string) []float32 {
	w := make([]float32, 40*300)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)) * math.Exp(float64(i%17)-8))
	}
	odd := make([]float32, 3*33)
	for i := range odd {
		odd[i] = float32(i) - 40
	}
	odd[5], odd[6] = float32(math.NaN()), float32(math.Inf(1))
	ints, err := safetensors.NewTensorView(safetensors.I32, []uint64{2}, make([]byte, 8))
	require.NoError(t, err)
	empty, err := safetensors.NewTensorView(safetensors.F32, []uint64{0, 4}, nil)
	require.NoError(t, err)
	views := map[string]safetensors.TensorView{
		"w": f32View(t, []uint64{40, 300}, w), "odd": f32View(t, []uint64{3, 33}, odd),
		"vec": f32View(t, []uint64{5}, make([]float32, 5)), "cube": f32View(t, []uint64{2, 2, 2}, make([]float32, 8)),
		"ids": ints, "empty": empty,
	}
	data, err := safetensors.Serialize(views, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return w
}

// TestQuantizeRecipes: each recipe writes Transformer Engine's tensors
// with their shapes and dtypes, the codes and scales the fp8 package's
// casts give, and lists what it skipped and why.
func TestQuantizeRecipes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	w := writeInput(t, in)
	for _, c := range []struct {
		args   []string
		shapes map[string][]uint64
		dtypes map[string]safetensors.DType
	}{
		{[]string{"-recipe", "fp8-block"}, map[string][]uint64{"w.data": {40, 300}, "w.scale_inv": {40, 3}, "odd.scale_inv": {3, 1}},
			map[string]safetensors.DType{"w.data": safetensors.U8, "w.scale_inv": safetensors.F32}},
		{[]string{"-recipe", "fp8-block", "-block-dim", "2", "-format", "E5M2", "-fp32-scales"}, map[string][]uint64{"w.scale_inv": {1, 3}},
			map[string]safetensors.DType{"w.scale_inv": safetensors.F32}},
		{[]string{"-recipe", "nvfp4", "-2d"}, map[string][]uint64{"w.data": {40, 150}, "w.block_scale": {3, 19}, "w.amax": {1}, "odd.data": {3, 17}},
			map[string]safetensors.DType{"w.data": safetensors.U8, "w.block_scale": safetensors.U8, "w.amax": safetensors.F32}},
		{[]string{"-recipe", "mxfp8"}, map[string][]uint64{"w.scale": {40, 10}}, map[string]safetensors.DType{"w.scale": safetensors.U8}},
		{[]string{"-recipe", "current"}, map[string][]uint64{"w.scale_inv": {1}}, map[string]safetensors.DType{"w.scale_inv": safetensors.F32}},
	} {
		out := filepath.Join(dir, "out.safetensors")
		var so, se bytes.Buffer
		require.NoError(t, run(append(append([]string{"quantize"}, c.args...), in, out), &so, &se), se.String())
		require.Contains(t, so.String(), "vec")
		require.Contains(t, so.String(), "skipped: rank 1")
		require.Contains(t, so.String(), "skipped: rank 3")
		require.Contains(t, so.String(), "skipped: I32")
		require.Contains(t, so.String(), "skipped: empty")
		require.Contains(t, so.String(), "2 non-finite value(s)")
		require.Contains(t, so.String(), "2 tensor(s) quantized")
		// odd's NaN poisons its MXFP8 block (a NaN scale): the mse and
		// the scale range leave that block out, and say so.
		for _, line := range strings.Split(so.String(), "\n") {
			if strings.HasPrefix(line, "odd ") {
				f := strings.Fields(line)
				require.NotContains(t, f[3:7], "NaN", "%v: %s", c.args, line) // mse, underflows%, scale range
				if c.args[1] == "mxfp8" {
					require.Contains(t, line, "less 30 that decode to NaN", "%s", line)
				} else {
					require.NotContains(t, line, "decode to NaN", "%s", line)
				}
			}
		}
		raw, err := os.ReadFile(out)
		require.NoError(t, err)
		st, err := safetensors.Deserialize(raw)
		require.NoError(t, err)
		for name, sh := range c.shapes {
			v, ok := st.Tensor(name)
			require.True(t, ok, "%v: %s", c.args, name)
			require.Equal(t, sh, v.Shape(), "%v: %s", c.args, name)
		}
		for name, dt := range c.dtypes {
			v, _ := st.Tensor(name)
			require.Equal(t, dt, v.DType(), "%v: %s", c.args, name)
		}
		_, ok := st.Tensor("vec.data")
		require.False(t, ok)
	}
	// The codes are the fp8 package's cast.
	out := filepath.Join(dir, "block.safetensors")
	var so, se bytes.Buffer
	require.NoError(t, run([]string{"quantize", "-recipe", "fp8-block", in, out}, &so, &se))
	raw, _ := os.ReadFile(out)
	st, _ := safetensors.Deserialize(raw)
	codes, inv := make([]uint8, len(w)), make([]float32, 40*3)
	require.NoError(t, fp8.QuantizeFloat8Block(codes, inv, w, 40, 300, fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}))
	got, _ := st.Tensor("w.data")
	require.Equal(t, codes, got.Data())
	gi, _ := st.Tensor("w.scale_inv")
	for i, v := range inv {
		require.Equal(t, math.Float32bits(v), binary.LittleEndian.Uint32(gi.Data()[4*i:]))
	}
}

// TestQuantizeAndInspectRefusals: hostile files and command lines give
// clear errors naming the file, tensor or flag — never a panic.
func TestQuantizeAndInspectRefusals(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	writeInput(t, in)
	good, _ := os.ReadFile(in)
	trunc := filepath.Join(dir, "trunc.safetensors")
	require.NoError(t, os.WriteFile(trunc, good[:len(good)-10], 0o644))
	junk := filepath.Join(dir, "junk.safetensors")
	require.NoError(t, os.WriteFile(junk, []byte("not a safetensors file at all"), 0o644))
	onlyVec := filepath.Join(dir, "vec.safetensors")
	data, err := safetensors.Serialize(map[string]safetensors.TensorView{"v": f32View(t, []uint64{3}, []float32{1, 2, 3})}, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(onlyVec, data, 0o644))
	out := filepath.Join(dir, "out.safetensors")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"quantize", "-recipe", "fp4", in, out}, `-recipe "fp4"`},
		{[]string{"quantize", "-recipe", "nvfp4", "-block-dim", "2", in, out}, "-block-dim does not apply to -recipe nvfp4"},
		{[]string{"quantize", "-recipe", "fp8-block", "-rht", in, out}, "-rht does not apply"},
		{[]string{"quantize", "-format", "E3M4", in, out}, "-format"},
		{[]string{"quantize", "-block-dim", "3", in, out}, "-block-dim 3"},
		{[]string{"quantize", "-eps", "-1", in, out}, "-eps"},
		{[]string{"quantize", "-recipe", "nvfp4", "-seed", "3", in, out}, "give -sr"},
		{[]string{"quantize", "-recipe", "nvfp4", "-rht", in, out}, "multiple of 16"},
		{[]string{"quantize", in}, "got 1 argument"},
		{[]string{"quantize", trunc, out}, trunc},
		{[]string{"quantize", junk, out}, "not a valid safetensors file"},
		{[]string{"quantize", onlyVec, out}, "no float32 matrix"},
		{[]string{"quantize", filepath.Join(dir, "none"), out}, "none"},
		{[]string{"inspect", trunc}, "truncated"},
		{[]string{"inspect", junk}, junk},
		{[]string{"inspect"}, "got 0 argument"},
	} {
		var so, se bytes.Buffer
		err := run(c.args, &so, &se)
		require.Error(t, err, "%v", c.args)
		require.Contains(t, err.Error(), c.want, "%v", c.args)
	}
}

// TestInspect lists a checkpoint's tensors, step and FP8 state with its
// checksums verified, refuses one with a flipped byte, and lists a plain
// safetensors file.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	store := graph.NewStore()
	require.NoError(t, store.SetFloat32("fc.weight", []float32{1, 2, 3, 4}, 2, 2))
	ck := filepath.Join(dir, "ck.safetensors")
	require.NoError(t, checkpoint.Save(ck, &checkpoint.State{Store: store, Step: 7, Meta: map[string]string{"recipe": "te"}}))
	var so, se bytes.Buffer
	require.NoError(t, run([]string{"inspect", ck}, &so, &se))
	require.Contains(t, so.String(), "Octet checkpoint, step 7")
	require.Contains(t, so.String(), "CRC-32C verified")
	require.Contains(t, so.String(), "recipe: te")
	require.Contains(t, so.String(), "param/fc.weight")
	raw, _ := os.ReadFile(ck)
	raw[len(raw)-3] ^= 0x40
	bad := filepath.Join(dir, "bad.safetensors")
	require.NoError(t, os.WriteFile(bad, raw, 0o644))
	err := run([]string{"inspect", bad}, &so, &se)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "CRC-32C")
	in := filepath.Join(dir, "in.safetensors")
	writeInput(t, in)
	so.Reset()
	require.NoError(t, run([]string{"inspect", in}, &so, &se))
	require.Contains(t, so.String(), "safetensors file, 6 tensor(s); no checksums to verify")
	require.Contains(t, so.String(), "cube")
}

// TestQuantizeOutputsAndStatistics: for every recipe the written codes
// and scales are the fp8 package's, and the printed MSE and underflows%
// of a tensor are those of its dequantized values and zero codes.
func TestQuantizeOutputsAndStatistics(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	w := writeInput(t, in)
	rows, cols := 40, 300
	for _, recipe := range []string{"fp8-block", "nvfp4", "mxfp8", "current"} {
		out := filepath.Join(dir, recipe+".safetensors")
		var so, se bytes.Buffer
		require.NoError(t, run([]string{"quantize", "-recipe", recipe, in, out}, &so, &se))
		raw, _ := os.ReadFile(out)
		st, err := safetensors.Deserialize(raw)
		require.NoError(t, err)
		data, _ := st.Tensor("w.data")
		dq := make([]float32, len(w))
		zero := 0
		switch recipe {
		case "fp8-block":
			codes, inv := make([]uint8, len(w)), make([]float32, rows*3)
			require.NoError(t, fp8.QuantizeFloat8Block(codes, inv, w, rows, cols, fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}))
			require.Equal(t, codes, data.Data())
			require.NoError(t, fp8.DequantizeFloat8Block(dq, codes, inv, rows, cols, fp8.Quantizer{Kind: fp8.Float8Blocks, BlockDim: 1, Format: fp8.E4M3}))
			zero = zeros(codes)
		case "nvfp4":
			q, err := fp8.QuantizeNVFP4(w, rows, cols, fp8.Quantizer{Kind: fp8.NVFP4Blocks})
			require.NoError(t, err)
			require.Equal(t, q.Codes, data.Data())
			bs, _ := st.Tensor("w.block_scale")
			require.Equal(t, q.BlockScales, bs.Data())
			require.NoError(t, q.Dequantize(dq))
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					if q.Code(r, j) == 0 {
						zero++
					}
				}
			}
		case "mxfp8":
			codes, scales := make([]uint8, len(w)), make([]fp8.E8M0, fp8.MXScaleCount(rows, cols, 1))
			_, err := fp8.QuantizeMX(codes, scales, w, rows, cols, 1, fp8.E4M3, fp8.ExpRoundUp)
			require.NoError(t, err)
			require.Equal(t, codes, data.Data())
			require.NoError(t, fp8.DequantizeMX(dq, codes, scales, rows, cols, 1, fp8.E4M3))
			zero = zeros(codes)
		case "current":
			scale := fp8.CurrentScale(fp8.Amax(w), fp8.E4M3, false)
			codes := make([]uint8, len(w))
			_, err := fp8.Quantize(codes, w, fp8.E4M3, scale)
			require.NoError(t, err)
			require.Equal(t, codes, data.Data())
			require.NoError(t, fp8.Dequantize(dq, codes, fp8.E4M3, 1/scale))
			zero = zeros(codes)
		}
		var mse float64
		for i, v := range w {
			d := float64(dq[i]) - float64(v)
			mse += d * d
		}
		mse /= float64(len(w))
		line := ""
		for _, l := range bytes.Split(so.Bytes(), []byte("\n")) {
			if bytes.HasPrefix(l, []byte("w ")) {
				line = string(l)
			}
		}
		require.NotEmpty(t, line, recipe)
		f := strings.Fields(line) // name, "[40", "300]", mse, underflows%, …
		gotMSE, err := strconv.ParseFloat(f[3], 64)
		require.NoError(t, err)
		gotUnder, err := strconv.ParseFloat(f[4], 64)
		require.NoError(t, err)
		require.InEpsilon(t, mse, gotMSE, 1e-5, "%s mse", recipe)
		require.InDelta(t, 100*float64(zero)/float64(len(w)), gotUnder, 1e-4, "%s underflows%%", recipe)
	}
}

// zeros counts the codes 0x00 (independently of the command's own count).
func zeros(codes []uint8) (n int) {
	for _, c := range codes {
		if c == 0x00 {
			n++
		}
	}
	return n
}
