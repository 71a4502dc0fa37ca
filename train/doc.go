// Package train is the training driver users import, Octet's counterpart
// of Hugging Face Accelerate's Accelerator: a Precision configured from Go,
// flags, the environment (OCTET_FP8_* and Accelerate's ACCELERATE_*
// variables) or an Accelerate config file; a Trainer that prepares a model
// for it (passes.Prepare), picks the optimizer the recipe needs, runs one
// process or data-parallel / FSDP ranks, and drives the loop — gradient
// accumulation, clipping, a learning-rate schedule, evaluation, named
// hooks (progress and log lines are hooks), the non-finite diagnosis, and
// SaveState/LoadState of everything a run needs to continue bit for bit.
package train
