// Package report writes a training run's report: one self-contained
// HTML page (no network needed; plots are inline SVG from
// gonum/plot) with the loss curves of each precision run, each FP8
// layer's scale, amax, underflow% and overflow% over the steps (from the
// debug statistics the run logged), the conversion report, the recipe
// with where each setting came from, and the step timings.
package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/internal/atomicfile"
)

// DebugConfig is the debug config a run uses for its report when it has
// none of its own: every layer's FP8 casts (scale from scale_inv_min,
// underflows% as Transformer Engine counts them, Octet's flushed%,
// overflows%) and the amax and standard deviation of its
// activation, weight and gradient, every freq steps.
func DebugConfig(freq int) (*inspect.Config, error) {
	return inspect.ParseConfig(strings.NewReader(fmt.Sprintf(`
report:
  enabled: True
  layers:
    layer_name_regex_pattern: .*
  transformer_engine:
    LogFp8TensorStats:
      enabled: True
      tensors: [activation, weight, gradient]
      stats: [underflows%%, flushed%%, overflows%%, scale_inv_min]
      freq: %d
    LogTensorStats:
      enabled: True
      tensors: [activation, weight, gradient]
      stats: [cur_amax, std]
      freq: %d
`, max(freq, 1), max(freq, 1))), "report config")
}

// Run is one precision's run.
type Run struct {
	Precision, Recipe string
	// Name is the precision as summaries say it ("FP8", "float32").
	Name string
	// Settings says where the recipe's settings came from.
	Settings string
	// Losses holds the training loss of each step run, from FirstStep.
	Losses    []float32
	FirstStep int
	MsPerStep float64
	// Summary lines (final loss, accuracy) and the conversion report.
	Summary    []string
	Conversion string
	// Stats are the run's logged debug statistics (inspect.ReadStats).
	Stats []inspect.Stat
	// Profile is the training step's per-op profile (-profile; nil
	// without).
	Profile *graph.Profile
}

// PrintProfiles writes the per-op profile table of each run that has one,
// titled by its precision's name.
func PrintProfiles(w io.Writer, runs []Run) {
	for _, r := range runs {
		if r.Profile != nil {
			fmt.Fprintf(w, "\n%s training step ", r.Name)
			r.Profile.WriteTable(w, 12)
		}
	}
}

// Write writes the report of runs to path (atomically).
func Write(path, title string, runs []Run) error {
	var buf bytes.Buffer
	if err := Render(&buf, title, runs); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	})
}

type layerView struct {
	Name    string
	Rows    []tensorRow
	Scale   template.HTML
	Range   template.HTML
	HasPlot bool
}

type tensorRow struct {
	Tensor                            string
	Underflow, Flushed, Overflow, Amx string
	ScaleInv, Std                     string
}

type runView struct {
	Run
	LossSVG template.HTML
	Layers  []layerView
	Timings string // the profile table
	HasFP8  bool   // the run logged FP8 cast statistics
}

// Render writes the HTML page to w.
func Render(w io.Writer, title string, runs []Run) error {
	views := make([]runView, len(runs))
	var curves []Curve
	for i, r := range runs {
		views[i].Run = r
		ok := len(r.Losses) > 0
		for _, l := range r.Losses {
			if !(l > 0) || math.IsInf(float64(l), 0) {
				ok = false
			}
		}
		if ok {
			curves = append(curves, Curve{Label: r.Precision + " " + r.Recipe, Losses: r.Losses})
		}
		layers, err := layerViews(r.Stats)
		if err != nil {
			return err
		}
		views[i].Layers = layers
		for _, st := range r.Stats {
			if st.Stat == "scale_inv_min" || st.Stat == "underflows%" {
				views[i].HasFP8 = true
			}
		}
		if r.Profile != nil {
			var t strings.Builder
			r.Profile.WriteTable(&t, 20)
			views[i].Timings = t.String()
		}
	}
	var lossSVG bytes.Buffer
	if len(curves) > 0 {
		if err := LossSVG(&lossSVG, "training loss", "cross-entropy, 20-step average", 20, curves); err != nil {
			return err
		}
	}
	return page.Execute(w, map[string]any{
		"Title": title, "Date": time.Now().Format("2006-01-02 15:04"), "Runs": views,
		"LossSVG": template.HTML(stripXMLHeader(lossSVG.String())),
	})
}

// layerViews groups a run's statistics by layer: the latest values per
// tensor for the table, and the series over the steps for the plots.
func layerViews(stats []inspect.Stat) ([]layerView, error) {
	type key struct{ layer, tensor, stat string }
	series := map[key][][2]float64{}
	var layers []string
	seen := map[string]bool{}
	for _, s := range stats {
		k := key{s.Layer, string(s.Tensor), s.Stat}
		series[k] = append(series[k], [2]float64{float64(s.Step), s.Value})
		if !seen[s.Layer] {
			seen[s.Layer] = true
			layers = append(layers, s.Layer)
		}
	}
	sort.Strings(layers)
	last := func(k key) string {
		v := series[k]
		if len(v) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.4g", v[len(v)-1][1])
	}
	var out []layerView
	for _, l := range layers {
		lv := layerView{Name: l}
		var panels []Panel
		var rng []Line
		for _, t := range []string{"activation", "weight", "gradient"} {
			lv.Rows = append(lv.Rows, tensorRow{Tensor: t, Underflow: last(key{l, t, "underflows%"}), Flushed: last(key{l, t, "flushed%"}), Overflow: last(key{l, t, "overflows%"}),
				Amx: last(key{l, t, "cur_amax"}), ScaleInv: last(key{l, t, "scale_inv_min"}), Std: last(key{l, t, "std"})})
			// Each tensor on an axis of its own: an activation's amax (~10)
			// and a gradient's (~0.001) are then both readable.
			var lines []Line
			if pts := series[key{l, t, "cur_amax"}]; len(pts) > 0 {
				lines = append(lines, line("amax", pts, nil))
			}
			if pts := series[key{l, t, "std"}]; len(pts) > 0 {
				lines = append(lines, line("std", pts, nil))
			}
			if pts := series[key{l, t, "scale_inv_min"}]; len(pts) > 0 {
				lines = append(lines, line("scale_inv", pts, nil))
			}
			if len(lines) > 0 {
				panels = append(panels, Panel{Title: t, XLabel: "step", YLabel: "value", LogY: true, Lines: lines})
			}
			for _, st := range []string{"underflows%", "flushed%", "overflows%"} {
				if pts := series[key{l, t, st}]; len(pts) > 0 {
					rng = append(rng, line(t+" "+st, pts, nil))
				}
			}
		}
		if len(panels)+len(rng) > 0 {
			lv.HasPlot = true
			var a, b bytes.Buffer
			if len(panels) > 0 {
				if err := PanelsSVG(&a, panels); err != nil {
					return nil, err
				}
			}
			if len(rng) > 0 {
				if err := LinesSVG(&b, l+": values flushed and saturated by the FP8 casts", "step", "% of the elements", false, rng); err != nil {
					return nil, err
				}
			}
			lv.Scale, lv.Range = template.HTML(stripXMLHeader(a.String())), template.HTML(stripXMLHeader(b.String()))
		}
		out = append(out, lv)
	}
	return out, nil
}

func line(label string, pts [][2]float64, f func(float64) float64) Line {
	l := Line{Label: label}
	for _, p := range pts {
		y := p[1]
		if f != nil {
			y = f(y)
		}
		l.X, l.Y = append(l.X, p[0]), append(l.Y, y)
	}
	return l
}

// stripXMLHeader drops the XML declaration gonum's SVG starts with, which
// HTML does not want inline.
func stripXMLHeader(svg string) string {
	if i := strings.Index(svg, "<svg"); i > 0 {
		return svg[i:]
	}
	return svg
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right}
th{background:#eee}td:first-child,th:first-child{text-align:left}
pre{background:#f6f6f6;padding:.8em;overflow-x:auto}
figure{margin:1em 0}svg{width:100%;height:auto}figcaption{font-weight:bold}
</style></head><body>
<h1>{{.Title}}</h1>
<p>Written {{.Date}}.</p>
<h2>Runs</h2>
<table id="runs"><tr><th>precision</th><th>recipe</th><th>ms/step</th><th>steps run</th><th>settings</th></tr>
{{range .Runs}}<tr><td>{{.Precision}}</td><td>{{.Recipe}}</td><td>{{printf "%.2f" .MsPerStep}}</td><td>{{len .Losses}} (from step {{.FirstStep}})</td><td>{{.Settings}}</td></tr>
{{end}}</table>
{{if .LossSVG}}<figure id="loss">{{.LossSVG}}</figure>{{end}}
{{range .Runs}}<section class="run" id="run-{{.Precision}}">
<h2>{{.Precision}} ({{.Recipe}})</h2>
{{range .Summary}}<p>{{.}}</p>{{end}}
{{if .Conversion}}<h3>Conversion</h3><pre>{{.Conversion}}</pre>{{end}}
{{if .Timings}}<h3>Step timings</h3><pre class="profile">{{.Timings}}</pre>{{end}}
{{if .Layers}}<h3>Layers</h3>
{{if .HasFP8}}<table class="layers"><tr><th>layer</th><th>tensor</th><th>underflows%</th><th>flushed%</th><th>overflows%</th><th>amax</th><th>std</th><th>scale_inv</th></tr>
{{range .Layers}}{{$l := .Name}}{{range .Rows}}<tr><td>{{$l}}</td><td>{{.Tensor}}</td><td>{{.Underflow}}</td><td>{{.Flushed}}</td><td>{{.Overflow}}</td><td>{{.Amx}}</td><td>{{.Std}}</td><td>{{.ScaleInv}}</td></tr>
{{end}}{{end}}</table>{{else}}<table class="layers"><tr><th>layer</th><th>tensor</th><th>amax</th><th>std</th></tr>
{{range .Layers}}{{$l := .Name}}{{range .Rows}}<tr><td>{{$l}}</td><td>{{.Tensor}}</td><td>{{.Amx}}</td><td>{{.Std}}</td></tr>
{{end}}{{end}}</table>{{end}}
{{range .Layers}}{{if .HasPlot}}<figure class="layer-plot" data-layer="{{.Name}}"><figcaption>{{.Name}}</figcaption>{{.Scale}}{{.Range}}</figure>
{{end}}{{end}}{{end}}
</section>{{end}}
</body></html>
`))
