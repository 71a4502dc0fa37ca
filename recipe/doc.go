// Package recipe holds Octet's mixed-precision recipes — Transformer
// Engine's delayed scaling and MXFP8 (TE), Float8BlockScaling
// (Float8Block), NVFP4BlockScaling (NVFP4) and CustomRecipe (Custom),
// torchao's Float8LinearConfig (AO), MS-AMP's optimization levels
// (MSAMP) and bf16 (BF16) — as Hugging Face Accelerate's TERecipeKwargs,
// AORecipeKwargs and MSAMPRecipeKwargs configure them.
//
// A recipe lowers itself: Recipe's Lower says, for one linear layer
// (Layer: its name, place, sizes and rows, the caller's filter, the
// run's seed), whether it converts and why not, and the fp8.Quantizer
// of each operand of its three GEMMs (fprop, dgrad, wgrad); NewLayerState
// gives the scaling state the layer keeps (delayed scaling's amax
// histories, checkpointed with the parameters). Label, EvalQuantized,
// Float8AllGather and LowBitOptimizer answer the trainer. The compiler
// (passes.ConvertLinear), the trainer and the checkpoints ask these
// methods and never a recipe's type, so a program may define a recipe
// of its own: embed one of this package's and override Lower, or write
// every method. WithBackward adds Transformer Engine's backward override
// to any recipe.
//
// The numerics the quantizers name (formats, casts, scaling math, block
// and NVFP4 quantization) are package fp8's; the settings that choose a
// recipe from flags, environment variables and Accelerate config files
// are package precision's.
package recipe
