package inspect_test

import (
	"fmt"
	"strings"

	"github.com/octetml/octet/inspect"
)

func ExampleParseConfig() {
	cfg, err := inspect.ParseConfig(strings.NewReader(`
first_layers:
  enabled: True
  layers:
    layer_name_regex_pattern: mlp\.fc[12]
  transformer_engine:
    LogFp8TensorStats:
      enabled: True
      tensors: [activation, gradient]
      stats: [underflows%, mse]
      freq: 100
    DisableFP8GEMM:
      enabled: True
      gemms: [wgrad]
`), "debug.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := cfg.SectionFor("mlp.fc2")
	fmt.Println(s.Name, s.FP8Stats[1].Tensor, s.FP8Stats[1].Stats, s.DisableGEMMs)
	fmt.Println(s.FP8Stats[0].Active(200), s.FP8Stats[0].Active(201))
	// Output:
	// first_layers gradient [underflows% mse] [wgrad]
	// true false
}
