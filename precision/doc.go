// Package precision reads a run's mixed-precision configuration —
// Accelerate's mixed_precision with its FP8 recipe kwargs — from every
// source Accelerate has, with the same names: Go (Config's fields), the
// command line (Config.RegisterFlags), the environment (Octet's
// OCTET_FP8_* and Accelerate's ACCELERATE_* variables) and Accelerate
// config files (-config). One table of settings serves all four, so a
// value is parsed one way whatever its source, every setting can say
// where it came from (Config.Source, Config.Describe), and a value the
// chosen precision does not read is refused, naming it. Config.Recipe
// turns the result into a recipe.Recipe (nil for float32).
//
// An error about a setting matches ErrInvalid (errors.Is) and names the
// flag, the variable and its value, or the file, line and key.
package precision
