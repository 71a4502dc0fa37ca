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
// -ao (a torchao recipe), -opt-level (MS-AMP's), -calibrate (delayed
// scaling's calibration steps) and -config (an
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
	fs.Var(&precisionFlag{p.flags, "calibration_steps", def(intOr(p.CalibrationSteps), "0")}, "calibrate", "delayed scaling (te, msamp): run the first `N` steps in float32 recording amaxes, then start FP8 from their scales (TE's calibrating=True)")
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
	if p.code == nil {
		p.code, p.applied = map[string]string{}, map[string]string{}
	}
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
		// The value set in Go: the field's, unless the last Resolve wrote
		// it from a source.
		goV := s.get(p)
		if a, ok := p.applied[s.key]; ok && a == goV {
			goV = p.code[s.key]
		}
		p.code[s.key] = goV
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
		// Explicit beats ambient: the flag, the Go value, the
		// environment, the config file.
		var cands []value
		if p.flags != nil {
			if raw, ok := p.flags.given[s.key]; ok {
				c, ok := s.canon(strings.TrimSpace(raw))
				if !ok {
					return precisionErrorf("-%s %q: want %s", s.flag, raw, flagAllowed(s))
				}
				cands = append(cands, value{c, raw, Source{Kind: FromFlag, Name: "-" + s.flag}})
			}
		}
		if goV != "" {
			cands = append(cands, value{goV, goV, Source{Kind: FromCode}})
		}
		if len(env) > 0 {
			cands = append(cands, env[0])
		}
		if v, ok := file[s.key]; ok {
			cands = append(cands, v)
		}
		if len(cands) == 0 || cands[0].src.Kind == FromCode {
			if _, ok := p.applied[s.key]; ok {
				s.apply(p, goV)
				delete(p.applied, s.key)
			}
		}
		if len(cands) == 0 {
			continue
		}
		win := cands[0]
		for _, c := range cands[1:] {
			// A flag's default is the Go value: no news when it wins.
			if c.canon != win.canon && !(win.src.Kind == FromFlag && c.src.Kind == FromCode) {
				p.warnings = append(p.warnings, fmt.Sprintf("%s is not applied: %s wins (explicit beats ambient)", c.given(s.key), win.given(s.key)))
			}
		}
		if win.src.Kind == FromCode {
			continue
		}
		s.apply(p, win.canon)
		p.applied[s.key] = s.get(p)
		p.src[s.key], p.raw[s.key] = win.src, win.raw
	}
	m, err := p.mode()
	if err != nil {
		return p.blame(err, "mixed_precision")
	}
	fp8Run := m != "no" && m != "bf16"
	if !fp8Run {
		if err := p.checkUnread(m); err != nil {
			return err
		}
	}
	if fp8Run && (p.Use != nil || p.Custom != nil) {
		if err := p.checkGoRecipe(); err != nil {
			return err
		}
	} else {
		b, err := p.backend()
		if err != nil {
			return p.blame(err, "backend")
		}
		if err := p.checkRecipeFlags(b); err != nil {
			return err
		}
		if fp8Run {
			if err := p.checkOtherBackend(b); err != nil {
				return err
			}
		}
	}
	// The FP8 recipe is checked in every run: a program checks it before
	// its float32 baseline too.
	_, err = p.FP8Recipe()
	return err
}

// given names a source's value of a setting as messages say it:
// "ACCELERATE_MIXED_PRECISION=bf16", "-format E4M3", "mixed_precision
// fp8 set in Go", "accelerate.yaml:3 margin 1".
func (v value) given(key string) string {
	switch v.src.Kind {
	case FromCode:
		return fmt.Sprintf("%s %s set in Go", key, v.raw)
	case FromEnv:
		return v.src.Name + "=" + v.raw
	case FromFile:
		return fmt.Sprintf("%s: %s %s", v.src, key, v.raw)
	}
	return fmt.Sprintf("%s %s", v.src.Name, v.raw)
}

// givenBy names setting s's value as its source gave it (see value.given).
func (p *Config) givenBy(s setting) string {
	return value{raw: p.raw[s.key], src: p.src[s.key]}.given(s.key)
}

// recipeSetting reports whether s is a setting of the recipe's own
// (not the precision, the processes or the backward override, which
// every FP8 recipe takes).
func (s setting) recipeSetting() bool {
	return !s.top && s.key != "backward_override" && s.key != "calibration_steps"
}

// goRecipe returns the field holding the recipe set in Go
// ("Config.Use", else "Config.Custom"), its label and its family as the backend setting names it ("te", "block", "nvfp4", "ao",
// "msamp"; "custom" or the label's first part otherwise): the first part
// of its Label, which package recipe's recipes begin with their family.
func (p *Config) goRecipe() (field, label, family string) {
	var r recipe.Recipe = p.Use
	field = "Config.Use"
	if r == nil {
		r, field = *p.Custom, "Config.Custom"
	}
	label = r.Label()
	family, _, _ = strings.Cut(label, "/")
	return field, label, family
}

// checkGoRecipe refuses a recipe setting from a flag (no flag changes a
// recipe set in Go) or, from the environment or a config file, one the
// recipe's family has no such setting; one it has loses to the Go recipe
// with a warning.
func (p *Config) checkGoRecipe() error {
	field, label, family := p.goRecipe()
	for _, s := range settings {
		src, ok := p.src[s.key]
		if !ok || src.Kind == FromCode || !s.recipeSetting() {
			continue
		}
		if s.key == "backend" && p.raw[s.key] != "" {
			if c, _ := s.canon(p.raw[s.key]); c == family {
				continue
			}
		}
		given := p.givenBy(s)
		if src.Kind == FromFlag {
			return precisionErrorf("%s reaches nothing: the recipe is set in Go (%s: %s), and no flag changes it; drop the flag or the recipe", given, field, label)
		}
		if s.key != "backend" && !s.of(family) {
			return precisionErrorf("%s reaches nothing: the run's recipe is set in Go (%s: %s), which has no %s; unset it", given, field, label, s.key)
		}
		p.warnings = append(p.warnings, fmt.Sprintf("%s is not applied: the recipe set in Go (%s: %s) wins (explicit beats ambient)", given, field, label))
		s.apply(p, p.code[s.key])
		delete(p.applied, s.key)
		delete(p.src, s.key)
	}
	return nil
}

// checkOtherBackend refuses a setting from the environment or a config
// file that belongs to another recipe than backend b's: it would reach
// nothing.
func (p *Config) checkOtherBackend(b string) error {
	for _, s := range settings {
		src, ok := p.src[s.key]
		if !ok || src.Kind == FromCode || src.Kind == FromFlag || s.backend == "" || s.of(b) {
			continue
		}
		from := "by default"
		if bs, ok := p.src["backend"]; ok && bs.Kind != FromCode {
			from = "from " + p.givenBy(*settingByKey("backend"))
		} else if p.code["backend"] != "" {
			from = "set in Go"
		}
		return precisionErrorf("%s reaches nothing: %s is a setting of -recipe %s, and this run's recipe is %s (%s); unset it", p.givenBy(s), s.key, strings.ReplaceAll(s.backend, " ", " or "), b, from)
	}
	return nil
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

// checkUnread refuses an FP8 setting given by a flag to a run of mode
// ("no" or "bf16"), which reads none, and warns of one from the
// environment or a config file: those apply to a program's FP8 runs only
// (a float32 baseline beside an FP8 run shares their environment).
func (p *Config) checkUnread(mode string) error {
	name := DisplayName(p.Name())
	from := "by default"
	if ms, ok := p.src["mixed_precision"]; ok && ms.Kind != FromCode {
		from = "from " + ms.describe(p.raw["mixed_precision"])
	} else if p.code["mixed_precision"] != "" {
		from = "set in Go"
	}
	for _, s := range settings {
		src, ok := p.src[s.key]
		if !ok || src.Kind == FromCode || s.top {
			continue
		}
		given := p.givenBy(s)
		if src.Kind == FromFlag {
			return precisionErrorf("%s: an FP8 setting, and this run is %s (%s), which reads none; drop it, or train with -precision fp8 (or both, all)", given, name, from)
		}
		p.warnings = append(p.warnings, fmt.Sprintf("%s applies to FP8 runs only: this run is %s (%s), which reads none", given, name, from))
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
	var mine []string
	for _, s := range settings {
		if s.flag != "" && s.of(backend) {
			mine = append(mine, "-"+s.flag)
		}
	}
	for _, s := range settings {
		if _, ok := p.flags.given[s.key]; ok && s.backend != "" && !s.of(backend) {
			reads := "no recipe flag"
			if len(mine) > 0 {
				reads = strings.Join(mine, " and ")
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
