package precision

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/octetml/octet/recipe"
)

// flagValues are the precision flags given on a command line.
type flagValues struct {
	given  map[string]string // setting key → value as typed
	config string            // -config
	set    bool              // -config given
}

// precisionFlag is the flag.Value of one setting.
type precisionFlag struct {
	f   *flagValues
	key string
	def string
}

func (v *precisionFlag) String() string {
	if v == nil || v.f == nil {
		return ""
	}
	if g, ok := v.f.given[v.key]; ok {
		return g
	}
	return v.def
}

func (v *precisionFlag) Set(s string) error {
	v.f.given[v.key] = s
	return nil
}

type configFlag struct{ f *flagValues }

func (v *configFlag) String() string {
	if v == nil || v.f == nil {
		return ""
	}
	return v.f.config
}

func (v *configFlag) Set(s string) error {
	v.f.config, v.f.set = s, true
	return nil
}

// RegisterFlags adds the precision flags to fs: -precision (fp32, bf16,
// fp8, both or all), -recipe (te, ao or msamp), -format (TE's fp8_format),
// -ao (a torchao recipe), -opt-level (MS-AMP's) and -config (an
// Accelerate config file). Their defaults are p's current values; Resolve
// applies them after fs.Parse.
func (p *Config) RegisterFlags(fs *flag.FlagSet) {
	p.flags = &flagValues{given: map[string]string{}}
	def := func(s, d string) string {
		if s == "" {
			return d
		}
		return s
	}
	fs.Var(&precisionFlag{p.flags, "mixed_precision", def(p.MixedPrecision, "fp32")}, "precision", "fp32, bf16, fp8, both (fp32 and fp8) or all (the three; same seed, side by side)")
	fs.Var(&precisionFlag{p.flags, "backend", def(p.Backend, "te")}, "recipe", "FP8 recipe family: te (delayed scaling, MXFP8), block (Float8BlockScaling), nvfp4 (NVFP4BlockScaling), ao or msamp")
	fs.Var(&precisionFlag{p.flags, "fp8_format", def(p.FP8Format, "HYBRID")}, "format", "fp8_format: HYBRID, E4M3 or E5M2 (te); E4M3 or HYBRID (block, E4M3 by default)")
	fs.Var(&precisionFlag{p.flags, "recipe_name", def(p.AORecipe, recipe.AOTensorwise)}, "ao", "AO recipe: tensorwise, rowwise or rowwise_with_gw_hp")
	fs.Var(&precisionFlag{p.flags, "opt_level", def(p.OptLevel, "O2")}, "opt-level", "MS-AMP optimization level with -recipe msamp: O1 or O2")
	fs.Var(&configFlag{p.flags}, "config", "an Accelerate config `FILE` (the YAML that accelerate config writes): mixed_precision, fp8_config, num_processes")
}

// ConfigFile returns the -config file given on the command line ("" for
// none).
func (p *Config) ConfigFile() string {
	if p.flags == nil {
		return ""
	}
	return p.flags.config
}

// value is one source's value of a setting.
type value struct {
	canon, raw string
	src        Source
}

// Resolve applies the -config file, the environment and the flags (see
// Precision) and checks the result: it returns the first bad value,
// conflict or unknown config key, naming the flag, variable, or file and
// line. It can be called again (the sources are read anew).
func (p *Config) Resolve() error { return p.resolveEnv(os.LookupEnv, os.Environ) }

// ResolveFile is Resolve with a config file given in Go (Accelerate's
// `accelerate launch --config_file`).
func (p *Config) ResolveFile(path string) error {
	if p.flags == nil {
		p.flags = &flagValues{given: map[string]string{}}
	}
	if !p.flags.set {
		p.flags.config = path
	}
	return p.resolveEnv(os.LookupEnv, os.Environ)
}

// resolve is Resolve with the environment's variables given by lookup
// (and no check of the names in it).
func (p *Config) resolve(lookup func(string) (string, bool)) error {
	return p.resolveEnv(lookup, func() []string { return nil })
}

// resolveEnv is Resolve on an environment: lookup reads a variable,
// environ lists them all (KEY=VALUE).
func (p *Config) resolveEnv(lookup func(string) (string, bool), environ func() []string) error {
	p.src, p.raw, p.ignored, p.warnings = map[string]Source{}, map[string]string{}, nil, nil
	var err error
	if p.warnings, err = checkEnviron(environ()); err != nil {
		return err
	}
	var file map[string]value
	if p.flags != nil && p.flags.config != "" {
		var err error
		if file, p.ignored, err = readConfigFile(p.flags.config); err != nil {
			return err
		}
	}
	for _, s := range settings {
		var env []value
		for _, name := range []string{prefixed(s.octet), s.accel} {
			if name == "" {
				continue
			}
			raw, ok := lookup(name)
			if !ok {
				continue
			}
			raw = strings.TrimSpace(raw)
			c, ok := s.canon(raw)
			if !ok {
				return precisionErrorf("fp8: environment variable %s=%q is not valid (want %s)", name, raw, s.allowed)
			}
			env = append(env, value{c, raw, Source{Kind: FromEnv, Name: name}})
		}
		if len(env) == 2 && env[0].canon != env[1].canon {
			return precisionErrorf("%s=%s and %s=%s disagree; set one of them", env[0].src.Name, env[0].raw, env[1].src.Name, env[1].raw)
		}
		var fl *value
		if p.flags != nil {
			if raw, ok := p.flags.given[s.key]; ok {
				c, ok := s.canon(strings.TrimSpace(raw))
				if !ok {
					return precisionErrorf("-%s %q: want %s", s.flag, raw, flagAllowed(s))
				}
				fl = &value{c, raw, Source{Kind: FromFlag, Name: "-" + s.flag}}
			}
		}
		if fl != nil && len(env) > 0 && env[0].canon != fl.canon {
			return precisionErrorf("-%s %s and %s=%s disagree; set one of them", s.flag, fl.raw, env[0].src.Name, env[0].raw)
		}
		var win *value
		switch {
		case fl != nil:
			win = fl
		case len(env) > 0:
			win = &env[0]
		default:
			if v, ok := file[s.key]; ok {
				win = &v
			}
		}
		if win == nil {
			continue
		}
		s.apply(p, win.canon)
		p.src[s.key], p.raw[s.key] = win.src, win.raw
	}
	m, err := p.mode()
	if err != nil {
		return p.blame(err)
	}
	if m == "no" || m == "bf16" {
		if err := p.checkUnread(m); err != nil {
			return err
		}
	}
	b, err := p.backend()
	if err != nil {
		return p.blame(err)
	}
	if err := p.checkRecipeFlags(b); err != nil {
		return err
	}
	_, err = p.FP8Recipe()
	return err
}

func prefixed(field string) string {
	if field == "" {
		return ""
	}
	return EnvPrefix + field
}

func flagAllowed(s setting) string {
	if s.key == "mixed_precision" {
		return "fp32, bf16, fp8, both or all"
	}
	return s.allowed
}

// checkUnread refuses an FP8 setting given by a flag, a variable or a
// config file to a run of mode ("no" or "bf16"), which reads none: the
// setting would be ignored without a word.
func (p *Config) checkUnread(mode string) error {
	for _, s := range settings {
		src, ok := p.src[s.key]
		if !ok || src.Kind == FromCode || s.top {
			continue
		}
		given := src.describe(p.raw[s.key])
		if src.Kind == FromFile {
			given = fmt.Sprintf("%s: fp8_config.%s %s", src, s.key, p.raw[s.key])
		}
		name := DisplayName(p.Name())
		from := "by default"
		if ms, ok := p.src["mixed_precision"]; ok && ms.Kind != FromCode {
			from = "from " + ms.describe(p.raw["mixed_precision"])
		}
		return precisionErrorf("%s: an FP8 setting, and this run is %s (%s), which reads none; drop it, or train with -precision fp8 (or both, all)", given, name, from)
	}
	return nil
}

// Warnings lists what Resolve found worth saying but not refusing: an
// ACCELERATE_FP8_ variable Octet does not read (Accelerate's launcher sets
// some), with the nearest one it does. The progress hook prints them.
func (p *Config) Warnings() []string { return append([]string(nil), p.warnings...) }

// checkRecipeFlags refuses a recipe flag for another backend than the one
// chosen, saying which flag that backend reads.
func (p *Config) checkRecipeFlags(backend string) error {
	if p.flags == nil {
		return nil
	}
	var mine string
	for _, s := range settings {
		if s.flag != "" && s.of(backend) {
			mine = s.flag
		}
	}
	for _, s := range settings {
		if _, ok := p.flags.given[s.key]; ok && s.backend != "" && !s.of(backend) {
			reads := "no recipe flag"
			if mine != "" {
				reads = "-" + mine
			}
			return precisionErrorf("-%s applies to -recipe %s only; -recipe %s reads %s", s.flag, strings.ReplaceAll(s.backend, " ", " or "), backend, reads)
		}
	}
	return nil
}

// Given reports whether a flag registered by RegisterFlags was set on the
// command line.
func (p *Config) Given(flagName string) bool {
	if p.flags == nil {
		return false
	}
	if flagName == "config" {
		return p.flags.set
	}
	for _, s := range settings {
		if s.flag == flagName {
			_, ok := p.flags.given[s.key]
			return ok
		}
	}
	return false
}

// String formats the settings in effect for the run ("fp8 te/HYBRID",
// "bf16", "fp32").
func (p Config) String() string {
	r, err := p.Recipe()
	if err != nil {
		return fmt.Sprintf("invalid (%v)", err)
	}
	if r == nil {
		return "fp32"
	}
	if p.Name() == "bf16" {
		return "bf16"
	}
	return p.Name() + " " + Label(r)
}

// Resolved reports whether Resolve (or ResolveFile) has run on the
// configuration, so that a caller given a Config does not resolve it
// twice (a second Resolve would read the environment again).
func (p *Config) Resolved() bool { return p.src != nil }
