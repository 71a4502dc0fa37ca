package passes

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/octetml/octet/graph"
	"github.com/octetml/octet/internal/atomicfile"
)

// Pass is one named stage of a pipeline.
type Pass struct {
	Name string
	// Run rewrites the graph and returns a one-line summary.
	Run func(g *graph.Graph) (string, error)
	// Check states what a legal graph looks like after this stage; it
	// runs after graph.Verify.
	Check func(g *graph.Graph) error
}

// Pipeline runs passes in order. Between stages it verifies the graph;
// with Dump set it writes the live graph as text before the first pass
// and after each one, and with DOTDir set it writes the same as Graphviz
// files NN-name.dot.
type Pipeline struct {
	Passes []Pass
	// Outputs are the program outputs whose live nodes the dumps show
	// (all nodes if empty).
	Outputs []*graph.Node
	Dump    io.Writer
	DOTDir  string
	// Log receives each pass's summary line (nil: none).
	Log io.Writer
}

func (p *Pipeline) dump(g *graph.Graph, i int, stage string) error {
	if p.Dump != nil {
		fmt.Fprintf(p.Dump, "== %s ==\n", stage)
		if err := g.WriteText(p.Dump, p.Outputs...); err != nil {
			return err
		}
	}
	if p.DOTDir != "" {
		name := filepath.Join(p.DOTDir, fmt.Sprintf("%02d-%s.dot", i, strings.ReplaceAll(stage, " ", "_")))
		if err := atomicfile.Write(name, func(w io.Writer) error { return g.WriteDOT(w, p.Outputs...) }); err != nil {
			return err
		}
	}
	return nil
}

// Run applies the passes to g.
func (p *Pipeline) Run(g *graph.Graph) error {
	if err := graph.Verify(g); err != nil {
		return fmt.Errorf("passes: input graph: %w", err)
	}
	if err := p.dump(g, 0, "input"); err != nil {
		return err
	}
	for i, pass := range p.Passes {
		summary, err := pass.Run(g)
		if err != nil {
			return &passError{pass.Name, err}
		}
		if err := graph.Verify(g); err != nil {
			return fmt.Errorf("passes: after %s: %w", pass.Name, err)
		}
		if pass.Check != nil {
			if err := pass.Check(g); err != nil {
				return fmt.Errorf("passes: after %s: %w", pass.Name, err)
			}
		}
		if p.Log != nil {
			fmt.Fprintf(p.Log, "%s: %s\n", pass.Name, summary)
		}
		if err := p.dump(g, i+1, "after "+pass.Name); err != nil {
			return err
		}
	}
	return nil
}

// passError is the error of a pass, which names the pass unless the
// error's own text already speaks for this package ("passes: convert
// linear: ..."), so that the message does not stutter.
type passError struct {
	pass string
	err  error
}

func (e *passError) Error() string {
	if msg := e.err.Error(); strings.HasPrefix(msg, "passes: ") {
		return msg
	}
	return "passes: " + e.pass + ": " + e.err.Error()
}

func (e *passError) Unwrap() error { return e.err }
