// Package hf reads and writes Hugging Face's transformers layout: a
// directory with config.json (the model's configuration) and
// model.safetensors, or shards named by model.safetensors.index.json
// (its tensors by name), as LlamaForCausalLM.from_pretrained and
// GPT2LMHeadModel.from_pretrained read them — in float32, bfloat16 and
// the FP8 checkpoint layouts inference engines read (Format).
//
// One file per model type maps its configuration and tensor names:
// llama.go (nn.Llama) and gpt2.go (nn.GPT). io.go reads and writes the
// safetensors files, single and sharded; quant.go the quantized
// layouts. Every problem with a directory matches ErrCheckpoint and
// names the file and the key or tensor.
package hf
