package passestest_test

import (
	"fmt"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/ops"
	"github.com/octetml/octet/passes"
	"github.com/octetml/octet/passes/passestest"
)

// A rewrite rule tested as users test theirs: x + x becomes 2·x, the
// Add is gone from the program that runs, and the loss is the same.
func ExampleRulePass() {
	model := func() (*graph.Node, []*graph.Node, error) {
		g := graph.New()
		x := g.Input("x", graph.Float32, 4, 8)
		w := g.Param("fc.weight", 8, 8)
		h := ops.Linear("fc", x, w, nil)
		loss := ops.Mean(ops.Add(h, h))
		return loss, []*graph.Node{w}, g.Err()
	}
	double := passes.Rule{
		Name:    "double",
		Pattern: &passes.Pattern{Kind: ops.KindAdd, Inputs: []*passes.Pattern{{Bind: "a"}, {Bind: "b"}}},
		Apply: func(root *graph.Node, m passes.Match) (*graph.Node, error) {
			if m["a"] != m["b"] {
				return nil, nil // not x + x
			}
			return ops.Scale(m["a"], 2), nil
		},
	}
	plain, err := passestest.Build(model, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	rewritten, err := passestest.Build(model, 1, passestest.RulePass("double", double))
	if err != nil {
		fmt.Println(err)
		return
	}
	l0, _ := plain.Prog.Scalar(plain.Loss)
	l1, _ := rewritten.Prog.Scalar(rewritten.Loss)
	fmt.Println(plain.Count(ops.KindAdd), rewritten.Count(ops.KindAdd), rewritten.Count(ops.KindScale) > 0, l0 == l1)
	// Output:
	// 1 0 true true
}
