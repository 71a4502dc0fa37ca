package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotLosses draws each run's training loss (a 50-step moving average)
// against the step and writes a PNG, through a temporary file.
func plotLosses(path string, results []*result) error {
	p := plot.New()
	p.Title.Text = "MNIST MLP training loss"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "cross-entropy (50-step average, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	colors := []color.Color{color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255}, color.RGBA{G: 128, A: 255}}
	for i, r := range results {
		const win = 50
		pts := make(plotter.XYs, 0, len(r.Losses))
		var sum float64
		for s, l := range r.Losses {
			sum += float64(l)
			if s >= win {
				sum -= float64(r.Losses[s-win])
			}
			pts = append(pts, plotter.XY{X: float64(s), Y: sum / float64(min(s+1, win))})
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = colors[i%len(colors)]
		line.Width = vg.Points(1.5)
		p.Add(line)
		label := r.Precision
		if r.Recipe != "-" {
			label += " " + r.Recipe
		}
		p.Legend.Add(fmt.Sprintf("%s (test %.2f%%)", label, 100*r.TestAccuracy), line)
	}
	p.Legend.Top = true
	w, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, "png")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plot-*.png")
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
