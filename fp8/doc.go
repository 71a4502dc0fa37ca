// Package fp8 is Octet's FP8 numerics core: the OCP 8-bit formats, their
// casts (tensorwise, axiswise, MXFP8, Float8BlockScaling, NVFP4), the
// delayed-scaling state (Meta), the Quantizer that describes one cast,
// the Cast that performs it on a GEMM operand (kernel, worker split,
// scales and state, the GEMM's Operand: ops carries a Quantizer and
// builds a Cast from it, nothing else), the per-layer state the compiler
// keeps, and a scaled GEMM on slices.
// It knows no graph types and no recipes: package recipe decides, per
// layer and GEMM operand, which Quantizer to use; ops and the compiler
// passes build on both. This
// comment states the semantics the package follows; the tests hold it to
// them (every float32 input of every cast is checked against a slow
// reference with OCTET_EXHAUSTIVE=1).
//
// # Formats
//
// E4M3 ("e4m3fn"): bias 7, largest finite ±448 (S.1111.110), smallest
// normal 2^-6, smallest subnormal 2^-9, no infinities, NaN only at
// S.1111.111. E5M2: bias 15, largest finite ±57344, smallest normal
// 2^-14, subnormal 2^-16, ±inf at S.11111.00, NaN at S.11111.{01,10,11}.
// E8M0, the MXFP8 block scale: 2^(code−127), code 0 standing for
// 2^-127 and 0xFF for NaN.
//
// A cast from float32 rounds to nearest, ties to even on the FP8 code,
// keeps the sign of zero and handles subnormals exactly. Saturating
// (Encode, what TE's casts and torchao's clamp-then-cast do): overflow
// and ±inf go to ±max, NaN stays NaN; the overflow boundary is the
// midpoint past max (for E4M3 464 still rounds to 448, anything above
// overflows; for E5M2 61440 overflows). Non-saturating (EncodeNoSat, the
// OCP NONSAT mode): E4M3 overflow and ±inf give NaN, E5M2 overflow ±inf.
// Decoding is exact into float32, and into bfloat16 (every FP8 value is a
// normal bf16 value).
//
// # Delayed scaling (Meta; recipe.TE)
//
// Accelerate's TERecipeKwargs: margin 0, interval 1, fp8_format HYBRID
// (E4M3, E5M2 or HYBRID: forward tensors E4M3, gradients E5M2; pure E5M2
// is allowed here although TE refuses it for training), amax_history_len
// 1024 (at most recipe.MaxAmaxHistoryLen), amax_compute_algo
// most_recent (or max), override_linear_precision (fprop, dgrad, wgrad)
// all false, use_autocast_during_eval false, use_mxfp8_block_scaling
// false (package precision reads each from flags, OCTET_FP8_<FIELD>,
// ACCELERATE_FP8_<FIELD> or a config file). One tensor's Meta holds scale (starting at 1),
// scale_inv = 1/scale and the amax history. Each cast in a step
// quantizes x·scale (saturating) and records max|x| of the unscaled
// input in the current slot (the largest over repeated casts). At the
// end of the step, every interval steps: amax is the window's maximum
// including the current value (max; NaN entries skipped, as TE's fmaxf
// does) or the current value (most_recent); when amax is finite and
// positive, scale = (fp8_max / amax) / 2^margin, a scale beyond float32
// becoming the largest float32, else the old scale stays (an infinity
// anywhere in the window keeps it while it is in the window); non-finite
// amaxes are counted; then the history rolls by one. A Meta whose layer
// did not run (amax 0) is not rolled. Step t thus casts with the scale
// computed from the amaxes up to step t−1; the first step uses 1. With
// margin 2, HYBRID, x = k+0.25, w = k+0.5, dy = k+0.75 at step k, the
// scales after steps 0…3 are: input 448, 89.6, 49.778, 34.4615; weight
// 224, 74.667, 44.8, 32; grad_output 19114.67, 8192, 5213.09, 3822.93.
//
// # Current scaling (CurrentScale, QuantizeAxiswise; recipe.AO)
//
// torchao's Float8LinearConfig through Accelerate's AORecipeKwargs:
// scale = fp8_max / max(amax, 1e-12), computed in float64 and stored as
// float32, optionally rounded down to a power of two; the cast is
// clamp(x·scale, ±max) then round; dequantize is q/scale. Tensorwise
// (one scale) or axiswise (one per row along the GEMM's contraction
// dimension). Named recipes: tensorwise (input and weight E4M3,
// grad_output E5M2), rowwise (all E4M3, axiswise, power-of-two scales),
// rowwise_with_gw_hp (the weight-gradient GEMM in high precision).
// pad_inner_dim and enable_fsdp_float8_all_gather default to true. An
// infinite or NaN amax gives scale 1 (TE's compute_scale_from_amax), so
// the inverse scale is never infinite. The backward of a cast is the
// identity.
//
// # MXFP8 block scaling
//
// 32 consecutive values along a GEMM operand's contraction dimension
// share one E8M0 scale. TE's exponent rule (the default) is
// e = ⌈log2(block_amax/448)⌉, so a block never overflows (its scaled
// maximum lies in (224, 448]); the OCP MX rule is ⌊log2(amax)⌋ − 8. An
// all-zero block gets code 0 (2^-127), an infinite or NaN block amax
// code 0xFF, as TE and torchao do. History settings with MXFP8 are an
// error, as in Accelerate.
//
// # MS-AMP (recipe.MSAMP)
//
// opt_level O1 or O2 (the default; O3 is DeepSpeed's and refused): FP8
// GEMMs with power-of-two delayed scaling, FP16 master weights with a
// per-tensor power-of-two scale, FP8 E4M3 weight gradients; Adam moments
// float32 (O1) or FP8 E4M3 and FP16 with power-of-two scales (O2, 3
// bytes of state per parameter instead of 8). The FP8 gradient
// all-reduce shares one scale from the global amax, multiplied by 1/√N
// before the cast, sums, and divides by N through the inverse scale.
//
// # bf16 (recipe.BF16)
//
// Accelerate's mixed_precision="bf16" for linear layers: the three GEMMs
// read their float32 operands rounded to bf16 (nearest even) and
// accumulate in float32; no scaling state, no size condition.
//
// # Slices
//
// Every slice-taking function refuses a destination shorter than its
// source, or a Format other than E4M3 and E5M2, with an error, before
// writing anything.
package fp8
