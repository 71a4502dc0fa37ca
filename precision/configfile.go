package precision

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// acceleratePassive are the keys of an Accelerate config file that do not
// concern precision: accepted and listed as ignored.
var acceleratePassive = map[string]bool{
	"compute_environment": true, "debug": true, "distributed_type": true, "downcast_bf16": true,
	"enable_cpu_affinity": true, "gpu_ids": true, "machine_rank": true, "main_training_function": true,
	"main_process_ip": true, "main_process_port": true, "num_machines": true, "rdzv_backend": true,
	"same_network": true, "tpu_env": true, "tpu_use_cluster": true, "tpu_use_sudo": true, "use_cpu": true,
	"deepspeed_config": true, "fsdp_config": true, "megatron_lm_config": true, "dynamo_config": true,
	"ipex_config": true, "mpirun_config": true, "parallelism_config": true, "tpu_name": true, "tpu_zone": true,
	"commands": true, "command_file": true, "dynamo_backend": true, "mixed_precision_config": true,
}

// maxConfigSize bounds the config file read.
const maxConfigSize = 1 << 20

// readConfigFile reads an Accelerate config file (YAML, as `accelerate
// config` writes it) into setting values, and lists the keys it ignores.
func readConfigFile(path string) (map[string]value, []string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, precisionErrorf("-config: %v", err)
	}
	if fi.Size() > maxConfigSize {
		return nil, nil, precisionErrorf("-config %s: %d bytes is not an Accelerate config file", path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, precisionErrorf("-config: %v", err)
	}
	return parseConfig(b, path)
}

func parseConfig(b []byte, path string) (vals map[string]value, ignored []string, err error) {
	defer func() {
		if r := recover(); r != nil { // the YAML library must never panic the caller
			vals, ignored, err = nil, nil, precisionErrorf("%s: not a config file: %v", path, r)
		}
	}()
	fail := func(line int, format string, args ...any) error {
		return precisionErrorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			return map[string]value{}, nil, nil // an empty file sets nothing
		}
		return nil, nil, precisionErrorf("%s: %v", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return map[string]value{}, nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, fail(root.Line, "want a mapping of config keys (mixed_precision: fp8, fp8_config: ...)")
	}
	vals = map[string]value{}
	byYAML := func(top bool) map[string]*setting {
		m := map[string]*setting{}
		for i := range settings {
			s := &settings[i]
			if s.top == top {
				for _, k := range s.yaml {
					m[k] = s
				}
			}
		}
		return m
	}
	topKeys, fp8Keys := byYAML(true), byYAML(false)
	seen := map[string]int{}
	put := func(s *setting, key string, n *yaml.Node, scope string) error {
		if n.Kind != yaml.ScalarNode {
			return fail(n.Line, "%s%s: want a single value", scope, key)
		}
		if n.Tag == "!!null" {
			return nil
		}
		if prev, dup := seen[s.key]; dup {
			return fail(n.Line, "%s%s: %s is set twice (also on line %d)", scope, key, s.key, prev)
		}
		seen[s.key] = n.Line
		raw := strings.TrimSpace(n.Value)
		c, ok := s.canon(raw)
		if !ok {
			return fail(n.Line, "%s%s: %q is not valid (want %s)", scope, key, raw, s.allowed)
		}
		vals[s.key] = value{c, raw, Source{Kind: FromFile, Name: path, Line: n.Line}}
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Value == "fp8_config":
			if v.Tag == "!!null" {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return nil, nil, fail(v.Line, "fp8_config: want a mapping of FP8 settings")
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				fk, fv := v.Content[j], v.Content[j+1]
				if fk.Value == "override_linear_precision" {
					if err := putOverride(fv, path, seen, vals); err != nil {
						return nil, nil, err
					}
					continue
				}
				s, ok := fp8Keys[fk.Value]
				if !ok {
					return nil, nil, fail(fk.Line, "fp8_config: unknown key %q (known: %s)", fk.Value, knownKeys(fp8Keys, "override_linear_precision"))
				}
				if err := put(s, fk.Value, fv, "fp8_config."); err != nil {
					return nil, nil, err
				}
			}
		case topKeys[k.Value] != nil:
			if err := put(topKeys[k.Value], k.Value, v, ""); err != nil {
				return nil, nil, err
			}
		case acceleratePassive[k.Value]:
			ignored = append(ignored, fmt.Sprintf("%s (line %d)", k.Value, k.Line))
		default:
			return nil, nil, fail(k.Line, "unknown key %q (Octet reads mixed_precision, fp8_config and num_processes, and ignores Accelerate's other keys)", k.Value)
		}
	}
	return vals, ignored, nil
}

// putOverride reads override_linear_precision: a list of three booleans
// (fprop, dgrad, wgrad), or the same written as "(false, false, true)".
func putOverride(n *yaml.Node, path string, seen map[string]int, vals map[string]value) error {
	var items []*yaml.Node
	switch {
	case n.Kind == yaml.SequenceNode:
		items = n.Content
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		s := strings.Trim(strings.TrimSpace(n.Value), "()[]")
		for _, part := range strings.Split(s, ",") {
			items = append(items, &yaml.Node{Kind: yaml.ScalarNode, Value: strings.TrimSpace(part), Line: n.Line})
		}
	case n.Tag == "!!null":
		return nil
	}
	if len(items) != 3 {
		return precisionErrorf("%s:%d: fp8_config.override_linear_precision: want three booleans (fprop, dgrad, wgrad), such as [false, false, true]", path, n.Line)
	}
	for i, it := range items {
		c, ok := boolean(strings.TrimSpace(it.Value))
		if it.Kind != yaml.ScalarNode || !ok {
			return precisionErrorf("%s:%d: fp8_config.override_linear_precision[%d]: %q is not valid (want %s)", path, it.Line, i, it.Value, boolAllowed)
		}
		key := overrideKeys[i]
		if prev, dup := seen[key]; dup {
			return precisionErrorf("%s:%d: override_linear_precision is set twice (also on line %d)", path, n.Line, prev)
		}
		seen[key] = n.Line
		vals[key] = value{c, c, Source{Kind: FromFile, Name: path, Line: it.Line}}
	}
	return nil
}

func knownKeys(m map[string]*setting, extra ...string) string {
	keys := append([]string(nil), extra...)
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
