package train

import "github.com/octetml/octet/precision"

// Precision is the type of Config.Precision: a run's mixed-precision
// configuration (package precision holds it, with its flags,
// environment variables and config files).
type Precision = precision.Config

// ErrPrecision is precision.ErrInvalid, which every error about a
// precision setting matches.
var ErrPrecision = precision.ErrInvalid
