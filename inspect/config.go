// Package inspect is Octet's window into FP8 numerics during a run, the
// counterpart of Transformer Engine's precision debug tools
// (transformer_engine.debug with Nvidia-DL-Framework-Inspect). A YAML
// config in Transformer Engine's schema selects layers and features;
// passes.Debug turns it into statistics nodes and precision switches in
// the compiled program; the statistics are written as JSON lines, one per
// layer, tensor, statistic and step, which ReadStats reads back.
//
// The config has one or more sections:
//
//	section_name:
//	  enabled: True
//	  layers:
//	    layer_name_regex_pattern: .*fc1    # or layer_types: [fc1, attn]
//	  transformer_engine:
//	    LogTensorStats:
//	      enabled: True
//	      tensors: [activation, weight, gradient, output, wgrad, dgrad]
//	      stats: [min, max, mean, std, l1_norm, l2_norm, cur_amax, dynamic_range]
//	      freq: 10
//	      start_step: 0
//	      end_step: 1000
//	    LogFp8TensorStats:
//	      enabled: True
//	      tensors_struct:
//	        - tensor: activation
//	          stats: [underflows%, overflows%, scale_inv_min, scale_inv_max, mse]
//	          freq: 1
//	    DisableFP8GEMM:
//	      enabled: True
//	      gemms: [wgrad]
//	    DisableFP8Layer:
//	      enabled: False
//	    PerTensorScaling:
//	      enabled: True
//	      gemms: [wgrad]
//	      tensors: [gradient]
//
// The other switches: PerTensorScaling (gemms with tensors, or
// gemms_struct) casts the chosen GEMM operands with one current scale per
// tensor; FakeQuant (the same, with quant_format FP8E4M3 or FP8E5M2)
// rounds them through FP8 and back and computes the GEMM in high
// precision.
//
// A layer belongs to the first enabled section whose selector matches
// its name (Transformer Engine allows one section per layer). Unknown
// section keys, features, parameters, tensor, statistic and GEMM names
// are errors that name the line. In a data-parallel run the ranks'
// partial statistics merge (see Partial), so they describe the global
// batch; each rank's gradient is that of its own loss.
//
// Statistics follow Transformer Engine's definitions: min, max, mean,
// std (population), l1_norm, l2_norm, cur_amax (max |x|), dynamic_range
// (log2 of max |x| over the smallest non-zero |x|); for the FP8 casts,
// underflows% (elements whose FP8 code is 0x00 — exact zeros of the
// input included, negative zeros not — in percent of the elements, as
// Transformer Engine counts them), overflows% (values the cast
// saturated), scale_inv_min and
// scale_inv_max (over the tensor's scales) and mse (mean squared
// difference between the dequantized tensor and its source); and one
// statistic of Octet's own, flushed% (non-zero values the cast sent to
// a zero, in percent of the elements: what underflows% counted before
// it followed Transformer Engine).
package inspect

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Tensor names a tensor of a linear layer, as Transformer Engine does.
type Tensor string

// The tensors of a linear layer: its input, weight and output, the
// gradient of its output, and its two backward GEMMs' results.
const (
	Activation Tensor = "activation"
	Weight     Tensor = "weight"
	Gradient   Tensor = "gradient"
	Output     Tensor = "output"
	Wgrad      Tensor = "wgrad"
	Dgrad      Tensor = "dgrad"
)

// GEMM names one of a linear layer's three GEMMs.
type GEMM string

// The GEMMs of a linear layer.
const (
	Fprop     GEMM = "fprop"
	DgradGEMM GEMM = "dgrad"
	WgradGEMM GEMM = "wgrad"
)

// The statistics LogTensorStats computes.
var TensorStats = []string{"min", "max", "mean", "std", "l1_norm", "l2_norm", "cur_amax", "dynamic_range"}

// The statistics LogFp8TensorStats computes of an FP8 cast.
var FP8Stats = []string{"underflows%", "flushed%", "overflows%", "scale_inv_min", "scale_inv_max", "mse"}

// Schedule says on which steps a statistic is computed: every Freq steps
// (counted from 0) within [StartStep, EndStep] (EndStep < 0: no end), or
// within one of the Ranges when they are given.
type Schedule struct {
	Freq               int
	StartStep, EndStep int
	Ranges             [][2]int
}

// Active reports whether step is one the schedule selects.
func (s Schedule) Active(step int64) bool {
	if s.Freq <= 0 || step%int64(s.Freq) != 0 {
		return false
	}
	if len(s.Ranges) > 0 {
		for _, r := range s.Ranges {
			if step >= int64(r[0]) && step <= int64(r[1]) {
				return true
			}
		}
		return false
	}
	return step >= int64(s.StartStep) && (s.EndStep < 0 || step <= int64(s.EndStep))
}

// StatRequest is one tensor's statistics on a schedule.
type StatRequest struct {
	Tensor Tensor
	Stats  []string
	Schedule
}

// Layers selects layers by name.
type Layers struct {
	// Regexp, when set, must match the layer's name (layer_name_regex_pattern).
	Regexp *regexp.Regexp
	// Types, when set, selects a layer whose name contains any of them
	// (layer_types).
	Types []string
}

// String describes the selector as a config writes it:
// "layer_name_regex_pattern fc[12]", "layer_types [qkv, proj]".
func (l Layers) String() string {
	var parts []string
	if l.Regexp != nil {
		parts = append(parts, "layer_name_regex_pattern "+l.Regexp.String())
	}
	if len(l.Types) > 0 {
		parts = append(parts, "layer_types ["+strings.Join(l.Types, ", ")+"]")
	}
	if len(parts) == 0 {
		return "no layer selector"
	}
	return strings.Join(parts, " or ")
}

// Match reports whether the selector takes the layer named fqn.
func (l Layers) Match(fqn string) bool {
	if l.Regexp != nil && l.Regexp.MatchString(fqn) {
		return true
	}
	for _, t := range l.Types {
		if strings.Contains(fqn, t) {
			return true
		}
	}
	return false
}

// Section is one enabled section of the config.
type Section struct {
	Name   string
	Layers Layers
	// TensorStats and FP8Stats are the LogTensorStats and
	// LogFp8TensorStats requests.
	TensorStats, FP8Stats []StatRequest
	// DisableGEMMs lists the GEMMs DisableFP8GEMM keeps in high
	// precision; DisableLayer is DisableFP8Layer.
	DisableGEMMs []GEMM
	DisableLayer bool
	// PerTensorScaling lists the GEMM operands cast with current
	// (per-tensor, dynamic) scaling instead of the recipe's.
	PerTensorScaling []GEMMTensor
	// FakeQuant lists the GEMM operands quantized and dequantized again
	// (current per-tensor scaling, FakeQuantFormat: "FP8E4M3" or
	// "FP8E5M2"), their GEMMs then computed in high precision.
	FakeQuant       []GEMMTensor
	FakeQuantFormat string
}

// Fake reports whether the section fake-quantizes tensor t for GEMM g.
func (s *Section) Fake(g GEMM, t Tensor) bool {
	for _, o := range s.FakeQuant {
		if o.GEMM == g && o.Tensor == t {
			return true
		}
	}
	return false
}

// GEMMTensor names one operand of one GEMM.
type GEMMTensor struct {
	GEMM   GEMM
	Tensor Tensor
}

// gemmOperands lists the tensors each GEMM reads.
var gemmOperands = map[GEMM][]Tensor{Fprop: {Activation, Weight}, DgradGEMM: {Gradient, Weight}, WgradGEMM: {Gradient, Activation}}

// PerTensor reports whether the section casts tensor t for GEMM g with
// current per-tensor scaling.
func (s *Section) PerTensor(g GEMM, t Tensor) bool {
	for _, o := range s.PerTensorScaling {
		if o.GEMM == g && o.Tensor == t {
			return true
		}
	}
	return false
}

// Config is a parsed debug config: its enabled sections, in file order.
type Config struct {
	Sections []Section
}

// SectionFor returns the section that takes the layer named fqn: the
// first enabled section whose selector matches it.
func (c *Config) SectionFor(fqn string) (*Section, bool) {
	if c == nil {
		return nil, false
	}
	for i := range c.Sections {
		if c.Sections[i].Layers.Match(fqn) {
			return &c.Sections[i], true
		}
	}
	return nil, false
}

// ParseConfig reads a debug config in Transformer Engine's YAML schema.
// name labels errors (a file name).
func ParseConfig(r io.Reader, name string) (*Config, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(r).Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("inspect: %s: the config is empty", name)
		}
		return nil, fmt.Errorf("inspect: %s: %w", name, err)
	}
	p := &parser{name: name}
	cfg := &Config{}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errorf(root, "the config is a mapping of sections (name: {enabled, layers, transformer_engine})")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		sec, enabled, err := p.section(root.Content[i], root.Content[i+1])
		if err != nil {
			return nil, err
		}
		if enabled {
			cfg.Sections = append(cfg.Sections, sec)
		}
	}
	return cfg, nil
}

type parser struct{ name string }

func (p *parser) errorf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("inspect: %s:%d: %s", p.name, n.Line, fmt.Sprintf(format, args...))
}

// mapping returns the key/value pairs of a mapping node, refusing keys
// not in allowed and repeated keys.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, "%s: want a mapping", what)
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !contains(allowed, k.Value) {
			return nil, p.errorf(k, "%s: unknown key %q (want one of %s)", what, k.Value, strings.Join(allowed, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errorf(k, "%s: %q given twice", what, k.Value)
		}
		out[k.Value] = n.Content[i+1]
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) bool(n *yaml.Node, what string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, p.errorf(n, "%s: want True or False, got %q", what, n.Value)
	}
	return b, nil
}

func (p *parser) int(n *yaml.Node, what string, lo int) (int, error) {
	var v int
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil || v < lo {
		return 0, p.errorf(n, "%s: want an integer ≥ %d, got %q", what, lo, n.Value)
	}
	return v, nil
}

// names reads a list of names (or one name), each in allowed.
func (p *parser) names(n *yaml.Node, what string, allowed []string) ([]string, error) {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var out []string
	for _, it := range items {
		if it.Kind != yaml.ScalarNode {
			return nil, p.errorf(it, "%s: want a name or a list of names", what)
		}
		if allowed != nil && !contains(allowed, it.Value) {
			return nil, p.errorf(it, "%s: unknown name %q (want one of %s)", what, it.Value, strings.Join(allowed, ", "))
		}
		out = append(out, it.Value)
	}
	if len(out) == 0 {
		return nil, p.errorf(n, "%s: the list is empty", what)
	}
	return out, nil
}

var sectionKeys = []string{"enabled", "layers", "transformer_engine"}

func (p *parser) section(key, val *yaml.Node) (Section, bool, error) {
	sec := Section{Name: key.Value}
	what := "section " + key.Value
	m, err := p.mapping(val, what, sectionKeys...)
	if err != nil {
		return sec, false, err
	}
	en, ok := m["enabled"]
	if !ok {
		return sec, false, p.errorf(val, "%s: no enabled field", what)
	}
	enabled, err := p.bool(en, what+": enabled")
	if err != nil {
		return sec, false, err
	}
	ln, ok := m["layers"]
	if !ok {
		return sec, false, p.errorf(val, "%s: no layers field (layer_name_regex_pattern or layer_types)", what)
	}
	if sec.Layers, err = p.layers(ln, what+": layers"); err != nil {
		return sec, false, err
	}
	if te, ok := m["transformer_engine"]; ok {
		if err := p.features(te, &sec, what); err != nil {
			return sec, false, err
		}
	}
	return sec, enabled, nil
}

func (p *parser) layers(n *yaml.Node, what string) (Layers, error) {
	var l Layers
	m, err := p.mapping(n, what, "layer_name_regex_pattern", "layer_types")
	if err != nil {
		return l, err
	}
	if len(m) == 0 {
		return l, p.errorf(n, "%s: want layer_name_regex_pattern or layer_types", what)
	}
	if r, ok := m["layer_name_regex_pattern"]; ok {
		if r.Kind != yaml.ScalarNode {
			return l, p.errorf(r, "%s: layer_name_regex_pattern: want a regular expression", what)
		}
		re, err := regexp.Compile(r.Value)
		if err != nil {
			return l, p.errorf(r, "%s: layer_name_regex_pattern %q: %v", what, r.Value, err)
		}
		l.Regexp = re
	}
	if t, ok := m["layer_types"]; ok {
		if l.Types, err = p.names(t, what+": layer_types", nil); err != nil {
			return l, err
		}
	}
	return l, nil
}

var (
	featureNames = []string{"LogTensorStats", "LogFp8TensorStats", "DisableFP8GEMM", "DisableFP8Layer", "PerTensorScaling", "FakeQuant"}
	statParams   = []string{"enabled", "tensors", "tensors_struct", "stats", "freq", "start_step", "end_step", "start_end_list"}
	structParams = []string{"tensor", "stats", "freq", "start_step", "end_step", "start_end_list"}
	hpTensors    = []string{string(Activation), string(Weight), string(Gradient), string(Output), string(Wgrad), string(Dgrad)}
	fp8Tensors   = []string{string(Activation), string(Weight), string(Gradient)}
	gemmNames    = []string{string(Fprop), string(DgradGEMM), string(WgradGEMM)}
)

func (p *parser) features(n *yaml.Node, sec *Section, what string) error {
	m, err := p.mapping(n, what+": transformer_engine", featureNames...)
	if err != nil {
		return err
	}
	for _, name := range featureNames { // a fixed order, whatever the file's
		f, ok := m[name]
		if !ok {
			continue
		}
		fw := what + ": " + name
		switch name {
		case "LogTensorStats", "LogFp8TensorStats":
			tensors, stats := hpTensors, TensorStats
			if name == "LogFp8TensorStats" {
				tensors, stats = fp8Tensors, FP8Stats
			}
			reqs, on, err := p.statFeature(f, fw, tensors, stats)
			if err != nil || !on {
				return err
			}
			if name == "LogTensorStats" {
				sec.TensorStats = reqs
			} else {
				sec.FP8Stats = reqs
			}
		case "DisableFP8GEMM":
			fm, err := p.mapping(f, fw, "enabled", "gemms")
			if err != nil {
				return err
			}
			if on, err := p.enabled(fm, f, fw); err != nil || !on {
				return err
			}
			g, ok := fm["gemms"]
			if !ok {
				return p.errorf(f, "%s: no gemms (fprop, dgrad, wgrad)", fw)
			}
			gs, err := p.names(g, fw+": gemms", gemmNames)
			if err != nil {
				return err
			}
			for _, s := range gs {
				sec.DisableGEMMs = append(sec.DisableGEMMs, GEMM(s))
			}
		case "DisableFP8Layer":
			fm, err := p.mapping(f, fw, "enabled")
			if err != nil {
				return err
			}
			on, err := p.enabled(fm, f, fw)
			if err != nil {
				return err
			}
			sec.DisableLayer = on
		case "PerTensorScaling":
			ops, _, on, err := p.gemmTensors(f, fw)
			if err != nil || !on {
				return err
			}
			sec.PerTensorScaling = ops
		default: // FakeQuant
			ops, m, on, err := p.gemmTensors(f, fw, "quant_format")
			if err != nil || !on {
				return err
			}
			qf, ok := m["quant_format"]
			if !ok {
				return p.errorf(f, "%s: no quant_format (FP8E4M3 or FP8E5M2)", fw)
			}
			names, err := p.names(qf, fw+": quant_format", []string{"FP8E4M3", "FP8E5M2"})
			if err != nil {
				return err
			}
			sec.FakeQuant, sec.FakeQuantFormat = ops, names[0]
		}
	}
	return nil
}

// enabled reads a feature's enabled field, which must be there.
func (p *parser) enabled(m map[string]*yaml.Node, n *yaml.Node, what string) (bool, error) {
	e, ok := m["enabled"]
	if !ok {
		return false, p.errorf(n, "%s: no enabled field", what)
	}
	return p.bool(e, what+": enabled")
}

// statFeature reads LogTensorStats or LogFp8TensorStats: tensors with
// stats and a schedule shared by all, and tensors_struct entries with
// their own (falling back to the feature's).
func (p *parser) statFeature(n *yaml.Node, what string, tensors, stats []string) ([]StatRequest, bool, error) {
	m, err := p.mapping(n, what, statParams...)
	if err != nil {
		return nil, false, err
	}
	if on, err := p.enabled(m, n, what); err != nil || !on {
		return nil, false, err
	}
	base := StatRequest{Schedule: Schedule{Freq: 1, EndStep: -1}}
	if err := p.statFields(m, &base, what, stats); err != nil {
		return nil, false, err
	}
	var out []StatRequest
	if t, ok := m["tensors"]; ok {
		names, err := p.names(t, what+": tensors", tensors)
		if err != nil {
			return nil, false, err
		}
		if base.Stats == nil {
			return nil, false, p.errorf(n, "%s: no stats for the tensors", what)
		}
		for _, name := range names {
			r := base
			r.Tensor = Tensor(name)
			out = append(out, r)
		}
	}
	if ts, ok := m["tensors_struct"]; ok {
		if ts.Kind != yaml.SequenceNode {
			return nil, false, p.errorf(ts, "%s: tensors_struct: want a list", what)
		}
		for _, e := range ts.Content {
			em, err := p.mapping(e, what+": tensors_struct entry", structParams...)
			if err != nil {
				return nil, false, err
			}
			tn, ok := em["tensor"]
			if !ok {
				return nil, false, p.errorf(e, "%s: tensors_struct entry without tensor", what)
			}
			names, err := p.names(tn, what+": tensors_struct: tensor", tensors)
			if err != nil {
				return nil, false, err
			}
			r := base
			r.Tensor = Tensor(names[0])
			if err := p.statFields(em, &r, what, stats); err != nil {
				return nil, false, err
			}
			if r.Stats == nil {
				return nil, false, p.errorf(e, "%s: no stats for tensor %s", what, r.Tensor)
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, false, p.errorf(n, "%s: no tensors (tensors or tensors_struct)", what)
	}
	return out, true, nil
}

// statFields reads stats, freq, start_step, end_step and start_end_list
// into r (the ones present).
func (p *parser) statFields(m map[string]*yaml.Node, r *StatRequest, what string, stats []string) error {
	var err error
	if s, ok := m["stats"]; ok {
		if r.Stats, err = p.names(s, what+": stats", stats); err != nil {
			return err
		}
	}
	if f, ok := m["freq"]; ok {
		if r.Freq, err = p.int(f, what+": freq", 1); err != nil {
			return err
		}
	}
	if s, ok := m["start_step"]; ok {
		if r.StartStep, err = p.int(s, what+": start_step", 0); err != nil {
			return err
		}
	}
	if e, ok := m["end_step"]; ok {
		if r.EndStep, err = p.int(e, what+": end_step", 0); err != nil {
			return err
		}
		if r.EndStep < r.StartStep {
			return p.errorf(e, "%s: end_step %d is before start_step %d", what, r.EndStep, r.StartStep)
		}
	}
	if l, ok := m["start_end_list"]; ok {
		if l.Kind != yaml.SequenceNode || len(l.Content) == 0 {
			return p.errorf(l, "%s: start_end_list: want a list of [start, end] pairs", what)
		}
		r.Ranges = nil
		for _, pair := range l.Content {
			if pair.Kind != yaml.SequenceNode || len(pair.Content) != 2 {
				return p.errorf(pair, "%s: start_end_list: want [start, end]", what)
			}
			a, err := p.int(pair.Content[0], what+": start_end_list start", 0)
			if err != nil {
				return err
			}
			b, err := p.int(pair.Content[1], what+": start_end_list end", a)
			if err != nil {
				return err
			}
			r.Ranges = append(r.Ranges, [2]int{a, b})
		}
	}
	return nil
}

// gemmTensors reads a feature that names GEMM operands: gemms with
// tensors (every operand of those GEMMs when tensors is left out), or
// gemms_struct entries {gemm, tensors}.
func (p *parser) gemmTensors(n *yaml.Node, what string, extra ...string) ([]GEMMTensor, map[string]*yaml.Node, bool, error) {
	m, err := p.mapping(n, what, append([]string{"enabled", "gemms", "tensors", "gemms_struct"}, extra...)...)
	if err != nil {
		return nil, nil, false, err
	}
	if on, err := p.enabled(m, n, what); err != nil || !on {
		return nil, nil, false, err
	}
	var out []GEMMTensor
	add := func(gn *yaml.Node, tn *yaml.Node, w string) error {
		gs, err := p.names(gn, w+": gemms", gemmNames)
		if err != nil {
			return err
		}
		var ts []string
		if tn != nil {
			if ts, err = p.names(tn, w+": tensors", fp8Tensors); err != nil {
				return err
			}
		}
		for _, g := range gs {
			for _, t := range gemmOperands[GEMM(g)] {
				if tn == nil || contains(ts, string(t)) {
					out = append(out, GEMMTensor{GEMM(g), t})
				}
			}
		}
		return nil
	}
	if g, ok := m["gemms"]; ok {
		if err := add(g, m["tensors"], what); err != nil {
			return nil, nil, false, err
		}
	} else if _, ok := m["tensors"]; ok {
		return nil, nil, false, p.errorf(n, "%s: tensors without gemms", what)
	}
	if gs, ok := m["gemms_struct"]; ok {
		if gs.Kind != yaml.SequenceNode {
			return nil, nil, false, p.errorf(gs, "%s: gemms_struct: want a list", what)
		}
		for _, e := range gs.Content {
			em, err := p.mapping(e, what+": gemms_struct entry", "gemm", "tensors")
			if err != nil {
				return nil, nil, false, err
			}
			g, ok := em["gemm"]
			if !ok {
				return nil, nil, false, p.errorf(e, "%s: gemms_struct entry without gemm", what)
			}
			if err := add(g, em["tensors"], what+": gemms_struct"); err != nil {
				return nil, nil, false, err
			}
		}
	}
	if len(out) == 0 {
		return nil, nil, false, p.errorf(n, "%s: no GEMM operands (gemms with tensors, or gemms_struct)", what)
	}
	return out, m, true, nil
}
