package report

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/stretchr/testify/require"
)

// sampleRuns is a float32 run and an FP8 run whose two layers logged
// their casts' statistics over 30 steps.
func sampleRuns() []Run {
	var stats []inspect.Stat
	for step := int64(0); step < 30; step += 10 {
		for _, l := range []string{"mlp.fc1", "mlp.fc2"} {
			for _, t := range []inspect.Tensor{inspect.Activation, inspect.Weight, inspect.Gradient} {
				stats = append(stats,
					inspect.Stat{Step: step, Layer: l, Tensor: t, Stat: "underflows%", Value: float64(step) / 10},
					inspect.Stat{Step: step, Layer: l, Tensor: t, Stat: "overflows%", Value: 0.01},
					inspect.Stat{Step: step, Layer: l, Tensor: t, Stat: "scale_inv_min", Value: 1.0 / 64},
					inspect.Stat{Step: step, Layer: l, Tensor: t, Stat: "cur_amax", Value: 3 + float64(step)/30})
			}
		}
	}
	losses := make([]float32, 30)
	for i := range losses {
		losses[i] = 2.3 / float32(1+i/5)
	}
	return []Run{
		{Precision: "fp32", Recipe: "-", Losses: losses, MsPerStep: 4.2, Summary: []string{"test accuracy 97.00%"}},
		{Precision: "fp8", Recipe: "te/HYBRID", Settings: "margin 1 (OCTET_FP8_MARGIN); the rest defaults", Losses: losses, MsPerStep: 3.1,
			Conversion: "2 of 3 linear layers converted (te)", Stats: stats},
	}
}

func TestRender(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, "a <test> run", sampleRuns()))
	html := buf.String()
	require.Contains(t, html, "a &lt;test&gt; run", "escaped")
	require.Equal(t, 2, strings.Count(html, `class="layer-plot"`))
	require.Contains(t, html, `<table class="layers">`)
	require.Contains(t, html, "margin 1 (OCTET_FP8_MARGIN)")
	require.Contains(t, html, "2 of 3 linear layers converted (te)")
	require.NotContains(t, html, "<?xml", "inline SVG without its XML declaration")
	require.NotRegexp(t, `(src|href)="https?:`, html, "nothing to fetch")
	require.Equal(t, 1+2*2, strings.Count(html, "<svg"), "the loss plot and two per layer")
}

// TestReportInBrowser renders a report in headless Chromium: the
// screenshot is not blank and the DOM holds the layer table and one plot
// per logged layer. CI installs chromium and sets OCTET_BROWSER_TEST=1;
// elsewhere the test is skipped when no browser is installed.
func TestReportInBrowser(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if os.Getenv("OCTET_BROWSER_TEST") == "1" {
			t.Fatal("OCTET_BROWSER_TEST=1 but no chromium on PATH")
		}
		t.Skip("no chromium on PATH")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "run.html")
	require.NoError(t, Write(page, "browser test", sampleRuns()))
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(dir, "profile")}
	shot := filepath.Join(dir, "shot.png")
	out, err := exec.Command(browser, append(flags, "--window-size=1200,1600", "--screenshot="+shot, "file://"+page)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := os.Open(shot)
	require.NoError(t, err)
	img, err := png.Decode(f)
	f.Close()
	require.NoError(t, err)
	require.Greater(t, distinctColors(img), 8, "the screenshot is not blank")
	dom, err := exec.Command(browser, append(flags, "--dump-dom", "file://"+page)...).Output()
	require.NoError(t, err)
	require.Contains(t, string(dom), `<table class="layers">`)
	require.Equal(t, 2, strings.Count(string(dom), `class="layer-plot"`), "one plot per logged layer")
	require.Contains(t, string(dom), `data-layer="mlp.fc2"`)
}

func distinctColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}] = true
			if len(seen) > 64 {
				return len(seen)
			}
		}
	}
	return len(seen)
}

func TestPrintProfiles(t *testing.T) {
	var buf bytes.Buffer
	PrintProfiles(&buf, []Run{{Name: "float32"}, {Name: "FP8", Profile: &graph.Profile{}}})
	require.Equal(t, "\nFP8 training step no profiled steps\n", buf.String(), "runs without a profile are skipped")
	var page bytes.Buffer
	runs := sampleRuns()
	runs[1].Profile = &graph.Profile{}
	require.NoError(t, Render(&page, "t", runs))
	require.Contains(t, page.String(), `<pre class="profile">no profiled steps`)
}
