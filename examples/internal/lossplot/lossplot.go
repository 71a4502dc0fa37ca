// Package lossplot draws training-loss curves to a PNG with gonum/plot,
// for the example programs.
package lossplot

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"github.com/octetml/octet/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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

// Write plots each curve as a moving average over window steps on a log
// scale and writes the PNG to path through a temporary file.
// A log scale needs positive values: a curve with a loss that is not a
// positive finite number is refused with an error naming the curve and
// step.
func Write(path, title, ylabel string, window int, curves []Curve) error {
	if window < 1 {
		return fmt.Errorf("lossplot: moving-average window %d, want ≥ 1", window)
	}
	if len(curves) == 0 {
		return fmt.Errorf("lossplot: no curves to plot")
	}
	for _, c := range curves {
		for s, l := range c.Losses {
			if !(l > 0) || math.IsInf(float64(l), 1) {
				return fmt.Errorf("lossplot: curve %q step %d: loss %v cannot go on a log scale", c.Label, s, l)
			}
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = ylabel + " (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.DefaultTicks{} // labelled ticks inside a decade
	p.Add(plotter.NewGrid())
	for i, c := range curves {
		pts := make(plotter.XYs, 0, len(c.Losses))
		var sum float64
		for s, l := range c.Losses {
			sum += float64(l)
			if s >= window {
				sum -= float64(c.Losses[s-window])
			}
			pts = append(pts, plotter.XY{X: float64(s), Y: sum / float64(min(s+1, window))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = palette[i%len(palette)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(c.Label, line)
	}
	if p.Y.Min == p.Y.Max {
		// A flat curve (or a single step): gonum/plot would widen the
		// range by ±1, below zero on a log scale; widen it by ×2 instead.
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
	}
	p.Legend.Top = true
	w, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		_, err := w.WriteTo(f)
		return err
	})
}
