// Package train is the training driver users import, Octet's counterpart
// of Hugging Face Accelerate's Accelerator: given a model function and a
// precision.Config (package precision reads it from Go, flags, the
// environment or an Accelerate config file), a Trainer prepares the model
// for its recipe (passes.Prepare), picks the optimizer the recipe needs, runs one
// process or data-parallel / FSDP ranks, and drives the loop — gradient
// accumulation, clipping, a learning-rate schedule, evaluation, named
// hooks (progress and log lines are hooks), the non-finite diagnosis, and
// SaveState/LoadState of everything a run needs to continue bit for bit.
package train
