package report_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/octetml/octet/inspect"
	"github.com/octetml/octet/train/report"
)

// A report of one FP8 run whose layer logged its cast statistics.
func ExampleRender() {
	runs := []report.Run{{Precision: "fp8", Recipe: "te/HYBRID", Losses: []float32{2.3, 2.1, 1.9}, MsPerStep: 3,
		Stats: []inspect.Stat{
			{Step: 0, Layer: "mlp.fc1", Tensor: inspect.Activation, Stat: "underflows%", Value: 0.5},
			{Step: 0, Layer: "mlp.fc1", Tensor: inspect.Activation, Stat: "scale_inv_min", Value: 0.25},
		}}}
	var page bytes.Buffer
	if err := report.Render(&page, "demo", runs); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Count(page.String(), `class="layer-plot"`), strings.Contains(page.String(), "<table class=\"layers\">"))
	// Output: 1 true
}
