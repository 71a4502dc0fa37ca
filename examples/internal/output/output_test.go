package output

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/octetml/octet/train"
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

func TestDecodeLast(t *testing.T) {
	var m map[string]any
	require.NoError(t, DecodeLast("epoch 1\nepoch 2\n{\"acc\": 0.5}\n\n", &m))
	require.Equal(t, 0.5, m["acc"])
	require.ErrorContains(t, DecodeLast("no json here", &m), "no json here")
}

func TestMessageAndFinish(t *testing.T) {
	require.Equal(t, "mnist: mnist: no data", "mnist: "+Message("mnist", errors.New("mnist: no data")))
	require.Equal(t, "mnist: -lr: bad", Message("mnist", errors.New("-lr: bad")))
	require.Equal(t, "gpt: mnist: x", Message("gpt", errors.New("mnist: x")))

	var out bytes.Buffer
	plotted := ""
	plot := func(p string) error { plotted = p; return nil }
	require.NoError(t, Finish(&out, false, "loss.png", plot, nil))
	require.Equal(t, "loss.png", plotted)
	require.Equal(t, "loss curves written to loss.png\n"+train.Kernels().String()+"\n", out.String())
	out.Reset()
	require.NoError(t, Finish(&out, true, "", plot, []map[string]any{{"a": 1}, {"a": 2}}))
	require.JSONEq(t, `{"a": 2, "runs": [{"a": 1}, {"a": 2}]}`, out.String())
	require.ErrorContains(t, Finish(&out, true, "x.png", func(string) error { return errors.New("disk full") }, nil), "disk full")
}
