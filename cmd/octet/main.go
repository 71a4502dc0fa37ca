// Command octet is Octet's command-line tool.
//
//	octet tokenize [-encoding r50k_base] IN.txt OUT.bin
//	octet quantize [-recipe fp8-block|nvfp4|mxfp8|current] [flags] IN.safetensors OUT.safetensors
//	octet inspect FILE.safetensors
//	octet export [-format fp8-block|fp8-tensor|fp8-channel|mxfp8|nvfp4|bf16|f32] [flags] IN OUT_DIR
//
// tokenize turns a UTF-8 text file into BPE tokens (r50k_base, GPT-2's
// encoding, or cl100k_base; the vocabularies are built in) and writes
// them as an llm.c token file: a header of 256 int32 (magic 20240520,
// version 1, the token count) and the tokens as uint16, which
// data.ReadTokenFile and the examples' -data flag read. cl100k_base ids
// above 65,535 do not fit the format and are refused, naming the first.
//
// quantize casts every float32 matrix (F32, rank 2, the last axis
// contiguous) of IN under a recipe and writes, for each input tensor
// NAME:
//
//   - -recipe fp8-block (Float8BlockScaling; -block-dim 1|2, -format
//     E4M3|E5M2, -fp32-scales, -eps): NAME.data (U8 FP8 codes, [rows
//     cols]) and NAME.scale_inv (F32 decode scales: [rows ⌈cols/128⌉]
//     for 1×128 blocks, [⌈rows/128⌉ ⌈cols/128⌉] for 128×128 tiles);
//   - -recipe nvfp4 (-2d, -rht, -sr -seed N): NAME.data (U8, [rows
//     ⌈cols/2⌉], two E2M1 codes per byte, the even element in the low
//     nibble), NAME.block_scale (U8 E4M3 codes, [rows ⌈cols/16⌉], or
//     [⌈rows/16⌉ ⌈cols/16⌉] with -2d) and NAME.amax (F32 [1], the
//     tensor's amax, after the transform with -rht);
//   - -recipe mxfp8 (-format): NAME.data and NAME.scale (U8 E8M0 codes,
//     [rows ⌈cols/32⌉]);
//   - -recipe current (-format; tensorwise current scaling): NAME.data
//     and NAME.scale_inv (F32 [1]);
//
// and prints per tensor the mean squared error of the dequantized
// values (over the finite inputs; with -rht, against the transformed
// tensor), underflows% (elements whose code is zero, Transformer
// Engine's definition) and the range of the decode scales. Tensors that
// are not float32 matrices (another dtype, rank 1 or 3, empty) are
// listed as skipped and left out; NaN and infinite values are cast as
// the recipe casts them (saturated, or NaN codes in FP8) and counted.
// A flag the recipe does not read is refused.
//
// export writes a Llama or GPT-2 as a Hugging Face directory whose
// linear weights are in an FP8 layout inference engines read
// (hf.Format: fp8-block is transformers' fine-grained FP8, the
// DeepSeek-V3 layout; fp8-tensor and fp8-channel are compressed-tensors;
// mxfp8 and nvfp4 are NVIDIA ModelOpt's), the head, embeddings and norms
// in F32 (BF16 with -bf16). IN is a Hugging Face directory (config.json
// with model_type llama or gpt2, and its weights: F32, BF16, F16, or any
// of these FP8 layouts) or an Octet checkpoint file with -config naming
// the directory whose config.json describes its model; a checkpoint's
// FP8-trained layers (those with FP8 scaling state) are the ones
// quantized. -keep lists further layers to keep, -shard-mb splits the
// weights into shards with an index, -fp32-scales keeps fp8-block's
// tile scales in float32. Tokenizer files beside the config are copied.
//
// inspect lists a safetensors file's tensors (name, dtype, shape) and
// metadata and, for an Octet checkpoint, its step, recipe and FP8 state;
// it verifies the per-tensor CRC-32C checksums the file carries and
// refuses a truncated or corrupt file, naming the offset or tensor.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/octetml/octet/data"
	"github.com/octetml/octet/train"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "octet:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command line that cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: octet <command> [flags] [arguments]

commands:
  tokenize [-encoding r50k_base|cl100k_base] IN.txt OUT.bin
      write IN.txt's BPE tokens as an llm.c token file
  quantize [-recipe fp8-block|nvfp4|mxfp8|current] [flags] IN.safetensors OUT.safetensors
      cast every float32 matrix of IN and write codes and scales to OUT
      (octet quantize -h lists the flags)
  export [-format fp8-block|fp8-tensor|fp8-channel|mxfp8|nvfp4|bf16|f32] [flags] IN OUT_DIR
      write a Llama or GPT-2 (a Hugging Face directory, or an Octet checkpoint with -config)
      as a Hugging Face directory with FP8 weights (octet export -h lists the flags)
  inspect FILE.safetensors
      list a safetensors file's tensors, metadata and FP8 state; verify its checksums
  kernels
      name the kernels this CPU runs, the ones OCTET_GEMM_KERNEL accepts,
      and whether bf16 and FP8 run faster than float32 here
`

// run runs one command line (without the program name).
func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "tokenize":
		return tokenize(args[1:], stdout, stderr)
	case "quantize":
		return quantizeCmd(args[1:], stdout, stderr)
	case "inspect":
		return inspectCmd(args[1:], stdout, stderr)
	case "export":
		return exportCmd(args[1:], stdout, stderr)
	case "kernels":
		if len(args) > 1 {
			return usageError{fmt.Sprintf("kernels takes no arguments, got %q", args[1:])}
		}
		return kernelsCmd(stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func tokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("octet tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	enc := fs.String("encoding", "r50k_base", "BPE encoding: "+strings.Join(data.BPEEncodings(), " or "))
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("tokenize wants IN.txt OUT.bin, got %d argument(s)", fs.NArg())}
	}
	in, out := fs.Arg(0), fs.Arg(1)
	bpe, err := data.NewBPE(*enc)
	if err != nil {
		return usageError{"-encoding: " + err.Error()}
	}
	text, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	if len(text) == 0 {
		return fmt.Errorf("%s: empty file: no tokens to write", in)
	}
	ids, err := bpe.Encode(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	toks, err := data.Uint16(ids)
	if err != nil {
		return fmt.Errorf("%s with %s: %w", in, bpe.Name(), err)
	}
	if err := data.WriteTokenFile(out, toks); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d bytes → %d %s tokens → %s\n", in, len(text), len(toks), bpe.Name(), out)
	return nil
}

// kernelsCmd prints train.Kernels.
func kernelsCmd(stdout io.Writer) error {
	k := train.Kernels()
	fmt.Fprintln(stdout, k)
	fmt.Fprintf(stdout, "OCTET_GEMM_KERNEL accepts: %s\n", strings.Join(k.Available, ", "))
	if k.LowPrecisionFaster {
		fmt.Fprintln(stdout, "bf16 and FP8 GEMMs run on this CPU's bf16 dot-product unit: faster than float32")
	} else {
		fmt.Fprintln(stdout, k.Note("fp8"))
	}
	return nil
}
