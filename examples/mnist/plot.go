package main

import (
	"fmt"

	"github.com/octetml/octet/train/report"
)

// plotLosses draws each run's training loss (a 50-step moving average).
func plotLosses(path string, results []*result) error {
	var curves []report.Curve
	for _, r := range results {
		label := r.Precision
		if r.Recipe != "-" {
			label += " " + r.Recipe
		}
		curves = append(curves, report.Curve{Label: fmt.Sprintf("%s (test %.2f%%)", label, 100*r.TestAccuracy), Losses: r.Losses})
	}
	return report.PlotLosses(path, "MNIST MLP training loss", "cross-entropy, 50-step average", 50, curves)
}
