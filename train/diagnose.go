package train

import (
	"fmt"
	"math"
	"strings"

	"github.com/octetml/octet/fp8"
	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/optim"
)

// Diagnose says where a run's numbers first stopped being finite: the
// first non-finite gradient and weight among params (in their order),
// and the first FP8 layer in store whose scale, inverse scale or newest
// amax is not finite; or that all of them are finite.
func Diagnose(params []optim.Param, store *graph.Store) string {
	var parts []string
	if s := firstNonFinite(params, "gradient", func(p optim.Param) []float32 { return p.G }); s != "" {
		parts = append(parts, s)
	}
	if s := firstNonFinite(params, "weight", func(p optim.Param) []float32 { return p.W }); s != "" {
		parts = append(parts, s)
	}
	if store != nil {
		if s := fp8NonFinite(store); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "gradients, weights and FP8 scales are all finite"
	}
	return strings.Join(parts, "; ")
}

func firstNonFinite(params []optim.Param, what string, vals func(optim.Param) []float32) string {
	for _, p := range params {
		for i, v := range vals(p) {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Sprintf("first non-finite %s: %s[%d] = %v", what, p.Name, i, v)
			}
		}
	}
	return ""
}

func fp8NonFinite(store *graph.Store) string {
	for _, k := range store.StateKeys() {
		ls, ok := store.State(k).(*fp8.LayerState)
		if !ok {
			continue
		}
		for _, r := range fp8.Roles {
			m := ls.Meta(r)
			if m == nil {
				continue
			}
			newest := m.History[len(m.History)-1]
			for _, q := range []struct {
				name string
				v    float32
			}{{"scale", m.Scale}, {"scale_inv", m.ScaleInv}, {"amax", newest}} {
				if f := float64(q.v); math.IsNaN(f) || math.IsInf(f, 0) {
					return fmt.Sprintf("first non-finite FP8 state: %s %s %s = %v", ls.FQN, r, q.name, q.v)
				}
			}
		}
	}
	return ""
}
