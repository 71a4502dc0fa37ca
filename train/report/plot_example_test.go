package report_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/octetml/octet/train/report"
)

// Write plots loss curves (smoothed over a window, log scale) to a PNG or
// SVG file.
func ExamplePlotLosses() {
	dir, _ := os.MkdirTemp("", "plot")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "loss.png")
	curve := report.Curve{Label: "float32", Losses: []float32{2, 1.5, 1.2, 1, 0.9}}
	err := report.PlotLosses(path, "MNIST", "loss", 2, []report.Curve{curve})
	_, statErr := os.Stat(path)
	fmt.Println(err, statErr)
	// Output: <nil> <nil>
}
