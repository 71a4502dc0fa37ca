package trainloop

import (
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
	"github.com/octetml/octet/train"
)

// Diagnosis is train.Diagnose: the first non-finite gradient, weight and
// FP8 state.
func Diagnosis(params []optim.Param, store *graph.Store) string { return train.Diagnose(params, store) }
