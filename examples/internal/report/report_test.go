package report

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummary(t *testing.T) {
	require.Empty(t, Summary(nil))
	one := Summary([]map[string]any{{"acc": 0.9}})
	require.Equal(t, map[string]any{"acc": 0.9}, one)
	runs := []map[string]any{{"acc": 0.9, "p": "fp32"}, {"acc": 0.95, "p": "fp8"}}
	two := Summary(runs)
	require.Equal(t, 0.95, two["acc"])
	require.Equal(t, "fp8", two["p"])
	require.Equal(t, runs, two["runs"])
	// The top level is a copy: the last run's own map is left alone.
	require.NotContains(t, runs[1], "runs")
}
