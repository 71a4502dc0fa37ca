package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/octetml/octet/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Curve is one labelled series of per-step losses.
type Curve struct {
	Label  string
	Losses []float32
}

var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{G: 128, A: 255},
	color.RGBA{R: 148, G: 103, B: 189, A: 255},
}

// PlotLosses plots each curve as a moving average over window steps on a log
// scale and writes the PNG to path through a temporary file.
// A log scale needs positive values: a curve with a loss that is not a
// positive finite number is refused with an error naming the curve and
// step.
func PlotLosses(path, title, ylabel string, window int, curves []Curve) error {
	w, err := losses(title, ylabel, window, curves, "png")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		_, err := w.WriteTo(f)
		return err
	})
}

// LossSVG is PlotLosses to w as an SVG image (for a page that embeds it).
func LossSVG(w io.Writer, title, ylabel string, window int, curves []Curve) error {
	wt, err := losses(title, ylabel, window, curves, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

func losses(title, ylabel string, window int, curves []Curve, format string) (io.WriterTo, error) {
	if window < 1 {
		return nil, fmt.Errorf("report: moving-average window %d, want ≥ 1", window)
	}
	if len(curves) == 0 {
		return nil, fmt.Errorf("report: no curves to plot")
	}
	lines := make([]Line, len(curves))
	for i, c := range curves {
		lines[i].Label = c.Label
		var sum float64
		for s, l := range c.Losses {
			if !(l > 0) || math.IsInf(float64(l), 1) {
				return nil, fmt.Errorf("report: curve %q step %d: loss %v cannot go on a log scale", c.Label, s, l)
			}
			sum += float64(l)
			if s >= window {
				sum -= float64(c.Losses[s-window])
			}
			lines[i].X = append(lines[i].X, float64(s))
			lines[i].Y = append(lines[i].Y, sum/float64(min(s+1, window)))
		}
	}
	return render(title, "step", ylabel, true, lines, format)
}

// Line is one labelled series of points.
type Line struct {
	Label string
	X, Y  []float64
}

// LinesSVG plots lines (on a log scale for y when logY, where points
// that are not positive are left out) and writes the SVG to w.
func LinesSVG(w io.Writer, title, xlabel, ylabel string, logY bool, lines []Line) error {
	wt, err := render(title, xlabel, ylabel, logY, lines, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

func render(title, xlabel, ylabel string, logY bool, lines []Line, format string) (io.WriterTo, error) {
	p, err := newPlot(title, xlabel, ylabel, logY, lines)
	if err != nil {
		return nil, err
	}
	return p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
}

// Panel is one plot of a row of plots, with an axis of its own.
type Panel struct {
	Title, XLabel, YLabel string
	LogY                  bool
	Lines                 []Line
}

// PanelsSVG draws panels side by side, each with its own y axis (so that
// quantities of different magnitudes can each be read), and writes the
// SVG to w.
func PanelsSVG(w io.Writer, panels []Panel) error {
	if len(panels) == 0 {
		return fmt.Errorf("report: no panels to plot")
	}
	row := make([]*plot.Plot, len(panels))
	for i, pn := range panels {
		p, err := newPlot(pn.Title, pn.XLabel, pn.YLabel, pn.LogY, pn.Lines)
		if err != nil {
			return err
		}
		row[i] = p
	}
	width, height := vg.Length(len(panels))*4.5*vg.Inch, 3.6*vg.Inch
	c := vgsvg.New(width, height)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2}
	for i, cv := range plot.Align([][]*plot.Plot{row}, tiles, dc)[0] {
		row[i].Draw(cv)
	}
	_, err := c.WriteTo(w)
	return err
}

// decadeTicks labels every power of ten of a log axis, with unlabelled
// ticks at 2…9 times each; a range within one decade also labels the 2
// and 5 multiples (then all of them, then round values in between), so
// that every plot can be read off its axis.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max >= min) || math.IsInf(max, 0) {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	lo, hi := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	var ticks []plot.Tick
	for _, labelled := range [][]int{{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		ticks = ticks[:0]
		inRange := 0
		for e := lo; e <= hi; e++ {
			for m := 1; m <= 9; m++ {
				v := float64(m) * math.Pow(10, float64(e))
				t := plot.Tick{Value: v}
				if slices.Contains(labelled, m) {
					t.Label = strconv.FormatFloat(v, 'g', 3, 64)
					if v >= min && v <= max {
						inRange++
					}
				}
				ticks = append(ticks, t)
			}
		}
		if inRange >= 2 {
			return ticks
		}
	}
	// Narrower than from one integer multiple of a power of ten to the
	// next: plain ticks at round values.
	return plot.DefaultTicks{}.Ticks(min, max)
}

func newPlot(title, xlabel, ylabel string, logY bool, lines []Line) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	if logY {
		p.Y.Label.Text += " (log scale)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decadeTicks{}
	}
	p.Add(plotter.NewGrid())
	drawn := 0
	for i, l := range lines {
		pts := make(plotter.XYs, 0, len(l.X))
		for j := range l.X {
			y := l.Y[j]
			if math.IsNaN(y) || math.IsInf(y, 0) || (logY && !(y > 0)) {
				continue
			}
			pts = append(pts, plotter.XY{X: l.X[j], Y: y})
		}
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.Label, line)
		drawn++
	}
	if drawn == 0 {
		p.Y.Min, p.Y.Max = 1, 10
		p.X.Min, p.X.Max = 0, 1
	}
	if p.Y.Min == p.Y.Max {
		// A flat curve (or a single step): gonum/plot would widen the
		// range by ±1, below zero on a log scale; widen it by ×2 instead.
		if logY {
			p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
		} else {
			p.Y.Min, p.Y.Max = p.Y.Min-1, p.Y.Max+1
		}
	}
	p.Legend.Top = true
	return p, nil
}
